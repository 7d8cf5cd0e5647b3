//! Just enough of the block encoding to find its output scripts: the 80-byte header, then
//! the transactions (with or without BIP144 witness data). Every length is checked against
//! what is left, so a hostile block is a [`BlockError`], never a panic or an allocation.
//! A [`Block`] once checked gives its transactions, their inputs (with witnesses) and
//! outputs, their txids and the block's Merkle root, for checking it against its header.

use alloc::vec::Vec;

use sha2::{Digest, Sha256};

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

    pub(crate) fn byte(&mut self, field: &'static str) -> Result<u8, BlockError> {
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
    pub(crate) fn count(&mut self, min: usize, field: &'static str) -> Result<u64, BlockError> {
        let n = self.compact_size(field)?;
        if n.saturating_mul(min as u64) > self.rest.len() as u64 {
            return Err(BlockError::TooLong { field, len: n });
        }
        Ok(n)
    }

    /// A CompactSize length, then that many bytes.
    pub(crate) fn var_bytes(&mut self, field: &'static str) -> Result<&'a [u8], BlockError> {
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
    let block = Block::parse(block)?;
    for tx in block.transactions() {
        tx.outputs().for_each(|o| f(o.script));
    }
    Ok(block.tx_count())
}

/// A block whose encoding was checked to the last byte: its header and its transactions,
/// borrowed. Walking it again cannot fail.
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    header: &'a [u8; 80],
    txs: &'a [u8],
    count: usize,
}

impl<'a> Block<'a> {
    /// Check `bytes` as a block (the header, then transactions with or without BIP144
    /// witness data, nothing after): no allocation, every length checked against what is
    /// left.
    pub fn parse(bytes: &'a [u8]) -> Result<Block<'a>, BlockError> {
        let mut r = Reader::new(bytes);
        let header = r.take(80, "the header")?;
        // A transaction takes at least 10 bytes (version, two counts, lock time).
        let count = r.count(10, "the transaction count")?;
        let txs = r.rest();
        for _ in 0..count {
            Tx::read(&mut r)?;
        }
        match r.rest().len() {
            0 => Ok(Block {
                header: header.try_into().unwrap_or(&[0; 80]),
                txs,
                count: count as usize,
            }),
            n => Err(BlockError::TrailingBytes(n)),
        }
    }

    /// The 80-byte header.
    pub fn header(&self) -> &'a [u8; 80] {
        self.header
    }

    /// How many transactions it holds.
    pub fn tx_count(&self) -> usize {
        self.count
    }

    /// Its transactions, in order.
    pub fn transactions(&self) -> impl Iterator<Item = Tx<'a>> + use<'a> {
        let mut r = Reader::new(self.txs);
        (0..self.count).map_while(move |_| Tx::read(&mut r).ok())
    }

    /// The Merkle root of its transaction ids, and whether the tree is *mutated*: two equal
    /// hashes paired at some level (CVE-2012-2459), which lets a block with transactions
    /// repeated at the end share the root of the block without them. Bitcoin Core refuses
    /// such a block; so must a caller that checks a block against its header.
    pub fn merkle_root(&self) -> ([u8; 32], bool) {
        let mut level: Vec<[u8; 32]> = self.transactions().map(|t| t.txid()).collect();
        let mut mutated = false;
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            for pair in level.chunks(2) {
                let right = pair.get(1).unwrap_or(&pair[0]);
                mutated |= pair.len() == 2 && pair[0] == pair[1];
                next.push(hash_pair(&pair[0], right));
            }
            level = next;
        }
        (level.first().copied().unwrap_or([0; 32]), mutated)
    }
}

fn hash_pair(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let once = Sha256::new()
        .chain_update(left)
        .chain_update(right)
        .finalize();
    Sha256::digest(once).into()
}

/// One transaction of a checked [`Block`].
#[derive(Clone, Copy, Debug)]
pub struct Tx<'a> {
    version: &'a [u8],
    /// From the input count to the end of the outputs: with the version and lock time,
    /// the serialization its txid hashes.
    body: &'a [u8],
    /// The witnesses of all inputs, one after another (empty without BIP144 data).
    witness: &'a [u8],
    lock_time: &'a [u8],
}

/// A transaction input.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The txid of the transaction whose output it spends (internal byte order).
    pub prev_txid: &'a [u8; 32],
    /// The index of that output.
    pub prev_vout: u32,
    /// The input script.
    pub script_sig: &'a [u8],
    /// Its sequence number.
    pub sequence: u32,
    /// Its witness (no items without BIP144 data).
    pub witness: Witness<'a>,
}

/// An input's witness stack, as serialized.
#[derive(Clone, Copy, Debug)]
pub struct Witness<'a> {
    items: usize,
    bytes: &'a [u8],
}

impl<'a> Witness<'a> {
    /// How many items it holds.
    pub fn len(&self) -> usize {
        self.items
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Its items, bottom of the stack first.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let mut r = Reader::new(self.bytes);
        (0..self.items).map_while(move |_| r.var_bytes("").ok())
    }
}

/// A transaction output.
#[derive(Clone, Copy, Debug)]
pub struct Output<'a> {
    /// Its value in satoshis.
    pub value: u64,
    /// Its script.
    pub script: &'a [u8],
}

fn le32(b: &[u8]) -> u32 {
    b.iter().rev().fold(0, |v, x| (v << 8) | u32::from(*x))
}

impl<'a> Tx<'a> {
    fn read(r: &mut Reader<'a>) -> Result<Tx<'a>, BlockError> {
        let version = r.take(4, "a version")?;
        let start = r.rest();
        let mut inputs = r.count(41, "an input count")?;
        let mut body = start;
        let witness = inputs == 0;
        if witness {
            // BIP144: a zero "input count" is the marker; the flag must be 1.
            let flag = r.byte("the witness flag")?;
            if flag != 1 {
                return Err(BlockError::BadWitnessFlag(flag));
            }
            body = r.rest();
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
            r.var_bytes("an output script")?;
        }
        let body = &body[..body.len() - r.rest().len()];
        let at_witness = r.rest();
        if witness {
            for _ in 0..inputs {
                let items = r.count(1, "a witness item count")?;
                for _ in 0..items {
                    r.var_bytes("a witness item")?;
                }
            }
        }
        let witness = &at_witness[..at_witness.len() - r.rest().len()];
        let lock_time = r.take(4, "a lock time")?;
        Ok(Tx {
            version,
            body,
            witness,
            lock_time,
        })
    }

    /// One transaction alone (as `send_tx` carries it): checked to its last byte.
    pub fn parse(bytes: &'a [u8]) -> Result<Tx<'a>, BlockError> {
        let mut r = Reader::new(bytes);
        let tx = Tx::read(&mut r)?;
        match r.rest().len() {
            0 => Ok(tx),
            n => Err(BlockError::TrailingBytes(n)),
        }
    }

    /// Its size without witness data (what its txid hashes).
    pub fn base_size(&self) -> usize {
        self.version.len() + self.body.len() + self.lock_time.len()
    }

    /// Its weight (BIP141): the base size three times, plus the whole size.
    pub fn weight(&self) -> usize {
        let marker = if self.witness.is_empty() { 0 } else { 2 };
        let total = self.base_size() + marker + self.witness.len();
        self.base_size() * 3 + total
    }

    /// Its txid: double SHA-256 of its serialization without witness data (internal byte
    /// order).
    pub fn txid(&self) -> [u8; 32] {
        let once = Sha256::new()
            .chain_update(self.version)
            .chain_update(self.body)
            .chain_update(self.lock_time)
            .finalize();
        Sha256::digest(once).into()
    }

    /// Its version.
    pub fn version(&self) -> u32 {
        le32(self.version)
    }

    /// Its lock time.
    pub fn lock_time(&self) -> u32 {
        le32(self.lock_time)
    }

    /// Whether it carries BIP144 witness data.
    pub fn has_witness(&self) -> bool {
        !self.witness.is_empty()
    }

    /// Whether it is a coinbase: one input, spending the null outpoint.
    pub fn is_coinbase(&self) -> bool {
        let mut inputs = self.inputs();
        matches!(
            (inputs.next(), inputs.next()),
            (Some(i), None) if *i.prev_txid == [0; 32] && i.prev_vout == u32::MAX
        )
    }

    /// Its inputs, with their witnesses.
    pub fn inputs(&self) -> impl Iterator<Item = Input<'a>> + use<'a> {
        let mut r = Reader::new(self.body);
        let mut w = Reader::new(self.witness);
        let n = r.compact_size("").unwrap_or(0);
        (0..n).map_while(move |_| {
            let outpoint = r.take(36, "").ok()?;
            let script_sig = r.var_bytes("").ok()?;
            let sequence = le32(r.take(4, "").ok()?);
            let witness = if w.rest().is_empty() {
                Witness {
                    items: 0,
                    bytes: &[],
                }
            } else {
                let items = w.compact_size("").ok()? as usize;
                let start = w.rest();
                for _ in 0..items {
                    w.var_bytes("").ok()?;
                }
                Witness {
                    items,
                    bytes: &start[..start.len() - w.rest().len()],
                }
            };
            Some(Input {
                prev_txid: outpoint[..32].try_into().ok()?,
                prev_vout: le32(&outpoint[32..]),
                script_sig,
                sequence,
                witness,
            })
        })
    }

    /// Its outputs.
    pub fn outputs(&self) -> impl Iterator<Item = Output<'a>> + use<'a> {
        let mut r = Reader::new(self.body);
        let inputs = r.compact_size("").unwrap_or(0);
        for _ in 0..inputs {
            let skipped = r
                .take(36, "")
                .and_then(|_| r.var_bytes(""))
                .and_then(|_| r.take(4, ""));
            if skipped.is_err() {
                break;
            }
        }
        let n = r.compact_size("").unwrap_or(0);
        (0..n).map_while(move |_| {
            let value = r.take(8, "").ok()?;
            let value = value
                .iter()
                .rev()
                .fold(0u64, |v, x| (v << 8) | u64::from(*x));
            Some(Output {
                value,
                script: r.var_bytes("").ok()?,
            })
        })
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
    fn a_checked_block_gives_its_transactions() {
        let block = hex::decode(GENESIS).unwrap();
        let b = Block::parse(&block).unwrap();
        assert_eq!(b.tx_count(), 1);
        let tx = b.transactions().next().unwrap();
        assert!(tx.is_coinbase() && !tx.has_witness());
        assert_eq!((tx.version(), tx.lock_time()), (1, 0));
        // The genesis coinbase's txid is the header's Merkle root.
        assert_eq!(&tx.txid()[..], &block[36..68]);
        assert_eq!((b.merkle_root().0, b.merkle_root().1), (tx.txid(), false));
        let outputs: Vec<Output<'_>> = tx.outputs().collect();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].value, 5_000_000_000);
        let input = tx.inputs().next().unwrap();
        assert_eq!(input.script_sig.len(), 0x4d);
        assert!(input.witness.is_empty());
    }

    /// A segwit transaction: marker and flag, then the witness after the outputs.
    #[test]
    fn witness_data_is_read_per_input_and_left_out_of_the_txid() {
        let legacy_body = [
            &[1u8][..], // one input
            &[7; 32],
            &[2, 0, 0, 0],             // outpoint
            &[0],                      // empty script
            &[0xfe, 0xff, 0xff, 0xff], // sequence
            &[1],                      // one output
            &[0x10, 0x27, 0, 0, 0, 0, 0, 0],
            &[3, 0x51, 0x52, 0x53],
        ]
        .concat();
        let tx = |witness: bool| {
            let mut t = vec![2, 0, 0, 0];
            if witness {
                t.extend_from_slice(&[0, 1]);
            }
            t.extend_from_slice(&legacy_body);
            if witness {
                t.extend_from_slice(&[2, 2, 0xaa, 0xbb, 1, 0xcc]);
            }
            t.extend_from_slice(&[0, 0, 0, 0]);
            t
        };
        let mut block = vec![0u8; 80];
        block.push(1);
        block.extend_from_slice(&tx(true));
        let b = Block::parse(&block).unwrap();
        let t = b.transactions().next().unwrap();
        assert!(t.has_witness() && !t.is_coinbase());
        let legacy: [u8; 32] = Sha256::digest(Sha256::digest(tx(false))).into();
        assert_eq!(t.txid(), legacy);
        let input = t.inputs().next().unwrap();
        assert_eq!((input.prev_txid, input.prev_vout), (&[7; 32], 2));
        assert_eq!(input.sequence, 0xffff_fffe);
        let items: Vec<&[u8]> = input.witness.iter().collect();
        assert_eq!(items, [&[0xaa, 0xbb][..], &[0xcc][..]]);
        let out = t.outputs().next().unwrap();
        assert_eq!((out.value, out.script), (10_000, &[0x51, 0x52, 0x53][..]));
        // Alone, as a relayed transaction: its weight counts the witness once, the rest
        // four times.
        let alone = tx(true);
        let t = Tx::parse(&alone).unwrap();
        assert_eq!(t.base_size(), tx(false).len());
        assert_eq!(t.weight(), tx(false).len() * 3 + alone.len());
        assert_eq!(Tx::parse(&tx(false)).unwrap().weight(), tx(false).len() * 4);
        let mut more = alone.clone();
        more.push(0);
        assert_eq!(
            Tx::parse(&more).map(|_| ()),
            Err(BlockError::TrailingBytes(1))
        );
        assert!(Tx::parse(&alone[..alone.len() - 1]).is_err());
    }

    #[test]
    fn a_repeated_last_transaction_is_a_mutated_tree() {
        let block = hex::decode(GENESIS).unwrap();
        let tx = &block[81..];
        let mut twice = block[..80].to_vec();
        twice.push(2);
        twice.extend_from_slice(tx);
        twice.extend_from_slice(tx);
        let (root, mutated) = Block::parse(&twice).unwrap().merkle_root();
        assert!(mutated);
        // The same root as one transaction paired with itself: why mutation is refused.
        let one = Block::parse(&block).unwrap().merkle_root().0;
        assert_eq!(root, hash_pair(&one, &one));
    }

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
