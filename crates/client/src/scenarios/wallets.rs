//! Several wallets on one chain: one scan matches every wallet's scripts, a block matched
//! for several is fetched once, and a wallet that starts again (it watches more, a
//! rescan, an unwatch) takes the scan back for itself alone. The others keep what they
//! found, however far back the scan goes or does not go.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::str::FromStr;

use lightwire_chain::synthetic::{DEFAULT_PROFILE, Payment, Pool};
use lightwire_proto::testing::TestChain;

use super::{coinbase_script, small};
use crate::testnet::{Net, memory};
use crate::wallet::Watched;
use crate::wallet::blocks::WalletId;
use lightwire_store::HeaderStore;

/// A BIP84 account's xpub (BIP84's test vector), as a tpub: the wallets are on regtest.
fn account() -> String {
    let xpub = "xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V";
    let key = bip32::XPub::from_str(xpub).expect("BIP84's xpub");
    let tpub = key.to_extended_key(bip32::Prefix::TPUB).to_string();
    format!("wpkh({tpub}/<0;1>/*)")
}

/// The account's receive script at `index`.
fn receive(index: u32) -> Vec<u8> {
    let d = lightwire_wallet::Descriptor::parse(&account(), lightwire_chain::Network::Regtest)
        .expect("the account parses");
    let branch = d.branch_key(0).expect("its receive branch");
    d.script_at(&branch, index).expect("a script")
}

/// A chain of `count` blocks paying `payments` (height, script).
fn paying(count: u32, payments: &[(u32, Vec<u8>)]) -> TestChain {
    let payments = payments.iter().map(|(height, script)| Payment {
        height: *height,
        script: script.clone(),
        value: 100_000,
    });
    let pool = Box::leak(Box::new(Pool::with_payments(
        &DEFAULT_PROFILE,
        payments,
        2_000,
    )));
    TestChain::generate_paying(count, pool)
}

fn coinbase(height: u32) -> Watched {
    Watched::Script(hex::encode(coinbase_script(height, 0)))
}

/// A session synced to a chain of 3,000 blocks, its one gateway serving it.
fn synced() -> Net<lightwire_store::MemoryStore> {
    let mut net = Net::new(memory(), vec![TestChain::generate(3_000)], small);
    net.drive();
    net
}

/// The heights of the blocks gateway 0 served.
fn blocks_served<S: HeaderStore>(net: &Net<S>) -> Vec<u32> {
    let Some(gw) = net.host.gateways[0].as_ref() else {
        panic!("connected");
    };
    gw.chain
        .block_reads
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default()
}

/// The heights of wallet `id`'s transactions.
fn found<S: HeaderStore>(net: &Net<S>, id: WalletId) -> Vec<u32> {
    let w = net.host.engine.wallet_of(id).expect("the wallet");
    w.ledger.transactions().iter().map(|t| t.height).collect()
}

const SECOND: WalletId = match WalletId::new(1) {
    Some(id) => id,
    None => unreachable!(),
};

/// The trap of one scan for several wallets: the default wallet watches more, and its
/// start (2,000) is above the second wallet's payments (1,100 and 1,200). The second
/// then applies 1,200, which pays receive 10 and brings receive 25, paid at 1,100 and
/// seen there only as a lookahead script, within the gap: it goes back to 1,100 and
/// applies the scan's matches from there again. They must still be in the scan: a scan
/// started again from the default wallet's start would have lost them, and hidden the
/// payment at 1,100 for good.
#[test]
fn a_wallet_watching_more_leaves_another_wallets_matches_below_its_start() {
    let mut chain = paying(3_000, &[(1_100, receive(25)), (1_200, receive(10))]);
    chain.pending_blocks.insert(1_200);
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    let engine = &mut net.host.engine;
    engine
        .watch_in(SECOND, &[Watched::Descriptor(account())], 1_000)
        .unwrap();
    engine.watch(&[coinbase(2_500)], 2_000).unwrap();
    net.drive();
    // Block 1,200's answer waits: the second wallet applied 1,100 (only its lookahead).
    assert_eq!(found(&net, SECOND), [] as [u32; 0]);
    let filters = net.host.engine.scan().map(|s| s.filters);
    assert_eq!(filters, Some(2_001), "one pass from 1,000 for both");
    // The default wallet watches one script more: it scans again from 2,000, alone.
    net.host.engine.watch(&[coinbase(2_600)], 2_000).unwrap();
    net.drive();
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain.pending_blocks.clear();
    gw.server.data_arrived();
    net.drive();
    assert_eq!(found(&net, SECOND), [1_100, 1_200]);
    assert_eq!(found(&net, WalletId::DEFAULT), [2_500, 2_600]);
    assert!(net.host.engine.wallet_synced());
    assert!(net.host.engine.wallet_synced_of(SECOND));
    let filters = net.host.engine.scan().map(|s| s.filters);
    assert_eq!(filters, Some(2_001 + 1_001), "only from 2,000 again");
}

/// Two wallets watching the same script each find its payment, in one pass and one fetch
/// of its block; one unwatching it leaves the other's as it was, and scans again alone
/// from its own start; a reorganisation below takes what each found from both.
#[test]
fn two_wallets_watching_one_script_each_keep_their_own_view() {
    let mut net = synced();
    let engine = &mut net.host.engine;
    engine
        .watch(&[coinbase(1_234), coinbase(2_000)], 1_000)
        .unwrap();
    engine
        .watch_in(SECOND, &[coinbase(1_234), coinbase(2_500)], 1_200)
        .unwrap();
    net.drive();
    assert_eq!(found(&net, WalletId::DEFAULT), [1_234, 2_000]);
    assert_eq!(found(&net, SECOND), [1_234, 2_500]);
    assert_eq!(
        blocks_served(&net),
        [1_234, 2_000, 2_500],
        "block 1,234 fetched once for both"
    );
    // The second stops watching it: only its own view changes, only it scans again.
    let filters = net.host.engine.scan().map(|s| s.filters);
    net.host
        .engine
        .unwatch_in(SECOND, &[coinbase(1_234)])
        .unwrap();
    net.drive();
    assert_eq!(found(&net, WalletId::DEFAULT), [1_234, 2_000]);
    assert_eq!(found(&net, SECOND), [2_500]);
    let again = net.host.engine.scan().map(|s| s.filters).zip(filters);
    assert_eq!(again.map(|(a, b)| a - b), Some(1_801), "from 1,200 only");
    // A reorganisation below both payments: withdrawn from both, and the new branch
    // (whose coinbases pay other scripts) pays neither.
    let mut fork = TestChain::generate(3_000);
    fork.reorg(1_100, 2_000, 1);
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain = fork;
    gw.server.tip_changed();
    net.drive();
    assert_eq!(net.stored().height, 3_100);
    assert_eq!(found(&net, WalletId::DEFAULT), [] as [u32; 0]);
    assert_eq!(found(&net, SECOND), [] as [u32; 0]);
    assert!(net.host.engine.wallet_synced());
    assert!(net.host.engine.wallet_synced_of(SECOND));
}

/// A wallet removed while its rescan runs: the scan goes on for the others, which keep
/// what they found, and nothing is fetched for the one removed.
#[test]
fn a_wallet_removed_while_its_rescan_runs_leaves_the_others() {
    let mut net = synced();
    let engine = &mut net.host.engine;
    engine.watch(&[coinbase(2_000)], 1_500).unwrap();
    engine.watch_in(SECOND, &[coinbase(2_500)], 1_500).unwrap();
    net.drive();
    assert_eq!(found(&net, SECOND), [2_500]);
    let blocks = blocks_served(&net);
    // The second widens its start to 1,000 and is removed before the scan gets anywhere.
    net.host.engine.rescan_in(SECOND, Some(1_000)).unwrap();
    net.host.engine.remove_wallet(SECOND);
    net.drive();
    assert!(net.host.engine.wallet_of(SECOND).is_none());
    assert_eq!(found(&net, WalletId::DEFAULT), [2_000]);
    assert!(net.host.engine.wallet_synced());
    assert_eq!(blocks_served(&net), blocks, "nothing fetched");
    let scan = net.host.engine.scan().expect("the default wallet's scan");
    assert_eq!(scan.all_owners(), WalletId::DEFAULT.owner());
    // The last wallet removed: the scan stops.
    net.host.engine.remove_wallet(WalletId::DEFAULT);
    net.drive();
    assert!(net.host.engine.scan().is_none());
}

/// Named wallets are saved each in its own record and resumed by the next session as
/// they were, nothing fetched or scanned again; one removed has its record deleted; a
/// reorganisation while the client was closed takes from each what the new branch
/// lacks.
#[test]
fn named_wallets_are_resumed_and_removed_with_their_records() {
    let mut net = synced();
    let engine = &mut net.host.engine;
    let savings = engine.add_wallet("savings").unwrap();
    let spending = engine.add_wallet("spending").unwrap();
    engine.watch(&[coinbase(2_000)], 1_000).unwrap();
    engine
        .watch_in(savings, &[coinbase(1_234), coinbase(2_500)], 1_000)
        .unwrap();
    engine
        .watch_in(spending, &[coinbase(1_500)], 1_200)
        .unwrap();
    net.drive();
    assert!(net.host.engine.wallet_saved_of(savings));
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(3_000)], small);
    net.drive();
    let names: Vec<(WalletId, String)> = net
        .host
        .engine
        .wallet_names()
        .map(|(id, n)| (id, n.to_string()))
        .collect();
    assert_eq!(
        names,
        [(savings, "savings".into()), (spending, "spending".into())]
    );
    assert_eq!(found(&net, WalletId::DEFAULT), [2_000]);
    assert_eq!(found(&net, savings), [1_234, 2_500]);
    assert_eq!(found(&net, spending), [1_500]);
    assert_eq!(blocks_served(&net), [] as [u32; 0], "nothing fetched again");
    assert_eq!(net.host.engine.scan().map(|s| s.filters), Some(0));
    // Spending removed: its record goes with it.
    net.host.engine.remove_wallet(spending);
    net.drive();
    let key = crate::wallet::names::record_key(spending);
    let record = crate::testnet::block_on(net.store.record(key)).unwrap();
    assert_eq!(record, None);
    // The next session, on a branch that forked below 2,500 while it was closed.
    let mut fork = TestChain::generate(3_000);
    fork.reorg(2_400, 700, 1);
    let store = net.store;
    let mut net = Net::new(store, vec![fork], small);
    net.drive();
    assert_eq!(net.host.engine.wallet_names().count(), 1);
    assert!(net.host.engine.wallet_of(spending).is_none());
    assert_eq!(found(&net, WalletId::DEFAULT), [2_000]);
    assert_eq!(found(&net, savings), [1_234]);
    assert!(net.host.engine.wallet_synced_of(savings));
}

/// A session that ends while one wallet's rescan runs: the next goes on with that rescan
/// alone, the other wallets' blocks not fetched again.
#[test]
fn a_rescan_of_one_wallet_resumed_after_a_reload_leaves_the_others() {
    let mut net = synced();
    let engine = &mut net.host.engine;
    let savings = engine.add_wallet("savings").unwrap();
    engine.watch(&[coinbase(2_000)], 1_000).unwrap();
    engine.watch_in(savings, &[coinbase(2_500)], 2_200).unwrap();
    net.drive();
    // Savings widens its start to 1,000 (paid at 1,234 too, it turns out); the gateway's
    // answers are held, so the session ends with the rescan saved where it stands.
    net.hold(crate::ids::GatewayId(0));
    let engine = &mut net.host.engine;
    engine.watch_in(savings, &[coinbase(1_234)], 1_000).unwrap();
    net.drive();
    assert_eq!(
        found(&net, savings),
        [] as [u32; 0],
        "withdrawn to be found again"
    );
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(3_000)], small);
    net.drive();
    assert_eq!(found(&net, WalletId::DEFAULT), [2_000]);
    assert_eq!(found(&net, savings), [1_234, 2_500]);
    assert_eq!(
        blocks_served(&net),
        [1_234, 2_500],
        "the default's not again"
    );
    assert!(net.host.engine.wallet_synced());
    assert!(net.host.engine.wallet_synced_of(savings));
}

/// One mempool subscription serves every wallet: a payment to two wallets is held by
/// both, one to a single wallet by that one only, each told with its wallet; an eviction
/// drops it from the wallet holding it.
#[test]
fn the_mempool_serves_every_wallet() {
    use super::mempool::{mempool, paying as pays};
    use crate::engine::Event;
    use crate::wallet::WalletChange;
    use lightwire_primitives::Txid;
    let mut chain = TestChain::generate(3_000);
    chain.mempool = Some(Default::default());
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    let engine = &mut net.host.engine;
    let savings = engine.add_wallet("savings").unwrap();
    engine.watch(&[coinbase(1_234)], 1_000).unwrap();
    engine.watch_in(savings, &[coinbase(2_000)], 1_000).unwrap();
    net.drive();
    net.host.events.clear();
    let (ours, theirs) = (coinbase_script(1_234, 0), coinbase_script(2_000, 0));
    let mut both = [0u8; 32];
    mempool(&mut net, 0, |m| {
        both = m.add(&pays(1, 0, &[&ours, &theirs]))
    });
    let mut one = [0u8; 32];
    mempool(&mut net, 0, |m| one = m.add(&pays(2, 0, &[&theirs])));
    let told: Vec<(WalletId, Txid)> = net
        .host
        .events
        .drain(..)
        .filter_map(|e| match e {
            Event::Wallet(id, WalletChange::Unconfirmed(t)) => Some((id, t.txid)),
            _ => None,
        })
        .collect();
    let (both, one) = (Txid(both), Txid(one));
    assert_eq!(
        told,
        [(WalletId::DEFAULT, both), (savings, both), (savings, one)]
    );
    let held = |net: &Net<_>, id| {
        let w = net.host.engine.wallet_of(id).unwrap();
        w.unconfirmed
            .transactions()
            .iter()
            .map(|t| t.txid)
            .collect::<Vec<_>>()
    };
    assert_eq!(held(&net, WalletId::DEFAULT), [both]);
    assert_eq!(held(&net, savings), [both, one]);
    mempool(&mut net, 0, |m| {
        m.remove(one.0, lightwire_wire::Removal::Evicted)
    });
    assert_eq!(held(&net, savings), [both]);
    assert_eq!(held(&net, WalletId::DEFAULT), [both]);
}

/// The application's `scan()` runs beside the wallets instead of pausing them: one pass
/// over each filter serves both, its events and its result tell of its own matches only,
/// a wallet watching more scans again without replacing it, and both follow new blocks.
#[test]
fn an_apps_scan_runs_beside_the_wallets() {
    use crate::engine::Event;
    let mut net = synced();
    let engine = &mut net.host.engine;
    engine
        .watch(&[coinbase(1_234), coinbase(3_050)], 1_000)
        .unwrap();
    net.drive();
    let filters = net.host.engine.scan().map(|s| s.filters).unwrap_or(0);
    net.host.events.clear();
    let app = |h| coinbase_script(h, 0);
    net.host
        .engine
        .start_scan(vec![app(2_000), app(3_060)], 1_500);
    net.drive();
    let told = |events: &[Event]| -> (Vec<u32>, Vec<Vec<u32>>) {
        let matched = events.iter().filter_map(|e| match e {
            Event::ScanMatch { height, .. } => Some(*height),
            _ => None,
        });
        let reached = events.iter().filter_map(|e| match e {
            Event::ScanReached { matches, .. } => Some(matches.iter().map(|m| m.0).collect()),
            _ => None,
        });
        (matched.collect(), reached.collect())
    };
    assert_eq!(told(&net.host.events), (vec![2_000], vec![vec![2_000]]));
    assert!(net.host.engine.wallet_synced(), "the wallet not paused");
    assert_eq!(found(&net, WalletId::DEFAULT), [1_234]);
    let scanned = net.host.engine.scan().map(|s| s.filters).unwrap_or(0);
    assert_eq!(
        scanned - filters,
        1_501,
        "from 1,500 for the application alone"
    );
    // The wallet watches more: it scans again from its start, the application's scan
    // goes on (its matches kept, none told again).
    net.host.events.clear();
    net.host.engine.watch(&[coinbase(2_500)], 1_000).unwrap();
    net.drive();
    assert_eq!(found(&net, WalletId::DEFAULT), [1_234, 2_500]);
    assert_eq!(told(&net.host.events).0, [] as [u32; 0]);
    assert!(net.host.engine.app_scan_at_tip());
    assert_eq!(net.host.engine.app_matches().len(), 1);
    // New blocks: both find theirs in the same pass.
    net.host.events.clear();
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain = TestChain::generate(3_100);
    gw.server.tip_changed();
    net.drive();
    assert_eq!(net.stored().height, 3_100);
    assert_eq!(found(&net, WalletId::DEFAULT), [1_234, 2_500, 3_050]);
    assert_eq!(told(&net.host.events).0, [3_060]);
    let apps: Vec<u32> = net.host.engine.app_matches().iter().map(|m| m.0).collect();
    assert_eq!(apps, [2_000, 3_060]);
}

/// A transaction spending a coin of each of two wallets, the first wallet's input signed
/// by its coin's key and the second's not, so that no node would take it, is taken by
/// neither: every wallet is asked before any takes it. Its gateway is marked bad
/// (`invalid-signature`, on the second input). The default wallet is asked first and,
/// alone, would have taken it (its own input is signed): the test fails if wallets take
/// a transaction one by one.
#[test]
fn a_spend_of_two_wallets_coins_signed_for_one_is_taken_by_neither() {
    use super::mempool::mempool;
    use crate::engine::GatewayState;
    use crate::ids::GatewayId;
    use bip32::secp256k1::ecdsa::SigningKey;
    use bip32::secp256k1::ecdsa::signature::hazmat::PrehashSigner;
    use lightwire_wallet::Kind;
    use lightwire_wallet::descriptor::script_for_key;

    let keys = [0x42u8, 0x43].map(|b| SigningKey::from_slice(&[b; 32]).expect("a key"));
    let public: Vec<[u8; 33]> = keys
        .iter()
        .map(|k| {
            let p = k.verifying_key().to_sec1_point(true);
            p.as_bytes().try_into().expect("compressed")
        })
        .collect();
    let scripts: Vec<Vec<u8>> = public
        .iter()
        .map(|p| script_for_key(Kind::Wpkh, p).expect("P2WPKH"))
        .collect();
    let mut chain = paying(
        3_000,
        &[(1_100, scripts[0].clone()), (1_200, scripts[1].clone())],
    );
    chain.mempool = Some(Default::default());
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    let engine = &mut net.host.engine;
    let savings = engine.add_wallet("savings").expect("a wallet");
    engine
        .watch(&[Watched::Script(hex::encode(&scripts[0]))], 1_000)
        .expect("watched");
    engine
        .watch_in(savings, &[Watched::Script(hex::encode(&scripts[1]))], 1_000)
        .expect("watched");
    net.drive();
    let coin = |net: &Net<_>, id| {
        let w = net.host.engine.wallet_of(id).expect("the wallet");
        let c = w.ledger.utxos().next().expect("its coin");
        (c.outpoint, c.value)
    };
    let coins = [coin(&net, WalletId::DEFAULT), coin(&net, savings)];
    // The transaction without witnesses (what BIP143 hashes), then with them.
    let bare = {
        let mut t = 2u32.to_le_bytes().to_vec();
        t.push(2);
        for (o, _) in &coins {
            t.extend_from_slice(&o.txid.0);
            t.extend_from_slice(&o.vout.to_le_bytes());
            t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        }
        t.push(1);
        t.extend_from_slice(&150_000u64.to_le_bytes());
        t.extend_from_slice(&[1, 0x51]);
        t.extend_from_slice(&[0; 4]);
        t
    };
    let parsed = lightwire_primitives::Tx::parse(&bare).expect("a transaction");
    let code = script_for_key(Kind::Pkh, &public[0]).expect("P2PKH");
    let hash = lightwire_wallet::sighash::segwit_v0(&parsed, 0, &code, coins[0].1, 1);
    let signature: bip32::secp256k1::ecdsa::Signature =
        keys[0].sign_prehash(&hash).expect("signed");
    let mut good = signature.normalize_s().to_der().as_bytes().to_vec();
    good.push(1);
    // The second input's "signature" signs nothing.
    let mut bad = good.clone();
    bad[10] ^= 1;
    let mut raw = bare[..4].to_vec();
    raw.extend_from_slice(&[0, 1]);
    raw.extend_from_slice(&bare[4..bare.len() - 4]);
    for (sig, key) in [(&good, &public[0]), (&bad, &public[1])] {
        raw.push(2);
        raw.push(sig.len() as u8);
        raw.extend_from_slice(sig);
        raw.push(33);
        raw.extend_from_slice(key);
    }
    raw.extend_from_slice(&[0; 4]);
    net.host.events.clear();
    mempool(&mut net, 0, |m| {
        m.add(&raw);
    });
    assert_eq!(
        super::rejected(&net.host.events),
        [(0, "invalid-signature")]
    );
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    for id in [WalletId::DEFAULT, savings] {
        let w = net.host.engine.wallet_of(id).expect("the wallet");
        assert!(w.unconfirmed.transactions().is_empty(), "{id:?} holds it");
        assert_eq!(w.ledger.utxos().count(), 1, "{id:?}'s coin is unspent");
    }
}
