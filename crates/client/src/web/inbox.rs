//! Everything that reaches the sync loop from JavaScript — socket events, timers, calls
//! from the application — goes through one queue, in arrival order. The queue's buffer is
//! reused, so a WebSocket message costs no allocation in wasm (its bytes stay in the
//! JavaScript `ArrayBuffer` until the loop copies them into the peer's buffer).

use crate::ids::GatewayId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use js_sys::{ArrayBuffer, Function};
use wasm_bindgen::JsValue;

use crate::reason::TransportError;

/// A call from the application that needs the store, answered through a Promise.
pub struct Call {
    /// What is asked.
    pub query: Query,
    /// The name of the wallet it is for (`None`: the default one, or none at all).
    pub wallet: Option<String>,
    /// The Promise's resolve function.
    pub resolve: Function,
    /// The Promise's reject function.
    pub reject: Function,
}

impl Call {
    /// The client has stopped: `stop` resolves, anything else rejects with `Stopped`.
    pub fn settle_stopped(self) {
        let _ = match self.query {
            Query::Stop => self.resolve.call0(&JsValue::NULL),
            _ => self.reject.call1(
                &JsValue::NULL,
                &super::js::error("Stopped", "the client has stopped"),
            ),
        };
    }
}

/// What a [`Call`] asks.
pub enum Query {
    /// The header at a height.
    HeaderAt(u32),
    /// The header with a hash (display hex).
    HeaderByHash(String),
    /// Check a Merkle branch against a stored header.
    VerifyInclusion {
        /// The transaction id (display hex).
        txid: String,
        /// Sibling hashes, lowest level first (display hex).
        branch: Vec<String>,
        /// The transaction's position in the block.
        index: u32,
        /// The block (display hex).
        block_hash: String,
    },
    /// Stop syncing and close the store; resolves once done.
    Stop,
    /// The named wallets.
    Wallets,
    /// Remove the call's wallet; resolves once its records are gone.
    RemoveWallet,
    /// Start a rescan of these output scripts from this height; resolves once it has
    /// matched every block whose filter header is stored.
    Scan {
        /// The watched output scripts.
        scripts: Vec<Vec<u8>>,
        /// The first block to match.
        from: u32,
    },
    /// Watch scripts, addresses and descriptors from this height; resolves once the
    /// wallet has matched every stored block and applied what matched.
    Watch {
        /// What to watch.
        items: Vec<crate::wallet::Watched>,
        /// The first block.
        from: u32,
    },
    /// Receive silent payments with these keys from this height; resolves at once with
    /// the receiver's addresses.
    #[cfg(feature = "silent-payments")]
    WatchSilent {
        /// The keys, as given (the scan key among them).
        keys: crate::receiver::ReceiverKeys,
        /// The first block.
        from: u32,
        /// Keep the keys in the store (`persistScanKey`): the next session starts the
        /// receiver itself. Without it, keys kept earlier are deleted.
        persist: bool,
    },
    /// Stop watching these; resolves once what is left is synced again.
    Unwatch(Vec<crate::wallet::Watched>),
    /// Scan the wallet again, from this height (its start widened) or from its start;
    /// resolves once synced again.
    Rescan(Option<u32>),
    /// The wallet's transactions, coins or balance (answered from the engine).
    Wallet(WalletQuery),
    /// Send a signed transaction to every gateway that relays; resolves once they answered.
    Broadcast(Vec<u8>),
    /// A PSBT spending the wallet's coins (answered from the engine).
    CreatePsbt(crate::spend::PsbtAsk),
    /// A PSBT replacing an unconfirmed transaction of the wallet's at a higher fee rate
    /// (answered from the engine).
    BumpFee {
        /// The transaction to replace.
        txid: lightwire_primitives::Txid,
        /// The new rate.
        rate: lightwire_wallet::spend::FeeRate,
    },
    /// The gateways' fee rates; resolves once they answered.
    FeeRates,
    /// BIP329 label records to import into the wallet, a file's lines in order (read by
    /// the browser's JSON parser); resolves once the wallet is saved.
    ImportLabels(super::labels::Lines),
    /// One label record to set (`clear`: its label removed); resolves once the wallet is
    /// saved.
    SetLabel {
        /// The record, its fields as given.
        record: lightwire_wallet::labels::LabelRecord,
        /// `label: null` was given: the label is removed.
        clear: bool,
    },
}

/// What [`Query::Wallet`] asks.
#[derive(Clone, Copy)]
pub enum WalletQuery {
    /// Every transaction found, oldest first.
    Transactions,
    /// The unspent coins.
    Utxos,
    /// The balance, counting coins with at least this many confirmations as confirmed.
    Balance(u32),
    /// The labels, as BIP329 JSON Lines.
    Labels,
}

/// One input to the loop. `epoch` tells a socket's events from those of the socket that
/// replaced it.
pub enum Input {
    /// Gateway `g`'s socket opened.
    Opened { g: GatewayId, epoch: u32 },
    /// A binary message from gateway `g`.
    Message {
        g: GatewayId,
        epoch: u32,
        data: ArrayBuffer,
    },
    /// Gateway `g`'s socket closed or failed.
    Closed {
        g: GatewayId,
        epoch: u32,
        why: TransportError,
    },
    /// Mirror `m`'s manifest, parsed (or why not).
    Manifest {
        m: crate::engine::MirrorId,
        result: Result<crate::engine::Manifest, crate::engine::FetchError>,
    },
    /// A piece of the body of the engine's fetch `fetch`.
    MirrorData {
        fetch: u32,
        data: js_sys::Uint8Array,
    },
    /// The body of fetch `fetch` ended (or the fetch failed).
    MirrorEnd {
        fetch: u32,
        result: Result<(), crate::engine::FetchError>,
    },
    /// The bytes of mirror `m`'s file `name` do not hash to its manifest's SHA-256.
    MirrorWrongHash {
        m: crate::engine::MirrorId,
        name: String,
    },
    /// The timer armed for the engine's next deadline ran out.
    Timeout,
    /// The scan pool's answer to a silent-payment filter check.
    #[cfg(feature = "silent-payments")]
    Scanned { tag: u32, height: u32, code: u8 },
    /// A call from the application.
    Call(Call),
}

/// The queue, shared by the loop and the JavaScript callbacks.
#[derive(Default)]
pub struct Inbox {
    queue: RefCell<VecDeque<Input>>,
    waker: Cell<Option<Waker>>,
    /// The loop has ended: calls are settled at once, other inputs dropped.
    closed: Cell<bool>,
}

impl Inbox {
    /// Queue an input and wake the loop.
    pub fn push(&self, input: Input) {
        if self.closed.get() {
            if let Input::Call(call) = input {
                call.settle_stopped();
            }
            return;
        }
        self.queue.borrow_mut().push_back(input);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// The loop ended: settle the calls still queued, and every later one.
    pub fn close(&self) {
        self.closed.set(true);
        let queued: Vec<Input> = self.queue.borrow_mut().drain(..).collect();
        for input in queued {
            if let Input::Call(call) = input {
                call.settle_stopped();
            }
        }
    }

    /// The next input, waiting for one.
    pub fn next(self: &Rc<Self>) -> Next {
        Next(self.clone())
    }
}

/// See [`Inbox::next`].
pub struct Next(Rc<Inbox>);

impl Future for Next {
    type Output = Input;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Input> {
        if let Some(input) = self.0.queue.borrow_mut().pop_front() {
            return Poll::Ready(input);
        }
        self.0.waker.set(Some(cx.waker().clone()));
        Poll::Pending
    }
}
