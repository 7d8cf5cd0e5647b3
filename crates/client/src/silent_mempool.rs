//! A silent-payment receiver's look at the mempool (BIP352 before a block holds the
//! payment): a gateway's mempool digest gives each transaction's set (its output scripts
//! and spent outpoints, a BIP158 set keyed by our salt) and, when we asked, its tweak. The
//! first keys that tweak gives the receiver (`P_0`, and `P_0` plus each label's point) are
//! asked of the set as taproot scripts; a transaction whose set holds one is fetched, and
//! its outputs are searched with the tweak ([`tx_payments`]: `P_1`, `P_2`, ... up to
//! K_max).
//!
//! Nothing here is taken on a gateway's word: an output found is at a key of the
//! receiver's (the spend key plus a tweak we computed), so it is the receiver's whatever
//! tweak found it; the transaction itself is unconfirmed, trusted for nothing until a
//! checked block holds it (then the scan of that block, from the tweak list the gateways
//! agreed on, finds it again). A tweak left out or changed hides the payment only until
//! it is mined, and only from this gateway's digest.

use lightwire_filter::Matcher;
use lightwire_filter::txset::{SALT_LEN, set_matches};
use lightwire_primitives::Tx;
use lightwire_wallet::silent::Receiver;
use lightwire_wallet::silent_block::{Payment, tx_payments};

/// What a digest entry's tweak and set told ([`MempoolScanner::matches`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MempoolCheck {
    /// No first key of the receiver's is in the set.
    Miss,
    /// One is: the transaction is fetched.
    Match,
    /// The tweak is not a point (no transaction has it: its gateway's fault).
    NotAPoint,
    /// The set does not decode (its gateway's fault).
    Undecodable,
}

/// The receiver's buffers for the mempool (kept between digests: no allocation per
/// entry once warm).
#[derive(Default)]
pub struct MempoolScanner {
    tweaks: Vec<[u8; 33]>,
    keys: Vec<[u8; 32]>,
    scripts: Vec<[u8; 34]>,
    /// Which tweaks are not points (only worked out when the batch failed).
    bad: Vec<bool>,
    matcher: Matcher,
    found: Vec<(u32, lightwire_wallet::silent::Found)>,
}

impl MempoolScanner {
    /// For each of `entries` (a digest's tweak and set, keyed by `salt`), in order, what
    /// it tells for `receiver`, into `out` (replaced). The tweaks' keys are worked out
    /// together (one field inversion a step for the batch).
    pub fn matches(
        &mut self,
        receiver: &Receiver,
        salt: &[u8; SALT_LEN],
        entries: &[(&[u8; 33], &[u8])],
        out: &mut Vec<MempoolCheck>,
    ) {
        out.clear();
        self.tweaks.clear();
        self.tweaks.extend(entries.iter().map(|(t, _)| **t));
        self.keys.clear();
        self.bad.clear();
        let per = 1 + receiver.label_count();
        if receiver
            .first_keys_batch(&self.tweaks, &mut self.keys)
            .is_err()
        {
            // One of them is not a point: each on its own, to know which (kept in step:
            // `per` keys a tweak, a bad one's never asked of a set).
            self.keys.clear();
            for t in &self.tweaks {
                let before = self.keys.len();
                let bad = receiver.first_keys(t, &mut self.keys).is_err();
                if bad {
                    self.keys.truncate(before);
                    self.keys.resize(before + per, [0; 32]);
                }
                self.bad.push(bad);
            }
        }
        for (i, (_, set)) in entries.iter().enumerate() {
            let keys = self.keys.get(i * per..(i + 1) * per);
            let (Some(keys), false) = (keys, self.bad.get(i).copied().unwrap_or(false)) else {
                out.push(MempoolCheck::NotAPoint);
                continue;
            };
            self.scripts.clear();
            self.scripts.extend(keys.iter().map(|k| {
                let mut s = [0u8; 34];
                s[0] = 0x51;
                s[1] = 0x20;
                s[2..].copy_from_slice(k);
                s
            }));
            let scripts = self.scripts.iter().map(|s| &s[..]);
            out.push(match set_matches(&mut self.matcher, set, salt, scripts) {
                Ok(true) => MempoolCheck::Match,
                Ok(false) => MempoolCheck::Miss,
                Err(_) => MempoolCheck::Undecodable,
            });
        }
    }

    /// The outputs of `tx` that pay `receiver`, given `tweak`; appended to `out` (a tweak
    /// that is not a point finds nothing).
    pub fn payments(
        &mut self,
        receiver: &Receiver,
        tweak: &[u8; 33],
        tx: &Tx<'_>,
        out: &mut Vec<Payment>,
    ) {
        self.found.clear();
        if tx_payments(receiver, tweak, tx, &mut self.found).is_err() {
            return;
        }
        let txid = tx.txid();
        out.extend(self.found.iter().map(|(vout, f)| Payment {
            txid,
            vout: *vout,
            tweak: *tweak,
            found: *f,
        }));
    }
}
