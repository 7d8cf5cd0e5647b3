//! The engine asks the cross-check when its wait runs out at every `poll_timeout` (the
//! shell's timer, set after every input), and the cross-check asks its dispute whom it
//! waits on: during a dispute that answer allocates nothing. Its own test binary: counts
//! are process-wide.
#![cfg(not(target_arch = "wasm32"))]

use lightwire::dispute::{Defence, Dispute, Outcome};
use lightwire::ids::{GatewayId, Ids, TaskId};
use lightwire_alloc::{CountingAllocator, snapshot};
use lightwire_chain::BlockHash;
use lightwire_primitives::FilterHeader;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

#[test]
fn whom_a_dispute_waits_on_is_told_without_allocating() {
    let against = GatewayId(1);
    let mut d = Dispute::new(
        against,
        2_000,
        FilterHeader([1; 32]),
        0,
        Ids::new(TaskId::Check),
    );
    assert_eq!(d.need_read(Some(2_000)), Some((2_000, 2_000)));
    let ours = [FilterHeader([3; 32])];
    assert_eq!(
        d.on_read(2_000, &[BlockHash([2; 32])], &ours),
        Outcome::Going
    );
    let asked = d.next_ask(Defence::By(GatewayId(0))).expect("going");
    assert_eq!(asked.map(|(g, _)| g), Some(against), "its checkpoints");
    // The fewest of three rounds: the test harness's own thread may allocate meanwhile.
    let fewest = (0..3)
        .map(|_| {
            let before = snapshot();
            let mut waited_on = 0;
            for _ in 0..1_000 {
                for g in d.asked_gateways() {
                    waited_on += usize::from(g == against);
                }
            }
            assert_eq!(waited_on, 1_000);
            snapshot().since(&before).allocations
        })
        .min();
    assert_eq!(fewest, Some(0));
}
