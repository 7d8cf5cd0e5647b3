//! The allocator wrapper and its counters.
//!
//! `GlobalAlloc` is an unsafe trait, so this module cannot be under the crate's
//! `forbid(unsafe_code)`; it is the only place in lightwire that needs `unsafe`, and it
//! only forwards each call unchanged to the wrapped allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static DEALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES_ALLOCATED: AtomicU64 = AtomicU64::new(0);
static BYTES_FREED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The calling thread's own counters (see [`thread_snapshot`]): const-initialised
    /// cells without destructors, so touching them never allocates.
    static THREAD: Cell<Snapshot> = const {
        Cell::new(Snapshot {
            allocations: 0,
            deallocations: 0,
            bytes_allocated: 0,
            bytes_freed: 0,
        })
    };
}

/// Add to the calling thread's counters (none while its thread-locals are torn down).
fn record_thread(f: impl FnOnce(&mut Snapshot)) {
    let _ = THREAD.try_with(|t| {
        let mut s = t.get();
        f(&mut s);
        t.set(s);
    });
}

/// A global allocator that counts every allocation, then forwards to `A`.
///
/// A `realloc` counts as one allocation of the new size and one free of the old size,
/// so `live_bytes` stays exact and a growing buffer shows up as the allocations it costs.
#[derive(Debug, Default)]
pub struct CountingAllocator<A = System> {
    inner: A,
}

impl CountingAllocator<System> {
    /// Counting over the platform allocator (dlmalloc in wasm32-unknown-unknown).
    pub const fn system() -> Self {
        CountingAllocator { inner: System }
    }
}

impl<A> CountingAllocator<A> {
    /// Counting over any other allocator.
    pub const fn new(inner: A) -> Self {
        CountingAllocator { inner }
    }
}

fn record_alloc(size: usize) {
    ALLOCATIONS.fetch_add(1, Relaxed);
    BYTES_ALLOCATED.fetch_add(size as u64, Relaxed);
    record_thread(|t| {
        t.allocations += 1;
        t.bytes_allocated += size as u64;
    });
}

fn record_free(size: usize) {
    DEALLOCATIONS.fetch_add(1, Relaxed);
    BYTES_FREED.fetch_add(size as u64, Relaxed);
    record_thread(|t| {
        t.deallocations += 1;
        t.bytes_freed += size as u64;
    });
}

// SAFETY: every method forwards its arguments unchanged to `inner`, which upholds the
// `GlobalAlloc` contract; the counters are plain atomics and never allocate.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same layout as we were given; the caller upholds alloc's contract.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            record_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            record_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `inner` for `layout`, per the caller's contract.
        unsafe { self.inner.dealloc(ptr, layout) };
        record_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: arguments forwarded unchanged; the caller upholds realloc's contract.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            record_free(layout.size());
            record_alloc(new_size);
        }
        p
    }
}

/// Counters at one instant. Subtract two with [`Snapshot::since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Allocations made (reallocations included).
    pub allocations: u64,
    /// Frees made (reallocations included).
    pub deallocations: u64,
    /// Bytes requested by all allocations.
    pub bytes_allocated: u64,
    /// Bytes returned by all frees.
    pub bytes_freed: u64,
}

impl Snapshot {
    /// Bytes allocated and not yet freed.
    pub fn live_bytes(&self) -> u64 {
        self.bytes_allocated.saturating_sub(self.bytes_freed)
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            allocations: self.allocations.wrapping_sub(earlier.allocations),
            deallocations: self.deallocations.wrapping_sub(earlier.deallocations),
            bytes_allocated: self.bytes_allocated.wrapping_sub(earlier.bytes_allocated),
            bytes_freed: self.bytes_freed.wrapping_sub(earlier.bytes_freed),
        }
    }
}

/// The calling thread's counters now: what it allocated and freed itself, whatever other
/// threads do meanwhile (a test harness's own bookkeeping on its main thread, say). All
/// zero unless a [`CountingAllocator`] is the global allocator.
///
/// ```
/// #[global_allocator]
/// static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();
///
/// let (ours, all) = (lightwire_alloc::thread_snapshot(), lightwire_alloc::snapshot());
/// // Spawning allocates here (the thread's handle); the vector there.
/// std::thread::spawn(|| drop(vec![0u8; 100_000])).join().unwrap();
/// assert!(lightwire_alloc::thread_snapshot().since(&ours).bytes_allocated < 100_000);
/// assert!(lightwire_alloc::snapshot().since(&all).bytes_allocated >= 100_000);
/// ```
pub fn thread_snapshot() -> Snapshot {
    THREAD.try_with(Cell::get).unwrap_or_default()
}

/// The counters now, every thread's. All zero unless a [`CountingAllocator`] is the
/// global allocator.
pub fn snapshot() -> Snapshot {
    Snapshot {
        allocations: ALLOCATIONS.load(Relaxed),
        deallocations: DEALLOCATIONS.load(Relaxed),
        bytes_allocated: BYTES_ALLOCATED.load(Relaxed),
        bytes_freed: BYTES_FREED.load(Relaxed),
    }
}
