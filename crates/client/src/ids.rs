//! Ids: which gateway ([`GatewayId`]), and which task a request belongs to, written once. A gateway echoes the id of
//! the request it answers; the engine routes the answer to the task named by the id's top
//! four bits, and the task checks that the id is one it has in flight to that gateway (a
//! gateway answering another task's request, or one never asked, breaks a rule).
//!
//! The bits are ours alone: a gateway sees opaque 32-bit ids, so the layout can change
//! without a protocol change.

use core::fmt;

/// A gateway: its place in the list the application gave.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatewayId(pub usize);

impl GatewayId {
    /// Its index in the gateway list.
    pub const fn index(self) -> usize {
        self.0
    }

    /// Its bit in a set of gateways held in a `u64` (as the wallet keeps who holds an
    /// unconfirmed transaction); none for the 65th gateway on (they are not counted).
    pub const fn bit(self) -> u64 {
        if self.0 < 64 { 1 << self.0 } else { 0 }
    }
}

impl fmt::Debug for GatewayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gateway {}", self.0)
    }
}

impl fmt::Display for GatewayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A request given up, by the gateway it went to: the rest of its answer is let through.
pub type GivenUp = (GatewayId, u32);

/// The bits below the task's, for a task's own counter.
const SEQ_BITS: u32 = 28;
const SEQ_MASK: u32 = (1 << SEQ_BITS) - 1;

/// The engine's tasks that send requests.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum TaskId {
    /// Headers (`get_headers`).
    Headers,
    /// Transactions to relay (`tx`).
    Relay,
    /// The filter cross-check: probes and disputes (filter headers, checkpoints, filters,
    /// blocks).
    Check,
    /// The wallet's matched blocks.
    Wallet,
    /// The filter-header chain.
    FilterHeaders,
    /// The scan's filters.
    Scan,
    /// Transactions the mempool digest matched.
    Mempool,
    /// Fee rates (`get_fee_rates`).
    Fees,
    /// The silent-payment scan: tweak headers and lists, the filters and blocks they
    /// match, a tweak dispute's evidence.
    Silent,
}

impl TaskId {
    /// Every task, in the order of their bits.
    pub const ALL: [TaskId; 9] = [
        TaskId::Headers,
        TaskId::Relay,
        TaskId::Check,
        TaskId::Wallet,
        TaskId::FilterHeaders,
        TaskId::Scan,
        TaskId::Mempool,
        TaskId::Fees,
        TaskId::Silent,
    ];

    /// The id's top four bits for this task (all four set is no task's: an answer with
    /// such an id answers nothing asked).
    const fn bits(self) -> u32 {
        match self {
            TaskId::Headers => 0b000,
            TaskId::Relay => 0b001,
            TaskId::Check => 0b010,
            TaskId::Wallet => 0b011,
            TaskId::FilterHeaders => 0b100,
            TaskId::Scan => 0b110,
            TaskId::Mempool => 0b101,
            TaskId::Fees => 0b111,
            TaskId::Silent => 0b1000,
        }
    }

    /// Its place in [`Self::ALL`] (for tables indexed by task).
    pub const fn index(self) -> usize {
        match self {
            TaskId::Headers => 0,
            TaskId::Relay => 1,
            TaskId::Check => 2,
            TaskId::Wallet => 3,
            TaskId::FilterHeaders => 4,
            TaskId::Scan => 5,
            TaskId::Mempool => 6,
            TaskId::Fees => 7,
            TaskId::Silent => 8,
        }
    }
}

/// A request's id: a task and a counter of that task's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(u32);

impl RequestId {
    /// The id of `task`'s request number `seq` (counted modulo 2^28).
    pub const fn new(task: TaskId, seq: u32) -> RequestId {
        RequestId(task.bits() << SEQ_BITS | (seq & SEQ_MASK))
    }

    /// An id as it came on the wire.
    pub const fn from_wire(id: u32) -> RequestId {
        RequestId(id)
    }

    /// The id as it goes on the wire.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The task whose request this is, if the id names one.
    pub fn task(self) -> Option<TaskId> {
        let bits = self.0 >> SEQ_BITS;
        TaskId::ALL.into_iter().find(|t| t.bits() == bits)
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.task() {
            Some(t) => write!(f, "{t:?}#{}", self.0 & SEQ_MASK),
            None => write!(f, "{:#010x}", self.0),
        }
    }
}

/// Whether wire id `id` is a request of `task`'s.
pub fn is_task(id: u32, task: TaskId) -> bool {
    RequestId::from_wire(id).task() == Some(task)
}

/// A task's request ids, one after another.
#[derive(Clone, Debug)]
pub struct Ids {
    task: TaskId,
    seq: u32,
}

impl Ids {
    /// `task`'s ids, from its first.
    pub const fn new(task: TaskId) -> Ids {
        Ids { task, seq: 0 }
    }

    /// `task`'s ids, from number `seq` on (a dispute starts its own range, so that a late
    /// answer to an earlier dispute is not taken for this one's).
    pub const fn starting_at(task: TaskId, seq: u32) -> Ids {
        Ids { task, seq }
    }

    /// The next id, as it goes on the wire.
    pub fn next_id(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        RequestId::new(self.task, self.seq).get()
    }

    /// The counter (to start another range after it).
    pub fn seq(&self) -> u32 {
        self.seq
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn every_task_reads_back_from_its_ids_and_no_other() {
        for task in TaskId::ALL {
            let mut ids = Ids::new(task);
            for _ in 0..3 {
                let id = ids.next_id();
                assert_eq!(RequestId::from_wire(id).task(), Some(task), "{id:#x}");
                for other in TaskId::ALL.into_iter().filter(|&o| o != task) {
                    assert!(!is_task(id, other));
                }
            }
            // The counter wraps inside the task's bits.
            let mut ids = Ids::starting_at(task, u32::MAX - 1);
            for _ in 0..4 {
                assert_eq!(RequestId::from_wire(ids.next_id()).task(), Some(task));
            }
            assert_eq!(TaskId::ALL[task.index()], task);
        }
        // Ids no task sends: a gateway answering with one answers nothing we asked.
        assert_eq!(RequestId::from_wire(u32::MAX).task(), None);
    }
}
