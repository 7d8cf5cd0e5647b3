//! The router: an event from a gateway's connection goes to the task it is for, an answer
//! to the task its request id names ([`crate::ids`]). A new capability is a task, an
//! arm here for its answers, and a variant of [`TaskId`].

use lightwire_proto::PeerEvent;

use super::ctx::Ctx;
use super::event::Event;
use super::gateway::GatewayState;
use super::{check, filter_headers, headers, relay, scan, wallet};
use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, TaskId, is_task};
use crate::reason::DropReason;

/// The engine's parts but the connections: an event borrowed from a connection's buffer
/// is handled through these.
pub struct Parts<'a> {
    pub ctx: &'a mut Ctx,
    pub headers: &'a mut headers::Headers,
    pub filter_headers: &'a mut filter_headers::FilterHeaders,
    pub check: &'a mut check::Check,
    pub scan: &'a mut scan::ScanTask,
    pub wallet: &'a mut wallet::WalletTask,
    pub relay: &'a mut relay::Relay,
}

/// One event from gateway `g`'s connection, handed to the task it is for (an answer to
/// the task its request id names); an error drops the gateway.
pub fn route(p: Parts<'_>, g: GatewayId, event: PeerEvent<'_>) -> Result<(), DropReason> {
    let base = p.headers.syncer.base_height();
    match event {
        PeerEvent::Ready => {
            p.ctx.gateways[g].ready = true;
            p.ctx.set_state(g, GatewayState::Syncing, None);
            Ok(())
        }
        PeerEvent::Tip {
            height,
            header,
            chainwork,
        } => {
            // A tip (again) may mean the gateway's filter headers caught up, or its chain
            // moved: whatever waited for it is asked again.
            p.filter_headers.sync.unblock();
            p.ctx.gateways[g].trust.unlag();
            if let Some(scan) = p.scan.scan.as_mut() {
                scan.unblock();
            }
            p.headers.on_tip(p.ctx, g, height, header, chainwork);
            Ok(())
        }
        PeerEvent::Headers {
            id,
            headers,
            hashes,
            last,
            ..
        } => p.headers.on_headers(p.ctx, g, id, headers, hashes, last),
        PeerEvent::Warning(text) => {
            let text = text.map(str::to_string);
            p.ctx.events.push_back(Event::Warning { gateway: g, text });
            Ok(())
        }
        PeerEvent::Pong => Ok(()),
        PeerEvent::FilterHeaders {
            id,
            first_height,
            flags,
            before,
            headers,
            ..
        } => {
            let answer = FilterAnswer {
                id,
                first_height,
                flags,
                before,
                headers,
            };
            if is_task(id, TaskId::Check) {
                return p.check.on_headers(p.ctx, g, answer);
            }
            // Validated filter headers join the commit the headers task gathers.
            if let Some(t) = p.filter_headers.on_answer(p.ctx, g, answer)? {
                p.headers.syncer.push_filters(t.first, t.headers);
            }
            Ok(())
        }
        PeerEvent::FilterCheckpoints(m) => p.check.on_checkpoints(p.ctx, g, &m),
        PeerEvent::Filters(m) if is_task(m.id, TaskId::Check) => p.check.on_filters(p.ctx, g, &m),
        PeerEvent::Filters(m) => p.scan.on_filters(p.ctx, g, &m),
        PeerEvent::Block(b) if is_task(b.id, TaskId::Wallet) => {
            p.wallet.on_block(p.ctx, p.scan, g, &b, base)
        }
        PeerEvent::Block(b) => p.check.on_block(p.ctx, g, &b),
        PeerEvent::TxResult(r) => p.relay.on_result(p.ctx, g, &r),
    }
}

/// A gateway whose request timed out.
pub fn timeout(g: GatewayId) -> (GatewayId, DropReason) {
    (g, DropReason::RequestTimeout)
}
