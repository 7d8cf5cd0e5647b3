//! The scripts a wallet watches: given ones, and those derived from its descriptors with
//! a gap limit (BIP44's address gap): each branch's scripts up to `gap` past its last used
//! index are the wallet's, and a use (a match found) makes more of them so.
//!
//! A rescan goes through blocks in height order, but BIP44's gap counts in index order:
//! an address beyond the gap may be paid before the ones that bring it within. So each
//! branch is also derived a `lookahead` past the gap (as Bitcoin Core keeps a keypool ahead
//! of its last used key): the scan matches those scripts too, and when one of them turns
//! out to be the wallet's ([`Watchlist::owns`] says so after a use), what was seen of it
//! is applied again. A
//! script that joins the lookahead after the scan started was not matched in the blocks
//! before ([`Used::uncovered`]): the wallet is scanned again from its start
//! ([`Watchlist::cover_all`]).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use bip32::XPub;

use crate::descriptor::{Descriptor, DescriptorError};

/// BIP44's default gap limit.
pub const DEFAULT_GAP: u32 = 20;

/// Scripts derived past the gap on each branch, for the scan to match ahead: a payment up to
/// this far beyond the gap, before the addresses that bring it within, is found in one
/// pass. Each costs the scan a hash per filter and adds to its false matches (a block
/// fetched for nothing about once in 784,931 filters per script).
pub const DEFAULT_LOOKAHEAD: u32 = 50;

/// Where a watched script comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Origin {
    /// Given as a script or an address.
    Given,
    /// A silent-payment output the receiver's scan found (BIP352): the key that spends it
    /// is the spend key plus `tweak`.
    Silent {
        /// The private-key tweak (`t_k`, plus the label's for a labelled payment).
        tweak: [u8; 32],
        /// The label it was paid to (0: change), `None` for the plain address.
        label: Option<u32>,
        /// The receiver's spend public key (`B_spend`), whose private key plus `tweak`
        /// signs.
        spend: [u8; 33],
    },
    /// Derived: descriptor, branch (an index into its branches), index on the branch.
    Derived {
        /// Which descriptor (in the order added).
        descriptor: usize,
        /// Which of its branches (0: receive, 1: change, for `<0;1>`).
        branch: usize,
        /// The index on the branch.
        index: u32,
    },
}

struct Branch {
    key: XPub,
    /// Scripts derived: indexes `0..derived`.
    derived: u32,
    /// The public keys of those scripts, by index: a spend's inputs and change name them
    /// (derivation costs a quarter of a millisecond in wasm, a spend may have hundreds).
    keys: Vec<[u8; 33]>,
    /// The highest index used.
    used: Option<u32>,
    /// Indexes below this were matched by the scan since it started.
    covered: u32,
}

impl Branch {
    /// Indexes below this are the wallet's: `gap` past the last used one.
    fn owned(&self, gap: u32) -> u32 {
        self.used
            .map_or(0, |u| u.saturating_add(1))
            .saturating_add(gap)
    }
}

/// What a use of a script did (see [`Watchlist::mark_used`]).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Used {
    /// Scripts derived for the lookahead (the scan matches them from its next filter on).
    pub derived: Vec<Vec<u8>>,
    /// Some scripts that are now the wallet's joined the lookahead after the scan started: the blocks before were
    /// not matched against it.
    pub uncovered: bool,
}

struct Tracked {
    descriptor: Descriptor,
    branches: Vec<Branch>,
}

/// What a wallet watches (see the module documentation).
pub struct Watchlist {
    gap: u32,
    lookahead: u32,
    tracked: Vec<Tracked>,
    /// Every script watched, in the order it was added.
    scripts: Vec<Vec<u8>>,
    origins: BTreeMap<Vec<u8>, Origin>,
    /// Where each silent-payment spend key derives from, where the application said.
    spend_origins: BTreeMap<[u8; 33], crate::descriptor::KeyOrigin>,
}

impl Watchlist {
    /// An empty list owning `gap` scripts past the last used on each branch, and deriving
    /// `lookahead` more for the scan.
    pub fn new(gap: u32, lookahead: u32) -> Watchlist {
        Watchlist {
            gap: gap.max(1),
            lookahead,
            tracked: Vec::new(),
            scripts: Vec::new(),
            origins: BTreeMap::new(),
            spend_origins: BTreeMap::new(),
        }
    }

    /// Silent-payment spend key `spend` derives from `origin` (for the signer: BIP376's
    /// `PSBT_IN_SP_SPEND_BIP32_DERIVATION`).
    pub fn set_spend_origin(&mut self, spend: [u8; 33], origin: crate::descriptor::KeyOrigin) {
        self.spend_origins.insert(spend, origin);
    }

    /// Where silent-payment spend key `spend` derives from, if the application said.
    pub fn spend_origin(&self, spend: &[u8; 33]) -> Option<&crate::descriptor::KeyOrigin> {
        self.spend_origins.get(spend)
    }

    /// Watch `script`; false if it was watched already.
    pub fn add_script(&mut self, script: Vec<u8>) -> bool {
        self.insert(script, Origin::Given)
    }

    /// Watch the taproot output of x-only `key`, a silent payment to spend key `spend`
    /// found with `tweak` and `label`; false if it was watched already (as anything).
    pub fn add_silent(
        &mut self,
        key: &[u8; 32],
        tweak: [u8; 32],
        label: Option<u32>,
        spend: [u8; 33],
    ) -> bool {
        let mut script = Vec::with_capacity(34);
        script.extend_from_slice(&[0x51, 0x20]);
        script.extend_from_slice(key);
        self.insert(
            script,
            Origin::Silent {
                tweak,
                label,
                spend,
            },
        )
    }

    fn insert(&mut self, script: Vec<u8>, origin: Origin) -> bool {
        if self.origins.contains_key(&script) {
            return false;
        }
        self.origins.insert(script.clone(), origin);
        self.scripts.push(script);
        true
    }

    /// Watch `descriptor`, deriving `gap` and the lookahead on each branch; its index
    /// among the descriptors (the same one again is not added twice). The scan starts
    /// again for it: what is derived is covered.
    pub fn add_descriptor(&mut self, descriptor: Descriptor) -> Result<usize, DescriptorError> {
        if let Some(i) = self.tracked.iter().position(|t| t.descriptor == descriptor) {
            return Ok(i);
        }
        let branches = (0..descriptor.branches.len())
            .map(|b| {
                Ok(Branch {
                    key: descriptor.branch_key(b)?,
                    derived: 0,
                    keys: Vec::new(),
                    used: None,
                    covered: 0,
                })
            })
            .collect::<Result<Vec<_>, DescriptorError>>()?;
        self.tracked.push(Tracked {
            descriptor,
            branches,
        });
        let d = self.tracked.len() - 1;
        let count = self.gap.saturating_add(self.lookahead);
        for b in 0..self.tracked[d].branches.len() {
            self.derive_to(d, b, count)?;
            self.tracked[d].branches[b].covered = count;
        }
        Ok(d)
    }

    /// Derive branch `b` of descriptor `d` up to `count` scripts; returns how many are new.
    fn derive_to(&mut self, d: usize, b: usize, count: u32) -> Result<u32, DescriptorError> {
        let mut added = 0;
        let from = self.tracked[d].branches[b].derived;
        if from >= count {
            return Ok(0);
        }
        // The keys in one batch (cheaper than one by one: `Descriptor::keys_in`).
        let mut keys = Vec::with_capacity((count - from) as usize);
        Descriptor::keys_in(&self.tracked[d].branches[b].key, from, count, &mut keys)?;
        for (key, index) in keys.into_iter().zip(from..) {
            let t = &self.tracked[d];
            let script = crate::descriptor::checked_script_for_key(t.descriptor.kind, &key, index)?;
            let br = &mut self.tracked[d].branches[b];
            br.derived += 1;
            br.keys.push(key);
            let origin = Origin::Derived {
                descriptor: d,
                branch: b,
                index,
            };
            if self.insert(script, origin) {
                added += 1;
            }
        }
        Ok(added)
    }

    /// `script`, one of the wallet's, was used (paid in a block): its branch owns `gap`
    /// past it and is derived the lookahead further. Says what that did.
    pub fn mark_used(&mut self, script: &[u8]) -> Result<Used, DescriptorError> {
        let Some(Origin::Derived {
            descriptor,
            branch,
            index,
        }) = self.origins.get(script).copied()
        else {
            return Ok(Used::default());
        };
        let gap = self.gap;
        let br = &mut self.tracked[descriptor].branches[branch];
        if br.used.is_some_and(|u| u >= index) || index >= br.owned(gap) {
            return Ok(Used::default());
        }
        br.used = Some(index);
        let owned = br.owned(gap);
        let uncovered = owned > br.covered;
        let before = self.scripts.len();
        self.derive_to(descriptor, branch, owned.saturating_add(self.lookahead))?;
        Ok(Used {
            derived: self.scripts[before..].to_vec(),
            uncovered,
        })
    }

    /// The scan starts again from the wallet's start, matching every script derived.
    pub fn cover_all(&mut self) {
        for t in &mut self.tracked {
            for b in &mut t.branches {
                b.covered = b.derived;
            }
        }
    }

    /// Whether `script` is watched (`Some`), and if so whether it is the wallet's (given,
    /// or within the gap) rather than only in the lookahead.
    pub fn owns(&self, script: &[u8]) -> Option<bool> {
        Some(match self.origins.get(script)? {
            Origin::Given | Origin::Silent { .. } => true,
            Origin::Derived {
                descriptor,
                branch,
                index,
            } => *index < self.tracked[*descriptor].branches[*branch].owned(self.gap),
        })
    }

    /// Where a watched script comes from, if it is watched.
    pub fn origin(&self, script: &[u8]) -> Option<Origin> {
        self.origins.get(script).copied()
    }

    /// Every script watched (the lookahead too), in the order added.
    pub fn scripts(&self) -> impl Iterator<Item = &[u8]> {
        self.scripts.iter().map(Vec::as_slice)
    }

    /// How many scripts are watched.
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Whether nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// The descriptors watched, in the order added.
    pub fn descriptors(&self) -> impl Iterator<Item = &Descriptor> {
        self.tracked.iter().map(|t| &t.descriptor)
    }

    /// The highest used index and the count derived on branch `b` of descriptor `d`.
    pub fn branch_state(&self, d: usize, b: usize) -> Option<(Option<u32>, u32)> {
        let br = self.tracked.get(d)?.branches.get(b)?;
        Some((br.used, br.derived))
    }

    /// The public key at `index` on branch `b` of descriptor `d` (see
    /// [`Descriptor::key_at`]): the one kept if derived already.
    pub fn key_at(&self, d: usize, b: usize, index: u32) -> Result<[u8; 33], DescriptorError> {
        let br = self
            .tracked
            .get(d)
            .and_then(|t| t.branches.get(b))
            .ok_or(DescriptorError::InvalidChild(index))?;
        match br.keys.get(index as usize) {
            Some(k) => Ok(*k),
            None => Descriptor::key_at(&br.key, index),
        }
    }

    /// How many indexes of branch `b` of descriptor `d` the scan covered from its start.
    pub fn covered(&self, d: usize, b: usize) -> Option<u32> {
        Some(self.tracked.get(d)?.branches.get(b)?.covered)
    }

    /// Restore branch `b` of descriptor `d` from a saved state: its highest used index
    /// ([`Self::branch_state`]) and how far the scan covered it ([`Self::covered`], at most
    /// what is derived).
    pub fn restore_branch(
        &mut self,
        d: usize,
        b: usize,
        used: Option<u32>,
        covered: u32,
    ) -> Result<(), DescriptorError> {
        let Some(br) = self.tracked.get_mut(d).and_then(|t| t.branches.get_mut(b)) else {
            return Ok(());
        };
        br.used = used;
        let count = br.owned(self.gap).saturating_add(self.lookahead);
        self.derive_to(d, b, count)?;
        let br = &mut self.tracked[d].branches[b];
        br.covered = covered.min(br.derived);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::Network;

    use super::*;

    const BIP84: &str = "wpkh(xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)";

    #[test]
    fn the_gap_limit_grows_with_use() {
        let mut w = Watchlist::new(DEFAULT_GAP, 10);
        let d = Descriptor::parse(BIP84, Network::Mainnet).unwrap();
        assert_eq!(w.add_descriptor(d.clone()), Ok(0));
        assert_eq!(w.len(), 60, "20 receive and 20 change, 10 ahead on each");
        assert_eq!(w.add_descriptor(d.clone()), Ok(0), "the same one again");
        assert_eq!(w.len(), 60);
        let receive = d.branch_key(0).unwrap();
        let at = |i| d.script_at(&receive, i).unwrap();
        assert_eq!(
            w.origin(&at(5)),
            Some(Origin::Derived {
                descriptor: 0,
                branch: 0,
                index: 5
            })
        );
        assert_eq!(w.owns(&at(19)), Some(true));
        assert_eq!(w.owns(&at(20)), Some(false), "in the lookahead");
        assert_eq!(w.owns(&at(30)), None);
        // A script in the lookahead used does nothing (the wallet only reports its own).
        assert_eq!(w.mark_used(&at(25)).unwrap(), Used::default());
        // Index 5 used: receive owns 26 (5 + 1 + 20) and derives to 36, six new of each.
        let used = w.mark_used(&at(5)).unwrap();
        assert_eq!(used.derived.len(), 6);
        assert_eq!(used.derived[5], at(35));
        assert!(
            (20..26).all(|i| w.owns(&at(i)) == Some(true)),
            "newly owned"
        );
        assert_eq!(w.owns(&at(26)), Some(false));
        assert!(!used.uncovered, "20..26 were ahead since the start");
        assert_eq!(w.branch_state(0, 0), Some((Some(5), 36)));
        // Used again, or an earlier one: nothing new.
        assert_eq!(w.mark_used(&at(5)).unwrap(), Used::default());
        assert_eq!(w.mark_used(&at(1)).unwrap(), Used::default());
        // Index 15: owns up to 35, and 30..36 were derived after the start.
        let used = w.mark_used(&at(15)).unwrap();
        assert!(
            (26..36).all(|i| w.owns(&at(i)) == Some(true)),
            "ten newly owned"
        );
        assert_eq!(w.owns(&at(36)), Some(false));
        assert!(used.uncovered);
        // The scan starting again covers them all.
        w.cover_all();
        assert_eq!(w.covered(0, 0), Some(46));
        assert!(!w.mark_used(&at(20)).unwrap().uncovered);
        // The change branch on its own.
        let change = d.branch_key(1).unwrap();
        let used = w.mark_used(&d.script_at(&change, 0).unwrap()).unwrap();
        assert_eq!(used.derived.len(), 1);
        assert_eq!(
            w.owns(&d.script_at(&change, 20).unwrap()),
            Some(true),
            "one newly owned"
        );
        assert_eq!(w.branch_state(0, 1), Some((Some(0), 31)));
        // A given script is watched once, is owned, and has no branch to grow.
        assert!(w.add_script(alloc::vec![0x51]));
        assert!(!w.add_script(alloc::vec![0x51]));
        assert_eq!(w.origin(&[0x51]), Some(Origin::Given));
        assert_eq!(w.owns(&[0x51]), Some(true));
        assert_eq!(w.mark_used(&[0x51]).unwrap(), Used::default());
    }
}
