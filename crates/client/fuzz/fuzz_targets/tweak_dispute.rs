//! The silent-payment tweak dispute (`lightwire::tweak_dispute::TweakDispute`) as a state
//! machine, driven against an honest model.
//!
//! The fixture (built once): two real blocks made here, a paying block (a coinbase with a
//! BIP141 witness commitment, a transaction paying a taproot output from a P2PKH output of
//! key G, one paying a taproot output from a P2WPKH output of key 2G, its key in the
//! witness) and a block with nothing to prove (a coinbase and a transaction without a
//! taproot output: its list is empty); the transactions the paying block spends from; the
//! paying block with its witness changed (the P2WPKH key swapped: same txids, another
//! tweak, the commitment broken), with its witness stripped, and the empty block with a
//! witness its coinbase does not commit to. Two configurations of the tweak chain: a split
//! at 2,000 with the gateways agreeing at 1,000 (the paying block at 1,502, the empty block
//! at 1,700), and a split at 600 from genesis (the paying block at 600, the split's own
//! block, and the empty block at 0, the span's first). Every other height's list is made up
//! (`h % 3` tweaks) and has no block anyone can give: `block_hash` answers a hash nobody
//! has, or `None` (our chain no longer has a block there), as the input says. The true list
//! of the paying block is `silent::tweak` of its two transactions with the scripts they
//! spend (the wallet's `evidence` target checks `silent::tweak` against BIP352 itself).
//!
//! Each side of the split is a gateway whose tweak chain is the honest one or a liar's: its
//! list at one height (from a fixed list: the real blocks, the span's first and last, a
//! height in between) without a tweak, with one changed, with one or 300 added, or not a
//! list at all, and maybe a second lie higher up (headers rebuilt on them). Its word at the
//! split is its own chain's header, the honest one, the other side's, or random bytes. Zero
//! to two other gateways; each gateway serves blocks, tweaks (what `spent_from` needs),
//! both or neither; the gateway list the dispute is given holds the sides or not, in one
//! of four orders.
//!
//! Then every request is answered as the input says. A span: from the side's own chain,
//! the honest one, the other side's, or its own with a hash changed (headers rebuilt on it,
//! as a connection links them), in messages of sizes from the input, each sent honestly or
//! with another id, a skipped height, another header before it, `last` too early or left
//! off the final message, hashes past the end, or empty. A block or `spent_from`: the true
//! bytes (or `not_found` for a block nobody has), the changed or stripped block, the other
//! block, bytes flipped, cut short or with a byte after, random bytes; evidence with the
//! transactions reordered and an unrelated one added, one missing, one with witness data,
//! a count one too high; each piece (of a size from the input) sent honestly, as
//! `not_found`, out of order, twice, with another id, as the other kind of answer, with
//! its data changed, as a last piece cutting the answer short, with another total length;
//! or the gateway goes. At any step a gateway may also answer an id it was not asked (a
//! random one, another gateway's, one of its own that ended) or go away. Pieces go through
//! the wire's encoder and decoder first (what reaches the dispute is what the wire lets
//! through). On `Bad` the engine may drop the gateway (`gateway_gone`) or keep it, as the
//! input says. Past the end of the input every answer is honest and whole, so every run
//! reaches a verdict.
//!
//! Input layout (every read past the end is 0): byte 0, flags: bit 0 the configuration
//! (split at 600 from genesis), bit 1 `block_hash` without a block at made-up heights,
//! bit 2 the engine drops a gateway on `Bad`, bits 3-4 the gateway list's order, bits 5-6
//! the other gateways (mod 3); byte 1 which ids the gateways get (a permutation of 0..4,
//! mod 24); bytes 2-5 side a's lies (kind mod 6, 0 honest; height index; second kind, 0
//! none; second height index), bytes 6-9 side b's (its kind shifted by one: 0 leaves a
//! tweak out); byte 10 the words (two bits a side: its chain's, the honest one, the other
//! side's, random, then 32 bytes); byte 11 what each gateway lacks (two bits each: blocks,
//! tweaks); a u32, the ids' first sequence number; a u32, a byte and a u32 for the side
//! check of `new`. Then steps: a byte (5: a gateway goes, 6: an answer to an id nobody
//! asked, else: answer a request in flight, picked by the next byte, as the byte after
//! says, with a piece size from the next: 0 for the rest); each new request reads its
//! body's kind (and its knobs) when it is asked.
//!
//! Checks, after every step:
//! - no panic; every request the dispute has in flight is one the model was asked, and no
//!   id is used twice;
//! - every ask is the one due: the two spans first (from the span's first height to our
//!   block at the split), then for the block and then for its evidence the first gateway,
//!   the sides before the others, that can serve it, is present and was not asked for it
//!   before, for our block at the disputed height; `Unsettled` from `next_ask` exactly
//!   when `block_hash` has no block there or nobody is left to ask;
//! - each outcome is the model's: `Going` for an honest piece, `Bad(g, Unasked)` for an
//!   answer to an id not asked of `g` for that kind, `OutOfOrder` for a piece not where
//!   the last ended (or, for evidence, of another total length), `Block` for a completed
//!   block that is not ours; with the block and its evidence both in: `Witness` naming the
//!   block's sender when its witness is not what the coinbase commits to, `SpentFrom`
//!   naming the evidence's sender when it is not a list of transactions without witness
//!   data, `Evidence` when a transaction spent from is missing, and `Settled` when both
//!   are true: so a `Bad` always names a gateway that sent something wrong (for `Witness`
//!   and `Evidence`, what it sent before and is held), never an honest one;
//! - `Settled` is at the disputed height, `proven` is the true hash of the block's list
//!   there, and `wrong` holds exactly the sides whose span's hash there is not it;
//! - a span faithful to its side's content is taken when that content ends at its word,
//!   and is `BrokeItsWord { EndMismatch }` when it does not; every other deviation is
//!   `BrokeItsWord` with the rule it breaks (`AnchorMismatch` or `SpanOutOfOrder`), a
//!   harmless one (`last` left off the final message, an empty message where the header
//!   before is the zero one) is taken; `disputed()` is the first height where the two
//!   spans taken differ, and two spans alike end `Unsettled` at the split;
//! - `gateway_gone` ends the dispute (`Unsettled` at the split) exactly when a side goes
//!   before its span was taken;
//! - with one gateway present that serves blocks and one that serves tweaks answering
//!   honestly (together with the rules above, which say who is asked next and that true
//!   answers settle), a dispute at a real block ends `Settled`;
//! - a verdict within 20,000 steps, and never nothing asked and nothing in flight while it
//!   is under way.
//!
//! A side check on `TweakDispute::new`: it refuses a span longer than `MAX_SPAN` and an
//! agreed height at or above the split (the top `u32::MAX` from genesis is left out: there
//! `top - first + 1` overflows, see the README).
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use lightwire::ids::{GatewayId, Ids, TaskId};
use lightwire::tweak_dispute::{
    Need, TweakAsk, TweakDispute, TweakFault, TweakOutcome, TweakVerdict,
};
use lightwire::tweaks::{MAX_SPAN, SpentFromError, TweakError};
use lightwire_fuzz_support::Cursor;
use lightwire_primitives::merkle::merkle_root;
use lightwire_primitives::{
    BlockHash, CheckedBlock, FilterHash, FilterHeader, Tx, sha256d, tweak_list_hash,
    write_compact_size, write_tweak_list,
};
use lightwire_wire::{BlockKind, BlockPiece, Writer};
use ripemd::Ripemd160;
use sha2::{Digest, Sha256};

const MAX_STEPS: usize = 20_000;

/// The generator point G, compressed.
const G: [u8; 33] = [
    0x02, 0x79, 0xbe, 0x66, 0x7e, 0xf9, 0xdc, 0xbb, 0xac, 0x55, 0xa0, 0x62, 0x95, 0xce, 0x87, 0x0b,
    0x07, 0x02, 0x9b, 0xfc, 0xdb, 0x2d, 0xce, 0x28, 0xd9, 0x59, 0xf2, 0x81, 0x5b, 0x16, 0xf8, 0x17,
    0x98,
];

/// 2G, compressed.
const G2: [u8; 33] = [
    0x02, 0xc6, 0x04, 0x7f, 0x94, 0x41, 0xed, 0x7d, 0x6d, 0x30, 0x45, 0x40, 0x6e, 0x95, 0xc0, 0x7c,
    0xd8, 0x5c, 0x77, 0x8e, 0x4b, 0x8c, 0xef, 0x3c, 0xa7, 0xab, 0xac, 0x09, 0xb9, 0x5c, 0x70, 0x9e,
    0xe5,
];

fn hash160(data: &[u8]) -> [u8; 20] {
    Ripemd160::digest(Sha256::digest(data)).into()
}

/// An input: outpoint, scriptSig, witness stack.
type TxIn = ([u8; 36], Vec<u8>, Vec<Vec<u8>>);

/// A version-2 transaction of `inputs` and `outputs` (value, script), serialized with its
/// witness (BIP144) when `with_witness` and an input has one.
fn tx(inputs: &[TxIn], outputs: &[(u64, Vec<u8>)], with_witness: bool) -> Vec<u8> {
    let segwit = with_witness && inputs.iter().any(|i| !i.2.is_empty());
    let mut t = vec![2, 0, 0, 0];
    if segwit {
        t.extend_from_slice(&[0, 1]);
    }
    write_compact_size(&mut t, inputs.len() as u64);
    for (outpoint, script, _) in inputs {
        t.extend_from_slice(outpoint);
        write_compact_size(&mut t, script.len() as u64);
        t.extend_from_slice(script);
        t.extend_from_slice(&[0xff; 4]);
    }
    write_compact_size(&mut t, outputs.len() as u64);
    for (value, script) in outputs {
        t.extend_from_slice(&value.to_le_bytes());
        write_compact_size(&mut t, script.len() as u64);
        t.extend_from_slice(script);
    }
    if segwit {
        for (_, _, w) in inputs {
            write_compact_size(&mut t, w.len() as u64);
            for item in w {
                write_compact_size(&mut t, item.len() as u64);
                t.extend_from_slice(item);
            }
        }
    }
    t.extend_from_slice(&[0; 4]);
    t
}

fn txid(raw: &[u8]) -> [u8; 32] {
    Tx::parse(raw)
        .expect("a fixture transaction parses")
        .txid()
        .0
}

fn outpoint(source: &[u8], vout: u32) -> [u8; 36] {
    let mut o = [0u8; 36];
    o[..32].copy_from_slice(&txid(source));
    o[32..].copy_from_slice(&vout.to_le_bytes());
    o
}

const COINBASE_OUTPOINT: [u8; 36] = {
    let mut o = [0u8; 36];
    let mut i = 32;
    while i < 36 {
        o[i] = 0xff;
        i += 1;
    }
    o
};

/// A block of `txs` (the first a coinbase) under a header whose Merkle root is theirs
/// (`tag` in its version, so that two blocks differ), and its hash.
fn block(tag: u8, txs: &[&[u8]]) -> (Vec<u8>, BlockHash) {
    let mut raw = vec![0u8; 80];
    raw[0] = tag;
    write_compact_size(&mut raw, txs.len() as u64);
    for t in txs {
        raw.extend_from_slice(t);
    }
    let (root, mutated) = merkle_root(txs.iter().map(|t| txid(t))).expect("a transaction");
    assert!(!mutated);
    raw[36..68].copy_from_slice(&root);
    let header: [u8; 80] = raw[..80].try_into().expect("80 bytes");
    (raw, BlockHash::of_header(&header))
}

fn p2tr(x: u8) -> Vec<u8> {
    let mut s = vec![0x51, 0x20];
    s.extend_from_slice(&[x; 32]);
    s
}

fn p2wpkh(key: &[u8; 33]) -> Vec<u8> {
    let mut s = vec![0x00, 0x14];
    s.extend_from_slice(&hash160(key));
    s
}

/// The real blocks and what they spend from.
struct Blocks {
    paying: Vec<u8>,
    paying_hash: BlockHash,
    /// The paying block's true tweaks, sorted.
    paying_tweaks: Vec<[u8; 33]>,
    /// The same header and txids, the P2WPKH key in the witness swapped.
    witness_changed: Vec<u8>,
    /// The same header and txids, no witness data (the commitment kept).
    witness_stripped: Vec<u8>,
    /// The transactions the paying block spends from.
    sources: [Vec<u8>; 2],
    /// `sources[0]` serialized with a witness (spent_from must not carry one).
    source_with_witness: Vec<u8>,
    /// A transaction nobody spends from.
    unrelated: Vec<u8>,
    empty: Vec<u8>,
    empty_hash: BlockHash,
    /// The empty block with a witness its coinbase does not commit to.
    empty_witnessed: Vec<u8>,
}

fn blocks() -> Blocks {
    let mut p2pkh = vec![0x76, 0xa9, 0x14];
    p2pkh.extend_from_slice(&hash160(&G));
    p2pkh.extend_from_slice(&[0x88, 0xac]);
    let wpkh = p2wpkh(&G2);
    let source0 = tx(
        &[([7; 36], vec![0x51], vec![])],
        &[(50_000, p2pkh.clone())],
        true,
    );
    let source1 = tx(
        &[([8; 36], vec![0x51], vec![])],
        &[(60_000, wpkh.clone())],
        true,
    );
    // scriptSig: a signature's push (not checked: a block's validity is its header's),
    // then the key's.
    let mut script_sig = vec![71];
    script_sig.extend_from_slice(&[0x30; 71]);
    script_sig.push(33);
    script_sig.extend_from_slice(&G);
    let pay0 = tx(
        &[(outpoint(&source0, 0), script_sig, vec![])],
        &[(40_000, p2tr(0x42))],
        true,
    );
    let input1 = |key: &[u8; 33]| -> TxIn {
        (
            outpoint(&source1, 0),
            vec![],
            vec![vec![0x30; 71], key.to_vec()],
        )
    };
    let pay1 = tx(&[input1(&G2)], &[(50_000, p2tr(0x43))], true);
    let pay1_changed = tx(&[input1(&G)], &[(50_000, p2tr(0x43))], true);
    let pay1_stripped = tx(&[input1(&G2)], &[(50_000, p2tr(0x43))], false);
    // The witness commitment: the wtxids' root (the coinbase's taken as zero) and a
    // reserved value of zeros.
    let (wroot, _) = merkle_root([[0; 32], sha256d(&pay0), sha256d(&pay1)]).expect("three");
    let mut both = [0u8; 64];
    both[..32].copy_from_slice(&wroot);
    let mut commitment = vec![0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];
    commitment.extend_from_slice(&sha256d(&both));
    let coinbase_in: TxIn = (COINBASE_OUTPOINT, vec![1, 1], vec![vec![0; 32]]);
    let coinbase_outs = [(0, vec![0x51]), (0, commitment)];
    let coinbase = tx(std::slice::from_ref(&coinbase_in), &coinbase_outs, true);
    let coinbase_stripped = tx(&[coinbase_in], &coinbase_outs, false);
    let (paying, paying_hash) = block(0x20, &[&coinbase, &pay0, &pay1]);
    let (witness_changed, h1) = block(0x20, &[&coinbase, &pay0, &pay1_changed]);
    let (witness_stripped, h2) = block(0x20, &[&coinbase_stripped, &pay0, &pay1_stripped]);
    assert_eq!(
        (h1, h2),
        (paying_hash, paying_hash),
        "same header, same txids"
    );

    let checked = CheckedBlock::check(&paying, &paying_hash).expect("the paying block");
    checked.check_witness().expect("its witness commitment");
    for bad in [&witness_changed, &witness_stripped] {
        let b = CheckedBlock::check(bad, &paying_hash).expect("the header holds");
        assert!(b.check_witness().is_err(), "the commitment catches it");
    }
    let txs: Vec<Tx<'_>> = checked.transactions().collect();
    let t0 = lightwire_wallet::silent::tweak(&txs[1], &[&p2pkh]).expect("a P2PKH tweak");
    let t1 = lightwire_wallet::silent::tweak(&txs[2], &[&wpkh]).expect("a P2WPKH tweak");
    assert_ne!(t0, t1);
    let mut paying_tweaks = vec![t0, t1];
    paying_tweaks.sort_unstable();

    let source_with_witness = tx(
        &[([7; 36], vec![], vec![vec![0x42]])],
        &[(50_000, p2pkh)],
        true,
    );
    assert!(
        Tx::parse(&source_with_witness)
            .expect("parses")
            .has_witness()
    );
    let unrelated = tx(&[([3; 36], vec![0x51], vec![])], &[(1, vec![0x51])], true);

    // The empty block: a coinbase and a transaction without a taproot output (not looked
    // at: nothing to prove).
    let coinbase_e = tx(
        &[(COINBASE_OUTPOINT, vec![1, 2], vec![])],
        &[(0, vec![0x51])],
        true,
    );
    let plain_in = |w: Vec<Vec<u8>>| -> TxIn { ([9; 36], vec![0x51], w) };
    let plain = tx(&[plain_in(vec![])], &[(1_000, wpkh.clone())], true);
    let plain_witnessed = tx(&[plain_in(vec![vec![0x42]])], &[(1_000, wpkh)], true);
    let (empty, empty_hash) = block(0x21, &[&coinbase_e, &plain]);
    let (empty_witnessed, h3) = block(0x21, &[&coinbase_e, &plain_witnessed]);
    assert_eq!(h3, empty_hash);
    let e = CheckedBlock::check(&empty, &empty_hash).expect("the empty block");
    e.check_witness().expect("no witness, no commitment");
    let ew = CheckedBlock::check(&empty_witnessed, &empty_hash).expect("the header holds");
    assert!(
        ew.check_witness().is_err(),
        "a witness without a commitment"
    );

    Blocks {
        paying,
        paying_hash,
        paying_tweaks,
        witness_changed,
        witness_stripped,
        sources: [source0, source1],
        source_with_witness,
        unrelated,
        empty,
        empty_hash,
        empty_witnessed,
    }
}

/// A tweak chain over heights `0..=top`.
struct Chain {
    hashes: Vec<FilterHash>,
    headers: Vec<FilterHeader>,
}

impl Chain {
    fn of(hashes: Vec<FilterHash>) -> Chain {
        let mut at = FilterHeader([0; 32]);
        let headers = hashes
            .iter()
            .map(|h| {
                at = at.next(h);
                at
            })
            .collect();
        Chain { hashes, headers }
    }
}

/// A configuration of the split.
struct Config {
    /// The span's first height (the agreed height is the one before; none at genesis).
    first: u32,
    top: u32,
    paying: u32,
    empty: u32,
    /// Where a liar's list may differ (the first is the default: the paying block).
    heights: &'static [u32],
}

const CONFIGS: [Config; 2] = [
    Config {
        first: 1_001,
        top: 2_000,
        paying: 1_502,
        empty: 1_700,
        heights: &[1_502, 1_700, 1_001, 1_250, 1_999, 2_000],
    },
    Config {
        first: 0,
        top: 600,
        paying: 600,
        empty: 0,
        heights: &[600, 0, 1, 300, 599],
    },
];

struct Fixture {
    blocks: Blocks,
    /// The honest chain of each configuration.
    honest: [Chain; 2],
}

/// A made-up list of height `h`: `h % 3` tweaks `02 || h || i`.
fn made_up(h: u32) -> Vec<[u8; 33]> {
    (0..h % 3)
        .map(|i| {
            let mut t = [0u8; 33];
            t[0] = 2;
            t[1..5].copy_from_slice(&h.to_be_bytes());
            t[5] = i as u8;
            t
        })
        .collect()
}

fn list_bytes(tweaks: &[[u8; 33]]) -> Vec<u8> {
    let mut t = tweaks.to_vec();
    let mut out = Vec::new();
    write_tweak_list(&mut t, &mut out);
    out
}

/// The true tweaks of height `h` in configuration `cfg`.
fn honest_tweaks(blocks: &Blocks, cfg: usize, h: u32) -> Vec<[u8; 33]> {
    let c = &CONFIGS[cfg];
    if h == c.paying {
        blocks.paying_tweaks.clone()
    } else if h == c.empty {
        Vec::new()
    } else {
        made_up(h)
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let blocks = blocks();
        let honest = [0, 1].map(|cfg| {
            let hashes = (0..=CONFIGS[cfg].top)
                .map(|h| tweak_list_hash(&list_bytes(&honest_tweaks(&blocks, cfg, h))))
                .collect();
            Chain::of(hashes)
        });
        Fixture { blocks, honest }
    })
}

/// A tweak a liar adds.
const EXTRA: [u8; 33] = [0x03; 33];

/// A liar's list instead of `honest`: kind 1 without a tweak, 2 with one changed, 3 with
/// one added, 4 with 300 added, 5 not a list (an empty list gets one added instead of
/// losing or changing one).
fn lie_list(honest: &[[u8; 33]], kind: u8) -> Vec<u8> {
    let mut t = honest.to_vec();
    match kind {
        1 if !t.is_empty() => {
            t.remove(0);
        }
        2 if !t.is_empty() => {
            let last = t.len() - 1;
            t[last][32] ^= 1;
        }
        1..=3 => t.push(EXTRA),
        4 => t.extend((0..300u32).map(|i| {
            let mut x = [3u8; 33];
            x[1..5].copy_from_slice(&i.to_be_bytes());
            x[5] = 0xee;
            x
        })),
        _ => return vec![0xde, 0xad, 0xbe, 0xef],
    }
    list_bytes(&t)
}

/// A liar's lies: (kind 1..=5, height), and maybe a second.
type Lies = (u8, u32, Option<(u8, u32)>);

/// The chain of configuration `cfg` with `lies` (`kind` 0: the honest chain), built once
/// and kept (a static is a root the leak checker sees).
fn chain(cfg: usize, lies: Lies) -> &'static Chain {
    let f = fixture();
    if lies.0 == 0 {
        return &f.honest[cfg];
    }
    static LIARS: OnceLock<Mutex<HashMap<(usize, Lies), &'static Chain>>> = OnceLock::new();
    let mut liars = LIARS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    liars.entry((cfg, lies)).or_insert_with(|| {
        let mut hashes = f.honest[cfg].hashes.clone();
        let (kind, at, second) = lies;
        for (k, h) in std::iter::once((kind, at)).chain(second) {
            let honest = list_bytes(&honest_tweaks(&f.blocks, cfg, h));
            let lie = lie_list(&honest_tweaks(&f.blocks, cfg, h), k);
            assert_ne!(lie, honest, "a lie differs");
            hashes[h as usize] = tweak_list_hash(&lie);
        }
        Box::leak(Box::new(Chain::of(hashes)))
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Span,
    Block,
    Spent,
}

/// What a completed block or evidence answer is, as the dispute will find it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// The true block, or evidence that proves its list.
    Valid,
    /// Not our block (`Block` fault when it completes).
    BadBlock,
    /// Our header and txids, a witness its coinbase does not commit to.
    BadWitness,
    /// Not a list of transactions without witness data.
    BadFormat,
    /// Well formed, but a transaction the block spends from is missing.
    BadProof,
    /// Changed bytes: whatever the dispute makes of them.
    Unknown,
}

/// What a request is answered with.
enum Body {
    /// A side's span: its hashes and headers from the span's first height, and the header
    /// before them.
    Span {
        side: usize,
        hashes: Vec<FilterHash>,
        headers: Vec<FilterHeader>,
        anchor: FilterHeader,
    },
    /// A block or evidence: `None` for `not_found`.
    Data {
        bytes: Option<Vec<u8>>,
        class: Class,
        /// The total length the dispute took from the first piece (evidence only).
        len: Option<u32>,
        /// The last piece sent in order (offset, length), to send it twice.
        prev: Option<(usize, usize)>,
    },
}

struct Req {
    g: GatewayId,
    id: u32,
    kind: Kind,
    body: Body,
    /// Hashes or bytes the dispute holds of it.
    off: usize,
}

struct Gw {
    id: GatewayId,
    blocks: bool,
    tweaks: bool,
    gone: bool,
}

struct SideM {
    g: GatewayId,
    word: FilterHeader,
    chain: &'static Chain,
    asked: bool,
    /// The span taken (its hashes), once the model says it is.
    taken: Option<Vec<FilterHash>>,
}

struct Model {
    cfg: usize,
    f: &'static Fixture,
    gws: Vec<Gw>,
    list: Vec<GatewayId>,
    sides: [SideM; 2],
    /// `block_hash` has no block at the heights without a real one.
    no_hash: bool,
    drop_bad: bool,
    stop: BlockHash,
    pending: Vec<Req>,
    /// Ended requests: (gateway, kind, id).
    ended: Vec<(GatewayId, Kind, u32)>,
    /// Who was asked for the block, for its evidence.
    asked: [Vec<GatewayId>; 2],
    /// The block and the evidence the dispute holds: sender and class.
    held: [Option<(GatewayId, Class)>; 2],
    ids: Vec<u32>,
    disputed: Option<u32>,
}

fn fake_hash(h: u32) -> BlockHash {
    let mut b = h.to_le_bytes().to_vec();
    b.extend_from_slice(b"a block nobody has, at this height");
    BlockHash(sha256d(&b))
}

fn need_index(n: Need) -> usize {
    n as usize
}

impl Model {
    fn c(&self) -> &'static Config {
        &CONFIGS[self.cfg]
    }

    fn block_hash(&self, h: u32) -> Option<BlockHash> {
        let c = self.c();
        if h == c.paying {
            Some(self.f.blocks.paying_hash)
        } else if h == c.empty {
            Some(self.f.blocks.empty_hash)
        } else if self.no_hash {
            None
        } else {
            Some(fake_hash(h))
        }
    }

    fn can(&self, g: GatewayId, need: Need) -> bool {
        self.gws.iter().any(|w| {
            w.id == g
                && !w.gone
                && match need {
                    Need::Block => w.blocks,
                    Need::SpentFrom => w.tweaks,
                }
        })
    }

    fn gw(&mut self, g: GatewayId) -> Option<&mut Gw> {
        self.gws.iter_mut().find(|w| w.id == g)
    }

    fn side_of(&self, g: GatewayId) -> Option<usize> {
        self.sides.iter().position(|s| s.g == g)
    }

    /// The sides, then the gateway list less the sides.
    fn order(&self) -> Vec<GatewayId> {
        let sides = [self.sides[0].g, self.sides[1].g];
        sides
            .iter()
            .chain(self.list.iter().filter(|g| !sides.contains(g)))
            .copied()
            .collect()
    }

    /// The disputed block's hash as the dispute finds it.
    fn disputed_hash(&self, d: u32) -> Option<BlockHash> {
        if d == self.c().top {
            Some(self.stop)
        } else {
            self.block_hash(d)
        }
    }

    fn in_flight(&self, kind: Kind) -> bool {
        self.pending.iter().any(|r| r.kind == kind)
    }

    /// The next ask due: `Ok(None)` for none, `Err(height)` for `Unsettled`.
    fn expected_ask(&self) -> Result<Option<(GatewayId, Kind)>, u32> {
        let Some(d) = self.disputed else {
            return Ok(self
                .sides
                .iter()
                .find(|s| !s.asked)
                .map(|s| (s.g, Kind::Span)));
        };
        if self.disputed_hash(d).is_none() {
            return Err(d);
        }
        for (need, kind) in [(Need::Block, Kind::Block), (Need::SpentFrom, Kind::Spent)] {
            let i = need_index(need);
            if self.held[i].is_some() || self.in_flight(kind) {
                continue;
            }
            let next = self
                .order()
                .into_iter()
                .find(|&g| !self.asked[i].contains(&g) && self.can(g, need));
            return match next {
                Some(g) => Ok(Some((g, kind))),
                None => Err(d),
            };
        }
        Ok(None)
    }

    fn new_id(&mut self, id: u32) {
        assert!(!self.ids.contains(&id), "id {id:#x} used twice");
        self.ids.push(id);
    }

    /// Every ask due, each checked and answered with a body read from the input; the
    /// verdict when `next_ask` ends the dispute.
    fn ask(&mut self, d: &mut TweakDispute, c: &mut Cursor<'_>) -> Option<TweakVerdict> {
        loop {
            let want = self.expected_ask();
            let got = {
                let m = &*self;
                d.next_ask(|h| m.block_hash(h), |g, n| m.can(g, n), &m.list)
            };
            match (got, want) {
                (Err(v), Err(h)) => {
                    assert_eq!(v, TweakVerdict::Unsettled { height: h });
                    return Some(v);
                }
                (Ok(None), Ok(None)) => return None,
                (Ok(Some((g, ask))), Ok(Some((wg, kind)))) => {
                    assert_eq!(g, wg, "asked {ask:?} of the wrong gateway");
                    self.answer_with(g, ask, kind, c);
                }
                (got, want) => panic!("next_ask gave {got:?}, the model wants {want:?}"),
            }
        }
    }

    /// The body of a new request, read from the input.
    fn answer_with(&mut self, g: GatewayId, ask: TweakAsk, kind: Kind, c: &mut Cursor<'_>) {
        let cfg = self.c();
        let (id, body) = match ask {
            TweakAsk::Span { id, first, stop } => {
                assert_eq!(kind, Kind::Span, "{ask:?}");
                assert_eq!((first, stop), (cfg.first, self.stop), "the span asked");
                let side = self.side_of(g).expect("a span is asked of a side");
                self.sides[side].asked = true;
                (id, self.span_body(side, c))
            }
            TweakAsk::Block { id, hash } => {
                assert_eq!(kind, Kind::Block, "{ask:?}");
                self.evidence_ask(g, Need::Block, hash);
                (id, self.block_body(hash, c))
            }
            TweakAsk::SpentFrom { id, hash } => {
                assert_eq!(kind, Kind::Spent, "{ask:?}");
                self.evidence_ask(g, Need::SpentFrom, hash);
                (id, self.spent_body(hash, c))
            }
        };
        self.new_id(id);
        self.pending.push(Req {
            g,
            id,
            kind,
            body,
            off: 0,
        });
    }

    fn evidence_ask(&mut self, g: GatewayId, need: Need, hash: BlockHash) {
        let d = self
            .disputed
            .expect("evidence is asked once the spans part");
        assert_eq!(Some(hash), self.disputed_hash(d), "the block asked");
        let i = need_index(need);
        assert!(self.held[i].is_none(), "{need:?} asked again while held");
        self.asked[i].push(g);
    }

    /// A side's span: its own chain, the honest one, the other side's, or its own with one
    /// hash changed (the headers rebuilt on it).
    fn span_body(&self, side: usize, c: &mut Cursor<'_>) -> Body {
        let cfg = self.c();
        let (first, top) = (cfg.first as usize, cfg.top as usize);
        let own = self.sides[side].chain;
        let (chain, flip) = match c.u8() % 4 {
            1 => (&self.f.honest[self.cfg], None),
            2 => (self.sides[1 - side].chain, None),
            3 => (own, Some(usize::from(c.u16()) % (top - first + 1))),
            _ => (own, None),
        };
        // Every lie is in the span: below it the chains agree.
        let anchor = match first {
            0 => FilterHeader([0; 32]),
            f => chain.headers[f - 1],
        };
        let mut hashes = chain.hashes[first..=top].to_vec();
        let mut headers = chain.headers[first..=top].to_vec();
        if let Some(k) = flip {
            hashes[k].0[0] ^= 1;
            let mut at = if k == 0 { anchor } else { headers[k - 1] };
            for i in k..hashes.len() {
                at = at.next(&hashes[i]);
                headers[i] = at;
            }
        }
        Body::Span {
            side,
            hashes,
            headers,
            anchor,
        }
    }

    /// A block answer for `hash`.
    fn block_body(&self, hash: BlockHash, c: &mut Cursor<'_>) -> Body {
        let b = &self.f.blocks;
        let paying = hash == b.paying_hash;
        let empty = hash == b.empty_hash;
        let honest = if paying {
            Some(&b.paying)
        } else if empty {
            Some(&b.empty)
        } else {
            None
        };
        let base = honest.unwrap_or(&b.paying);
        // Anything but the true block, for a block nobody has, is not it.
        let not_ours = |class| {
            if honest.is_some() {
                class
            } else {
                Class::BadBlock
            }
        };
        let (bytes, class) = match c.u8() % 8 {
            1 => {
                let mut x = base.clone();
                let at = usize::from(c.u16()) % x.len();
                x[at] ^= c.u8() | 1;
                (x, not_ours(Class::Unknown))
            }
            s @ (2 | 3) => match (empty, s) {
                (true, _) => (b.empty_witnessed.clone(), Class::BadWitness),
                (false, 2) => (b.witness_changed.clone(), not_ours(Class::BadWitness)),
                _ => (b.witness_stripped.clone(), not_ours(Class::BadWitness)),
            },
            4 => {
                let other = if paying { &b.empty } else { &b.paying };
                (other.clone(), Class::BadBlock)
            }
            5 => {
                let n = 1 + usize::from(c.u8());
                let mut x = c.bytes(n).to_vec();
                if x.is_empty() {
                    x.push(0);
                }
                (x, Class::BadBlock)
            }
            6 => {
                let k = 1 + usize::from(c.u16()) % (base.len() - 1);
                (base[..k].to_vec(), Class::BadBlock)
            }
            7 => {
                let mut x = base.clone();
                x.push(c.u8());
                (x, Class::BadBlock)
            }
            _ => match honest {
                Some(x) => (x.clone(), Class::Valid),
                None => return Body::data(None, Class::Valid),
            },
        };
        Body::data(Some(bytes), class)
    }

    /// A `spent_from` answer for the block `hash`.
    fn spent_body(&self, hash: BlockHash, c: &mut Cursor<'_>) -> Body {
        let b = &self.f.blocks;
        let paying = hash == b.paying_hash;
        let empty = hash == b.empty_hash;
        let list = |txs: &[&Vec<u8>], count: u64| {
            let mut v = Vec::new();
            write_compact_size(&mut v, count);
            for t in txs {
                v.extend_from_slice(t);
            }
            v
        };
        let [s0, s1] = &b.sources;
        let full = list(&[s0, s1], 2);
        let honest = if paying {
            Some(full.clone())
        } else if empty {
            Some(vec![0])
        } else {
            None
        };
        let base = honest.clone().unwrap_or_else(|| full.clone());
        let (bytes, class) = match c.u8() % 8 {
            1 => (list(&[&b.unrelated, s1, s0], 3), Class::Valid),
            // The empty block needs nothing: any evidence proves its list.
            2 => (
                list(&[s0], 1),
                if empty { Class::Valid } else { Class::BadProof },
            ),
            3 => (list(&[&b.source_with_witness, s1], 2), Class::BadFormat),
            4 => {
                let mut x = base;
                let at = usize::from(c.u16()) % x.len();
                x[at] ^= c.u8() | 1;
                (x, Class::Unknown)
            }
            5 => match base.len() {
                1 => (vec![0xfd], Class::BadFormat),
                n => (
                    base[..1 + usize::from(c.u16()) % (n - 1)].to_vec(),
                    Class::BadFormat,
                ),
            },
            6 => {
                let n = 1 + usize::from(c.u8());
                let mut x = c.bytes(n).to_vec();
                if x.is_empty() {
                    x.push(0);
                }
                (x, Class::Unknown)
            }
            7 => {
                let mut x = base;
                x[0] += 1;
                (x, Class::BadFormat)
            }
            _ => match honest {
                Some(x) => (x, Class::Valid),
                None => return Body::data(None, Class::Valid),
            },
        };
        // For a block nobody has, evidence is never judged.
        let class = if paying || empty {
            class
        } else {
            Class::Unknown
        };
        Body::data(Some(bytes), class)
    }

    /// Requests in flight are the model's, both ways.
    fn check_flight(&self, d: &TweakDispute) {
        let mut theirs: Vec<(GatewayId, u32)> = d.in_flight().collect();
        let mut ours: Vec<(GatewayId, u32)> = self.pending.iter().map(|r| (r.g, r.id)).collect();
        theirs.sort_unstable();
        ours.sort_unstable();
        assert_eq!(theirs, ours, "in flight");
        assert_eq!(d.disputed(), self.disputed, "the disputed height");
    }

    fn end(&mut self, i: usize) {
        let r = self.pending.remove(i);
        self.ended.push((r.g, r.kind, r.id));
    }

    /// Gateway `g` goes.
    fn go(&mut self, d: &mut TweakDispute, g: GatewayId) -> Option<TweakVerdict> {
        let w = self.gw(g)?;
        if w.gone {
            return None;
        }
        w.gone = true;
        let got = d.gateway_gone(g);
        let want = match (self.disputed, self.side_of(g)) {
            (None, Some(s)) if self.sides[s].taken.is_none() => Some(TweakVerdict::Unsettled {
                height: self.c().top,
            }),
            _ => None,
        };
        assert_eq!(got, want, "gateway_gone({g:?})");
        while let Some(i) = self.pending.iter().position(|r| r.g == g) {
            self.end(i);
        }
        got
    }

    /// After `Bad(g, _)`: the engine drops `g`, or keeps it.
    fn after_bad(&mut self, d: &mut TweakDispute, g: GatewayId) -> Option<TweakVerdict> {
        if self.drop_bad { self.go(d, g) } else { None }
    }

    /// One step read from the input; the verdict when the dispute ends.
    fn step(&mut self, d: &mut TweakDispute, c: &mut Cursor<'_>) -> Option<TweakVerdict> {
        match c.u8() % 8 {
            5 => {
                let g = self.gws[usize::from(c.u8()) % self.gws.len()].id;
                self.go(d, g)
            }
            6 => self.unsolicited(d, c),
            _ => {
                let i = usize::from(c.u8()) % self.pending.len();
                let behaviour = c.u8();
                match self.pending[i].kind {
                    Kind::Span => self.span_step(d, i, behaviour, c),
                    _ => self.data_step(d, i, behaviour, c),
                }
            }
        }
    }

    /// A present gateway answers an id not asked of it for that kind: a random one,
    /// another gateway's in flight, or one of its own that ended.
    fn unsolicited(&mut self, d: &mut TweakDispute, c: &mut Cursor<'_>) -> Option<TweakVerdict> {
        let live: Vec<GatewayId> = self.gws.iter().filter(|w| !w.gone).map(|w| w.id).collect();
        if live.is_empty() {
            return None;
        }
        let g = live[usize::from(c.u8()) % live.len()];
        let kind = [Kind::Span, Kind::Block, Kind::Spent][usize::from(c.u8()) % 3];
        let pick = |ids: Vec<u32>, c: &mut Cursor<'_>| match ids.len() {
            0 => None,
            n => Some(ids[usize::from(c.u8()) % n]),
        };
        let id = match c.u8() % 3 {
            1 => pick(
                self.pending
                    .iter()
                    .filter(|r| r.g != g)
                    .map(|r| r.id)
                    .collect(),
                c,
            ),
            2 => pick(
                self.ended
                    .iter()
                    .filter(|e| e.0 == g && e.1 == kind)
                    .map(|e| e.2)
                    .collect(),
                c,
            ),
            _ => None,
        };
        let mut id = id.unwrap_or_else(|| c.u32());
        while self
            .pending
            .iter()
            .any(|r| r.g == g && r.kind == kind && r.id == id)
        {
            id = id.wrapping_add(1);
        }
        let piece = BlockPiece {
            id,
            last: true,
            not_found: false,
            block_len: 1,
            offset: 0,
            data: &[0xab],
        };
        let mut buf = Vec::new();
        let out = match kind {
            Kind::Span => {
                let zero = FilterHeader([0; 32]);
                d.on_span(g, id, self.c().first, zero, &[], &[], true)
            }
            Kind::Block => d.on_block(g, &wire(BlockKind::Block, &piece, &mut buf)),
            Kind::Spent => d.on_spent_from(g, &wire(BlockKind::SpentFrom, &piece, &mut buf)),
        };
        assert_eq!(
            out,
            TweakOutcome::Bad(g, TweakFault::Unasked { id }),
            "{kind:?} {id:#x} from {g:?}, not asked"
        );
        self.after_bad(d, g)
    }

    /// The next message of span request `i`, sent as `behaviour` says.
    fn span_step(
        &mut self,
        d: &mut TweakDispute,
        i: usize,
        behaviour: u8,
        c: &mut Cursor<'_>,
    ) -> Option<TweakVerdict> {
        let cfg = self.c();
        let (first, top) = (cfg.first, cfg.top);
        let r = &self.pending[i];
        let (g, id, off) = (r.g, r.id, r.off);
        let Body::Span {
            ref hashes,
            ref headers,
            anchor,
            ..
        } = r.body
        else {
            unreachable!("a span request")
        };
        let len = hashes.len();
        let rest = len - off;
        let at = if off == 0 { anchor } else { headers[off - 1] };
        let s = c.u8();
        let n = if s == 0 {
            rest
        } else {
            usize::from(s).min(rest)
        };
        let height = first + off as u32;
        let order = TweakError::SpanOutOfOrder { first, last: top };
        let broke = |error| TweakOutcome::Over(TweakVerdict::BrokeItsWord { gateway: g, error });
        let (hs, hd) = (&hashes[off..off + n], &headers[off..off + n]);
        let out_of_order = |out: TweakOutcome| {
            assert_eq!(out, broke(order), "span message out of order");
            Some(TweakVerdict::BrokeItsWord {
                gateway: g,
                error: order,
            })
        };
        match behaviour % 16 {
            5 => {
                let mut x = c.u32();
                while x == id {
                    x = x.wrapping_add(1);
                }
                let out = d.on_span(g, x, height, at, hs, hd, off + n == len);
                assert_eq!(out, TweakOutcome::Bad(g, TweakFault::Unasked { id: x }));
                self.after_bad(d, g)
            }
            6 => {
                let out = d.on_span(g, id, height + 1, at, hs, hd, off + n == len);
                out_of_order(out)
            }
            7 => {
                let mut before = FilterHeader(c.bytes(32).try_into().unwrap_or([7; 32]));
                if before == at {
                    before.0[0] ^= 1;
                }
                let mut h = before;
                let chained: Vec<FilterHeader> = hs
                    .iter()
                    .map(|x| {
                        h = h.next(x);
                        h
                    })
                    .collect();
                let out = d.on_span(g, id, height, before, hs, &chained, off + n == len);
                let error = if off == 0 {
                    TweakError::AnchorMismatch { first }
                } else {
                    order
                };
                assert_eq!(out, broke(error), "another header before");
                Some(TweakVerdict::BrokeItsWord { gateway: g, error })
            }
            8 if n < rest => {
                let out = d.on_span(g, id, height, at, hs, hd, true);
                out_of_order(out)
            }
            9 => {
                // The whole rest, the final message without `last`: taken.
                let (hs, hd) = (&hashes[off..], &headers[off..]);
                let out = d.on_span(g, id, height, at, hs, hd, false);
                self.span_sent(i, rest, out)
            }
            10 => {
                let extra = FilterHash([0xee; 32]);
                let mut more = hashes[off..].to_vec();
                let mut chained = headers[off..].to_vec();
                more.push(extra);
                chained.push(headers[len - 1].next(&extra));
                let out = d.on_span(g, id, height, at, &more, &chained, true);
                out_of_order(out)
            }
            11 => {
                // An empty message: the connection gives the zero header before it.
                let zero = FilterHeader([0; 32]);
                let out = d.on_span(g, id, height, zero, &[], &[], false);
                if at == zero {
                    assert_eq!(out, TweakOutcome::Going, "an empty message at genesis");
                    return None;
                }
                let error = if off == 0 {
                    TweakError::AnchorMismatch { first }
                } else {
                    order
                };
                assert_eq!(out, broke(error), "an empty message");
                Some(TweakVerdict::BrokeItsWord { gateway: g, error })
            }
            12 => self.go(d, g),
            _ => {
                let out = d.on_span(g, id, height, at, hs, hd, off + n == len);
                self.span_sent(i, n, out)
            }
        }
    }

    /// `n` more hashes of span request `i` were sent faithfully: `out` is what the
    /// dispute made of them.
    fn span_sent(&mut self, i: usize, n: usize, out: TweakOutcome) -> Option<TweakVerdict> {
        let top = self.c().top;
        let first = self.c().first;
        let r = &mut self.pending[i];
        r.off += n;
        let g = r.g;
        let Body::Span {
            side,
            ref hashes,
            ref headers,
            ..
        } = r.body
        else {
            unreachable!("a span request")
        };
        if r.off < hashes.len() {
            assert_eq!(out, TweakOutcome::Going, "a span message");
            return None;
        }
        if headers[hashes.len() - 1] != self.sides[side].word {
            let v = TweakVerdict::BrokeItsWord {
                gateway: g,
                error: TweakError::EndMismatch { last: top },
            };
            assert_eq!(
                out,
                TweakOutcome::Over(v),
                "a span that does not end at its word"
            );
            return Some(v);
        }
        let taken = hashes.clone();
        self.sides[side].taken = Some(taken);
        self.end(i);
        let (Some(a), Some(b)) = (&self.sides[0].taken, &self.sides[1].taken) else {
            assert_eq!(out, TweakOutcome::Going, "one span in");
            return None;
        };
        match a.iter().zip(b).position(|(x, y)| x != y) {
            Some(k) => {
                self.disputed = Some(first + k as u32);
                assert_eq!(out, TweakOutcome::Going, "both spans in");
                None
            }
            None => {
                let v = TweakVerdict::Unsettled { height: top };
                assert_eq!(out, TweakOutcome::Over(v), "two spans alike");
                Some(v)
            }
        }
    }

    /// The next piece of block or evidence request `i`, sent as `behaviour` says.
    fn data_step(
        &mut self,
        d: &mut TweakDispute,
        i: usize,
        behaviour: u8,
        c: &mut Cursor<'_>,
    ) -> Option<TweakVerdict> {
        let r = &self.pending[i];
        let (g, id, off) = (r.g, r.id, r.off);
        let Body::Data {
            ref bytes, prev, ..
        } = r.body
        else {
            unreachable!("a block or evidence request")
        };
        let Some(mut bytes) = bytes.clone() else {
            // Nobody has it: not_found, or the gateway goes or answers another id.
            return match behaviour % 16 {
                6 => self.go(d, g),
                7 | 10 => self.wrong(d, i, BlockPiece::not_found(id), behaviour % 16 == 10, c),
                _ => self.piece(d, i, BlockPiece::not_found(id)),
            };
        };
        let len = bytes.len();
        let rest = len - off;
        let s = c.u8();
        let n = if s == 0 {
            rest
        } else {
            usize::from(s).min(rest)
        };
        let piece = |offset: usize, n: usize, block_len: usize| BlockPiece {
            id,
            last: offset + n == block_len,
            not_found: false,
            block_len: block_len as u32,
            offset: offset as u32,
            data: &[],
        };
        let honest = piece(off, n, len);
        let with = |p: BlockPiece<'static>, from: usize, to: usize| (p, from, to);
        let (p, from, to) = match behaviour % 16 {
            5 => return self.piece(d, i, BlockPiece::not_found(id)),
            6 => return self.go(d, g),
            7 => return self.wrong(d, i, honest.with(&bytes[off..off + n]), false, c),
            10 => return self.wrong(d, i, honest.with(&bytes[off..off + n]), true, c),
            8 if off + 1 < len => {
                let o = off + 1;
                let n = n.min(len - o);
                with(piece(o, n, len), o, o + n)
            }
            8 if off > 0 => {
                let o = off - 1;
                let n = n.min(len - o);
                with(piece(o, n, len), o, o + n)
            }
            9 if prev.is_some() => {
                let (o, n) = prev.unwrap_or_default();
                with(piece(o, n, len), o, o + n)
            }
            11 => {
                // The data changed from here on (the content too, for what follows).
                let x = c.u8() | 1;
                bytes[off] ^= x;
                if let Body::Data {
                    bytes: Some(b),
                    class,
                    ..
                } = &mut self.pending[i].body
                {
                    b[off] ^= x;
                    *class = Class::Unknown;
                }
                with(honest, off, off + n)
            }
            12 if n < rest => with(piece(off, n, off + n), off, off + n),
            13 if rest > 1 => {
                let n = n.min(rest - 1);
                let more = len + 1 + usize::from(c.u8());
                with(piece(off, n, more), off, off + n)
            }
            _ => with(honest, off, off + n),
        };
        self.piece(d, i, p.with(&bytes[from..to]))
    }

    /// `p` answers request `i` through the other kind's handler (`other_kind`) or with
    /// another id: not asked.
    fn wrong(
        &mut self,
        d: &mut TweakDispute,
        i: usize,
        mut p: BlockPiece<'_>,
        other_kind: bool,
        c: &mut Cursor<'_>,
    ) -> Option<TweakVerdict> {
        let r = &self.pending[i];
        let (g, kind) = (r.g, r.kind);
        if !other_kind {
            let mut x = c.u32();
            while self
                .pending
                .iter()
                .any(|q| q.g == g && q.kind == kind && q.id == x)
            {
                x = x.wrapping_add(1);
            }
            p.id = x;
        }
        let block = (kind == Kind::Block) != other_kind;
        let mut buf = Vec::new();
        let out = if block {
            d.on_block(g, &wire(BlockKind::Block, &p, &mut buf))
        } else {
            d.on_spent_from(g, &wire(BlockKind::SpentFrom, &p, &mut buf))
        };
        assert_eq!(
            out,
            TweakOutcome::Bad(g, TweakFault::Unasked { id: p.id }),
            "a piece not asked"
        );
        self.after_bad(d, g)
    }

    /// Piece `p` answers request `i` (its id, its kind): the dispute's outcome checked
    /// against the rules (pieces in order; evidence of one total length; complete answers
    /// judged).
    fn piece(&mut self, d: &mut TweakDispute, i: usize, p: BlockPiece<'_>) -> Option<TweakVerdict> {
        let r = &self.pending[i];
        let (g, kind, off) = (r.g, r.kind, r.off);
        let dd = self.disputed.expect("evidence stage");
        let Body::Data {
            ref bytes,
            class,
            len,
            ..
        } = r.body
        else {
            unreachable!("a block or evidence request")
        };
        let full = bytes.as_ref().map_or(0, Vec::len);
        let mut buf = Vec::new();
        let out = match kind {
            Kind::Block => d.on_block(g, &wire(BlockKind::Block, &p, &mut buf)),
            _ => d.on_spent_from(g, &wire(BlockKind::SpentFrom, &p, &mut buf)),
        };
        if p.not_found {
            assert_eq!(out, TweakOutcome::Going, "not_found is no fault");
            self.end(i);
            return None;
        }
        let out_of_order = p.offset as usize != off
            || (kind == Kind::Spent && len.is_some_and(|l| l != p.block_len));
        if out_of_order {
            let fault = match kind {
                Kind::Block => TweakFault::OutOfOrder { height: dd },
                _ => TweakFault::SpentFrom {
                    height: dd,
                    error: SpentFromError::OutOfOrder { offset: p.offset },
                },
            };
            assert_eq!(out, TweakOutcome::Bad(g, fault), "a piece out of order");
            self.end(i);
            return self.after_bad(d, g);
        }
        let n = p.data.len();
        if let Body::Data { len, prev, .. } = &mut self.pending[i].body {
            *len = Some(p.block_len);
            *prev = Some((off, n));
        }
        self.pending[i].off += n;
        if !p.last {
            assert_eq!(out, TweakOutcome::Going, "a piece in order");
            return None;
        }
        // Complete: cut short of its content, a block is no block and evidence no list.
        let class = match (off + n < full, class, kind) {
            (false, class, _) | (true, class @ Class::Unknown, _) => class,
            (true, _, Kind::Block) => Class::BadBlock,
            (true, _, _) => Class::BadFormat,
        };
        self.end(i);
        match (kind, class, out) {
            (Kind::Block, Class::BadBlock | Class::Unknown, TweakOutcome::Bad(x, f))
                if matches!(f, TweakFault::Block { .. }) =>
            {
                assert_eq!(x, g, "a block not ours is its sender's fault");
                assert!(matches!(f, TweakFault::Block { height, .. } if height == dd));
                return self.after_bad(d, g);
            }
            (Kind::Block, Class::BadBlock, out) => panic!("a block not ours taken: {out:?}"),
            (Kind::Block, ..) => self.held[0] = Some((g, class)),
            _ => self.held[1] = Some((g, class)),
        }
        self.judge(d, out)
    }

    /// With a block or its evidence just in, `out` is the judgement of what is held.
    fn judge(&mut self, d: &mut TweakDispute, out: TweakOutcome) -> Option<TweakVerdict> {
        use Class::*;
        let dd = self.disputed.expect("evidence stage");
        let (Some(b), Some(s)) = (self.held[0], self.held[1]) else {
            assert_eq!(out, TweakOutcome::Going, "block or evidence still due");
            return None;
        };
        let why = format!("block {b:?}, evidence {s:?}: {out:?}");
        match out {
            TweakOutcome::Over(
                v @ TweakVerdict::Settled {
                    height,
                    proven,
                    wrong,
                },
            ) => {
                assert!(
                    matches!(b.1, Valid | Unknown) && matches!(s.1, Valid | Unknown),
                    "{why}"
                );
                let cfg = self.c();
                assert_eq!(height, dd, "{why}");
                assert!(
                    dd == cfg.paying || dd == cfg.empty,
                    "settled without a block: {why}"
                );
                let truth = self.f.honest[self.cfg].hashes[dd as usize];
                assert_eq!(proven, truth, "the proven hash: {why}");
                let k = (dd - cfg.first) as usize;
                let want = [0, 1].map(|i| {
                    let taken = self.sides[i].taken.as_ref().expect("both spans in");
                    (taken[k] != truth).then_some(self.sides[i].g)
                });
                assert_eq!(wrong, want, "the sides wrong: {why}");
                Some(v)
            }
            TweakOutcome::Bad(x, TweakFault::Witness { height }) => {
                assert!(x == b.0 && height == dd, "{why}");
                assert!(matches!(b.1, BadWitness | Unknown), "{why}");
                assert!(matches!(s.1, Valid | BadProof | Unknown), "{why}");
                self.held[0] = None;
                self.after_bad(d, x)
            }
            TweakOutcome::Bad(x, TweakFault::SpentFrom { height, error }) => {
                assert!(x == s.0 && height == dd, "{why}");
                assert!(!matches!(error, SpentFromError::OutOfOrder { .. }), "{why}");
                assert!(matches!(s.1, BadFormat | Unknown), "{why}");
                self.held[1] = None;
                self.after_bad(d, x)
            }
            TweakOutcome::Bad(x, TweakFault::Evidence { height, .. }) => {
                assert!(x == s.0 && height == dd, "{why}");
                assert!(matches!(s.1, BadProof | Unknown), "{why}");
                assert!(matches!(b.1, Valid | Unknown), "{why}");
                self.held[1] = None;
                self.after_bad(d, x)
            }
            _ => panic!("not a judgement of what is held: {why}"),
        }
    }
}

impl Body {
    fn data(bytes: Option<Vec<u8>>, class: Class) -> Body {
        Body::Data {
            bytes,
            class,
            len: None,
            prev: None,
        }
    }
}

trait WithData {
    fn with(self, data: &[u8]) -> BlockPiece<'_>;
}

impl WithData for BlockPiece<'_> {
    fn with(self, data: &[u8]) -> BlockPiece<'_> {
        BlockPiece { data, ..self }
    }
}

/// `p` through the wire's encoder and decoder (what the connection lets through).
fn wire<'b>(kind: BlockKind, p: &BlockPiece<'_>, buf: &'b mut Vec<u8>) -> BlockPiece<'b> {
    buf.clear();
    buf.resize(p.payload_len(), 0);
    let mut w = Writer::new(buf);
    p.write_payload(&mut w).expect("a piece fits its payload");
    let n = w.written();
    BlockPiece::decode_payload_as(kind, &buf[..n])
        .unwrap_or_else(|e| panic!("the model made a piece the wire refuses: {e:?}, {p:?}"))
}

/// The permutation of `0..4` numbered `k` (0..24).
fn permutation(mut k: usize) -> [usize; 4] {
    let mut left = vec![0, 1, 2, 3];
    let mut out = [0; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let n = 4 - i;
        *o = left.remove(k % n);
        k /= n;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let f = fixture();
    let flags = c.u8();
    let cfg = usize::from(flags & 1);
    let conf = &CONFIGS[cfg];
    let (first, top) = (conf.first, conf.top);
    let no_hash = flags & 2 != 0;
    let drop_bad = flags & 4 != 0;
    let list_mode = (flags >> 3) & 3;
    let others = usize::from(flags >> 5) % 3;
    let perm = permutation(usize::from(c.u8()) % 24);
    let ids: Vec<GatewayId> = perm[..2 + others].iter().map(|&i| GatewayId(i)).collect();
    let lies = |c: &mut Cursor<'_>, shift: u8| -> Lies {
        let kind = (c.u8() % 6 + shift) % 6;
        let hs = conf.heights;
        let at = hs[usize::from(c.u8()) % hs.len()];
        let k2 = c.u8() % 6;
        let at2 = hs[usize::from(c.u8()) % hs.len()];
        match kind {
            0 => (0, 0, None),
            _ => (kind, at, (k2 != 0 && at2 != at).then_some((k2, at2))),
        }
    };
    // Side a honest, side b leaving a tweak out of the paying block, by default.
    let chains = [chain(cfg, lies(&mut c, 0)), chain(cfg, lies(&mut c, 1))];
    let wb = c.u8();
    let honest = &f.honest[cfg];
    let words: [FilterHeader; 2] = [0, 1].map(|i| match (wb >> (2 * i)) & 3 {
        0 => chains[i].headers[top as usize],
        1 => honest.headers[top as usize],
        2 => chains[1 - i].headers[top as usize],
        _ => FilterHeader(c.bytes(32).try_into().unwrap_or([9; 32])),
    });
    let caps = c.u8();
    let gws: Vec<Gw> = ids
        .iter()
        .enumerate()
        .map(|(j, &id)| Gw {
            id,
            blocks: (caps >> (2 * j)) & 1 == 0,
            tweaks: (caps >> (2 * j + 1)) & 1 == 0,
            gone: false,
        })
        .collect();
    let list: Vec<GatewayId> = match list_mode {
        0 => ids.clone(),
        1 => ids[2..].to_vec(),
        2 => ids[2..].iter().rev().chain(&ids[1..2]).copied().collect(),
        _ => ids.iter().rev().copied().collect(),
    };
    let seq = c.u32();

    // A side check: `new` refuses a span longer than MAX_SPAN and an agreed height at or
    // above the split.
    let (top2, mode, h2) = (c.u32(), c.u8(), c.u32());
    let agreed2 = (mode & 1 == 1).then_some((h2, FilterHeader([1; 32])));
    if !(top2 == u32::MAX && agreed2.is_none()) {
        let want = match agreed2 {
            Some((h, _)) => h < top2 && top2 - h <= MAX_SPAN,
            None => top2 < MAX_SPAN,
        };
        let got = TweakDispute::new(
            top2,
            BlockHash([1; 32]),
            (GatewayId(0), FilterHeader([2; 32])),
            (GatewayId(1), FilterHeader([3; 32])),
            agreed2,
            Ids::new(TaskId::Check),
        )
        .is_some();
        assert_eq!(got, want, "new({top2}, agreed {agreed2:?})");
    }

    let stop = if top == conf.paying {
        f.blocks.paying_hash
    } else {
        fake_hash(top)
    };
    let agreed = (first > 0).then(|| (first - 1, honest.headers[first as usize - 1]));
    let (a, b) = (ids[0], ids[1]);
    let mut d = TweakDispute::new(
        top,
        stop,
        (a, words[0]),
        (b, words[1]),
        agreed,
        Ids::starting_at(TaskId::Check, seq),
    )
    .expect("a span within MAX_SPAN");
    assert_eq!((d.height(), d.sides()), (top, [a, b]));
    let side = |i: usize| SideM {
        g: ids[i],
        word: words[i],
        chain: chains[i],
        asked: false,
        taken: None,
    };
    let mut m = Model {
        cfg,
        f,
        gws,
        list,
        sides: [side(0), side(1)],
        no_hash,
        drop_bad,
        stop,
        pending: Vec::new(),
        ended: Vec::new(),
        asked: [Vec::new(), Vec::new()],
        held: [None, None],
        ids: Vec::new(),
        disputed: None,
    };
    for step in 0.. {
        assert!(step < MAX_STEPS, "no verdict within {MAX_STEPS} steps");
        if m.ask(&mut d, &mut c).is_some() {
            return;
        }
        m.check_flight(&d);
        assert!(
            !m.pending.is_empty(),
            "stalled: nothing to ask, nothing in flight, no verdict"
        );
        if m.step(&mut d, &mut c).is_some() {
            return;
        }
        m.check_flight(&d);
    }
});
