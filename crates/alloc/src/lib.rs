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
//! [`snapshot`] counts process-wide (every thread), so a test that asserts on it must not
//! run other allocating work at the same time: put it in its own test binary, or
//! serialise. [`thread_snapshot`] counts the calling thread alone, for code measured on
//! one thread (a test harness's main thread allocates while a test runs).
//! Counting costs two relaxed atomic adds and a thread-local update per call; wasm32
//! without threads lowers the atomics
//! to plain loads and stores.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod counting;

pub use counting::{CountingAllocator, Snapshot, snapshot, thread_snapshot};
