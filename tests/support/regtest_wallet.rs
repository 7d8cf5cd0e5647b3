//! A test wallet for btcd on regtest (built with rust-bitcoin, test-only): it mines to its
//! own P2PKH key, then pays one output of every standard kind (P2PKH, P2SH-P2WPKH, P2WPKH,
//! P2WSH, P2TR and an `OP_RETURN`) in one block, and spends them all in the next, so the
//! blocks' basic filters hold every kind of output script and every kind of spent script.
//! Shared by the gateway's btcd test and the browser end-to-end test's helper binary
//! (included with `#[path]`).
//!
//! Keys are fixed (`[n; 32]`): the chain differs from run to run only in its times.

use bitcoin::consensus::encode::{deserialize, serialize_hex};
use bitcoin::hashes::Hash;
use bitcoin::key::{Keypair, TapTweak};
use bitcoin::opcodes::all::OP_CHECKSIG;
use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::secp256k1::{Message, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, Prevouts, SighashCache, TapSighashType};
use bitcoin::{
    Address, Amount, Block, CompressedPublicKey, Network, OutPoint, PublicKey, ScriptBuf, Sequence,
    Transaction, TxIn, TxOut, Witness, absolute::LockTime, transaction::Version,
};

/// What the wallet built.
#[derive(Debug)]
pub struct Built {
    /// Every output script it paid, by kind (hex).
    pub scripts: Vec<(&'static str, String)>,
    /// The same as regtest addresses.
    pub addresses: Vec<(&'static str, String)>,
    /// Height of the block paying them.
    pub paid_at: u32,
    /// Height of the block spending them.
    pub spent_at: u32,
    /// The scripts the paying block's and the spending block's inputs spend (hex), for
    /// building their filters as a node does from its undo data.
    pub spent_in_paying: Vec<String>,
    /// See [`Self::spent_in_paying`].
    pub spent_in_spending: Vec<String>,
}

/// An unsigned transaction (version 2, no lock time) spending `inputs` into `outputs`.
fn spending(inputs: &[OutPoint], output: Vec<TxOut>) -> Transaction {
    Transaction {
        version: Version::TWO,
        lock_time: LockTime::ZERO,
        input: inputs
            .iter()
            .map(|&previous_output| TxIn {
                previous_output,
                script_sig: ScriptBuf::new(),
                sequence: Sequence::MAX,
                witness: Witness::new(),
            })
            .collect(),
        output,
    }
}

/// The block at `height` on the node.
fn block_at(ctl: &dyn Fn(&[&str]) -> String, height: u32) -> Block {
    let hash = ctl(&["getblockhash", &height.to_string()]);
    let raw = hex::decode(ctl(&["getblock", hash.trim(), "0"]).trim()).expect("hex");
    deserialize(&raw).expect("a block")
}

/// Sign input 0 of `tx`, spending key 1's P2PKH output (the coinbases btcd mines here), with
/// SIGHASH_ALL.
fn sign_p2pkh1(tx: &mut Transaction) {
    let secp = Secp256k1::new();
    let pk1 = PublicKey::new(key(1).public_key(&secp));
    let p2pkh1 = ScriptBuf::new_p2pkh(&pk1.pubkey_hash());
    let sighash = SighashCache::new(&*tx)
        .legacy_signature_hash(0, &p2pkh1, EcdsaSighashType::All.to_u32())
        .unwrap();
    let sig = secp.sign_ecdsa(&Message::from_digest(sighash.to_byte_array()), &key(1));
    tx.input[0].script_sig = Builder::new()
        .push_slice(bitcoin::ecdsa::Signature::sighash_all(sig).serialize())
        .push_key(&pk1)
        .into_script();
}

fn key(n: u8) -> SecretKey {
    SecretKey::from_slice(&[n; 32]).expect("a valid key")
}

/// The address btcd mines to (`--miningaddr`): P2PKH of key 1.
pub fn mining_address() -> String {
    let secp = Secp256k1::new();
    let pk = PublicKey::new(key(1).public_key(&secp));
    Address::p2pkh(pk, Network::Regtest).to_string()
}

/// Mine to maturity, pay every kind of output in one block, spend them all in the next.
/// `ctl` runs a btcctl command and returns its output.
pub fn build(ctl: &dyn Fn(&[&str]) -> String) -> Built {
    let secp = Secp256k1::new();
    let height = |ctl: &dyn Fn(&[&str]) -> String| -> u32 {
        ctl(&["getblockcount"]).trim().parse().expect("a height")
    };
    let start = height(ctl);
    if start < 101 {
        ctl(&["generate", &(101 - start).to_string()]);
    }
    // The coinbase of block 1 (mature) pays key 1's P2PKH.
    let block = block_at(ctl, 1);
    let coinbase = &block.txdata[0];
    let pk1 = PublicKey::new(key(1).public_key(&secp));
    let p2pkh1 = ScriptBuf::new_p2pkh(&pk1.pubkey_hash());
    assert_eq!(
        coinbase.output[0].script_pubkey, p2pkh1,
        "btcd mines to key 1"
    );
    let coinbase_value = coinbase.output[0].value;

    // The outputs: one of every kind.
    let pk2 = PublicKey::new(key(2).public_key(&secp));
    let cpk3 = CompressedPublicKey(key(3).public_key(&secp));
    let redeem3 = ScriptBuf::new_p2wpkh(&cpk3.wpubkey_hash());
    let cpk4 = CompressedPublicKey(key(4).public_key(&secp));
    let pk5 = PublicKey::new(key(5).public_key(&secp));
    let wscript5 = Builder::new()
        .push_key(&pk5)
        .push_opcode(OP_CHECKSIG)
        .into_script();
    let kp6 = Keypair::from_secret_key(&secp, &key(6));
    let (xonly6, _) = kp6.x_only_public_key();
    let outputs: Vec<(&'static str, ScriptBuf)> = vec![
        ("p2pkh", ScriptBuf::new_p2pkh(&pk2.pubkey_hash())),
        ("p2sh-p2wpkh", ScriptBuf::new_p2sh(&redeem3.script_hash())),
        ("p2wpkh", ScriptBuf::new_p2wpkh(&cpk4.wpubkey_hash())),
        ("p2wsh", ScriptBuf::new_p2wsh(&wscript5.wscript_hash())),
        ("p2tr", ScriptBuf::new_p2tr(&secp, xonly6, None)),
    ];
    let each = Amount::from_sat(1_000_000);
    let fee = Amount::from_sat(20_000);
    let change = coinbase_value - each * outputs.len() as u64 - fee;
    let op_return =
        ScriptBuf::new_op_return(PushBytesBuf::try_from(b"lightwire".to_vec()).unwrap());
    let mut pay = spending(
        &[OutPoint::new(coinbase.compute_txid(), 0)],
        outputs
            .iter()
            .map(|(_, s)| TxOut {
                value: each,
                script_pubkey: s.clone(),
            })
            .chain([
                TxOut {
                    value: Amount::ZERO,
                    script_pubkey: op_return,
                },
                TxOut {
                    value: change,
                    script_pubkey: p2pkh1.clone(),
                },
            ])
            .collect(),
    );
    sign_p2pkh1(&mut pay);
    ctl(&["sendrawtransaction", &serialize_hex(&pay)]);
    ctl(&["generate", "1"]);
    let paid_at = height(ctl);

    // Spend all five (and the change) into one P2WPKH output.
    let txid = pay.compute_txid();
    let prevouts: Vec<TxOut> = (0..outputs.len())
        .map(|i| pay.output[i].clone())
        .chain([pay.output[outputs.len() + 1].clone()])
        .collect();
    let vouts: Vec<u32> = (0..outputs.len() as u32)
        .chain([outputs.len() as u32 + 1])
        .collect();
    let total: Amount = prevouts.iter().map(|o| o.value).sum();
    let inputs: Vec<OutPoint> = vouts.iter().map(|&v| OutPoint::new(txid, v)).collect();
    let mut spend = spending(
        &inputs,
        vec![TxOut {
            value: total - fee,
            script_pubkey: ScriptBuf::new_p2wpkh(&cpk4.wpubkey_hash()),
        }],
    );
    let mut cache = SighashCache::new(spend.clone());
    let ecdsa = |digest: [u8; 32], k: u8| {
        let s = secp.sign_ecdsa(&Message::from_digest(digest), &key(k));
        bitcoin::ecdsa::Signature::sighash_all(s)
    };
    let all = EcdsaSighashType::All;
    // 0: P2PKH (key 2).
    let h = cache
        .legacy_signature_hash(0, &prevouts[0].script_pubkey, all.to_u32())
        .unwrap();
    let s = ecdsa(h.to_byte_array(), 2);
    let script_sig0 = Builder::new()
        .push_slice(s.serialize())
        .push_key(&pk2)
        .into_script();
    // 1: P2SH-P2WPKH (key 3): the redeem script in the input script, the rest witness.
    let h = cache
        .p2wpkh_signature_hash(1, &redeem3, prevouts[1].value, all)
        .unwrap();
    let w1 = Witness::p2wpkh(&ecdsa(h.to_byte_array(), 3), &cpk3.0);
    let script_sig1 = Builder::new()
        .push_slice(PushBytesBuf::try_from(redeem3.to_bytes()).unwrap())
        .into_script();
    // 2: P2WPKH (key 4).
    let h = cache
        .p2wpkh_signature_hash(2, &prevouts[2].script_pubkey, prevouts[2].value, all)
        .unwrap();
    let w2 = Witness::p2wpkh(&ecdsa(h.to_byte_array(), 4), &cpk4.0);
    // 3: P2WSH (key 5's <pk> OP_CHECKSIG).
    let h = cache
        .p2wsh_signature_hash(3, &wscript5, prevouts[3].value, all)
        .unwrap();
    let mut w3 = Witness::new();
    w3.push(ecdsa(h.to_byte_array(), 5).to_vec());
    w3.push(wscript5.as_bytes());
    // 4: P2TR key path (key 6, tweaked with no script tree).
    let h = cache
        .taproot_key_spend_signature_hash(4, &Prevouts::All(&prevouts), TapSighashType::Default)
        .unwrap();
    let tweaked = kp6.tap_tweak(&secp, None);
    let schnorr = secp.sign_schnorr_no_aux_rand(
        &Message::from_digest(h.to_byte_array()),
        &tweaked.to_keypair(),
    );
    let w4 = Witness::p2tr_key_spend(&bitcoin::taproot::Signature {
        signature: schnorr,
        sighash_type: TapSighashType::Default,
    });
    // 5: the change, P2PKH (key 1).
    let h = cache
        .legacy_signature_hash(5, &p2pkh1, all.to_u32())
        .unwrap();
    let script_sig5 = Builder::new()
        .push_slice(ecdsa(h.to_byte_array(), 1).serialize())
        .push_key(&pk1)
        .into_script();
    spend.input[0].script_sig = script_sig0;
    spend.input[1].script_sig = script_sig1;
    spend.input[1].witness = w1;
    spend.input[2].witness = w2;
    spend.input[3].witness = w3;
    spend.input[4].witness = w4;
    spend.input[5].script_sig = script_sig5;
    ctl(&["sendrawtransaction", &serialize_hex(&spend)]);
    ctl(&["generate", "1"]);
    let spent_at = height(ctl);

    Built {
        scripts: outputs
            .iter()
            .map(|(k, s)| (*k, hex::encode(s.as_bytes())))
            .collect(),
        addresses: outputs
            .iter()
            .map(|(k, s)| {
                let a = Address::from_script(s, Network::Regtest).expect("an address");
                (*k, a.to_string())
            })
            .collect(),
        paid_at,
        spent_at,
        spent_in_paying: vec![hex::encode(p2pkh1.as_bytes())],
        spent_in_spending: prevouts
            .iter()
            .map(|o| hex::encode(o.script_pubkey.as_bytes()))
            .collect(),
    }
}

/// What [`build_xpub`] built: the watch-only side's descriptor and what it should find.
#[derive(Debug)]
pub struct XpubBuilt {
    /// `wpkh(tpub.../<0;1>/*)`: the account m/84'/1'/0' of a fixed seed.
    pub descriptor: String,
    /// The blocks paying it (height, branch, index, value), in order.
    pub payments: Vec<(u32, u32, u32, u64)>,
    /// The block spending the first payment, with change back to change index 2: its
    /// height, txid (display hex) and fee.
    pub spend: (u32, String, u64),
    /// What the wallet should hold at the end, in satoshis.
    pub balance: u64,
    /// A transaction signed and not sent, for the client to broadcast: it spends receive
    /// 15 whole to someone else. Its hex, txid (display hex), the value spent and the fee.
    pub unsent: (String, String, u64, u64),
}

/// On a node where [`build`] ran: pay addresses of a BIP84 account, each in its own
/// block, from the coinbases of blocks 2 to 7, out of index order: receive 80, 30, 15, 0,
/// 45 and 65 (BIP44's gap of 20 reaches every one of them, but in height order receive 30
/// is paid before 15 brings it within the gap, and 80 before anything brings it within 70
/// of the start), then change 2 by a spend of receive 0.
pub fn build_xpub(ctl: &dyn Fn(&[&str]) -> String) -> XpubBuilt {
    use bitcoin::bip32::{ChildNumber, DerivationPath, Xpriv, Xpub};
    use core::str::FromStr;

    let secp = Secp256k1::new();
    let master = Xpriv::new_master(Network::Regtest, &[7u8; 32]).unwrap();
    let account = master
        .derive_priv(&secp, &DerivationPath::from_str("m/84'/1'/0'").unwrap())
        .unwrap();
    let xpub = Xpub::from_priv(&secp, &account);
    let child = |branch: u32, index: u32| {
        account
            .derive_priv(
                &secp,
                &[
                    ChildNumber::from_normal_idx(branch).unwrap(),
                    ChildNumber::from_normal_idx(index).unwrap(),
                ],
            )
            .unwrap()
            .private_key
    };
    let script = |branch: u32, index: u32| {
        let pk = CompressedPublicKey(child(branch, index).public_key(&secp));
        ScriptBuf::new_p2wpkh(&pk.wpubkey_hash())
    };
    let height = || -> u32 { ctl(&["getblockcount"]).trim().parse().unwrap() };
    let pk1 = PublicKey::new(key(1).public_key(&secp));
    let p2pkh1 = ScriptBuf::new_p2pkh(&pk1.pubkey_hash());
    let fee = Amount::from_sat(10_000);
    let mut payments = Vec::new();
    let mut first: Option<(OutPoint, Amount)> = None;
    for (cb_height, index, value) in [
        (2u32, 80u32, 1_000_000u64),
        (3, 30, 4_000_000),
        (4, 15, 3_000_000),
        (5, 0, 2_000_000),
        (6, 45, 1_500_000),
        (7, 65, 2_500_000),
    ] {
        let block = block_at(ctl, cb_height);
        let coinbase = &block.txdata[0];
        let value = Amount::from_sat(value);
        let mut pay = spending(
            &[OutPoint::new(coinbase.compute_txid(), 0)],
            vec![
                TxOut {
                    value,
                    script_pubkey: script(0, index),
                },
                TxOut {
                    value: coinbase.output[0].value - value - fee,
                    script_pubkey: p2pkh1.clone(),
                },
            ],
        );
        sign_p2pkh1(&mut pay);
        ctl(&["sendrawtransaction", &serialize_hex(&pay)]);
        ctl(&["generate", "1"]);
        payments.push((height(), 0, index, value.to_sat()));
        if index == 0 {
            first = Some((OutPoint::new(pay.compute_txid(), 0), value));
        }
    }
    // Spend receive 0: 500,000 to someone else, the rest (less the fee) to change 2.
    let (outpoint, value) = first.unwrap();
    let paid_out = Amount::from_sat(500_000);
    let change = value - paid_out - fee;
    let mut spend = spending(
        &[outpoint],
        vec![
            TxOut {
                value: paid_out,
                script_pubkey: ScriptBuf::new_p2pkh(
                    &PublicKey::new(key(2).public_key(&secp)).pubkey_hash(),
                ),
            },
            TxOut {
                value: change,
                script_pubkey: script(1, 2),
            },
        ],
    );
    let sk = child(0, 0);
    let cpk = CompressedPublicKey(sk.public_key(&secp));
    let sighash = SighashCache::new(&spend)
        .p2wpkh_signature_hash(0, &script(0, 0), value, EcdsaSighashType::All)
        .unwrap();
    let sig = secp.sign_ecdsa(&Message::from_digest(sighash.to_byte_array()), &sk);
    spend.input[0].witness = Witness::p2wpkh(&bitcoin::ecdsa::Signature::sighash_all(sig), &cpk.0);
    ctl(&["sendrawtransaction", &serialize_hex(&spend)]);
    ctl(&["generate", "1"]);
    let spent_at = height();
    // Signed, not sent: receive 15 to key 2, less the fee.
    let (second_txid, second_value) = {
        let fifteen = payments.iter().find(|p| p.2 == 15).unwrap();
        let block = block_at(ctl, fifteen.0);
        let tx = &block.txdata[1];
        (tx.compute_txid(), tx.output[0].value)
    };
    let mut unsent = spending(
        &[OutPoint::new(second_txid, 0)],
        vec![TxOut {
            value: second_value - fee,
            script_pubkey: ScriptBuf::new_p2pkh(
                &PublicKey::new(key(2).public_key(&secp)).pubkey_hash(),
            ),
        }],
    );
    let sk15 = child(0, 15);
    let sighash = SighashCache::new(&unsent)
        .p2wpkh_signature_hash(0, &script(0, 15), second_value, EcdsaSighashType::All)
        .unwrap();
    let sig = secp.sign_ecdsa(&Message::from_digest(sighash.to_byte_array()), &sk15);
    unsent.input[0].witness = Witness::p2wpkh(
        &bitcoin::ecdsa::Signature::sighash_all(sig),
        &CompressedPublicKey(sk15.public_key(&secp)).0,
    );
    let received: u64 = payments.iter().map(|p| p.3).sum();
    XpubBuilt {
        descriptor: format!("wpkh({xpub}/<0;1>/*)"),
        payments,
        spend: (spent_at, spend.compute_txid().to_string(), fee.to_sat()),
        balance: received - value.to_sat() + change.to_sat(),
        unsent: (
            serialize_hex(&unsent),
            unsent.compute_txid().to_string(),
            second_value.to_sat(),
            fee.to_sat(),
        ),
    }
}

/// BIP84 account `number` of the test wallet's master key (account 0 is the one
/// [`build_xpub`] pays), without a node: its descriptor, and the addresses of its first
/// `receive` receive and `change` change indexes (for a generated chain that pays it:
/// `lightwire-hostile --generate N --payments FILE`).
pub fn account(number: u32, receive: u32, change: u32) -> (String, Vec<String>, Vec<String>) {
    use bitcoin::bip32::{ChildNumber, DerivationPath, Xpriv, Xpub};
    use core::str::FromStr;

    let secp = Secp256k1::new();
    let master = Xpriv::new_master(Network::Regtest, &[7u8; 32]).unwrap();
    let path = DerivationPath::from_str(&format!("m/84'/1'/{number}'")).unwrap();
    let xpub = Xpub::from_priv(&secp, &master.derive_priv(&secp, &path).unwrap());
    let addresses = |branch: u32, count: u32| -> Vec<String> {
        (0..count)
            .map(|i| {
                let key = xpub
                    .derive_pub(
                        &secp,
                        &[
                            ChildNumber::from_normal_idx(branch).unwrap(),
                            ChildNumber::from_normal_idx(i).unwrap(),
                        ],
                    )
                    .unwrap();
                Address::p2wpkh(&CompressedPublicKey(key.public_key), Network::Regtest).to_string()
            })
            .collect()
    };
    (
        format!("wpkh({xpub}/<0;1>/*)"),
        addresses(0, receive),
        addresses(1, change),
    )
}

/// Signed transactions for the mempool test, none sent: spends of two mature coinbases
/// (blocks 2 and 3, key 1's P2PKH), each signalling replaceability (BIP125).
#[derive(Debug)]
pub struct MempoolTxs {
    /// Coinbase A pays the watched script 1 BTC (change back to key 1).
    pub pay: (String, String),
    /// Coinbase A again, paying the watched script 1 BTC with a higher fee: replaces
    /// `pay`.
    pub bump: (String, String),
    /// Coinbase B pays the watched script 2 BTC.
    pub other: (String, String),
    /// Coinbase B again, paying key 1 alone with a higher fee: conflicts with `other`.
    pub conflict: (String, String),
}

/// Mine to maturity (blocks 2 and 3 mature) and sign [`MempoolTxs`] paying `script`.
pub fn mempool_txs(ctl: &dyn Fn(&[&str]) -> String, script: &[u8]) -> MempoolTxs {
    let secp = Secp256k1::new();
    let tip: u32 = ctl(&["getblockcount"]).trim().parse().expect("a height");
    if tip < 103 {
        ctl(&["generate", &(103 - tip).to_string()]);
    }
    let pk1 = PublicKey::new(key(1).public_key(&secp));
    let p2pkh1 = ScriptBuf::new_p2pkh(&pk1.pubkey_hash());
    let watched = ScriptBuf::from_bytes(script.to_vec());
    let sign = |coinbase_at: u32, outputs: Vec<TxOut>| -> (String, String) {
        let block = block_at(ctl, coinbase_at);
        let coinbase = &block.txdata[0];
        let mut tx = spending(&[OutPoint::new(coinbase.compute_txid(), 0)], outputs);
        tx.input[0].sequence = Sequence::ENABLE_RBF_NO_LOCKTIME;
        sign_p2pkh1(&mut tx);
        (serialize_hex(&tx), tx.compute_txid().to_string())
    };
    let value = |at: u32| block_at(ctl, at).txdata[0].output[0].value;
    let btc = Amount::from_sat(100_000_000);
    let pay_to = |amount: Amount, rest: Amount| {
        vec![
            TxOut {
                value: amount,
                script_pubkey: watched.clone(),
            },
            TxOut {
                value: rest,
                script_pubkey: p2pkh1.clone(),
            },
        ]
    };
    let (a, b) = (value(2), value(3));
    MempoolTxs {
        pay: sign(2, pay_to(btc, a - btc - Amount::from_sat(10_000))),
        bump: sign(2, pay_to(btc, a - btc - Amount::from_sat(50_000))),
        other: sign(3, pay_to(btc * 2, b - btc * 2 - Amount::from_sat(10_000))),
        conflict: sign(
            3,
            vec![TxOut {
                value: b - Amount::from_sat(60_000),
                script_pubkey: p2pkh1.clone(),
            }],
        ),
    }
}

/// The output script of a regtest address.
pub fn script_of(address: &str) -> Result<Vec<u8>, String> {
    let a: Address<bitcoin::address::NetworkUnchecked> =
        address.parse().map_err(|e| format!("{address}: {e}"))?;
    let a = a
        .require_network(Network::Regtest)
        .map_err(|e| format!("{address}: {e}"))?;
    Ok(a.script_pubkey().to_bytes())
}

/// What [`pay_silent`] paid.
#[derive(Debug)]
pub struct SilentBuilt {
    /// The paying transaction (display hex).
    pub txid: String,
    /// Height of the block holding the payment.
    pub height: u32,
    /// The output keys the sender derived for the address (x-only, hex), in output order.
    pub keys: Vec<String>,
    /// The scripts the block's inputs after its coinbase spend (hex), in block order.
    pub spent: Vec<String>,
}

/// The coinbase of block `height` (key 1's P2PKH, checked), and that script.
fn coinbase_of_key1(ctl: &dyn Fn(&[&str]) -> String, height: u32) -> (Transaction, ScriptBuf) {
    let secp = Secp256k1::new();
    let block = block_at(ctl, height);
    let coinbase = block.txdata[0].clone();
    let pk1 = PublicKey::new(key(1).public_key(&secp));
    let p2pkh1 = ScriptBuf::new_p2pkh(&pk1.pubkey_hash());
    assert_eq!(
        coinbase.output[0].script_pubkey, p2pkh1,
        "btcd mines to key 1"
    );
    (coinbase, p2pkh1)
}

/// The `count` output keys of a transaction spending `inputs` (each outpoint with its
/// secret key and whether it is a taproot one) to `address`, as the `silentpayments`
/// crate derives them.
fn silent_outputs(
    address: &str,
    inputs: &[(OutPoint, SecretKey, bool)],
    count: usize,
) -> Vec<bitcoin::XOnlyPublicKey> {
    use silentpayments::SilentPaymentCode;
    use silentpayments::sending::generate_recipient_pubkeys;
    use silentpayments::utils::OutPoint as SpOutPoint;
    use silentpayments::utils::sending::calculate_partial_secret;

    let code = SilentPaymentCode::try_from(address).expect("a silent payment address");
    let secrets: Vec<(SecretKey, bool)> = inputs.iter().map(|&(_, k, t)| (k, t)).collect();
    let outpoints: Vec<SpOutPoint> = inputs
        .iter()
        .map(|(o, _, _)| SpOutPoint::from_txid_bytes_and_vout(o.txid.to_byte_array(), o.vout))
        .collect();
    let partial = calculate_partial_secret(&secrets, &outpoints).expect("a secret");
    generate_recipient_pubkeys(vec![code; count], partial).expect("outputs")[&code].clone()
}

/// Pay the silent payment address `address` `count` times in one transaction, from the
/// coinbase of block `coinbase_height` (key 1's P2PKH, mature), plus change back to it,
/// and mine it in a block of its own. The outputs are derived by the `silentpayments`
/// crate (a sender written apart from lightwire's code, on libsecp256k1), so a receiver
/// that finds them agrees with another implementation, not with itself.
pub fn pay_silent(
    ctl: &dyn Fn(&[&str]) -> String,
    address: &str,
    coinbase_height: u32,
    count: usize,
) -> SilentBuilt {
    use bitcoin::key::TweakedPublicKey;

    let (coinbase, p2pkh1) = coinbase_of_key1(ctl, coinbase_height);
    let txid = coinbase.compute_txid();
    let keys = silent_outputs(address, &[(OutPoint::new(txid, 0), key(1), false)], count);

    let each = Amount::from_sat(1_000_000);
    let fee = Amount::from_sat(10_000);
    let change = coinbase.output[0].value - each * count as u64 - fee;
    let mut pay = spending(
        &[OutPoint::new(txid, 0)],
        keys.iter()
            .map(|k| TxOut {
                value: each,
                script_pubkey: ScriptBuf::new_p2tr_tweaked(
                    TweakedPublicKey::dangerous_assume_tweaked(*k),
                ),
            })
            .chain([TxOut {
                value: change,
                script_pubkey: p2pkh1.clone(),
            }])
            .collect(),
    );
    sign_p2pkh1(&mut pay);
    mine_paid(ctl, &pay, &keys, &[&p2pkh1])
}

/// Send `pay` (signed), mine it in a block of its own, and say where it is, the output
/// keys it pays and the scripts its inputs spend.
fn mine_paid(
    ctl: &dyn Fn(&[&str]) -> String,
    pay: &Transaction,
    keys: &[bitcoin::XOnlyPublicKey],
    spent: &[&ScriptBuf],
) -> SilentBuilt {
    ctl(&["sendrawtransaction", &serialize_hex(pay)]);
    ctl(&["generate", "1"]);
    SilentBuilt {
        txid: pay.compute_txid().to_string(),
        height: ctl(&["getblockcount"]).trim().parse().expect("a height"),
        keys: keys.iter().map(|k| hex::encode(k.serialize())).collect(),
        spent: spent.iter().map(|s| hex::encode(s.as_bytes())).collect(),
    }
}

/// Pay the silent payment address `address` once from three inputs of three kinds BIP352
/// takes (a P2PKH, a P2WPKH and a P2TR key-path spend), and mine it. The coinbase of block
/// `coinbase_height` (key 1's P2PKH) first funds a P2WPKH output of key 7 and a P2TR output
/// of key 8 (tweaked with no script tree, as BIP86), mined in a block; then one
/// transaction spends its P2PKH change and both, paying the address (its output derived by
/// the `silentpayments` crate from all three input keys: the P2TR one's tweaked secret,
/// negated as BIP352 says when its key is odd) and change back to key 1. So the gateway's
/// tweak covers a public key from a script signature, one from a witness and one from the
/// output it spends.
pub fn pay_silent_mixed(
    ctl: &dyn Fn(&[&str]) -> String,
    address: &str,
    coinbase_height: u32,
) -> SilentBuilt {
    use bitcoin::key::TweakedPublicKey;

    let secp = Secp256k1::new();
    let (coinbase, p2pkh1) = coinbase_of_key1(ctl, coinbase_height);
    let cpk7 = CompressedPublicKey(key(7).public_key(&secp));
    let p2wpkh7 = ScriptBuf::new_p2wpkh(&cpk7.wpubkey_hash());
    let kp8 = Keypair::from_secret_key(&secp, &key(8));
    let (xonly8, _) = kp8.x_only_public_key();
    let p2tr8 = ScriptBuf::new_p2tr(&secp, xonly8, None);

    // The funding transaction: P2WPKH of key 7, P2TR of key 8, change to key 1.
    let each = Amount::from_sat(2_000_000);
    let fee = Amount::from_sat(10_000);
    let mut fund = spending(
        &[OutPoint::new(coinbase.compute_txid(), 0)],
        vec![
            TxOut {
                value: each,
                script_pubkey: p2wpkh7.clone(),
            },
            TxOut {
                value: each,
                script_pubkey: p2tr8.clone(),
            },
            TxOut {
                value: coinbase.output[0].value - each * 2 - fee,
                script_pubkey: p2pkh1.clone(),
            },
        ],
    );
    sign_p2pkh1(&mut fund);
    ctl(&["sendrawtransaction", &serialize_hex(&fund)]);
    ctl(&["generate", "1"]);
    let funded = fund.compute_txid();
    let inputs = [
        OutPoint::new(funded, 2),
        OutPoint::new(funded, 0),
        OutPoint::new(funded, 1),
    ];
    let prevouts = [
        fund.output[2].clone(),
        fund.output[0].clone(),
        fund.output[1].clone(),
    ];

    // The payment, its output derived from all three inputs' keys.
    let tweaked8 = kp8.tap_tweak(&secp, None).to_keypair();
    let keys = silent_outputs(
        address,
        &[
            (inputs[0], key(1), false),
            (inputs[1], key(7), false),
            (inputs[2], tweaked8.secret_key(), true),
        ],
        1,
    );
    let pay_value = Amount::from_sat(1_000_000);
    let total: Amount = prevouts.iter().map(|o| o.value).sum();
    let mut pay = spending(
        &inputs,
        vec![
            TxOut {
                value: pay_value,
                script_pubkey: ScriptBuf::new_p2tr_tweaked(
                    TweakedPublicKey::dangerous_assume_tweaked(keys[0]),
                ),
            },
            TxOut {
                value: total - pay_value - fee,
                script_pubkey: p2pkh1.clone(),
            },
        ],
    );
    let all = EcdsaSighashType::All;
    let mut cache = SighashCache::new(&pay);
    let h = cache
        .p2wpkh_signature_hash(1, &p2wpkh7, prevouts[1].value, all)
        .unwrap();
    let sig = secp.sign_ecdsa(&Message::from_digest(h.to_byte_array()), &key(7));
    let w1 = Witness::p2wpkh(&bitcoin::ecdsa::Signature::sighash_all(sig), &cpk7.0);
    let h = cache
        .taproot_key_spend_signature_hash(2, &Prevouts::All(&prevouts), TapSighashType::Default)
        .unwrap();
    let schnorr =
        secp.sign_schnorr_no_aux_rand(&Message::from_digest(h.to_byte_array()), &tweaked8);
    let w2 = Witness::p2tr_key_spend(&bitcoin::taproot::Signature {
        signature: schnorr,
        sighash_type: TapSighashType::Default,
    });
    pay.input[1].witness = w1;
    pay.input[2].witness = w2;
    sign_p2pkh1(&mut pay);
    mine_paid(ctl, &pay, &keys, &[&p2pkh1, &p2wpkh7, &p2tr8])
}
