//! The lightwire gateway: serves a validated header chain to browsers over BOLT 8 carried
//! in WebSocket binary messages (docs/PROTOCOL.md).
//!
//! The protocol itself (the WebSocket codec, the handshake, the session that answers
//! requests, every deadline) is `lightwire-proto`'s sans-IO [`lightwire_proto::Responder`];
//! this crate is its tokio shell ([`server`]), the chains it serves ([`served`], validated
//! before they are served, from a file, generated, or followed from a node over P2P:
//! [`upstream`], which follows several nodes, and [`p2p`]), the compact block filters it
//! serves ([`filters`]), its history as bulk files for a static host ([`export`], kept up
//! to date as the chain grows by [`exporter`]), the node's fee estimates ([`fees`], over
//! its JSON-RPC), the mempool followed ([`mempool`], with its transactions' silent-payment
//! tweaks worked out through the node's RPC by [`mempool_tweaks`]) and what
//! client sessions wait for from the node ([`wants`]), the
//! frame buffer pools ([`pool`]), the connection caps and the
//! trusted proxies ([`admission`]), native TLS ([`tls`]), `/metrics` ([`metrics`]), the
//! key file ([`key`]), and a native client for tests and the load generator ([`client`], a
//! thin shell over [`lightwire_proto::Link`]).
//!
//! Programs built on this library may serve data of their own making at a height in place
//! of the validated or generated one (test gateways do, to check what clients refuse):
//! [`served::ServedChain::set_header`], [`filters::ServedFilters::set_filter`],
//! [`blocks::ServedBlocks::set_answer`] and, for the mempool followed,
//! [`mempool::ServedMempool::add`] and [`mempool::ServedMempool::remove`] called with
//! transactions and removals of their own. The gateway itself never calls them so.
//!
//! It logs through `tracing` and never installs a subscriber itself: the binaries built on
//! it do, with [`logging`] (`lightwire-gateway`, whose command line is `src/cli.rs`;
//! `lightwire-load`, in its own crate).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod blocks;
pub mod client;
pub mod export;
pub mod exporter;
pub mod fees;
pub mod filters;
pub mod key;
pub mod logging;
pub mod mempool;
pub mod mempool_tweaks;
pub mod metrics;
pub mod p2p;
pub mod pool;
pub mod relay;
pub mod served;
pub mod server;
pub mod spent_from;
pub mod tls;
pub mod tweaks;
pub mod upstream;
pub mod wake;
pub mod wants;
