//! Transactions read by borrowing, with or without BIP144 witness data: checked to the
//! last byte once ([`Tx::read`]), then walked again (inputs, outputs, witnesses) without
//! failing and without allocating; their txid is double SHA-256 of the serialization
//! without witness data, hashed from the borrowed pieces.

use sha2::{Digest, Sha256};

use crate::hash::Txid;
use crate::reader::{DecodeError, Reader};

/// A transaction whose encoding was checked, borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Tx<'a> {
    /// The whole serialization, witness data included.
    raw: &'a [u8],
    version: &'a [u8; 4],
    /// From the input count to the end of the outputs: with the version and lock time,
    /// the serialization its txid hashes.
    body: &'a [u8],
    /// The witnesses of all inputs, one after another (empty without BIP144 data).
    witness: &'a [u8],
    lock_time: &'a [u8; 4],
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

impl Input<'_> {
    /// The txid of the transaction whose output it spends.
    pub fn prev_txid(&self) -> Txid {
        Txid(*self.prev_txid)
    }
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

/// Smallest encoded input: outpoint (36), an empty script (1), sequence (4).
const MIN_INPUT: usize = 41;
/// Smallest encoded output: value (8), an empty script (1).
const MIN_OUTPUT: usize = 9;

impl<'a> Tx<'a> {
    /// Read one transaction from `r`, checking every length; `r` is left after it.
    pub fn read(r: &mut Reader<'a>) -> Result<Tx<'a>, DecodeError> {
        let all = r.rest();
        let version = r.array::<4>("a version")?;
        let start = r.rest();
        let mut inputs = r.count(MIN_INPUT, "an input count")?;
        let mut body = start;
        let witness = inputs == 0;
        if witness {
            // BIP144: a zero "input count" is the marker; the flag must be 1.
            let flag = r.byte("the witness flag")?;
            if flag != 1 {
                return Err(DecodeError::BadWitnessFlag(flag));
            }
            body = r.rest();
            inputs = r.count(MIN_INPUT, "an input count")?;
        }
        for _ in 0..inputs {
            r.take(36, "an outpoint")?;
            r.var_bytes("an input script")?;
            r.take(4, "a sequence")?;
        }
        let outputs = r.count(MIN_OUTPUT, "an output count")?;
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
        let lock_time = r.array::<4>("a lock time")?;
        Ok(Tx {
            raw: &all[..all.len() - r.rest().len()],
            version,
            body,
            witness,
            lock_time,
        })
    }

    /// One transaction alone (as a relayed transaction is carried): checked to its last
    /// byte.
    pub fn parse(bytes: &'a [u8]) -> Result<Tx<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        let tx = Tx::read(&mut r)?;
        r.finish()?;
        Ok(tx)
    }

    /// The transaction as serialized, witness data included (borrowed from what it was
    /// read from).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Its size without witness data (what its txid hashes).
    pub fn base_size(&self) -> usize {
        self.version.len() + self.body.len() + self.lock_time.len()
    }

    /// Its serialization without witness data (what its txid hashes), appended to `out`.
    pub fn write_without_witness(&self, out: &mut alloc::vec::Vec<u8>) {
        out.extend_from_slice(self.version);
        out.extend_from_slice(self.body);
        out.extend_from_slice(self.lock_time);
    }

    /// Its weight (BIP141): the base size three times, plus the whole size.
    pub fn weight(&self) -> usize {
        let marker = if self.witness.is_empty() { 0 } else { 2 };
        let total = self.base_size() + marker + self.witness.len();
        self.base_size() * 3 + total
    }

    /// Its txid: double SHA-256 of its serialization without witness data.
    pub fn txid(&self) -> Txid {
        let once = Sha256::new()
            .chain_update(self.version)
            .chain_update(self.body)
            .chain_update(self.lock_time)
            .finalize();
        Txid(Sha256::digest(once).into())
    }

    /// Its version.
    pub fn version(&self) -> u32 {
        u32::from_le_bytes(*self.version)
    }

    /// Its lock time.
    pub fn lock_time(&self) -> u32 {
        u32::from_le_bytes(*self.lock_time)
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
            let prev_txid = r.array::<32>("").ok()?;
            let prev_vout = r.u32_le("").ok()?;
            let script_sig = r.var_bytes("").ok()?;
            let sequence = r.u32_le("").ok()?;
            let witness = if w.rest().is_empty() {
                Witness {
                    items: 0,
                    bytes: &[],
                }
            } else {
                let items = usize::try_from(w.compact_size("").ok()?).ok()?;
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
                prev_txid,
                prev_vout,
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
            Some(Output {
                value: r.u64_le("").ok()?,
                script: r.var_bytes("").ok()?,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;
    use crate::hash::sha256d;

    /// One input, one output; with BIP144 data, a two-item witness.
    fn tx(witness: bool) -> Vec<u8> {
        let body = [
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
        let mut t = vec![2, 0, 0, 0];
        if witness {
            t.extend_from_slice(&[0, 1]);
        }
        t.extend_from_slice(&body);
        if witness {
            t.extend_from_slice(&[2, 2, 0xaa, 0xbb, 1, 0xcc]);
        }
        t.extend_from_slice(&[0, 0, 0, 0]);
        t
    }

    /// Witness data is read per input and left out of the txid and of three quarters of
    /// the weight.
    #[test]
    fn witness_data_is_read_per_input_and_left_out_of_the_txid() {
        let with = tx(true);
        let t = Tx::parse(&with).unwrap();
        assert!(t.has_witness() && !t.is_coinbase());
        assert_eq!((t.version(), t.lock_time()), (2, 0));
        assert_eq!(t.txid(), Txid(sha256d(&tx(false))));
        assert_eq!(Tx::parse(&tx(false)).unwrap().txid(), t.txid());
        let input = t.inputs().next().unwrap();
        assert_eq!((input.prev_txid(), input.prev_vout), (Txid([7; 32]), 2));
        assert_eq!(input.sequence, 0xffff_fffe);
        let items: Vec<&[u8]> = input.witness.iter().collect();
        assert_eq!(items, [&[0xaa, 0xbb][..], &[0xcc][..]]);
        let out = t.outputs().next().unwrap();
        assert_eq!((out.value, out.script), (10_000, &[0x51, 0x52, 0x53][..]));
        assert_eq!(t.base_size(), tx(false).len());
        assert_eq!(t.weight(), tx(false).len() * 3 + with.len());
        assert_eq!(Tx::parse(&tx(false)).unwrap().weight(), tx(false).len() * 4);
        // Its bytes, whole: alone, and read from among others.
        assert_eq!(t.raw(), &with[..]);
        let mut two = tx(false);
        two.extend_from_slice(&with);
        let mut r = Reader::new(&two);
        assert_eq!(Tx::read(&mut r).unwrap().raw(), &tx(false)[..]);
        assert_eq!(Tx::read(&mut r).unwrap().raw(), &with[..]);
    }

    /// Every cut is a typed error, and so is a byte more or a bad witness flag.
    #[test]
    fn a_malformed_transaction_is_a_typed_error() {
        for witness in [false, true] {
            let t = tx(witness);
            for cut in 0..t.len() {
                assert!(Tx::parse(&t[..cut]).is_err(), "cut at {cut}");
            }
            let mut more = t.clone();
            more.push(0);
            assert_eq!(
                Tx::parse(&more).map(|_| ()),
                Err(DecodeError::TrailingBytes(1))
            );
        }
        let mut flag = tx(true);
        flag[5] = 2;
        assert_eq!(
            Tx::parse(&flag).map(|_| ()),
            Err(DecodeError::BadWitnessFlag(2))
        );
        // The output script's length written in three bytes: Core refuses it, so do we.
        let mut wide = tx(false);
        let at = wide.len() - 8;
        assert_eq!(wide[at], 3);
        wide.splice(at..at + 1, [0xfd, 3, 0]);
        assert_eq!(
            Tx::parse(&wide).map(|_| ()),
            Err(DecodeError::NonCanonical {
                field: "an output script",
                value: 3
            })
        );
    }
}
