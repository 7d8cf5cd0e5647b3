//! Helpers shared by this crate's unit tests.

/// Bytes from hex written in a test, ignoring whitespace (so vectors can be laid out in
/// fields). Panics on bad hex: test data only.
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(s).expect("test hex")
}
