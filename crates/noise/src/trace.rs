//! Test-only record of every intermediate handshake and transport value, under the
//! names the BOLT 8 vectors use, so that the vector tests can check each one by name.
//! Compiled only for this crate's unit tests; release code has no trace calls at all.

use std::cell::RefCell;

/// A recorded value: its dotted name and its bytes.
pub(crate) type Note = (String, Vec<u8>);
/// A named run of notes (an act, or one part of a frame).
pub(crate) type Section = (String, Vec<Note>);

thread_local! {
    static NOTES: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
}

/// Record `value` under `prefix.name` (or `name` when `prefix` is empty).
pub(crate) fn note(prefix: &str, name: &str, value: &[u8]) {
    let key = if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    };
    NOTES.with(|n| n.borrow_mut().push((key, value.to_vec())));
}

/// Everything recorded on this thread since the last call.
pub(crate) fn take() -> Vec<Note> {
    NOTES.with(|n| std::mem::take(&mut *n.borrow_mut()))
}

/// The name of a marker note that starts a new section; its value is the section's name.
pub(crate) const SECTION: &str = "§";

/// Start a new section (e.g. act three, after act two in the same call).
pub(crate) fn section(name: &str) {
    note("", SECTION, name.as_bytes());
}

/// Split notes at section markers: the notes before the first marker come under `""`.
pub(crate) fn sections(notes: Vec<Note>) -> Vec<Section> {
    let mut out = vec![(String::new(), Vec::new())];
    for (name, value) in notes {
        if name == SECTION {
            out.push((String::from_utf8_lossy(&value).into_owned(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push((name, value));
        }
    }
    out
}
