//! Following a node's headers: every header validated with `lightwire-chain` against the
//! one validation state the nodes share before the served chain takes it, and the
//! `getheaders` that ask for more. Sans-IO, as [`super::peer`].

use std::collections::VecDeque;

use lightwire_chain::{BlockHash, ConnectError, Header, MAX_BATCH, Outcome};

use super::UpstreamError;
use super::peer::{Event, Gateway};
use crate::p2p;

/// Ask for headers after the served chain's locator, or first after `from` (the last
/// header of the node's previous batch, wherever it is).
pub(super) fn getheaders(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    gw: &Gateway<'_>,
    from: Option<BlockHash>,
) {
    let mut locator = match gw.chain.read() {
        Ok(c) => c.locator(),
        Err(_) => return,
    };
    if let Some(from) = from
        && locator.first() != Some(&from)
    {
        locator.insert(0, from);
    }
    p2p::encode(out, magic, "getheaders", |p| {
        p2p::write_getheaders(p, &locator, &BlockHash([0; 32]))
    });
}

/// Validate `headers` from a node and apply them to the served chain (the validation
/// state locked throughout, so that it and the served chain move together); a changed tip
/// is an [`Event::TipChanged`]. Returns what to ask the node next.
pub(super) fn take_headers(
    gw: &Gateway<'_>,
    headers: &[Header],
    events: &mut VecDeque<Event>,
) -> Result<Next, UpstreamError> {
    let mut chain = gw.followers.validation();
    let now = gw.unix_time;
    for piece in headers.chunks(MAX_BATCH) {
        let mut outcome = match chain.connect(piece, now) {
            Ok(o) => o,
            // A header from more than two hours ahead of our clock is not yet, not invalid
            // (Bitcoin Core's `BLOCK_TIME_FUTURE`, which it does not punish): this batch
            // waits, and the node is asked again after the idle time.
            Err(ConnectError::Invalid(e)) if e.rule.is_not_yet() => {
                tracing::info!(height = e.height, "upstream header not yet: {e}");
                return Ok(Next::Wait);
            }
            Err(e) => return Err(UpstreamError::Invalid(e)),
        };
        if let Outcome::NeedAncestors { parent } = outcome {
            // Below the validation window: rebuild the ancestors from the served chain.
            let ancestors = gw.chain.read().ok().and_then(|c| {
                let fork = c.height_of(&parent)?;
                c.entries(fork.saturating_sub(MAX_BATCH as u32 - 1), fork)
            });
            let Some(ancestors) = ancestors else {
                return Ok(Next::FromServed);
            };
            outcome = chain
                .connect_branch(&ancestors, piece, now)
                .map_err(UpstreamError::Invalid)?;
        }
        let changed = match gw.chain.write() {
            Ok(mut c) => {
                let had = c.has_min_work();
                let changed = c.apply(&outcome, chain.staged());
                if !had && c.has_min_work() {
                    tracing::info!(
                        height = chain.tip().height,
                        "the chain from the node reached the network's minimum work: serving it"
                    );
                }
                changed
            }
            Err(_) => false,
        };
        if changed {
            if let Outcome::Reorg {
                fork_height,
                old_tip,
            } = outcome
            {
                tracing::info!(
                    "upstream reorg: fork at {fork_height}, old tip {} {}, new tip {} {}",
                    old_tip.height,
                    old_tip.hash,
                    chain.tip().height,
                    chain.tip().hash
                );
            }
            events.push_back(Event::TipChanged);
        }
    }
    Ok(Next::Continue)
}

/// What to ask a node for after its headers were taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Next {
    /// More after them if the batch was full.
    Continue,
    /// Headers again from the served chain (their parent was unknown: the node is on a
    /// branch we have not seen the start of).
    FromServed,
    /// Nothing now: a header is not yet valid by our clock; asked again after the idle
    /// time (asking at once would get the same answer, again and again).
    Wait,
}
