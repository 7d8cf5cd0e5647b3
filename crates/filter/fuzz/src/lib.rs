//! Shared by the filter fuzz targets: the input reader (crates/fuzz-support).
pub use lightwire_fuzz_support::Cursor;
