//! A silent-payment tweak dispute settled from evidence
//! (`lightwire_wallet::silent_evidence::tweaks_from_evidence`), against an honest model
//! that knows the truth: it made the block, the transactions the block spends from, and
//! every key. The function under test sees only the checked block and the evidence.
//!
//! The model, from the input (`Cursor`; past the end every knob reads 0, the honest
//! choice):
//! * 1-3 *creating* transactions, each with 1-3 outputs; each output has a recipe: a kind
//!   of script and a secret key (two input bytes, see `small_secret`). Kinds: P2PKH
//!   (compressed key; optionally junk after the key push), P2WPKH, P2SH-P2WPKH, P2TR key
//!   path (optionally with an annex), P2TR script path (internal key BIP341's `H`, or
//!   another), P2PKH of an uncompressed key, P2WPKH of an uncompressed key, P2WSH, a
//!   version-2 witness program, a bare `OP_1`.
//! * A block: a coinbase, then 1-4 transactions with 0-3 outputs (recipes too; the first a
//!   P2TR key unless the input says not) and 1-3 inputs, each spending an output of a
//!   creating transaction or of an earlier block transaction (signed as its recipe says),
//!   or, as a mutation, an output index past the creator's outputs, or a txid nobody
//!   made. Then optionally the block's transactions after the coinbase in another order.
//! * The witness commitment (the target's own BIP141 code): correct; none (every witness
//!   stripped, or some kept); wrong; correct but the coinbase's reserved value missing,
//!   doubled or 31 bytes. Optionally a commitment-looking output before it (ignored, the
//!   last counts), after it too short to count, or after it and counting (wrong).
//! * Optionally one witness byte changed after the commitment was made.
//! * The header: the Merkle root of the txids (the target's own code); the block must
//!   then pass `Block::check`.
//! * The evidence: each creating transaction kept, dropped, given twice, or given with
//!   another witness (the same txid); 0-2 unrelated transactions; 0-2 garbage items (a
//!   creating transaction cut short or with bytes after it, or raw input bytes); any
//!   block transactions; in the input's order or shuffled.
//!
//! Expected (the function's order, read from its code: the witness commitment first, then
//! every evidence item parsed in the order given, then the block's transactions after the
//! coinbase in block order, each with a taproot output, its inputs in order):
//! `Witness(e)` with `e` the reference's (`ref_check_witness`); else
//! `Malformed { index }` for the first item the reference parser (`ref_parse_tx`) refuses;
//! else `Missing { txid }` for the first input whose transaction is neither earlier in
//! the block nor among the items, or `NoSuchOutput { txid, vout }` for the first whose
//! transaction has no such output; else `Ok` with exactly the honest list:
//! `lightwire_wallet::silent::tweak` of each such transaction with the scripts the model
//! knows its inputs spend, sorted. `out` is that list, or empty after an error, whatever
//! it held before.
//!
//! And for every block transaction before a witness byte is changed: `tweak` with the true
//! scripts equals BIP352 computed here from the secret keys (`ref_tweak`: the eligible
//! inputs' keys summed, the smallest outpoint, `input_hash·A`), or is refused where BIP352
//! gives no tweak (no taproot output, no eligible input, a version-2 program spent, keys
//! that cancel).
#![no_main]

use std::collections::HashMap;

use k256::Scalar;
use libfuzzer_sys::fuzz_target;
use lightwire_primitives::{BlockHash, CheckedBlock, Tx, Txid, WitnessError};
use lightwire_wallet::silent::tweak;
use lightwire_wallet::silent_evidence::{EvidenceError, tweaks_from_evidence};
use lightwire_wallet_fuzz::{
    COMMITMENT_HEAD, Cursor, Keys, RefWitness, TxIn, TxModel, hash160, ref_check_witness,
    ref_commitment, ref_merkle_root, ref_parse_tx, ref_tweak, ref_write_compact_size, sha256,
    small_secret,
};

/// BIP341's NUMS point `H`, x coordinate: a script-path spend under it has no key path.
const NUMS_H: [u8; 32] = [
    0x50, 0x92, 0x9b, 0x74, 0xc1, 0xa0, 0x49, 0x54, 0xb7, 0x8b, 0x4b, 0x60, 0x35, 0xe9, 0x7a, 0x5e,
    0x07, 0x8a, 0x5a, 0x0f, 0x28, 0xec, 0x96, 0xd5, 0x47, 0xbf, 0xee, 0x9a, 0xce, 0x80, 0x3a, 0xc0,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    P2pkh,
    P2wpkh,
    P2shP2wpkh,
    TrKey,
    TrNums,
    TrScript,
    P2pkhUncompressed,
    P2wpkhUncompressed,
    P2wsh,
    LaterVersion,
    Bare,
}

const KINDS: [Kind; 11] = [
    Kind::P2pkh,
    Kind::P2wpkh,
    Kind::P2shP2wpkh,
    Kind::TrKey,
    Kind::TrNums,
    Kind::TrScript,
    Kind::P2pkhUncompressed,
    Kind::P2wpkhUncompressed,
    Kind::P2wsh,
    Kind::LaterVersion,
    Kind::Bare,
];

/// The x coordinate of the generator: another internal key than `H`.
const G_X: [u8; 32] = [
    0x79, 0xbe, 0x66, 0x7e, 0xf9, 0xdc, 0xbb, 0xac, 0x55, 0xa0, 0x62, 0x95, 0xce, 0x87, 0x0b, 0x07,
    0x02, 0x9b, 0xfc, 0xdb, 0x2d, 0xce, 0x28, 0xd9, 0x59, 0xf2, 0x81, 0x5b, 0x16, 0xf8, 0x17, 0x98,
];

/// How an output is locked and how the model spends it.
#[derive(Clone, Debug)]
struct Recipe {
    kind: Kind,
    keys: Keys,
    script: Vec<u8>,
}

/// What an input contributes to BIP352's sum.
enum Contribution {
    None,
    Key(Scalar),
    /// It spends a witness program of version 2 or above: the transaction has no tweak.
    Later,
}

fn push(out: &mut Vec<u8>, data: &[u8]) {
    assert!(data.len() < 0x4c);
    out.push(data.len() as u8);
    out.extend_from_slice(data);
}

impl Recipe {
    fn new(kind: Kind, secret: Scalar) -> Recipe {
        let keys = Keys::of(secret);
        let script = match kind {
            Kind::P2pkh => p2pkh(&hash160(&keys.compressed)),
            Kind::P2pkhUncompressed => p2pkh(&hash160(&keys.uncompressed)),
            Kind::P2wpkh => program(0, &hash160(&keys.compressed)),
            Kind::P2wpkhUncompressed => program(0, &hash160(&keys.uncompressed)),
            Kind::P2shP2wpkh => {
                let mut s = vec![0xa9, 0x14];
                s.extend_from_slice(&hash160(&program(0, &hash160(&keys.compressed))));
                s.push(0x87);
                s
            }
            Kind::TrKey | Kind::TrNums | Kind::TrScript => program(1, &keys.x),
            Kind::P2wsh => program(0, &sha256(&[0x51])),
            Kind::LaterVersion => program(2, &keys.x),
            Kind::Bare => vec![0x51],
        };
        Recipe { kind, keys, script }
    }

    fn read(input: &mut Cursor<'_>) -> Recipe {
        let kind = KINDS[usize::from(input.u8()) % KINDS.len()];
        Recipe::new(kind, small_secret(input.u16()))
    }

    /// A P2TR key path recipe (the honest taproot output).
    fn taproot(input: &mut Cursor<'_>) -> Recipe {
        Recipe::new(Kind::TrKey, small_secret(input.u16()))
    }

    /// The script and witness of an input spending it; `style` varies what does not
    /// change the key (junk after a P2PKH key, a taproot annex), `fill` the signature's
    /// bytes.
    fn spend(&self, style: u8, fill: u8) -> (Vec<u8>, Vec<Vec<u8>>) {
        let key = self.keys.compressed.to_vec();
        let sig = vec![fill; 71];
        let schnorr = vec![fill; 64];
        let annex = |mut w: Vec<Vec<u8>>| {
            if style & 1 == 1 {
                w.push(vec![0x50, fill]);
            }
            w
        };
        match self.kind {
            Kind::P2pkh => {
                let mut s = Vec::new();
                push(&mut s, &sig);
                push(&mut s, &key);
                if style & 1 == 1 {
                    // Junk after the key (a third party can add it): the key still counts.
                    s.extend_from_slice(&[0x61, fill, 0x75]);
                }
                (s, vec![])
            }
            Kind::P2pkhUncompressed => {
                let mut s = Vec::new();
                push(&mut s, &sig);
                s.push(0x41);
                s.extend_from_slice(&self.keys.uncompressed);
                (s, vec![])
            }
            Kind::P2wpkh => (vec![], vec![sig, key]),
            Kind::P2wpkhUncompressed => (vec![], vec![sig, self.keys.uncompressed.to_vec()]),
            Kind::P2shP2wpkh => {
                let mut s = Vec::new();
                push(&mut s, &program(0, &hash160(&key)));
                (s, vec![sig, key])
            }
            Kind::TrKey => (vec![], annex(vec![schnorr])),
            Kind::TrNums | Kind::TrScript => {
                let internal = match self.kind {
                    Kind::TrNums => NUMS_H,
                    _ => G_X,
                };
                let mut control = vec![0xc0];
                control.extend_from_slice(&internal);
                (vec![], annex(vec![vec![fill], vec![0x51], control]))
            }
            Kind::P2wsh => (vec![], vec![vec![fill], vec![0x51]]),
            Kind::LaterVersion => (vec![], vec![schnorr]),
            Kind::Bare => (vec![], vec![]),
        }
    }

    /// BIP352's rule for this kind, applied to the input as it stands (its witness may
    /// have been stripped): the key it contributes, as the point the input shows.
    fn contribution(&self, input: &TxIn) -> Contribution {
        let witnessed = !input.witness.is_empty();
        match self.kind {
            Kind::P2pkh => Contribution::Key(self.keys.secret),
            Kind::P2wpkh | Kind::P2shP2wpkh if witnessed => Contribution::Key(self.keys.secret),
            Kind::TrKey | Kind::TrScript if witnessed => Contribution::Key(self.keys.even),
            Kind::LaterVersion => Contribution::Later,
            _ => Contribution::None,
        }
    }
}

fn p2pkh(hash: &[u8; 20]) -> Vec<u8> {
    let mut s = vec![0x76, 0xa9, 0x14];
    s.extend_from_slice(hash);
    s.extend_from_slice(&[0x88, 0xac]);
    s
}

fn program(version: u8, program: &[u8]) -> Vec<u8> {
    let mut s = vec![
        if version == 0 { 0 } else { 0x50 + version },
        program.len() as u8,
    ];
    s.extend_from_slice(program);
    s
}

fn is_p2tr(script: &[u8]) -> bool {
    script.len() == 34 && script[0] == 0x51 && script[1] == 0x20
}

/// A transaction the model made, with what it knows of it.
#[derive(Clone)]
struct Made {
    tx: TxModel,
    /// The recipe of each output.
    recipes: Vec<Option<Recipe>>,
    /// The recipe of the output each input spends, when it exists.
    spends: Vec<Option<Recipe>>,
}

impl Made {
    fn new(tx: TxModel) -> Made {
        Made {
            tx,
            recipes: vec![],
            spends: vec![],
        }
    }

    fn add_output(&mut self, value: u64, recipe: Recipe) {
        self.tx.outputs.push((value, recipe.script.clone()));
        self.recipes.push(Some(recipe));
    }
}

/// A transaction spending a made-up outpoint (a creating or an unrelated one), with 1-3
/// outputs of recipes read from the input, and a witness or not.
fn source_tx(input: &mut Cursor<'_>, tag: u8, i: usize) -> Made {
    let mut prev = [tag; 32];
    prev[0] = i as u8;
    let witness = match input.u8() % 2 {
        0 => vec![],
        _ => vec![vec![tag, i as u8]],
    };
    let mut m = Made::new(TxModel {
        version: 2,
        inputs: vec![TxIn {
            prev_txid: prev,
            prev_vout: 0,
            script_sig: vec![0x51],
            sequence: 0xffff_ffff,
            witness,
        }],
        outputs: vec![],
        lock_time: u32::from(tag) << 16 | i as u32,
    });
    for _ in 0..1 + input.u8() % 3 {
        let r = Recipe::read(input);
        m.add_output(1000, r);
    }
    m
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);

    // The transactions the block spends from.
    let creators: Vec<Made> = (0..1 + usize::from(input.u8() % 3))
        .map(|c| source_tx(&mut input, 0xc0, c))
        .collect();
    let creator_txids: Vec<[u8; 32]> = creators.iter().map(|m| m.tx.txid()).collect();

    // The block's transactions after the coinbase, in the order they are made (each spends
    // only from creators and from those made before it).
    let mut txs: Vec<Made> = Vec::new();
    let n_block = 1 + usize::from(input.u8() % 4);
    for j in 0..n_block {
        let mut m = Made::new(TxModel {
            version: 2,
            inputs: vec![],
            outputs: vec![],
            lock_time: j as u32,
        });
        let shape = input.u8();
        if shape % 4 != 3 {
            let r = Recipe::taproot(&mut input);
            m.add_output(2000, r);
        }
        for _ in 0..(shape >> 2) % 3 {
            let r = Recipe::read(&mut input);
            m.add_output(3000, r);
        }
        for _ in 0..1 + input.u8() % 3 {
            let how = input.u8();
            let pick = usize::from(input.u8());
            let style = input.u8();
            let fill = input.u8();
            let (prev_txid, prev_vout, recipe) = match how % 8 {
                // An output of an earlier block transaction.
                5 if j > 0 => {
                    let b = &txs[pick % j];
                    let vout = usize::from(style) % b.recipes.len().max(1);
                    (
                        b.tx.txid(),
                        vout as u32,
                        b.recipes.get(vout).cloned().flatten(),
                    )
                }
                // An output index past the creator's outputs.
                6 => {
                    let c = pick % creators.len();
                    let vout = creators[c].recipes.len() + usize::from(style % 3);
                    (creator_txids[c], vout as u32, None)
                }
                // A transaction nobody made.
                7 => (sha256(&[0xdd, pick as u8, j as u8]), u32::from(style), None),
                // An output of a creating transaction.
                _ => {
                    let c = pick % creators.len();
                    let vout = usize::from(style) % creators[c].recipes.len();
                    (
                        creator_txids[c],
                        vout as u32,
                        creators[c].recipes[vout].clone(),
                    )
                }
            };
            let (script_sig, witness) = match &recipe {
                Some(r) => r.spend(style >> 4, fill),
                None => (vec![fill], vec![vec![fill; 33]]),
            };
            m.tx.inputs.push(TxIn {
                prev_txid,
                prev_vout,
                script_sig,
                sequence: 0xffff_ffff,
                witness,
            });
            m.spends.push(recipe);
        }
        txs.push(m);
    }

    // The witness commitment's mode; without one, witnesses are stripped unless kept.
    let mode = input.u8();
    let commit = mode % 4;
    if commit == 1 {
        let keep = input.u8();
        for (j, m) in txs.iter_mut().enumerate() {
            if keep >> (j % 8) & 1 == 0 {
                m.tx.inputs.iter_mut().for_each(|i| i.witness.clear());
            }
        }
    }

    // Another order for the block's transactions (the coinbase stays first).
    if input.u8() % 2 == 1 {
        for i in (1..txs.len()).rev() {
            let k = usize::from(input.u8()) % (i + 1);
            txs.swap(i, k);
        }
    }

    // Each transaction's tweak with the true scripts, against BIP352 from the secret keys;
    // kept by txid, for the honest list.
    let mut true_tweaks: HashMap<[u8; 32], Option<[u8; 33]>> = HashMap::new();
    for m in &txs {
        let raw = m.tx.serialize(true);
        let tx = Tx::parse(&raw).expect("a made transaction parses");
        let Some(recipes) = m
            .spends
            .iter()
            .map(Option::as_ref)
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let scripts: Vec<&[u8]> = recipes.iter().map(|r| r.script.as_slice()).collect();
        let mut keys = Vec::new();
        let mut later = false;
        for (r, i) in recipes.iter().zip(&m.tx.inputs) {
            match r.contribution(i) {
                Contribution::Key(k) => keys.push(k),
                Contribution::Later => later = true,
                Contribution::None => {}
            }
        }
        let smallest =
            m.tx.inputs
                .iter()
                .map(|i| {
                    let mut o = [0u8; 36];
                    o[..32].copy_from_slice(&i.prev_txid);
                    o[32..].copy_from_slice(&i.prev_vout.to_le_bytes());
                    o
                })
                .min()
                .expect("an input");
        let taproot = m.tx.outputs.iter().any(|(_, s)| is_p2tr(s));
        let want = if taproot && !later {
            ref_tweak(&keys, &smallest)
        } else {
            None
        };
        let got = tweak(&tx, &scripts);
        assert_eq!(
            got.ok(),
            want,
            "tweak of {} ({got:?}), spending {recipes:?}",
            hex(&raw)
        );
        true_tweaks.insert(m.tx.txid(), got.ok());
    }

    // The coinbase, then the commitment as the mode says.
    let nonce: [u8; 32] = {
        let mut n = [0u8; 32];
        let b = input.bytes(32);
        n[..b.len()].copy_from_slice(b);
        n
    };
    let coinbase_extra = input.u8();
    let mut coinbase = TxModel {
        version: 2,
        inputs: vec![TxIn {
            prev_txid: [0; 32],
            prev_vout: u32::MAX,
            script_sig: vec![0x01, coinbase_extra],
            sequence: 0xffff_ffff,
            witness: if commit == 1 {
                vec![]
            } else {
                vec![nonce.to_vec()]
            },
        }],
        outputs: vec![(50, program(0, &[coinbase_extra; 20]))],
        lock_time: 0,
    };
    if coinbase_extra % 2 == 1 {
        // A taproot output in the coinbase: never a transaction of the list.
        coinbase
            .outputs
            .push((1, program(1, &[coinbase_extra; 32])));
    }
    let decoys = input.u8();
    let commitment_script = |hash: &[u8; 32], extra: usize| {
        let mut s = COMMITMENT_HEAD.to_vec();
        s.extend_from_slice(hash);
        s.extend(std::iter::repeat_n(0xab, extra));
        s
    };
    let mut block_txs: Vec<TxModel> = vec![coinbase];
    block_txs.extend(txs.iter().map(|m| m.tx.clone()));
    if commit != 1 {
        let mut hash = ref_commitment(&block_txs, &nonce);
        if commit == 2 {
            hash[usize::from(decoys) % 32] ^= 1 << (decoys % 8);
        }
        let coinbase = &mut block_txs[0];
        if decoys & 0x10 != 0 {
            coinbase
                .outputs
                .push((0, commitment_script(&[0xee; 32], 0)));
        }
        coinbase
            .outputs
            .push((0, commitment_script(&hash, usize::from(decoys >> 6))));
        if decoys & 0x20 != 0 {
            // Too short to be one: not counted.
            let mut short = commitment_script(&[0xee; 32], 0);
            short.pop();
            coinbase.outputs.push((0, short));
        }
        if commit == 3 {
            coinbase.inputs[0].witness = match decoys % 3 {
                0 => vec![],
                1 => vec![nonce.to_vec(), nonce.to_vec()],
                _ => vec![nonce[..31].to_vec()],
            };
        }
    }
    if decoys & 0x0f == 0x0f {
        // A commitment-looking output after the real one (or where there is none): it is
        // the one that counts, and it commits to nothing here.
        block_txs[0]
            .outputs
            .push((0, commitment_script(&[0xee; 32], 0)));
    }

    // One witness byte changed after the commitment was made.
    let flip = input.u8();
    let mut flipped = false;
    if flip & 1 == 1 {
        let j = 1 + usize::from(flip >> 1) % txs.len();
        let at = usize::from(input.u8());
        let tx = &mut block_txs[j];
        let items: Vec<(usize, usize)> = tx
            .inputs
            .iter()
            .enumerate()
            .flat_map(|(i, inp)| (0..inp.witness.len()).map(move |k| (i, k)))
            .filter(|(i, k)| !tx.inputs[*i].witness[*k].is_empty())
            .collect();
        if let Some(&(i, k)) = items.get(at % items.len().max(1)) {
            let item = &mut tx.inputs[i].witness[k];
            let n = item.len();
            item[at % n] ^= 0x01;
            flipped = true;
        }
    }

    // The block, under a header of its Merkle root; it must check.
    let txids: Vec<[u8; 32]> = block_txs.iter().map(TxModel::txid).collect();
    let mut raw = Vec::new();
    raw.extend_from_slice(&0x2000_0000u32.to_le_bytes());
    raw.extend_from_slice(&[0x11; 32]);
    raw.extend_from_slice(&ref_merkle_root(&txids));
    raw.extend_from_slice(&[0x22; 12]);
    ref_write_compact_size(&mut raw, block_txs.len() as u64);
    for t in &block_txs {
        raw.extend_from_slice(&t.serialize(true));
    }
    let hash = BlockHash::of_header(raw[..80].try_into().expect("a header"));
    let block = CheckedBlock::check(&raw, &hash).expect("the model's block checks");

    // The evidence.
    let mut evidence: Vec<Vec<u8>> = Vec::new();
    for m in &creators {
        match input.u8() % 8 {
            5 => {}
            6 => {
                evidence.push(m.tx.serialize(true));
                evidence.push(m.tx.serialize(true));
            }
            7 => {
                // Another witness, the same txid.
                let mut other = m.tx.clone();
                match other.has_witness() {
                    true => other.inputs.iter_mut().for_each(|i| i.witness.clear()),
                    false => other.inputs[0].witness = vec![vec![0x77]],
                }
                evidence.push(other.serialize(true));
            }
            _ => evidence.push(m.tx.serialize(true)),
        }
    }
    for u in 0..input.u8() % 3 {
        evidence.push(
            source_tx(&mut input, 0xaa, usize::from(u))
                .tx
                .serialize(true),
        );
    }
    for _ in 0..input.u8() % 3 {
        let kind = input.u8();
        let c = &creators[usize::from(kind >> 2) % creators.len()];
        let full = c.tx.serialize(true);
        let item = match kind % 3 {
            0 => full[..usize::from(input.u16()) % full.len()].to_vec(),
            1 => {
                let mut more = full;
                more.extend_from_slice(input.bytes(1 + usize::from(kind >> 6)));
                more.push(0);
                more
            }
            _ => {
                let n = usize::from(input.u8());
                input.bytes(n).to_vec()
            }
        };
        evidence.push(item);
    }
    let given_block = input.u8();
    for (j, t) in block_txs.iter().enumerate().skip(1) {
        if given_block >> (j % 8) & 1 == 1 {
            evidence.push(t.serialize(true));
        }
    }
    if input.u8() % 2 == 1 {
        for i in (1..evidence.len()).rev() {
            let k = usize::from(input.u8()) % (i + 1);
            evidence.swap(i, k);
        }
    }

    // What the function must answer.
    let expected = expect(&block_txs, &true_tweaks, &evidence);
    if flipped {
        assert!(
            expected.is_err(),
            "a changed witness is caught by the commitment (model)"
        );
    }

    let items: Vec<&[u8]> = evidence.iter().map(Vec::as_slice).collect();
    let mut out = vec![[0x5a; 33]; 3];
    let got = tweaks_from_evidence(&block, &items, &mut out);
    match (&got, &expected) {
        (Ok(()), Ok(honest)) => assert_eq!(&out, honest, "the honest list"),
        (Err(e), Err(w)) => {
            assert_eq!(e, w, "the error");
            assert!(out.is_empty(), "nothing is left from a failed try");
            assert!(!e.to_string().is_empty());
        }
        _ => panic!(
            "got {got:?} ({} tweaks), expected {:?}",
            out.len(),
            expected.as_ref().map(Vec::len)
        ),
    }
});

/// The answer the evidence must give, worked out by the model (see the top of the file).
/// `true_tweaks` holds `tweak` of each block transaction whose inputs all spend outputs
/// the model made, with the scripts they spend (checked above against BIP352).
fn expect(
    block_txs: &[TxModel],
    true_tweaks: &HashMap<[u8; 32], Option<[u8; 33]>>,
    evidence: &[Vec<u8>],
) -> Result<Vec<[u8; 33]>, EvidenceError> {
    match ref_check_witness(block_txs) {
        RefWitness::Ok => {}
        RefWitness::NonceSize => return Err(EvidenceError::Witness(WitnessError::NonceSize)),
        RefWitness::Mismatch => return Err(EvidenceError::Witness(WitnessError::Mismatch)),
        RefWitness::Unexpected => return Err(EvidenceError::Witness(WitnessError::Unexpected)),
    }
    let mut given: HashMap<[u8; 32], usize> = HashMap::new();
    for (index, item) in evidence.iter().enumerate() {
        let parsed = ref_parse_tx(item).ok_or(EvidenceError::Malformed { index })?;
        given.insert(parsed.txid, parsed.outputs);
    }
    let mut earlier: HashMap<[u8; 32], usize> = HashMap::new();
    let mut honest = Vec::new();
    for (j, t) in block_txs.iter().enumerate() {
        let txid = t.txid();
        if j > 0 && t.outputs.iter().any(|(_, s)| is_p2tr(s)) {
            for i in &t.inputs {
                let outputs = earlier
                    .get(&i.prev_txid)
                    .or_else(|| given.get(&i.prev_txid))
                    .ok_or(EvidenceError::Missing {
                        txid: Txid(i.prev_txid),
                    })?;
                if i.prev_vout as usize >= *outputs {
                    return Err(EvidenceError::NoSuchOutput {
                        txid: Txid(i.prev_txid),
                        vout: i.prev_vout,
                    });
                }
            }
            // Every input spends an output that exists, so one the model made (nobody
            // else made a transaction of that txid): its tweak with the true scripts.
            let t = true_tweaks
                .get(&txid)
                .expect("the inputs of a transaction the evidence resolves spend made outputs");
            honest.extend(*t);
        }
        earlier.insert(txid, t.outputs.len());
    }
    honest.sort_unstable();
    Ok(honest)
}
