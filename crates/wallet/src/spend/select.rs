//! Coin selection: which coins pay for a spend. Bitcoin Core's branch and bound first
//! (`SelectCoinsBnB`, after Murch's "An Evaluation of Coin Selection Strategies"): a set
//! whose effective value (each coin's value less the fee to spend it at the asked rate)
//! lands within the cost of a change output above the target, so that no change is made,
//! the one of least waste; failing that, largest first: coins in descending effective
//! value until the target, a change output and change above the dust threshold are
//! paid. Largest first is deterministic and spends the fewest inputs; Core would also try
//! its knapsack and single random draw and keep the least waste, which this does not.
//!
//! Amounts here are in 1/4,000 satoshi (a fee rate in sat/kvB times a weight in weight
//! units), in `i128`, so that fees of parts add up exactly and no total overflows.

use alloc::vec::Vec;

/// Depth-first steps branch and bound takes at most (Core's `TOTAL_TRIES`).
pub const TOTAL_TRIES: u32 = 100_000;

/// A coin as selection sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its value less the fee to spend it at the asked rate (1/4,000 sat).
    pub effective: i128,
    /// The waste of spending it now rather than at the long-term rate: (rate - long-term
    /// rate) times its weight (1/4,000 sat; negative when fees are low).
    pub waste: i128,
}

/// What selection is asked for (1/4,000 sat).
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The outputs' value and the fee of everything but the inputs.
    pub amount: i128,
    /// What a change output costs: its own fee now and the fee to spend it later. A set
    /// that overshoots by less is taken without change (the excess goes to the fee).
    pub cost_of_change: i128,
    /// The least the set must cover to make change: the amount, the change output's fee
    /// and the smallest change that is not dust.
    pub with_change: i128,
}

/// Branch and bound over `coins` (each with a positive effective value, largest first):
/// the indexes (into `coins`) of the set of least waste whose effective value is within
/// `[amount, amount + cost_of_change]`, if one is found within [`TOTAL_TRIES`].
pub fn branch_and_bound(coins: &[Candidate], target: &Target) -> Option<Vec<usize>> {
    // What the coins from each position on add up to, for pruning.
    let mut rest = alloc::vec![0i128; coins.len() + 1];
    for i in (0..coins.len()).rev() {
        rest[i] = rest[i + 1] + coins[i].effective;
    }
    let upper = target.amount + target.cost_of_change;
    // With fees above the long-term rate, every input adds waste: a branch already
    // wasting more than the best set found cannot do better.
    let waste_grows = coins.first().is_some_and(|c| c.waste > 0);
    let mut stack: Vec<usize> = Vec::new();
    let (mut value, mut waste) = (0i128, 0i128);
    let mut best: Option<(i128, Vec<usize>)> = None;
    let mut i = 0;
    for _ in 0..TOTAL_TRIES {
        // Too little left to reach the target, too much already, or (with fees above
        // the long-term rate) more waste than the best set found.
        let hopeless = value + rest[i] < target.amount
            || value > upper
            || (waste_grows && best.as_ref().is_some_and(|(w, _)| waste > *w));
        let back = if hopeless {
            true
        } else if value >= target.amount {
            let total = waste + (value - target.amount);
            if best.as_ref().is_none_or(|(w, _)| total <= *w) {
                best = Some((total, stack.clone()));
            }
            true
        } else {
            false
        };
        if back {
            // Leave out the last coin taken, and every one after it of the same value
            // (taking one of those instead gives a set already tried).
            let Some(last) = stack.pop() else {
                break;
            };
            let c = coins[last];
            value -= c.effective;
            waste -= c.waste;
            i = last + 1;
            while i < coins.len() && coins[i] == c {
                i += 1;
            }
        } else {
            let c = coins[i];
            stack.push(i);
            value += c.effective;
            waste += c.waste;
            i += 1;
        }
    }
    best.map(|(_, picked)| picked)
}

/// Largest first over `coins` (largest first already): until `with_change` is covered
/// (then with change), or, failing that, every coin when they cover `amount` (without
/// change: what is left is below a change output's worth and goes to the fee). The
/// indexes into `coins`, or `None` when even every coin falls short of `amount`.
pub fn largest_first(coins: &[Candidate], target: &Target) -> Option<Vec<usize>> {
    let mut value = 0i128;
    for (n, c) in coins.iter().enumerate() {
        value += c.effective;
        if value >= target.with_change {
            return Some((0..=n).collect());
        }
    }
    (value >= target.amount).then(|| (0..coins.len()).collect())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// Candidates of `values`, largest first (as selection takes them).
    fn coins(values: &[i128]) -> Vec<Candidate> {
        let mut values = values.to_vec();
        values.sort_by(|a, b| b.cmp(a));
        values
            .iter()
            .map(|&v| Candidate {
                effective: v,
                waste: 1,
            })
            .collect()
    }

    fn sum(c: &[Candidate], picked: &[usize]) -> i128 {
        picked.iter().map(|&i| c[i].effective).sum()
    }

    #[test]
    fn branch_and_bound_finds_an_exact_set_and_prefers_fewer_inputs() {
        let c = coins(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let t = Target {
            amount: 17,
            cost_of_change: 0,
            with_change: 30,
        };
        let picked = branch_and_bound(&c, &t).expect("17 is a sum");
        assert_eq!(sum(&c, &picked), 17);
        assert_eq!(picked.len(), 2, "10 + 7, the least waste: {picked:?}");
        // Nothing within the window: none.
        let c = coins(&[10, 20, 40]);
        let t = Target {
            amount: 25,
            cost_of_change: 4,
            with_change: 40,
        };
        assert_eq!(branch_and_bound(&c, &t), None);
        let t = Target {
            cost_of_change: 5,
            ..t
        };
        let picked = branch_and_bound(&c, &t).expect("30 is within 25..=30");
        assert_eq!(sum(&c, &picked), 30);
    }

    #[test]
    fn branch_and_bound_ends_within_its_tries_on_a_pool_with_no_answer() {
        // 200 coins of even values and an odd target: no set fits, and the search is
        // cut off rather than running for ever.
        let c = coins(&(1..=200).map(|v| v * 2).collect::<Vec<_>>());
        let t = Target {
            amount: 1001,
            cost_of_change: 0,
            with_change: 2000,
        };
        assert_eq!(branch_and_bound(&c, &t), None);
    }

    #[test]
    fn largest_first_covers_change_or_spends_everything() {
        let c = coins(&[50, 20, 5]);
        let t = Target {
            amount: 30,
            cost_of_change: 3,
            with_change: 60,
        };
        let picked = largest_first(&c, &t).unwrap();
        assert_eq!(picked, [0, 1], "50 + 20 covers 60");
        let t = Target {
            with_change: 80,
            ..t
        };
        assert_eq!(
            largest_first(&c, &t).unwrap().len(),
            3,
            "all of them, no change"
        );
        let t = Target { amount: 76, ..t };
        assert_eq!(largest_first(&c, &t), None, "75 in all");
    }
}
