//! A wallet's labels in BIP329's terms (the wallet labels export format), sans-IO: what a
//! label is attached to (a transaction, an address, a public key, an input, an output, an
//! extended public key, a silent-payment scan key expression), its text, the key origin of
//! the wallet it belongs to, and whether an output may be spent (`spendable: false`
//! freezes it).
//!
//! The JSON Lines are read at the edge (the browser's own JSON parser, as the package reads
//! mirrors' manifests: no JSON parser in the wasm); what comes in here is one
//! [`LabelRecord`] a line, its fields as the line gave them. They are written here
//! ([`Labels::write_lines`]): writing is only escaping strings, and one pass in wasm is
//! far cheaper than a `JSON.stringify` call across the boundary per line. Each is checked
//! against BIP329's rules for its type: a reference that is not what its type names (a
//! txid that is not 64 hex digits, an address not of this network, `spendable` on
//! anything but an output) is a [`LabelError`] naming the line and the rule.
//!
//! Import is whole or nothing ([`Labels::import`]): every line is checked first, and one
//! that fails imports none (the application shows which line, the user fixes the file),
//! so a file never half-applies. BIP329's own leniencies are kept: a type it does not
//! define is skipped and counted (its "Backwards Compatibility": importing wallets ignore
//! types not defined there), a label longer than [`MAX_LABEL_CHARS`] is cut and counted
//! (its suggested default), and a field left out leaves what the wallet had (its
//! "should not alter these values").
//!
//! Written here rather than taken from a crate: the `bip329` crate reads and writes the
//! lines through serde and its own types for native programs; the package's wasm reads
//! JSON with the browser's parser instead, and checks references with the wallet's own
//! address and outpoint code.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use lightwire_chain::Network;

/// The longest label kept, in characters (BIP329's suggested default); longer ones are cut.
pub const MAX_LABEL_CHARS: usize = 255;

/// The longest key origin kept, in bytes (an abbreviated descriptor: a few dozen).
pub const MAX_ORIGIN_LEN: usize = 1_000;

/// What a label is attached to (BIP329's `type`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum LabelKind {
    /// A transaction (`ref`: its txid).
    Tx,
    /// An address.
    Addr,
    /// A public key (32, 33 or 65 bytes, hex).
    Pubkey,
    /// An input (`txid:index` of the transaction spending).
    Input,
    /// An output (`txid:vout`); the only kind `spendable` applies to.
    Output,
    /// An extended public key (BIP32).
    Xpub,
    /// A silent-payment scan key expression (BIP392's `spscan`).
    Spscan,
}

impl LabelKind {
    /// Its name in BIP329 (`type`).
    pub const fn name(self) -> &'static str {
        match self {
            LabelKind::Tx => "tx",
            LabelKind::Addr => "addr",
            LabelKind::Pubkey => "pubkey",
            LabelKind::Input => "input",
            LabelKind::Output => "output",
            LabelKind::Xpub => "xpub",
            LabelKind::Spscan => "spscan",
        }
    }

    /// The kind named `name`, if BIP329 defines it.
    pub fn from_name(name: &str) -> Option<LabelKind> {
        Some(match name {
            "tx" => LabelKind::Tx,
            "addr" => LabelKind::Addr,
            "pubkey" => LabelKind::Pubkey,
            "input" => LabelKind::Input,
            "output" => LabelKind::Output,
            "xpub" => LabelKind::Xpub,
            "spscan" => LabelKind::Spscan,
            _ => return None,
        })
    }
}

/// One line of a BIP329 file, its fields as the line gave them (`None`: left out).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct LabelRecord {
    /// `type`.
    pub kind: Option<String>,
    /// `ref`.
    pub reference: Option<String>,
    /// `label`.
    pub label: Option<String>,
    /// `origin`.
    pub origin: Option<String>,
    /// `spendable`.
    pub spendable: Option<bool>,
}

/// The rule a line broke.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum LabelFault {
    /// No `type`.
    #[error("it has no type")]
    NoType,
    /// A `type` BIP329 does not define, where one record is set alone (an import skips
    /// such lines instead).
    #[error("its type is not one BIP329 defines")]
    UnknownType,
    /// No `ref`.
    #[error("it has no ref")]
    NoRef,
    /// A `ref` that is not what its type names.
    #[error("its ref is not {}", expected(*.0))]
    Ref(LabelKind),
    /// `spendable` on a record that is not an output's.
    #[error("spendable applies to outputs only, not to a {}", .0.name())]
    SpendableNotOutput(LabelKind),
    /// An `origin` longer than [`MAX_ORIGIN_LEN`].
    #[error("its origin is longer than {MAX_ORIGIN_LEN} bytes")]
    OriginTooLong,
}

/// What a reference of `kind` must be, for [`LabelFault::Ref`].
fn expected(kind: LabelKind) -> &'static str {
    match kind {
        LabelKind::Tx => "a txid (64 hex digits)",
        LabelKind::Addr => "an address of the wallet's network",
        LabelKind::Pubkey => "a public key (32, 33 or 65 bytes in hex)",
        LabelKind::Input | LabelKind::Output => "txid:index",
        LabelKind::Xpub => "an extended public key",
        LabelKind::Spscan => "a scan key expression",
    }
}

/// A line of a file that cannot be imported, and why (lines count from 1).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("line {line}: {fault}")]
pub struct LabelError {
    /// The line.
    pub line: usize,
    /// The rule it broke.
    pub fault: LabelFault,
}

/// What a label holds, attached to its reference.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct LabelEntry {
    /// The text (at most [`MAX_LABEL_CHARS`] characters).
    pub label: Option<String>,
    /// The key origin of the wallet it belongs to (an abbreviated descriptor).
    pub origin: Option<String>,
    /// For an output: whether the wallet may spend it (`Some(false)`: frozen).
    pub spendable: Option<bool>,
}

/// What an import did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Imported {
    /// Records taken.
    pub taken: usize,
    /// Records of a type BIP329 does not define, skipped.
    pub unknown: usize,
    /// Labels cut to [`MAX_LABEL_CHARS`].
    pub cut: usize,
}

/// A wallet's labels, by what they are attached to (in BIP329's terms, each reference in
/// its one written form: lowercase hex, the address as the wallet writes it).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Labels {
    entries: BTreeMap<(LabelKind, String), LabelEntry>,
}

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels::default()
    }

    /// How many references have a label, an origin or a spendable flag.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What is attached to `reference` of `kind` (in its written form: see
    /// [`normalize`]).
    pub fn get(&self, kind: LabelKind, reference: &str) -> Option<&LabelEntry> {
        self.entries.get(&(kind, String::from(reference)))
    }

    /// Whether output `reference` (`txid:vout`) is frozen (`spendable: false`).
    pub fn frozen(&self, reference: &str) -> bool {
        self.get(LabelKind::Output, reference)
            .is_some_and(|e| e.spendable == Some(false))
    }

    /// Import `records` (the lines of a file, in order) for a wallet on `network`: every
    /// line is checked first, and the first that fails imports nothing (see the module's
    /// documentation). A field a line leaves out keeps what was there; a line of a type
    /// BIP329 does not define is skipped.
    pub fn import(
        &mut self,
        records: &[LabelRecord],
        network: Network,
    ) -> Result<Imported, LabelError> {
        let mut checked: Vec<((LabelKind, String), &LabelRecord)> =
            Vec::with_capacity(records.len());
        let mut done = Imported::default();
        for (i, r) in records.iter().enumerate() {
            let at = |fault| LabelError { line: i + 1, fault };
            let kind = r.kind.as_deref().ok_or(at(LabelFault::NoType))?;
            let Some(kind) = LabelKind::from_name(kind) else {
                done.unknown += 1;
                continue;
            };
            let reference = r.reference.as_deref().ok_or(at(LabelFault::NoRef))?;
            let reference = normalize(kind, reference, network).ok_or(at(LabelFault::Ref(kind)))?;
            if r.spendable.is_some() && kind != LabelKind::Output {
                return Err(at(LabelFault::SpendableNotOutput(kind)));
            }
            if r.origin.as_ref().is_some_and(|o| o.len() > MAX_ORIGIN_LEN) {
                return Err(at(LabelFault::OriginTooLong));
            }
            checked.push(((kind, reference), r));
        }
        for (key, r) in checked {
            let e = self.entries.entry(key).or_default();
            if let Some(text) = &r.label {
                let (kept, cut) = cut_label(text);
                done.cut += usize::from(cut);
                e.label = Some(kept);
            }
            if let Some(o) = &r.origin {
                e.origin = Some(o.clone());
            }
            if let Some(s) = r.spendable {
                e.spendable = Some(s);
            }
            done.taken += 1;
        }
        Ok(done)
    }

    /// Set, or with `None` remove, the label of `reference` of `kind` (checked as an
    /// import checks it); the origin and the spendable flag stay.
    pub fn set_label(
        &mut self,
        kind: LabelKind,
        reference: &str,
        label: Option<&str>,
        network: Network,
    ) -> Result<(), LabelFault> {
        let reference = normalize(kind, reference, network).ok_or(LabelFault::Ref(kind))?;
        let key = (kind, reference);
        match label {
            Some(text) => {
                self.entries.entry(key).or_default().label = Some(cut_label(text).0);
            }
            None => {
                if let Some(e) = self.entries.get_mut(&key) {
                    e.label = None;
                    if e.origin.is_none() && e.spendable.is_none() {
                        self.entries.remove(&key);
                    }
                }
            }
        }
        Ok(())
    }

    /// Freeze (`false`) or thaw (`true`) output `reference`.
    pub fn set_spendable(
        &mut self,
        reference: &str,
        spendable: bool,
        network: Network,
    ) -> Result<(), LabelFault> {
        let kind = LabelKind::Output;
        let reference = normalize(kind, reference, network).ok_or(LabelFault::Ref(kind))?;
        self.entries.entry((kind, reference)).or_default().spendable = Some(spendable);
        Ok(())
    }

    /// The labels as bytes, for the store ([`Self::decode`]): a count, then for each the
    /// kind's index, the reference, the label and the origin (each a flag and text) and
    /// the spendable flag (0 none, 1 false, 2 true); texts as a length (u32, little-endian)
    /// and UTF-8.
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn text(out: &mut Vec<u8>, t: &str) {
            out.extend_from_slice(&(t.len() as u32).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        fn maybe(out: &mut Vec<u8>, t: &Option<String>) {
            match t {
                Some(t) => {
                    out.push(1);
                    text(out, t);
                }
                None => out.push(0),
            }
        }
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for ((kind, reference), e) in &self.entries {
            out.push(KINDS.iter().position(|k| k == kind).unwrap_or(0) as u8);
            text(out, reference);
            maybe(out, &e.label);
            maybe(out, &e.origin);
            out.push(match e.spendable {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            });
        }
    }

    /// [`Self::encode`]'s bytes at the front of `bytes` read back, with what follows;
    /// `None` if they are not that.
    pub fn decode(bytes: &[u8]) -> Option<(Labels, &[u8])> {
        let mut r = crate::ledger::Cursor(bytes);
        let n = r.count(1 + 4 + 1 + 1 + 1)?;
        let mut entries = BTreeMap::new();
        let text = |r: &mut crate::ledger::Cursor<'_>| -> Option<String> {
            let len = r.count(1)?;
            String::from_utf8(r.take(len)?.to_vec()).ok()
        };
        let maybe = |r: &mut crate::ledger::Cursor<'_>| -> Option<Option<String>> {
            match r.u8()? {
                0 => Some(None),
                1 => Some(Some(text(r)?)),
                _ => None,
            }
        };
        for _ in 0..n {
            let kind = *KINDS.get(usize::from(r.u8()?))?;
            let reference = text(&mut r)?;
            let label = maybe(&mut r)?;
            let origin = maybe(&mut r)?;
            let spendable = match r.u8()? {
                0 => None,
                1 => Some(false),
                2 => Some(true),
                _ => return None,
            };
            entries.insert(
                (kind, reference),
                LabelEntry {
                    label,
                    origin,
                    spendable,
                },
            );
        }
        Some((Labels { entries }, r.0))
    }

    /// Every label as BIP329 JSON Lines, in [`Self::export`]'s order, onto `out`: one
    /// object a line (`type`, `ref`, then `label`, `origin` and `spendable` where set),
    /// each line ended by a newline.
    pub fn write_lines(&self, out: &mut String) {
        for ((kind, reference), e) in &self.entries {
            out.push_str("{\"type\":\"");
            out.push_str(kind.name());
            out.push_str("\",\"ref\":");
            json_string(out, reference);
            if let Some(label) = &e.label {
                out.push_str(",\"label\":");
                json_string(out, label);
            }
            if let Some(origin) = &e.origin {
                out.push_str(",\"origin\":");
                json_string(out, origin);
            }
            if let Some(s) = e.spendable {
                out.push_str(if s {
                    ",\"spendable\":true"
                } else {
                    ",\"spendable\":false"
                });
            }
            out.push_str("}\n");
        }
    }

    /// Every label as a record, in a fixed order (by type as BIP329 lists them, then by
    /// reference): what an export writes, one line each.
    pub fn export(&self) -> impl Iterator<Item = LabelRecord> + '_ {
        self.entries
            .iter()
            .map(|((kind, reference), e)| LabelRecord {
                kind: Some(String::from(kind.name())),
                reference: Some(reference.clone()),
                label: e.label.clone(),
                origin: e.origin.clone(),
                spendable: e.spendable,
            })
    }
}

/// `text` as a JSON string (RFC 8259, section 7): quoted, with `"`, `\\` and the control
/// characters escaped; everything else as it is (UTF-8).
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let b = c as u32 as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 15]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The kinds, in their stored order (their index is what the store keeps).
const KINDS: [LabelKind; 7] = [
    LabelKind::Tx,
    LabelKind::Addr,
    LabelKind::Pubkey,
    LabelKind::Input,
    LabelKind::Output,
    LabelKind::Xpub,
    LabelKind::Spscan,
];

/// `text` cut to [`MAX_LABEL_CHARS`] characters, and whether it was.
fn cut_label(text: &str) -> (String, bool) {
    match text.char_indices().nth(MAX_LABEL_CHARS) {
        Some((end, _)) => (String::from(&text[..end]), true),
        None => (String::from(text), false),
    }
}

/// `reference` of `kind` in its one written form, if it is what the kind names on
/// `network`: hex lowercased, `txid:index` with the index in decimal, an address decoded
/// for the network and written again as the wallet writes it (bech32 in lowercase: the
/// same address in capitals, as QR codes carry it, is one label), an extended key checked
/// to be one (78 bytes, base58check).
pub fn normalize(kind: LabelKind, reference: &str, network: Network) -> Option<String> {
    let r = reference.trim();
    match kind {
        LabelKind::Tx => hex_of_len(r, &[32]),
        LabelKind::Pubkey => hex_of_len(r, &[32, 33, 65]),
        LabelKind::Input | LabelKind::Output => {
            let (txid, index) = r.split_once(':')?;
            let txid = hex_of_len(txid, &[32])?;
            // Digits only: no sign, no spaces (`u32::from_str` takes a `+`).
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let index: u32 = index.parse().ok()?;
            Some(alloc::format!("{txid}:{index}"))
        }
        LabelKind::Addr => crate::script_of_address(r, network)
            .ok()
            .and_then(|script| crate::address::address_of(&script, network)),
        LabelKind::Xpub => (crate::address::base58check(r)?.len() == 78).then(|| String::from(r)),
        LabelKind::Spscan => (!r.is_empty() && r.is_ascii() && !r.contains(char::is_whitespace))
            .then(|| String::from(r)),
    }
}

/// `text` if it is the hex of one of `lens` bytes, lowercased.
fn hex_of_len(text: &str, lens: &[usize]) -> Option<String> {
    let ok = lens.contains(&(text.len() / 2))
        && text.len() % 2 == 0
        && text.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const TXID: &str = "f91d0a8a78462bc59398f2c5d7a84fcff491c26ba54c4833478b202796c8aafd";

    fn record(kind: &str, reference: &str, label: Option<&str>) -> LabelRecord {
        LabelRecord {
            kind: Some(kind.into()),
            reference: Some(reference.into()),
            label: label.map(Into::into),
            ..LabelRecord::default()
        }
    }

    /// BIP329's test vector, line by line as a parser gives it (the `spscan` line's
    /// reference shortened to its form).
    fn bip329_vector() -> Vec<LabelRecord> {
        vec![
            LabelRecord {
                origin: Some("wpkh([d34db33f/84'/0'/0'])".into()),
                ..record("tx", TXID, Some("Transaction"))
            },
            record(
                "addr",
                "bc1q34aq5drpuwy3wgl9lhup9892qp6svr8ldzyy7c",
                Some("Address"),
            ),
            record(
                "pubkey",
                "0283409659355b6d1cc3c32decd5d561abaac86c37a353b52895a5e6c196d6f448",
                Some("Public Key"),
            ),
            record("input", &alloc::format!("{TXID}:0"), Some("Input")),
            LabelRecord {
                spendable: Some(false),
                ..record("output", &alloc::format!("{TXID}:1"), Some("Output"))
            },
            record(
                "xpub",
                "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8",
                Some("Extended Public Key"),
            ),
            record(
                "spscan",
                "spscan1q5zs2pg9q5zs2pg9q5zs2pg9q5zs2pg9q5zs2pg9q5zs2pg9q5zsq9q6qjevn2kmdrnpuxt0v6h2kr2a2epkr0g6nk55ftf0xcxtddazgkrth3e",
                Some("Silent Payments Scan Key Expression"),
            ),
            LabelRecord {
                origin: Some("wpkh([d34db33f/84'/0'/1'])".into()),
                ..record(
                    "tx",
                    "f546156d9044844e02b181026a1a407abfca62e7ea1159f87bbeaa77b4286c74",
                    Some("Account #1 Transaction"),
                )
            },
        ]
    }

    /// BIP329's own example file imports whole; the output it marks unspendable is
    /// frozen; exported again, it gives the same records (in the export's order), which
    /// import to the same labels.
    #[test]
    fn the_bips_example_round_trips() {
        let mut l = Labels::new();
        let done = l.import(&bip329_vector(), Network::Mainnet).unwrap();
        assert_eq!(
            done,
            Imported {
                taken: 8,
                unknown: 0,
                cut: 0
            }
        );
        assert!(l.frozen(&alloc::format!("{TXID}:1")));
        assert!(!l.frozen(&alloc::format!("{TXID}:0")));
        assert_eq!(
            l.get(LabelKind::Tx, TXID).and_then(|e| e.origin.clone()),
            Some("wpkh([d34db33f/84'/0'/0'])".into())
        );
        let out: Vec<LabelRecord> = l.export().collect();
        assert_eq!(out.len(), 8);
        let mut sorted = bip329_vector();
        sorted.sort_by_key(|r| {
            (
                LabelKind::from_name(r.kind.as_deref().unwrap()),
                r.reference.clone(),
            )
        });
        assert_eq!(out, sorted);
        let mut again = Labels::new();
        again.import(&out, Network::Mainnet).unwrap();
        assert_eq!(again, l);
    }

    /// A line of a JSON Lines file as a parser gives it (fields not strings are left
    /// out, as the package's reader refuses them before).
    fn parsed(line: &str) -> LabelRecord {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = |k: &str| v.get(k).and_then(|s| s.as_str()).map(String::from);
        LabelRecord {
            kind: text("type"),
            reference: text("ref"),
            label: text("label"),
            origin: text("origin"),
            spendable: v.get("spendable").and_then(|s| s.as_bool()),
        }
    }

    /// What `write_lines` writes is JSON a parser reads back to the same records, one
    /// line each, whatever a label holds: quotes, backslashes, line breaks and other
    /// control characters, and text beyond ASCII.
    #[test]
    fn written_lines_parse_back_to_the_same_records() {
        let mut l = Labels::new();
        l.import(&bip329_vector(), Network::Mainnet).unwrap();
        let awkward =
            "a \"quoted\" \\ back\\slash\nnew line\r\ttab \u{1}\u{1f} \u{7f} é 中 \u{2028} 🙂";
        l.set_label(LabelKind::Tx, TXID, Some(awkward), Network::Mainnet)
            .unwrap();
        let mut out = String::new();
        l.write_lines(&mut out);
        assert!(out.ends_with('\n'));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines.len(),
            l.len(),
            "one line each, no line break inside one"
        );
        let back: Vec<LabelRecord> = lines.iter().map(|line| parsed(line)).collect();
        assert_eq!(back, l.export().collect::<Vec<_>>());
        assert!(back.iter().any(|r| r.label.as_deref() == Some(awkward)));
        // BIP329's shape: the fields in its order, those not set left out.
        assert!(
            lines.contains(&"{\"type\":\"output\",\"ref\":\"f91d0a8a78462bc59398f2c5d7a84fcff491c26ba54c4833478b202796c8aafd:1\",\"label\":\"Output\",\"spendable\":false}"),
            "{lines:#?}"
        );
    }

    /// An address is one label however its case is written (bech32 in capitals is the
    /// same address), kept as the wallet writes it, and found by that.
    #[test]
    fn an_address_in_capitals_is_the_same_address() {
        let mut l = Labels::new();
        let lower = "bc1q34aq5drpuwy3wgl9lhup9892qp6svr8ldzyy7c";
        let upper = lower.to_ascii_uppercase();
        l.import(&[record("addr", &upper, Some("QR"))], Network::Mainnet)
            .unwrap();
        assert_eq!(
            l.get(LabelKind::Addr, lower)
                .and_then(|e| e.label.as_deref()),
            Some("QR")
        );
        l.import(&[record("addr", lower, Some("again"))], Network::Mainnet)
            .unwrap();
        assert_eq!(l.len(), 1);
        let base58 = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2";
        l.import(&[record("addr", base58, Some("legacy"))], Network::Mainnet)
            .unwrap();
        assert!(
            l.get(LabelKind::Addr, base58).is_some(),
            "base58 kept as it is"
        );
    }

    /// A file with a bad line imports nothing, and the error names the line and the
    /// rule; a type BIP329 does not define is skipped and counted; a field left out keeps
    /// what the wallet had; a long label is cut to 255 characters and counted.
    #[test]
    fn a_bad_line_imports_nothing_and_is_named() {
        let mut l = Labels::new();
        l.import(&bip329_vector(), Network::Mainnet).unwrap();
        let before = l.clone();
        let bad = |line: usize, r: LabelRecord| {
            let mut file = bip329_vector();
            file.insert(line - 1, r);
            file
        };
        let cases = [
            (
                record("tx", "f91d", Some("short")),
                LabelFault::Ref(LabelKind::Tx),
            ),
            (
                record("addr", "tb1qexample", None),
                LabelFault::Ref(LabelKind::Addr),
            ),
            (
                record("output", &alloc::format!("{TXID}:+1"), None),
                LabelFault::Ref(LabelKind::Output),
            ),
            (
                record("pubkey", "02ab", None),
                LabelFault::Ref(LabelKind::Pubkey),
            ),
            (
                record("xpub", "xpub661MyMwAqRbc", None),
                LabelFault::Ref(LabelKind::Xpub),
            ),
            (
                LabelRecord {
                    spendable: Some(false),
                    ..record("tx", TXID, None)
                },
                LabelFault::SpendableNotOutput(LabelKind::Tx),
            ),
            (
                LabelRecord {
                    kind: None,
                    ..record("tx", TXID, None)
                },
                LabelFault::NoType,
            ),
            (
                LabelRecord {
                    reference: None,
                    ..record("tx", TXID, None)
                },
                LabelFault::NoRef,
            ),
        ];
        for (r, fault) in cases {
            let file = bad(3, r);
            assert_eq!(
                l.import(&file, Network::Mainnet),
                Err(LabelError { line: 3, fault })
            );
            assert_eq!(l, before, "nothing of the file imported");
        }
        // Unknown types are skipped; an omitted label keeps the one there; a new label
        // replaces it; a long one is cut.
        let long: String = core::iter::repeat_n('é', 300).collect();
        let done = l
            .import(
                &[
                    record("contract", "whatever", Some("x")),
                    LabelRecord {
                        spendable: Some(true),
                        ..record("output", &alloc::format!("{}:1", TXID.to_uppercase()), None)
                    },
                    record("tx", TXID, Some(&long)),
                ],
                Network::Mainnet,
            )
            .unwrap();
        assert_eq!(
            done,
            Imported {
                taken: 2,
                unknown: 1,
                cut: 1
            }
        );
        let out = l
            .get(LabelKind::Output, &alloc::format!("{TXID}:1"))
            .unwrap();
        assert_eq!(
            (out.label.as_deref(), out.spendable),
            (Some("Output"), Some(true)),
            "the label kept, the output thawed (the txid's case does not matter)"
        );
        let tx = l.get(LabelKind::Tx, TXID).unwrap();
        assert_eq!(
            tx.label.as_ref().map(|t| t.chars().count()),
            Some(MAX_LABEL_CHARS)
        );
        assert_eq!(tx.origin.as_deref(), Some("wpkh([d34db33f/84'/0'/0'])"));
    }

    /// Saved and read back whole; bytes cut short or with a kind or flag out of range are
    /// refused.
    #[test]
    fn labels_are_saved_and_read_back() {
        let mut l = Labels::new();
        l.import(&bip329_vector(), Network::Mainnet).unwrap();
        let mut bytes = Vec::new();
        l.encode(&mut bytes);
        bytes.push(0xaa);
        let (back, rest) = Labels::decode(&bytes).unwrap();
        assert_eq!((back, rest), (l, &[0xaa][..]));
        for cut in 0..bytes.len() - 1 {
            assert!(Labels::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[4] = 9;
        assert!(Labels::decode(&bad).is_none(), "no kind 9");
    }

    /// Labels set and removed one at a time, and coins frozen and thawed, checked as an
    /// import checks them; an entry with nothing left goes.
    #[test]
    fn labels_and_freezing_one_at_a_time() {
        let mut l = Labels::new();
        let o = alloc::format!("{TXID}:7");
        assert_eq!(
            l.set_label(LabelKind::Tx, "nothex", Some("x"), Network::Mainnet),
            Err(LabelFault::Ref(LabelKind::Tx))
        );
        l.set_label(LabelKind::Output, &o, Some("savings"), Network::Mainnet)
            .unwrap();
        l.set_spendable(&o, false, Network::Mainnet).unwrap();
        assert!(l.frozen(&o));
        l.set_label(LabelKind::Output, &o, None, Network::Mainnet)
            .unwrap();
        assert_eq!(l.len(), 1, "still frozen");
        l.set_spendable(&o, true, Network::Mainnet).unwrap();
        assert!(!l.frozen(&o));
        l.set_label(LabelKind::Tx, TXID, Some("a"), Network::Mainnet)
            .unwrap();
        l.set_label(LabelKind::Tx, TXID, None, Network::Mainnet)
            .unwrap();
        assert!(l.get(LabelKind::Tx, TXID).is_none(), "nothing left: gone");
    }
}
