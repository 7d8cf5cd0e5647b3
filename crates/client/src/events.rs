//! The events the engine sends to JavaScript, in one table: each event's `type` and the
//! names of its other properties. The wasm shell builds every event object through the
//! table ([`js_event!`] and [`js_event_from!`] in `web/run.rs`: a property the table does
//! not list, or one left out, fails to compile), and the TypeScript package declares the
//! same events (`LightwireEvent` in pkg/src/types.ts); tests/event-contract compares the
//! two (it reads this table from `cargo run --example event_contract`), so that neither
//! side changes without the other.

/// One kind of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventShape {
    /// Its `type` property.
    pub kind: &'static str,
    /// For a `type` with several shapes (`transaction`): the property that tells them
    /// apart and its value, set with `type`.
    pub variant: Option<(&'static str, &'static str)>,
    /// Its other properties, in the order the builders give them.
    pub fields: &'static [&'static str],
}

const fn event(kind: &'static str, fields: &'static [&'static str]) -> EventShape {
    EventShape {
        kind,
        variant: None,
        fields,
    }
}

const fn variant(
    kind: &'static str,
    variant: (&'static str, &'static str),
    fields: &'static [&'static str],
) -> EventShape {
    EventShape {
        kind,
        variant: Some(variant),
        fields,
    }
}

/// `list` and `wallet`: the fields of a wallet's event (the wallet's name last).
const fn and_wallet<const N: usize, const M: usize>(list: [&'static str; N]) -> [&'static str; M] {
    let mut out = ["wallet"; M];
    let mut i = 0;
    while i < N {
        out[i] = list[i];
        i += 1;
    }
    out
}

const WALLET_TX_FIELDS: [&str; 7] = [
    "txid",
    "height",
    "blockHash",
    "position",
    "received",
    "sent",
    "fee",
];

/// A wallet transaction (`WalletTransaction`): the answer to `transactions()`, and a
/// found `transaction` event.
pub const WALLET_TX: &[&str] = &WALLET_TX_FIELDS;

/// An unconfirmed transaction of the wallet's (`UnconfirmedTransaction`): in the answer
/// to `transactions()`, and an unconfirmed `transaction` event.
pub const UNCONFIRMED_TX: &[&str] = &UNCONFIRMED_TX_FIELDS;

const UNCONFIRMED_TX_FIELDS: [&str; 9] = [
    "txid",
    "height",
    "blockHash",
    "received",
    "sent",
    "fee",
    "gateways",
    "firstSeen",
    "silentPayments",
];

/// The wallet's balance (`Balance`): the answer to `balance()`, and a `balance` event.
pub const BALANCE: &[&str] = &BALANCE_FIELDS;

const BALANCE_FIELDS: [&str; 5] = ["confirmed", "pending", "immature", "coins", "unconfirmed"];

/// [`WALLET_TX`] in a `transaction` event: with the name of its wallet (null for the
/// default one).
pub const WALLET_TX_EVENT: &[&str] = &and_wallet::<7, 8>(WALLET_TX_FIELDS);

/// [`UNCONFIRMED_TX`] in a `transaction` event, with the name of its wallet.
pub const UNCONFIRMED_TX_EVENT: &[&str] = &and_wallet::<9, 10>(UNCONFIRMED_TX_FIELDS);

/// [`BALANCE`] in a `balance` event, with the name of its wallet.
pub const BALANCE_EVENT: &[&str] = &and_wallet::<5, 6>(BALANCE_FIELDS);

/// What `broadcast()` resolves to (`BroadcastResult`), and a `broadcast` event.
pub const BROADCAST_RESULT: &[&str] = &["txid", "relayed", "refused"];

/// Declares each event's constant and [`ALL`], so that no event is left out of the table
/// the contract check reads.
macro_rules! events {
    ($($(#[$doc:meta])* $name:ident = $shape:expr;)*) => {
        $($(#[$doc])* pub const $name: EventShape = $shape;)*
        /// Every event the engine sends.
        pub const ALL: &[EventShape] = &[$($name),*];
    };
}

events! {
    /// A gateway's connection changed state (`GatewayChange`).
    GATEWAY = event("gateway", &["gateway", "url", "state", "reason", "code"]);
    /// A mirror's manifest was read, or the mirror was dropped (`MirrorChange`).
    MIRROR = event("mirror", &["mirror", "url", "state", "height", "reason", "code"]);
    /// Sync progress (`SyncProgress`).
    PROGRESS = event(
        "progress",
        &[
            "height",
            "storedHeight",
            "targetHeight",
            "headersPerSecond",
            "bytesPerSecond",
            "synced",
            "filterHeight",
        ],
    );
    /// A commit reached IndexedDB (`NewTip`).
    TIP = event("tip", &["height", "hash", "time", "filterHeight"]);
    /// The best chain switched branches (`Reorg`).
    REORG = event("reorg", &["oldTip", "newTip", "depth"]);
    /// A gateway broke a rule (`Rejected`).
    REJECTED = event(
        "rejected",
        &["gateway", "url", "reason", "code", "height", "rule"],
    );
    /// A gateway's filter header differs from ours (`FilterConflict`).
    FILTER_CONFLICT = event("filterConflict", &["gateway", "url", "height"]);
    /// A dispute over filter headers is settled (`FilterDispute`).
    FILTER_DISPUTE = event(
        "filterDispute",
        &["gateway", "url", "verdict", "height"],
    );
    /// A wallet transaction found in a block (`TransactionEvent`).
    TRANSACTION_FOUND = variant("transaction", ("status", "found"), WALLET_TX_EVENT);
    /// A wallet transaction withdrawn by a reorg (`TransactionEvent`).
    TRANSACTION_WITHDRAWN = variant(
        "transaction",
        ("status", "withdrawn"),
        &["txid", "height", "wallet"],
    );
    /// An unconfirmed transaction of the wallet's taken, or held by another number of
    /// gateways (`TransactionEvent`).
    TRANSACTION_UNCONFIRMED = variant(
        "transaction",
        ("status", "unconfirmed"),
        UNCONFIRMED_TX_EVENT,
    );
    /// An unconfirmed transaction dropped, not mined (`TransactionEvent`).
    TRANSACTION_DROPPED = variant(
        "transaction",
        ("status", "dropped"),
        &["txid", "reason", "by", "wallet"],
    );
    /// A block the wallet's scan matched waits with no gateway asked for it
    /// (`WalletWaiting`).
    WALLET_WAITING = event("walletWaiting", &["height", "reason"]);
    /// The balance after transactions were found or withdrawn (`BalanceEvent`).
    BALANCE_CHANGED = event("balance", BALANCE_EVENT);
    /// Every gateway a transaction was sent to answered (`BroadcastEvent`).
    BROADCAST = event("broadcast", BROADCAST_RESULT);
    /// Scan progress (`ScanProgress`).
    SCAN = event(
        "scan",
        &[
            "height",
            "fromHeight",
            "targetHeight",
            "filtersPerSecond",
            "bytesPerSecond",
            "filters",
            "matches",
        ],
    );
    /// A block's filter matched (`ScanMatch`).
    SCAN_MATCH = event("scanMatch", &["height", "blockHash"]);
    /// A matched block was disconnected (`ScanWithdrawn`).
    SCAN_WITHDRAWN = event("scanWithdrawn", &["height", "blockHash"]);
    /// The scan reached the stored filter headers (`ScanReached`).
    SCAN_REACHED = event("scanReached", &["height", "matches"]);
    /// An output paying the silent-payment receiver was found (`SilentPaymentFound`).
    SILENT_PAYMENT = event(
        "silentPayment",
        &["height", "blockHash", "txid", "vout", "outputKey", "tweak", "label"],
    );
    /// The silent-payment scan waits below a dispute nobody present can settle
    /// (`SilentStalled`).
    SILENT_STALLED = event("silentStalled", &["height"]);
    /// A gateway sent a warning (`GatewayWarning`).
    WARNING = event("warning", &["gateway", "url", "text"]);
    /// The client failed (`ClientError`).
    ERROR = event("error", &["kind", "message", "fatal"]);
}

/// Whether two lists of property names are the same, in the same order (a `const fn`, for
/// the builders' compile-time checks).
pub const fn same_fields(a: &[&str], b: &[&str]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        let (x, y) = (a[i].as_bytes(), b[i].as_bytes());
        if x.len() != y.len() {
            return false;
        }
        let mut j = 0;
        while j < x.len() {
            if x[j] != y[j] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// The JavaScript object of event `$shape` (a constant of this module), its properties
/// given by name in the table's order: a name that differs from the table, or one missing
/// or added, is a compile-time error.
#[cfg_attr(not(target_arch = "wasm32"), allow(unused_macros))]
macro_rules! js_event {
    ($shape:path { $($field:literal: $value:expr),* $(,)? }) => {{
        const _: () = assert!(
            $crate::events::same_fields($shape.fields, &[$($field),*]),
            concat!("the properties differ from the table's ", stringify!($shape))
        );
        $crate::web::js::event(&$shape, &[$(($field, $value)),*])
    }};
}

/// A plain object with the properties of `$list` (a constant of this module), given by
/// name in its order: checked at compile time as [`js_event!`] is.
#[cfg_attr(not(target_arch = "wasm32"), allow(unused_macros))]
macro_rules! js_object {
    ($list:path { $($field:literal: $value:expr),* $(,)? }) => {{
        const _: () = assert!(
            $crate::events::same_fields($list, &[$($field),*]),
            concat!("the properties differ from ", stringify!($list))
        );
        $crate::web::js::object(&[$(($field, $value)),*])
    }};
}

/// Event `$shape` made of `$object`, an object built by [`js_object!`] from the list
/// `$list`: the table must give `$shape` exactly those properties (checked at compile
/// time); `type` and the variant are added.
#[cfg_attr(not(target_arch = "wasm32"), allow(unused_macros))]
macro_rules! js_event_from {
    ($shape:path, $list:path, $object:expr) => {{
        const _: () = assert!(
            $crate::events::same_fields($shape.fields, $list),
            concat!(
                "the table's ",
                stringify!($shape),
                " is not ",
                stringify!($list)
            )
        );
        $crate::web::js::tag_event(&$shape, $object)
    }};
}

#[cfg_attr(not(target_arch = "wasm32"), allow(unused_imports))]
pub(crate) use {js_event, js_event_from, js_object};

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn each_event_is_told_apart_and_names_each_property_once() {
        for (i, e) in ALL.iter().enumerate() {
            assert!(
                !ALL[..i]
                    .iter()
                    .any(|o| o.kind == e.kind && o.variant == e.variant),
                "{} twice",
                e.kind
            );
            // A kind with several shapes: each has a variant, by the same property.
            let same_kind = ALL.iter().filter(|o| o.kind == e.kind);
            if same_kind.clone().count() > 1 {
                let by = e.variant.map(|v| v.0);
                assert!(by.is_some(), "{}", e.kind);
                assert!(same_kind.clone().all(|o| o.variant.map(|v| v.0) == by));
            }
            let tag = e.variant.map(|v| v.0);
            for (j, f) in e.fields.iter().enumerate() {
                assert!(
                    !f.is_empty() && *f != "type" && Some(*f) != tag,
                    "{}",
                    e.kind
                );
                assert!(!e.fields[..j].contains(f), "{}.{f} twice", e.kind);
            }
        }
    }

    #[test]
    fn same_fields_compares_names_and_order() {
        assert!(same_fields(&["a", "bc"], &["a", "bc"]));
        assert!(same_fields(&[], &[]));
        assert!(!same_fields(&["a", "bc"], &["bc", "a"]));
        assert!(!same_fields(&["a", "bc"], &["a", "bd"]));
        assert!(!same_fields(&["a", "bc"], &["a", "b"]));
        assert!(!same_fields(&["a"], &["a", "b"]));
    }
}
