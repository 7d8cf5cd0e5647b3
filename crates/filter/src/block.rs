//! Just enough of the block encoding to find its output scripts: the 80-byte header, then
//! the transactions (with or without BIP144 witness data). Every length is checked against
//! what is left, so a hostile block is a [`BlockError`], never a panic or an allocation.

/// A block did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// It ended inside a field.
    #[error("the block ends inside {field}")]
    Truncated {
        /// The field.
        field: &'static str,
    },
    /// A count or length says more than the bytes left could hold.
    #[error("{field} of {len} is more than the block holds")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The value.
        len: u64,
    },
    /// Bytes after the last transaction.
    #[error("{0} bytes after the last transaction")]
    TrailingBytes(usize),
    /// A witness marker without the flag BIP144 requires (0x01).
    #[error("a witness marker with flag {0}")]
    BadWitnessFlag(u8),
}

/// A cursor over the block's bytes.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], BlockError> {
        let (head, tail) = self
            .rest
            .split_at_checked(n)
            .ok_or(BlockError::Truncated { field })?;
        self.rest = tail;
        Ok(head)
    }

    fn byte(&mut self, field: &'static str) -> Result<u8, BlockError> {
        Ok(self.take(1, field)?[0])
    }

    /// A CompactSize (Bitcoin's variable-length integer).
    pub(crate) fn compact_size(&mut self, field: &'static str) -> Result<u64, BlockError> {
        let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, x| (v << 8) | u64::from(*x));
        Ok(match self.byte(field)? {
            0xfd => le(self.take(2, field)?),
            0xfe => le(self.take(4, field)?),
            0xff => le(self.take(8, field)?),
            n => u64::from(n),
        })
    }

    /// A count of items each at least `min` bytes long: refused when the bytes left cannot
    /// hold that many (so that no loop runs long on a lie).
    fn count(&mut self, min: usize, field: &'static str) -> Result<u64, BlockError> {
        let n = self.compact_size(field)?;
        if n.saturating_mul(min as u64) > self.rest.len() as u64 {
            return Err(BlockError::TooLong { field, len: n });
        }
        Ok(n)
    }

    /// A CompactSize length, then that many bytes.
    fn var_bytes(&mut self, field: &'static str) -> Result<&'a [u8], BlockError> {
        let n = self.compact_size(field)?;
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.rest.len())
            .ok_or(BlockError::TooLong { field, len: n })?;
        self.take(n, field)
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

/// Call `f` with every output script of every transaction in `block`, in order; returns
/// how many transactions there were.
pub fn output_scripts<'a>(
    block: &'a [u8],
    mut f: impl FnMut(&'a [u8]),
) -> Result<usize, BlockError> {
    let mut r = Reader::new(block);
    r.take(80, "the header")?;
    // A transaction takes at least 10 bytes (version, two counts, lock time).
    let txs = r.count(10, "the transaction count")?;
    for _ in 0..txs {
        r.take(4, "a version")?;
        let mut inputs = r.count(41, "an input count")?;
        let witness = inputs == 0;
        if witness {
            // BIP144: a zero "input count" is the marker; the flag must be 1.
            let flag = r.byte("the witness flag")?;
            if flag != 1 {
                return Err(BlockError::BadWitnessFlag(flag));
            }
            inputs = r.count(41, "an input count")?;
        }
        for _ in 0..inputs {
            r.take(36, "an outpoint")?;
            r.var_bytes("an input script")?;
            r.take(4, "a sequence")?;
        }
        let outputs = r.count(9, "an output count")?;
        for _ in 0..outputs {
            r.take(8, "a value")?;
            f(r.var_bytes("an output script")?);
        }
        if witness {
            for _ in 0..inputs {
                let items = r.count(1, "a witness item count")?;
                for _ in 0..items {
                    r.var_bytes("a witness item")?;
                }
            }
        }
        r.take(4, "a lock time")?;
    }
    match r.rest().len() {
        0 => Ok(txs as usize),
        n => Err(BlockError::TrailingBytes(n)),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec::Vec;

    use super::*;

    /// Mainnet's genesis block.
    const GENESIS: &str = "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c0101000000010000000000000000000000000000000000000000000000000000000000000000ffffffff4d04ffff001d0104455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e206272696e6b206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a01000000434104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000";

    #[test]
    fn the_genesis_block_has_one_output_script() {
        let block = hex::decode(GENESIS).unwrap();
        let mut scripts = Vec::new();
        assert_eq!(output_scripts(&block, |s| scripts.push(s.to_vec())), Ok(1));
        assert_eq!(scripts.len(), 1);
        assert_eq!(scripts[0].len(), 67);
        // Every cut is a typed error; so is a byte more.
        for cut in 0..block.len() {
            assert!(
                output_scripts(&block[..cut], |_| {}).is_err(),
                "cut at {cut}"
            );
        }
        let mut more = block.clone();
        more.push(0);
        assert_eq!(
            output_scripts(&more, |_| {}),
            Err(BlockError::TrailingBytes(1))
        );
        // A count far beyond the bytes is refused before any loop.
        let mut lie = block[..80].to_vec();
        lie.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(matches!(
            output_scripts(&lie, |_| {}),
            Err(BlockError::TooLong { .. })
        ));
    }
}
