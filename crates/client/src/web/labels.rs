//! BIP329 label files read at the edge: each line parsed by the browser's own JSON parser
//! (`JSON.parse`: no JSON parser in the module), its fields taken as
//! [`LabelRecord`]s for the wallet to check (`lightwire_wallet::labels`), and the errors
//! of both as the package's typed errors, naming the file's line.
//!
//! Blank lines are skipped (a file ending in a newline, or with one between records, is
//! still a file of records) but counted: a line number is the file's, as an editor shows
//! it. A field of the wrong JSON type is a line that cannot be imported, as a missing
//! `type` is; a field that is `null` is one left out.

use js_sys::{JSON, Reflect};
use lightwire_wallet::labels::LabelRecord;
use wasm_bindgen::prelude::*;

use super::js;

/// What a file's lines hold: the records, and the file's line number of each.
pub struct Lines {
    /// The records, in the file's order.
    pub records: Vec<LabelRecord>,
    /// Each record's line in the file (from 1).
    pub lines: Vec<u32>,
}

/// The records of BIP329 file `text` (JSON Lines), or the `InvalidArgument` error naming
/// the first line that is not a JSON object of BIP329's fields.
pub fn read(text: &str) -> Result<Lines, JsValue> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Lines {
        records: Vec::new(),
        lines: Vec::new(),
    };
    for (i, line) in text.split('\n').enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let value = JSON::parse(line).map_err(|_| error(Some(n), &"it is not JSON"))?;
        out.records
            .push(record(&value).map_err(|why| error(Some(n), &why))?);
        out.lines.push(n);
    }
    Ok(out)
}

/// The record a parsed line (or `setLabel`'s argument) gives, or why it gives none.
/// Also whether its `label` was given as `null` (for `setLabel`: remove it).
pub fn record_of(value: &JsValue) -> Result<(LabelRecord, bool), String> {
    let r = record(value)?;
    let cleared =
        r.label.is_none() && Reflect::get(value, &"label".into()).is_ok_and(|v| v.is_null());
    Ok((r, cleared))
}

fn record(value: &JsValue) -> Result<LabelRecord, String> {
    if !value.is_object() || js_sys::Array::is_array(value) {
        return Err("it is not a JSON object".into());
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        let v = Reflect::get(value, &key.into()).unwrap_or(JsValue::UNDEFINED);
        if v.is_null() || v.is_undefined() {
            return Ok(None);
        }
        v.as_string()
            .map(Some)
            .ok_or_else(|| format!("its {key} is not a string"))
    };
    let spendable = Reflect::get(value, &"spendable".into()).unwrap_or(JsValue::UNDEFINED);
    let spendable = if spendable.is_null() || spendable.is_undefined() {
        None
    } else {
        Some(
            spendable
                .as_bool()
                .ok_or("its spendable is not true or false")?,
        )
    };
    Ok(LabelRecord {
        kind: text("type")?,
        reference: text("ref")?,
        label: text("label")?,
        origin: text("origin")?,
        spendable,
    })
}

/// The `InvalidArgument` error for a label: `line N: why` with a `line` property for a
/// file's line, `why` alone for one record.
pub fn error(line: Option<u32>, why: &dyn core::fmt::Display) -> JsValue {
    let e = match line {
        Some(n) => js::error("InvalidArgument", format!("line {n}: {why}")),
        None => js::error("InvalidArgument", format!("the label: {why}")),
    };
    if let Some(n) = line {
        js::set(&e, "line", n.into());
    }
    e
}
