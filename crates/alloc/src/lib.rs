//! A counting global allocator, for allocation accounting natively and in wasm.
//!
//! The crate only provides the type; a binary or test opts in by installing it, normally
//! behind its own `count-alloc` cargo feature so that production builds pay nothing:
//!
//! ```
//! use lightwire_alloc::CountingAllocator;
//!
//! #[global_allocator]
//! static ALLOC: CountingAllocator = CountingAllocator::system();
//!
//! let before = lightwire_alloc::snapshot();
//! let v = vec![0u8; 100];
//! let delta = lightwire_alloc::snapshot().since(&before);
//! assert_eq!(delta.allocations, 1);
//! assert_eq!(delta.bytes_allocated, 100);
//! drop(v);
//! ```
//!
//! Counts are process-wide (every thread), so a test that asserts on them must not run
//! other allocating work at the same time: put it in its own test binary, or serialise.
//! Counting costs three relaxed atomic adds per call; wasm32 without threads lowers them
//! to plain loads and stores.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod counting;

pub use counting::{CountingAllocator, Snapshot, snapshot};
