//! The wallets' names: which of the engine's wallets each name is ([`WalletId`]), saved as
//! one record ([`NAMES`]), each named wallet in its own record ([`record_key`]), the
//! default wallet (the calls without a name) in the record it always had.
//!
//! What the store holds stays whole whatever is cut short: a new wallet's record is
//! written before the names that point to it, and a removed one's deleted after the
//! names without it are ([`crate::pipeline`]'s save). A record no name points to (its
//! wallet removed, the session ended before its record was deleted) is never read, and
//! is written over when its id is given again; an id whose record is still to delete is
//! not given again before that.

use lightwire_store::RecordKey;

use super::blocks::{MAX_WALLETS, WalletId};

/// The record of the wallets' names.
pub const NAMES: RecordKey = RecordKey::from_static("wallets");

/// Each wallet's record, by id: the default wallet's is `wallet`, as it always was.
const KEYS: [RecordKey; MAX_WALLETS] = [
    RecordKey::from_static("wallet"),
    RecordKey::from_static("wallet-1"),
    RecordKey::from_static("wallet-2"),
    RecordKey::from_static("wallet-3"),
    RecordKey::from_static("wallet-4"),
    RecordKey::from_static("wallet-5"),
    RecordKey::from_static("wallet-6"),
    RecordKey::from_static("wallet-7"),
    RecordKey::from_static("wallet-8"),
    RecordKey::from_static("wallet-9"),
    RecordKey::from_static("wallet-10"),
    RecordKey::from_static("wallet-11"),
    RecordKey::from_static("wallet-12"),
    RecordKey::from_static("wallet-13"),
    RecordKey::from_static("wallet-14"),
    RecordKey::from_static("wallet-15"),
    RecordKey::from_static("wallet-16"),
    RecordKey::from_static("wallet-17"),
    RecordKey::from_static("wallet-18"),
    RecordKey::from_static("wallet-19"),
    RecordKey::from_static("wallet-20"),
    RecordKey::from_static("wallet-21"),
    RecordKey::from_static("wallet-22"),
    RecordKey::from_static("wallet-23"),
    RecordKey::from_static("wallet-24"),
    RecordKey::from_static("wallet-25"),
    RecordKey::from_static("wallet-26"),
    RecordKey::from_static("wallet-27"),
    RecordKey::from_static("wallet-28"),
    RecordKey::from_static("wallet-29"),
    RecordKey::from_static("wallet-30"),
    RecordKey::from_static("wallet-31"),
    RecordKey::from_static("wallet-32"),
    RecordKey::from_static("wallet-33"),
    RecordKey::from_static("wallet-34"),
    RecordKey::from_static("wallet-35"),
    RecordKey::from_static("wallet-36"),
    RecordKey::from_static("wallet-37"),
    RecordKey::from_static("wallet-38"),
    RecordKey::from_static("wallet-39"),
    RecordKey::from_static("wallet-40"),
    RecordKey::from_static("wallet-41"),
    RecordKey::from_static("wallet-42"),
    RecordKey::from_static("wallet-43"),
    RecordKey::from_static("wallet-44"),
    RecordKey::from_static("wallet-45"),
    RecordKey::from_static("wallet-46"),
    RecordKey::from_static("wallet-47"),
    RecordKey::from_static("wallet-48"),
    RecordKey::from_static("wallet-49"),
    RecordKey::from_static("wallet-50"),
    RecordKey::from_static("wallet-51"),
    RecordKey::from_static("wallet-52"),
    RecordKey::from_static("wallet-53"),
    RecordKey::from_static("wallet-54"),
    RecordKey::from_static("wallet-55"),
    RecordKey::from_static("wallet-56"),
    RecordKey::from_static("wallet-57"),
    RecordKey::from_static("wallet-58"),
    RecordKey::from_static("wallet-59"),
    RecordKey::from_static("wallet-60"),
    RecordKey::from_static("wallet-61"),
    RecordKey::from_static("wallet-62"),
    RecordKey::from_static("wallet-63"),
];

/// The record wallet `id` is saved in.
pub fn record_key(id: WalletId) -> RecordKey {
    KEYS[id.index()]
}

/// The longest name, in bytes of UTF-8.
pub const MAX_NAME: usize = 64;

/// Why a name was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum NameError {
    /// Empty, or longer than [`MAX_NAME`] bytes.
    #[error("a wallet's name is 1 to 64 bytes of UTF-8 (this one is {0})")]
    Length(usize),
    /// It holds a control character (a name is shown, and written in files).
    #[error("a wallet's name holds no control characters")]
    Control,
    /// Every id is taken.
    #[error("at most 62 named wallets beside the default one")]
    TooMany,
}

/// The wallets' names (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalletNames {
    names: Vec<(WalletId, String)>,
    /// Changed since last saved.
    dirty: bool,
    /// Wallets removed whose records are still to delete.
    removed: Vec<WalletId>,
}

/// Whether `name` can be a wallet's.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(NameError::Length(name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::Control);
    }
    Ok(())
}

impl WalletNames {
    /// The wallet named `name`, if there is one.
    pub fn id(&self, name: &str) -> Option<WalletId> {
        self.names
            .iter()
            .find(|(_, n)| n == name)
            .map(|(id, _)| *id)
    }

    /// The name of wallet `id`, if it has one (the default wallet has none).
    pub fn name(&self, id: WalletId) -> Option<&str> {
        self.names
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, n)| n.as_str())
    }

    /// The named wallets, in the order they were named.
    pub fn iter(&self) -> impl Iterator<Item = (WalletId, &str)> {
        self.names.iter().map(|(id, n)| (*id, n.as_str()))
    }

    /// The wallet named `name`, given the lowest free id if it has none yet.
    pub fn add(&mut self, name: &str) -> Result<WalletId, NameError> {
        check_name(name)?;
        if let Some(id) = self.id(name) {
            return Ok(id);
        }
        // The last id's owner bit is the application's scan's (`engine::scan::APP`).
        let free = (1..MAX_WALLETS - 1)
            .filter_map(WalletId::new)
            .find(|id| self.names.iter().all(|(i, _)| i != id) && !self.removed.contains(id));
        let id = free.ok_or(NameError::TooMany)?;
        self.names.push((id, name.to_string()));
        self.dirty = true;
        Ok(id)
    }

    /// Wallet `id` loses its name; its record is to delete. Returns whether it had one.
    pub fn remove(&mut self, id: WalletId) -> bool {
        let before = self.names.len();
        self.names.retain(|(i, _)| *i != id);
        if self.names.len() == before {
            return false;
        }
        self.dirty = true;
        self.removed.push(id);
        true
    }

    /// Whether the names changed since they were last saved.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The names to save, when they changed: `version 1 | count u8 | (id u8 | length u8
    /// | name) each`.
    pub fn to_save(&mut self) -> Option<Vec<u8>> {
        if !core::mem::take(&mut self.dirty) {
            return None;
        }
        let mut out = vec![1, self.names.len() as u8];
        for (id, name) in &self.names {
            out.push(id.index() as u8);
            out.push(name.len() as u8);
            out.extend_from_slice(name.as_bytes());
        }
        Some(out)
    }

    /// The wallets whose records are to delete now that the names without them are saved.
    pub fn take_removed(&mut self) -> Vec<WalletId> {
        core::mem::take(&mut self.removed)
    }

    /// Names saved by [`Self::to_save`]; `None` if the bytes are not (each id one of a
    /// named wallet's, each name valid, none twice).
    pub fn decode(bytes: &[u8]) -> Option<WalletNames> {
        let (&[1, count], mut rest) = bytes.split_first_chunk::<2>()? else {
            return None;
        };
        let mut names = WalletNames::default();
        for _ in 0..count {
            let (&[id, len], tail) = rest.split_first_chunk::<2>()?;
            let (name, tail) = tail.split_at_checked(usize::from(len))?;
            let name = core::str::from_utf8(name).ok()?;
            let id = WalletId::new(usize::from(id))
                .filter(|id| *id != WalletId::DEFAULT && id.index() < MAX_WALLETS - 1)?;
            if check_name(name).is_err() || names.id(name).is_some() || names.name(id).is_some() {
                return None;
            }
            names.names.push((id, name.to_string()));
            rest = tail;
        }
        rest.is_empty().then_some(names)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn names_are_given_ids_saved_and_read_back() {
        let mut n = WalletNames::default();
        let savings = n.add("savings").unwrap();
        assert_eq!(savings.index(), 1);
        assert_eq!(n.add("savings"), Ok(savings), "a name already given");
        let spending = n.add("spending ✓").unwrap();
        assert_eq!(record_key(spending).name(), "wallet-2");
        assert_eq!(record_key(WalletId::DEFAULT).name(), "wallet");
        let saved = n.to_save().unwrap();
        assert_eq!(n.to_save(), None, "nothing changed");
        let back = WalletNames::decode(&saved).unwrap();
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            n.iter().collect::<Vec<_>>()
        );
        // Removed: its id is not given again before its record is deleted.
        assert!(n.remove(savings));
        assert!(!n.remove(savings));
        assert_eq!(n.add("other").unwrap().index(), 3);
        assert_eq!(n.take_removed(), [savings]);
        assert_eq!(n.add("again").unwrap(), savings);
        // Bad names, and bytes that are not names.
        assert_eq!(n.add(""), Err(NameError::Length(0)));
        assert_eq!(n.add(&"x".repeat(65)), Err(NameError::Length(65)));
        assert_eq!(n.add("a\nb"), Err(NameError::Control));
        for bad in [
            &saved[..saved.len() - 1],
            &[2, 0][..],
            &[1, 1, 0, 1, b'a'][..],
            &[1, 2, 1, 1, b'a', 2, 1, b'a'][..],
            &[1, 2, 1, 1, b'a', 1, 1, b'b'][..],
            &[1, 1, 64, 1, b'a'][..],
            &[1, 1, 63, 1, b'a'][..],
            &[1, 1, 1, 1, 0xff][..],
            &[1, 0, 0][..],
        ] {
            assert_eq!(WalletNames::decode(bad), None, "{bad:?}");
        }
        // Every id taken.
        let mut full = WalletNames::default();
        for i in 1..MAX_WALLETS - 1 {
            full.add(&i.to_string()).unwrap();
        }
        assert_eq!(full.add("one more"), Err(NameError::TooMany));
    }
}
