//! The router: an event from a gateway's connection goes to the task it is for, an answer
//! to the task its request id names ([`crate::ids`]). A new capability is a task, an
//! arm here for its answers, and a variant of [`TaskId`].

use lightwire_proto::PeerEvent;

use super::ctx::Ctx;
use super::event::Event;
use super::gateway::GatewayState;
use super::task::Tasks;
use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, TaskId, is_task};
use crate::reason::DropReason;

/// One event from gateway `g`'s connection, handed to the task it is for (an answer to
/// the task its request id names); an error drops the gateway.
pub fn route(
    ctx: &mut Ctx,
    t: &mut Tasks,
    g: GatewayId,
    event: PeerEvent<'_>,
) -> Result<(), DropReason> {
    let base = t.headers.syncer.base_height();
    match event {
        PeerEvent::Ready => {
            ctx.gateways[g].ready = true;
            // How long the session lasts from here decides its next backoff.
            ctx.gateways[g].ready_at = Some(ctx.now);
            ctx.set_state(g, GatewayState::Syncing, None);
            Ok(())
        }
        PeerEvent::Tip {
            height,
            header,
            chainwork,
        } => {
            // A tip (again) may mean the gateway's filter headers caught up, or its chain
            // moved: whatever waited for it is asked again.
            t.filter_headers.sync.unblock();
            ctx.gateways[g].trust.unlag();
            if let Some(scan) = t.scan.scan.as_mut() {
                scan.unblock();
            }
            t.silent.unblock();
            t.headers.on_tip(ctx, g, height, header, chainwork);
            Ok(())
        }
        PeerEvent::Headers {
            id,
            headers,
            hashes,
            last,
            ..
        } => t.headers.on_headers(ctx, g, id, headers, hashes, last),
        PeerEvent::Warning(text) => {
            let text = text.map(str::to_string);
            ctx.events.push_back(Event::Warning { gateway: g, text });
            Ok(())
        }
        PeerEvent::Pong => Ok(()),
        e @ PeerEvent::FilterHeaders { .. } => {
            let Some(answer) = FilterAnswer::of(e) else {
                return Ok(());
            };
            let id = answer.id;
            if is_task(id, TaskId::Check) {
                return t.check.on_headers(ctx, g, answer);
            }
            // Validated filter headers join the commit the headers task gathers.
            if let Some(taken) = t.filter_headers.on_answer(ctx, g, answer)? {
                t.headers.syncer.push_filters(taken.first, taken.headers);
            }
            Ok(())
        }
        PeerEvent::FilterCheckpoints(m) if is_task(m.id, TaskId::Check) => {
            t.check.on_checkpoints(ctx, g, &m)
        }
        // The filter-header task's, for mirrors' files.
        PeerEvent::FilterCheckpoints(m) => t.filter_headers.bulk.on_checkpoints(ctx, g, &m),
        PeerEvent::Filters(m) if is_task(m.id, TaskId::Check) => t.check.on_filters(ctx, g, &m),
        PeerEvent::Filters(m) if is_task(m.id, TaskId::Silent) => t.silent.on_filters(ctx, g, &m),
        PeerEvent::Filters(m) => t.scan.on_filters(ctx, g, &m),
        PeerEvent::Block(b) if is_task(b.id, TaskId::Wallet) => {
            let best = &t.headers.syncer;
            t.wallet.on_block(ctx, &mut t.scan, g, &b, (base, best))
        }
        PeerEvent::Block(b) if is_task(b.id, TaskId::Silent) => t.silent.on_block(ctx, g, &b),
        PeerEvent::Block(b) => t.check.on_block(ctx, g, &b),
        PeerEvent::TxResult(r) => t.relay.on_result(ctx, g, &r),
        PeerEvent::MempoolDigest(d) => {
            let silent = t.silent.scan.as_deref_mut();
            t.mempool.on_digest(ctx, g, &d, &mut t.wallet, silent)
        }
        PeerEvent::MempoolTx(m) => {
            let silent = t.silent.scan.as_deref_mut();
            t.mempool.on_tx(ctx, g, &m, &mut t.wallet, silent)
        }
        PeerEvent::FeeRates(m) => t.fees.on_rates(ctx, g, &m),
        e @ PeerEvent::TweakHeaders { .. } => match FilterAnswer::of_tweaks(e) {
            Some(answer) => t.silent.on_span(ctx, g, &answer),
            None => Ok(()),
        },
        PeerEvent::Tweaks(m) => t.silent.on_tweaks(ctx, g, &m),
        PeerEvent::SpentFrom(p) => t.silent.on_spent_from(ctx, g, &p),
        // The engine asks no gateway for tweak checkpoints: any is an answer to a request
        // never made.
        PeerEvent::TweakCheckpoints(lightwire_wire::FilterCheckpoints { id, .. }) => {
            Err(DropReason::Sync(crate::sync::SyncError::UnexpectedAnswer {
                id,
            }))
        }
    }
}
