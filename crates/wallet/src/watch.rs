//! The scripts a wallet watches: given ones, and those derived from its descriptors with
//! a gap limit (BIP44's address gap): each branch is derived `gap` past its last used
//! index, and a use (a match found) derives further.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use bip32::XPub;

use crate::descriptor::{Descriptor, DescriptorError};

/// BIP44's default gap limit.
pub const DEFAULT_GAP: u32 = 20;

/// Where a watched script comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Origin {
    /// Given as a script or an address.
    Given,
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
    /// The highest index used.
    used: Option<u32>,
}

struct Tracked {
    descriptor: Descriptor,
    branches: Vec<Branch>,
}

/// What a wallet watches (see the module documentation).
pub struct Watchlist {
    gap: u32,
    tracked: Vec<Tracked>,
    /// Every script watched, in the order it was added.
    scripts: Vec<Vec<u8>>,
    origins: BTreeMap<Vec<u8>, Origin>,
}

impl Watchlist {
    /// An empty list deriving `gap` scripts past the last used on each branch.
    pub fn new(gap: u32) -> Watchlist {
        Watchlist {
            gap: gap.max(1),
            tracked: Vec::new(),
            scripts: Vec::new(),
            origins: BTreeMap::new(),
        }
    }

    /// Watch `script`; false if it was watched already.
    pub fn add_script(&mut self, script: Vec<u8>) -> bool {
        self.insert(script, Origin::Given)
    }

    fn insert(&mut self, script: Vec<u8>, origin: Origin) -> bool {
        if self.origins.contains_key(&script) {
            return false;
        }
        self.origins.insert(script.clone(), origin);
        self.scripts.push(script);
        true
    }

    /// Watch `descriptor`, deriving `gap` scripts on each branch; its index among the
    /// descriptors (the same one again is not added twice).
    pub fn add_descriptor(&mut self, descriptor: Descriptor) -> Result<usize, DescriptorError> {
        if let Some(i) = self.tracked.iter().position(|t| t.descriptor == descriptor) {
            return Ok(i);
        }
        let branches = (0..descriptor.branches.len())
            .map(|b| {
                Ok(Branch {
                    key: descriptor.branch_key(b)?,
                    derived: 0,
                    used: None,
                })
            })
            .collect::<Result<Vec<_>, DescriptorError>>()?;
        self.tracked.push(Tracked {
            descriptor,
            branches,
        });
        let d = self.tracked.len() - 1;
        for b in 0..self.tracked[d].branches.len() {
            self.derive_to(d, b, self.gap)?;
        }
        Ok(d)
    }

    /// Derive branch `b` of descriptor `d` up to `count` scripts; returns how many are new.
    fn derive_to(&mut self, d: usize, b: usize, count: u32) -> Result<u32, DescriptorError> {
        let mut added = 0;
        while self.tracked[d].branches[b].derived < count {
            let t = &self.tracked[d];
            let index = t.branches[b].derived;
            let script = t.descriptor.script_at(&t.branches[b].key, index)?;
            self.tracked[d].branches[b].derived += 1;
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

    /// `script` was used (paid or spent in a block): its branch is derived `gap` past it.
    /// Returns the scripts newly derived (watch them from the start of the scan).
    pub fn mark_used(&mut self, script: &[u8]) -> Result<Vec<Vec<u8>>, DescriptorError> {
        let Some(Origin::Derived {
            descriptor,
            branch,
            index,
        }) = self.origins.get(script).copied()
        else {
            return Ok(Vec::new());
        };
        let br = &mut self.tracked[descriptor].branches[branch];
        if br.used.is_some_and(|u| u >= index) {
            return Ok(Vec::new());
        }
        br.used = Some(index);
        let before = self.scripts.len();
        self.derive_to(
            descriptor,
            branch,
            index.saturating_add(1).saturating_add(self.gap),
        )?;
        Ok(self.scripts[before..].to_vec())
    }

    /// Where a watched script comes from, if it is watched.
    pub fn origin(&self, script: &[u8]) -> Option<Origin> {
        self.origins.get(script).copied()
    }

    /// Every script watched, in the order added.
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
        let mut w = Watchlist::new(DEFAULT_GAP);
        let d = Descriptor::parse(BIP84, Network::Mainnet).unwrap();
        assert_eq!(w.add_descriptor(d.clone()), Ok(0));
        assert_eq!(w.len(), 40, "20 receive and 20 change");
        assert_eq!(w.add_descriptor(d.clone()), Ok(0), "the same one again");
        assert_eq!(w.len(), 40);
        let receive = d.branch_key(0).unwrap();
        let fifth = d.script_at(&receive, 5).unwrap();
        assert_eq!(
            w.origin(&fifth),
            Some(Origin::Derived {
                descriptor: 0,
                branch: 0,
                index: 5
            })
        );
        // Index 5 used: receive goes to 26 (5 + 1 + 20), six new.
        let new = w.mark_used(&fifth).unwrap();
        assert_eq!(new.len(), 6);
        assert_eq!(new[5], d.script_at(&receive, 25).unwrap());
        assert_eq!(w.branch_state(0, 0), Some((Some(5), 26)));
        // Used again, or an earlier one: nothing new.
        assert!(w.mark_used(&fifth).unwrap().is_empty());
        assert!(
            w.mark_used(&d.script_at(&receive, 1).unwrap())
                .unwrap()
                .is_empty()
        );
        // The change branch on its own.
        let change = d.branch_key(1).unwrap();
        assert_eq!(
            w.mark_used(&d.script_at(&change, 0).unwrap())
                .unwrap()
                .len(),
            1
        );
        assert_eq!(w.branch_state(0, 1), Some((Some(0), 21)));
        // A given script is watched once, and has no branch to grow.
        assert!(w.add_script(alloc::vec![0x51]));
        assert!(!w.add_script(alloc::vec![0x51]));
        assert_eq!(w.origin(&[0x51]), Some(Origin::Given));
        assert!(w.mark_used(&[0x51]).unwrap().is_empty());
        assert_eq!(w.len(), 48);
    }
}
