//! `lightwire-gateway export`: a chain's headers, BIP157 filter headers and BIP158 filters
//! as immutable, content-addressed *bulk files* plus one mutable `manifest.json`, for any
//! static web host (nginx, a CDN) to serve (docs/PROTOCOL.md, "Bulk files (mirrors)";
//! deploy/nginx/bulk.conf).
//!
//! The files carry no trust: every record is the very message a gateway answers with, and
//! a client validates it exactly as a gateway's (DESIGN.md: "a mirror can make sync
//! slower, never wrong"). What this module guarantees is that a file, once named in a
//! manifest, never changes: a range is written only when it is `confirmations` blocks deep
//! ([`sealed_top`]), a second run only appends, and any disagreement between the chain and
//! what was sealed (a deeper reorg, another chain or network, a file changed on disk) is a
//! typed error with nothing written, never a rewrite. Runs into one directory are meant to
//! follow one another (from cron, say); two at once each write whole files and a whole
//! manifest, and the manifest renamed last is the one served.
//!
//! The source is an [`ExportSource`]: a [`ServedChain`] held alone (`lightwire-gateway
//! export`: a generated chain with its filters, or a headers file), or the chain a running
//! gateway follows from its nodes (`--export-dir`, [`crate::exporter`]), read a file at a
//! time under its lock and whose filters are fetched from the node while the export waits.
//! A filter the source cannot give is [`ExportError::FilterUnavailable`]; a chain that
//! moves under a file being written (a reorg deeper than the confirmations) is
//! [`ExportError::ChainMoved`], and that file is not sealed.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use lightwire_chain::{BlockHash, HEADER_LEN, Network};
use lightwire_proto::Served as _;
use lightwire_proto::bulk::{WriteFiltersError, write_filters};
use lightwire_proto::session::FilterLookup;
use lightwire_wire::EncodeError;
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;
use sha2::{Digest as _, Sha256};

use crate::filters::ServedFilters;
use crate::served::ServedChain;

/// Headers in one headers file: one retarget period, so that a file starts where a
/// client's difficulty check starts over.
pub const HEADERS_PER_FILE: u32 = 2016;
/// Blocks in each filter-headers and filters file after the first (which also holds
/// genesis): BIP157's checkpoint interval, so that every file ends on a checkpoint height,
/// where a client can compare its last filter header with what its gateways agree on.
pub const FILTERS_PER_FILE: u32 = FILTER_CHECKPOINT_INTERVAL;
/// Small files in a large one (see [`Kind::per_large`] for each kind's). Once the small
/// files from a large file's boundary cover its whole range, one file holding that range
/// takes their place in the manifest (they stay on disk, unchanged: a file is never
/// rewritten, and a client that read the manifest before may still ask for them). So the
/// bulk of history is in files of ten retarget periods and of 20,000 filter headers: a
/// client pays its per-file round trip about 46 times for mainnet's headers rather than
/// 460, and the small files keep the edge a gateway serves under one period
/// (benches/README.md, "Mirrors").
pub const SMALL_PER_LARGE: u32 = 10;
/// Small filter-headers files in a large one: 20,000 filter headers, about as many as a
/// large headers file's 20,160 headers, so that a client reading both kinds a file at a
/// time keeps its filter headers abreast of its headers (with 10,000 they fell behind by
/// half: benches/README.md, "Where a mirror sync's time goes").
pub const FILTER_HEADERS_PER_LARGE: u32 = 20;
/// `--confirmations`' default: how deep below the tip a range must end to be sealed.
pub const DEFAULT_CONFIRMATIONS: u32 = 6;
/// The one mutable file, in each network's directory.
pub const MANIFEST: &str = "manifest.json";
/// The manifest format written (its `version`).
pub const MANIFEST_VERSION: u64 = 1;

/// What an export reads: a chain, and the filters of its blocks.
pub trait ExportSource {
    /// Run `read` on the chain as it is now. A chain shared with a running gateway is
    /// locked for the call: each is one file's worth, so the gateway's following of its
    /// nodes waits at most that long.
    fn read<R>(&self, read: impl FnOnce(&ServedChain) -> R) -> R;

    /// Append the filter of the block at `height`, whose header is `header`, to `out`;
    /// false when it cannot be had. A source whose filters come from a node waits here
    /// (never while the chain is locked).
    fn filter(&self, height: u32, header: [u8; HEADER_LEN], out: &mut Vec<u8>) -> bool;
}

impl ExportSource for ServedChain {
    fn read<R>(&self, read: impl FnOnce(&ServedChain) -> R) -> R {
        read(self)
    }

    fn filter(&self, height: u32, header: [u8; HEADER_LEN], out: &mut Vec<u8>) -> bool {
        self.filters().is_some_and(|f| {
            matches!(
                f.with_filter(height, Some(header), |b| out.extend_from_slice(b)),
                FilterLookup::Ready(())
            )
        })
    }
}

/// The three kinds of bulk file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `headers_compact` messages, one retarget period a file.
    Headers,
    /// `filter_headers` messages, aligned on filter checkpoints.
    FilterHeaders,
    /// `filters` messages, the same ranges as filter headers.
    Filters,
}

impl Kind {
    /// The three kinds, in the order they are checked and written.
    pub const ALL: [Kind; 3] = [Kind::Headers, Kind::FilterHeaders, Kind::Filters];

    /// The start of its files' names.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Headers => "headers",
            Kind::FilterHeaders => "filter-headers",
            Kind::Filters => "filters",
        }
    }

    /// Its list's key in the manifest.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Headers => "headers",
            Kind::FilterHeaders => "filterHeaders",
            Kind::Filters => "filters",
        }
    }

    /// Whether its manifest entries carry `top` (the value at `last` the chain is checked
    /// against on the next run): filters are checked by clients against filter headers.
    fn has_top(self) -> bool {
        !matches!(self, Kind::Filters)
    }

    /// Small files in one of its large files, as exports write them now.
    pub fn per_large(self) -> u32 {
        match self {
            Kind::FilterHeaders => FILTER_HEADERS_PER_LARGE,
            Kind::Headers | Kind::Filters => SMALL_PER_LARGE,
        }
    }

    /// Small files in one of its large files, as exports write them or wrote them: an
    /// export begun with ten-file filter-headers files goes on with them.
    fn large_spans(self) -> &'static [u32] {
        match self {
            Kind::FilterHeaders => &[FILTER_HEADERS_PER_LARGE, SMALL_PER_LARGE],
            Kind::Headers | Kind::Filters => &[SMALL_PER_LARGE],
        }
    }

    /// The heights of its `index`-th file (from 0) in a layout of files `span` small
    /// files long (1, or a large file's), `None` past `u32`.
    pub fn range(self, index: u32, span: u32) -> Option<(u32, u32)> {
        match self {
            Kind::Headers => {
                let size = HEADERS_PER_FILE.checked_mul(span)?;
                let first = index.checked_mul(size)?;
                Some((first, first.checked_add(size - 1)?))
            }
            Kind::FilterHeaders | Kind::Filters => {
                let size = FILTERS_PER_FILE.checked_mul(span)?;
                let last = index.checked_add(1)?.checked_mul(size)?;
                let first = if index == 0 { 0 } else { last - size + 1 };
                Some((first, last))
            }
        }
    }

    /// Whether `first..=last` is a whole small file's range (1), a whole large file's
    /// (its span), or neither.
    pub fn span(self, first: u32, last: u32) -> Option<u32> {
        let mut spans = core::iter::once(1).chain(self.large_spans().iter().copied());
        spans.find(|&span| {
            let index = match self {
                Kind::Headers => first / HEADERS_PER_FILE.saturating_mul(span),
                Kind::FilterHeaders | Kind::Filters => {
                    last.saturating_sub(1) / FILTERS_PER_FILE.saturating_mul(span)
                }
            };
            self.range(index, span) == Some((first, last))
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Headers => "headers",
            Kind::FilterHeaders => "filter-headers",
            Kind::Filters => "filters",
        })
    }
}

/// One sealed file as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Height of its first block.
    pub first: u32,
    /// Height of its last block.
    pub last: u32,
    /// Its length.
    pub bytes: u64,
    /// SHA-256 of its bytes (plain, not double: what `sha256sum` prints).
    pub sha256: [u8; 32],
    /// For headers, the block hash at `last`; for filter headers, the filter header at
    /// `last` (internal byte order; shown byte-reversed); none for filters.
    pub top: Option<[u8; 32]>,
    /// For a large filters file, where a client may start reading it: the first height of
    /// each small file's range after the first, and the offset of the record that begins
    /// with it (a `Range` request from there is a whole answer from that height). Empty
    /// for the other kinds, small files, and files written before exports wrote parts.
    pub parts: Parts,
}

/// A filters file's parts (see [`Entry::parts`]): heights and offsets, ascending.
pub type Parts = Vec<(u32, u64)>;

impl Entry {
    /// Its file name: `<prefix>-<first>-<last>-<sha256 hex>.bin`.
    pub fn file_name(&self, kind: Kind) -> String {
        format!(
            "{}-{}-{}-{}.bin",
            kind.prefix(),
            self.first,
            self.last,
            hex::encode(self.sha256)
        )
    }

    fn json(&self, kind: Kind) -> String {
        let top = match self.top {
            Some(t) if kind.has_top() => format!(",\"top\":\"{}\"", display_hex(&t)),
            _ => String::new(),
        };
        let parts = if self.parts.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self
                .parts
                .iter()
                .map(|(h, o)| format!("[{h},{o}]"))
                .collect();
            format!(",\"parts\":[{}]", list.join(","))
        };
        format!(
            "{{\"first\":{},\"last\":{},\"bytes\":{},\"sha256\":\"{}\",\"file\":\"{}\"{top}{parts}}}",
            self.first,
            self.last,
            self.bytes,
            hex::encode(self.sha256),
            self.file_name(kind),
        )
    }
}

/// The manifest: what has been sealed, in height order, contiguous from 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The network's name ([`Network::name`]).
    pub network: String,
    /// The network's genesis block hash.
    pub genesis: BlockHash,
    /// Headers files.
    pub headers: Vec<Entry>,
    /// Filter-headers files.
    pub filter_headers: Vec<Entry>,
    /// Filters files (the same ranges as `filter_headers`).
    pub filters: Vec<Entry>,
}

impl Manifest {
    fn empty(network: Network, genesis: BlockHash) -> Manifest {
        Manifest {
            network: network.name().to_owned(),
            genesis,
            headers: Vec::new(),
            filter_headers: Vec::new(),
            filters: Vec::new(),
        }
    }

    /// The list of `kind`.
    pub fn entries(&self, kind: Kind) -> &[Entry] {
        match kind {
            Kind::Headers => &self.headers,
            Kind::FilterHeaders => &self.filter_headers,
            Kind::Filters => &self.filters,
        }
    }

    fn entries_mut(&mut self, kind: Kind) -> &mut Vec<Entry> {
        match kind {
            Kind::Headers => &mut self.headers,
            Kind::FilterHeaders => &mut self.filter_headers,
            Kind::Filters => &mut self.filters,
        }
    }

    /// The highest sealed header's height and hash: genesis (which every client knows)
    /// while no headers file is sealed.
    pub fn top(&self) -> (u32, BlockHash) {
        match self.headers.last() {
            Some(e) => (e.last, BlockHash(e.top.unwrap_or_default())),
            None => (0, self.genesis),
        }
    }

    /// The JSON, keys in the documented order, one entry a line (diffs and `tail` read
    /// well; the byte-for-byte same manifest is written for the same entries).
    pub fn to_json(&self) -> String {
        let (height, hash) = self.top();
        let mut s = format!(
            "{{\n  \"version\": {MANIFEST_VERSION},\n  \"network\": \"{}\",\n  \"genesis\": \"{}\",\n  \
             \"height\": {height},\n  \"hash\": \"{hash}\"",
            self.network, self.genesis
        );
        for kind in Kind::ALL {
            let list = self.entries(kind);
            s.push_str(&format!(",\n  \"{}\": [", kind.key()));
            for (i, e) in list.iter().enumerate() {
                s.push_str(if i == 0 { "\n    " } else { ",\n    " });
                s.push_str(&e.json(kind));
            }
            s.push_str(if list.is_empty() { "]" } else { "\n  ]" });
        }
        s.push_str("\n}\n");
        s
    }

    /// Parses a manifest, checking its shape: version 1, every key, every list in the
    /// documented ranges from 0, each file named as its entry says. Errs with why.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let version = v.get("version").and_then(|x| x.as_u64());
        if version != Some(MANIFEST_VERSION) {
            return Err(format!(
                "version {}, not {MANIFEST_VERSION}",
                v.get("version").map_or("missing".into(), |x| x.to_string())
            ));
        }
        let string = |key: &str| {
            v.get(key)
                .and_then(|x| x.as_str())
                .ok_or_else(|| format!("no string \"{key}\""))
        };
        let network = string("network")?.to_owned();
        let genesis = BlockHash::from_display_hex(string("genesis")?)
            .ok_or("\"genesis\" is not a 64-digit hash")?;
        let mut m = Manifest {
            network,
            genesis,
            headers: Vec::new(),
            filter_headers: Vec::new(),
            filters: Vec::new(),
        };
        for kind in Kind::ALL {
            let list = v
                .get(kind.key())
                .and_then(|x| x.as_array())
                .ok_or_else(|| format!("no list \"{}\"", kind.key()))?;
            let (mut next, mut small, mut large) = (0, false, None);
            for (i, item) in list.iter().enumerate() {
                let e = parse_entry(kind, i, item, next, small)?;
                let span = kind.span(e.first, e.last);
                small |= span == Some(1);
                // One large size a list (the export goes on with the first one's).
                if let Some(s) = span.filter(|&s| s > 1) {
                    if let Some(l) = large.filter(|&l| l != s) {
                        return Err(format!(
                            "\"{}\"[{i}]: a large file of {s} small ones after ones of {l}",
                            kind.key()
                        ));
                    }
                    large = Some(s);
                }
                next = e.last.saturating_add(1);
                m.entries_mut(kind).push(e);
            }
        }
        let end = |list: &[Entry]| list.last().map(|e| e.last);
        if end(&m.filters) != end(&m.filter_headers) {
            return Err(format!(
                "the filter-headers files end at {:?} but the filters files at {:?}",
                end(&m.filter_headers),
                end(&m.filters)
            ));
        }
        Ok(m)
    }
}

/// The `index`-th entry of `kind`'s list, checked: its range starts at `next` and is a
/// whole small file's or a whole large file's, a large one only before any small one
/// (`small_before`: one came before it).
fn parse_entry(
    kind: Kind,
    index: usize,
    item: &serde_json::Value,
    next: u32,
    small_before: bool,
) -> Result<Entry, String> {
    let at = || format!("\"{}\"[{index}]", kind.key());
    let num = |key: &str| {
        item.get(key)
            .and_then(|x| x.as_u64())
            .ok_or_else(|| format!("{}: no number \"{key}\"", at()))
    };
    let text = |key: &str| {
        item.get(key)
            .and_then(|x| x.as_str())
            .ok_or_else(|| format!("{}: no string \"{key}\"", at()))
    };
    let (first, last) = (num("first")?, num("last")?);
    let range = u32::try_from(first).ok().zip(u32::try_from(last).ok());
    let span = range.and_then(|(f, l)| kind.span(f, l));
    let fits =
        range.is_some_and(|(f, _)| f == next) && span.is_some_and(|s| s == 1 || !small_before);
    let (Some((first, last)), true) = (range, fits) else {
        return Err(format!(
            "{}: heights {first}-{last}, where the layout has a whole file from {next} \
             (large ones before small ones)",
            at()
        ));
    };
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(text("sha256")?, &mut sha256)
        .map_err(|_| format!("{}: \"sha256\" is not 64 hex digits", at()))?;
    let top = if kind.has_top() {
        let t = BlockHash::from_display_hex(text("top")?)
            .ok_or_else(|| format!("{}: \"top\" is not 64 hex digits", at()))?;
        Some(t.0)
    } else {
        None
    };
    let bytes = num("bytes")?;
    let parts = match item.get("parts") {
        None => Vec::new(),
        Some(list) if kind == Kind::Filters => {
            parse_parts(list, (first, last), bytes).ok_or_else(|| {
                format!(
                    "{}: \"parts\" is not a list of [height, offset] inside the file, both \
                     ascending",
                    at()
                )
            })?
        }
        Some(_) => return Err(format!("{}: only filters files have \"parts\"", at())),
    };
    let e = Entry {
        first,
        last,
        bytes,
        sha256,
        top,
        parts,
    };
    let file = text("file")?;
    if file != e.file_name(kind) {
        return Err(format!(
            "{}: file {file:?}, where its entry names {}",
            at(),
            e.file_name(kind)
        ));
    }
    Ok(e)
}

/// A filters entry's `parts`: `[height, offset]` pairs, heights inside `(first, last]`
/// and offsets inside the file's `bytes`, both strictly ascending.
fn parse_parts(
    list: &serde_json::Value,
    (first, last): (u32, u32),
    bytes: u64,
) -> Option<Vec<(u32, u64)>> {
    let mut parts: Vec<(u32, u64)> = Vec::new();
    for pair in list.as_array()? {
        let pair = pair.as_array().filter(|p| p.len() == 2)?;
        let height = u32::try_from(pair[0].as_u64()?).ok()?;
        let offset = pair[1].as_u64()?;
        let (after_h, after_o) = parts.last().copied().unwrap_or((first, 0));
        if height <= after_h || height > last || offset <= after_o || offset >= bytes {
            return None;
        }
        parts.push((height, offset));
    }
    Some(parts)
}

/// Why an export wrote nothing (or, for [`ExportError::Io`] and a stray file while
/// writing, stopped before its manifest: files already written then are named by their
/// content and listed by no manifest, so they change nothing a client reads).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading or writing a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was read or written.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The manifest is not one this program wrote (or not of this version).
    #[error("{}: unreadable manifest: {why}", path.display())]
    ManifestUnreadable {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A file the manifest lists is not there.
    #[error("{}: listed in the manifest, but missing", file.display())]
    FileMissing {
        /// The file's path.
        file: PathBuf,
    },
    /// A file the manifest lists (or one named as a new sealed file would be) does not
    /// hold the bytes it was sealed with.
    #[error("{}: changed since it was sealed ({why})", file.display())]
    FileChanged {
        /// The file's path.
        file: PathBuf,
        /// Its size or SHA-256 against the manifest's.
        why: String,
    },
    /// The manifest is of another network than the chain.
    #[error("the export is of {manifest}, the chain of {chain}")]
    NetworkMismatch {
        /// The manifest's network.
        manifest: String,
        /// The chain's.
        chain: Network,
    },
    /// The manifest names another genesis block than the chain's network.
    #[error("the export's genesis is {manifest}, the chain's {chain}: another chain")]
    GenesisMismatch {
        /// The manifest's.
        manifest: BlockHash,
        /// The chain's.
        chain: BlockHash,
    },
    /// The chain has another block hash (headers) or filter header (filter headers) at a
    /// sealed file's last height than the file was sealed with: a reorg deeper than the
    /// sealed files, or another chain. Sealed files are never rewritten.
    #[error(
        "the chain contradicts the sealed {kind} file at height {height} ({file}): \
         sealed {sealed}, the chain has {chain}"
    )]
    ChainContradicts {
        /// Which file kind.
        kind: Kind,
        /// The file's last height.
        height: u32,
        /// The file's name.
        file: String,
        /// What was sealed there (display hex).
        sealed: String,
        /// What the chain has there (display hex).
        chain: String,
    },
    /// The chain (or its filter headers) does not reach a sealed file's last height, so
    /// it cannot be checked against it; nothing sealed is dropped.
    #[error(
        "the chain's {kind} reach {}, below the sealed file ending at height {height} ({file})",
        .reached.map_or("nothing".to_owned(), |h| format!("height {h}"))
    )]
    ChainBehind {
        /// Which file kind.
        kind: Kind,
        /// The file's last height.
        height: u32,
        /// The file's name.
        file: String,
        /// The chain's highest height of that kind.
        reached: Option<u32>,
    },
    /// Bulk files start at genesis; this chain starts later (`--from-height`).
    #[error("the chain starts at height {base}: bulk files start at genesis")]
    NotFromGenesis {
        /// Its first height.
        base: u32,
    },
    /// A filter to write cannot be had (a node that did not send it in time, or a chain
    /// that serves none at that height).
    #[error("the filter of block {height} is not available")]
    FilterUnavailable {
        /// The block's height.
        height: u32,
    },
    /// The chain moved below a file's last height while the file was written (a reorg
    /// deeper than the confirmations, or the chain fell back): the file is not sealed,
    /// and the next run writes it from the chain as it is then.
    #[error("the chain changed at or below height {height} while its {kind} file was written")]
    ChainMoved {
        /// Which file kind.
        kind: Kind,
        /// The file's last height.
        height: u32,
    },
    /// A message did not encode (a bug: the buffers are sized for the largest).
    #[error("encoding the {kind} file from height {height}: {source}")]
    Encode {
        /// Which file kind.
        kind: Kind,
        /// Where the message started.
        height: u32,
        /// Why.
        #[source]
        source: EncodeError,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What an export did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// The network's directory (`<out>/<network>`).
    pub dir: PathBuf,
    /// Files added to the manifest by this run.
    pub new_files: usize,
    /// The last sealed header's height, if any headers file is sealed.
    pub headers_to: Option<u32>,
    /// The last sealed filter's height, if any filters file is sealed.
    pub filters_to: Option<u32>,
    /// Whether the manifest was written (false when nothing changed: it is left as is).
    pub manifest_written: bool,
    /// The manifest as this run left it (what [`export_after`] skips checking again).
    pub manifest: String,
}

impl fmt::Display for Exported {
    /// The one line `lightwire-gateway export` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = |x: Option<u32>| x.map_or("none".to_owned(), |h| h.to_string());
        write!(
            f,
            "exported {} new files to {}: headers to {}, filters to {}",
            self.new_files,
            self.dir.display(),
            h(self.headers_to),
            h(self.filters_to)
        )
    }
}

/// The highest height a sealed file may end at: `confirmations` below the tip (`None`
/// when the chain is not that long). A reorg deeper than this would contradict a sealed
/// file, which is then refused, never rewritten.
pub fn sealed_top(tip: u32, confirmations: u32) -> Option<u32> {
    tip.checked_sub(confirmations)
}

/// Export `src` into `out/<network>/`: check what an earlier run sealed there (the
/// manifest's files, byte for byte, and the chain at each sealed file's last height),
/// then write the ranges newly sealed and the manifest. Filter files are written only
/// when the chain serves filters; those sealed by an earlier run stay listed either way.
pub fn export(
    src: &impl ExportSource,
    out: &Path,
    confirmations: u32,
) -> Result<Exported, ExportError> {
    export_after(src, out, confirmations, None)
}

/// [`export`] for a process that exports again and again ([`crate::exporter`]): when the
/// manifest on disk is, byte for byte, `checked` (the one this process wrote or checked
/// last: [`Exported::manifest`]), the files it lists are not read and hashed again (a
/// mainnet export's filters are gigabytes). The chain is still checked at each sealed
/// file's last height.
pub fn export_after(
    src: &impl ExportSource,
    out: &Path,
    confirmations: u32,
    checked: Option<&str>,
) -> Result<Exported, ExportError> {
    let (base, params) = src.read(|c| (c.base(), c.params()));
    if base != 0 {
        return Err(ExportError::NotFromGenesis { base });
    }
    let network = params.network;
    let genesis = params.genesis.block_hash();
    let dir = out.join(network.name());
    let manifest_path = dir.join(MANIFEST);
    let old = match fs::read(&manifest_path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_at(&manifest_path)(e)),
    };
    let mut manifest = match &old {
        Some(bytes) => {
            let m = Manifest::parse(bytes).map_err(|why| ExportError::ManifestUnreadable {
                path: manifest_path.clone(),
                why,
            })?;
            if m.network != network.name() {
                return Err(ExportError::NetworkMismatch {
                    manifest: m.network,
                    chain: network,
                });
            }
            if m.genesis != genesis {
                return Err(ExportError::GenesisMismatch {
                    manifest: m.genesis,
                    chain: genesis,
                });
            }
            if checked.map(str::as_bytes) != Some(&bytes[..]) {
                check_files(&dir, &m)?;
            }
            src.read(|c| check_chain(c, &m))?;
            m
        }
        None => Manifest::empty(network, genesis),
    };

    fs::create_dir_all(&dir).map_err(io_at(&dir))?;
    let (tip, filters_tip) = src.read(|c| (c.tip().height, c.filters().map(|f| f.tip())));
    let top = sealed_top(tip, confirmations);
    let mut new_files = 0;
    // Headers, each file read from the chain in one piece.
    while let Some((first, last)) = next_range(&manifest, Kind::Headers, top) {
        let (bytes, hash) = src.read(|c| {
            let bytes = headers_file(c, first, last)?;
            // Held: the range ends below the tip (unless the chain moved since).
            let hash = c.block_hash(last).ok_or(ExportError::ChainBehind {
                kind: Kind::Headers,
                height: last,
                file: unnamed(Kind::Headers, first, last),
                reached: Some(c.tip().height),
            })?;
            Ok::<_, ExportError>((bytes, hash))
        })?;
        seal(
            &dir,
            &mut manifest,
            Kind::Headers,
            (first, last),
            &bytes,
            Some(hash.0),
            Vec::new(),
        )?;
        new_files += 1;
    }
    // Filter headers and filters, up to what the chain holds filter headers for.
    if let Some(filters_tip) = filters_tip {
        let top = top.zip(filters_tip).map(|(a, b)| a.min(b));
        while let Some((first, last)) = next_range(&manifest, Kind::FilterHeaders, top) {
            let (bytes, entry) = src.read(|c| {
                let filters = c
                    .filters()
                    .ok_or(ExportError::FilterUnavailable { height: last })?;
                let entry = filters
                    .entry(last)
                    .ok_or(ExportError::FilterUnavailable { height: last })?;
                Ok::<_, ExportError>((filter_headers_file(filters, first, last)?, entry))
            })?;
            let kind = Kind::FilterHeaders;
            seal(
                &dir,
                &mut manifest,
                kind,
                (first, last),
                &bytes,
                Some(entry.header.0),
                Vec::new(),
            )?;
            new_files += 1;
        }
        // Their large files are shorter than the filter headers' (a scan's window), so
        // they are sealed apart, to the same height.
        while let Some((first, last)) = next_range(&manifest, Kind::Filters, top) {
            let (bytes, parts) = filters_file(src, first, last)?;
            seal(
                &dir,
                &mut manifest,
                Kind::Filters,
                (first, last),
                &bytes,
                None,
                parts,
            )?;
            new_files += 1;
        }
    }

    let json = manifest.to_json();
    let manifest_written = old.as_deref() != Some(json.as_bytes());
    if manifest_written {
        // The files it names are on disk before it names them.
        sync_dir(&dir)?;
        write_atomically(&dir, MANIFEST, json.as_bytes())?;
        sync_dir(&dir)?;
    }
    Ok(Exported {
        dir,
        new_files,
        headers_to: manifest.headers.last().map(|e| e.last),
        filters_to: manifest.filters.last().map(|e| e.last),
        manifest_written,
        manifest: json,
    })
}

/// The next range of `kind` to seal, if it ends at or below `top`: a large file's after
/// the large files listed, when its whole range is sealed (it takes the place of the
/// small files it covers), else a small file's after the last file listed.
fn next_range(manifest: &Manifest, kind: Kind, top: Option<u32>) -> Option<(u32, u32)> {
    let top = top?;
    let list = manifest.entries(kind);
    // The large files' span: as the export began them, else as exports write them now.
    let span = list
        .first()
        .and_then(|e| kind.span(e.first, e.last))
        .filter(|&s| s > 1)
        .unwrap_or(kind.per_large());
    let large = list
        .iter()
        .take_while(|e| kind.span(e.first, e.last) == Some(span))
        .count();
    let index = u32::try_from(large).ok()?;
    if let Some(r) = kind.range(index, span).filter(|r| r.1 <= top) {
        return Some(r);
    }
    let next = list.last().map_or(0, |e| e.last.saturating_add(1));
    let index = match kind {
        Kind::Headers => next / HEADERS_PER_FILE,
        Kind::FilterHeaders | Kind::Filters => next.saturating_sub(1) / FILTERS_PER_FILE,
    };
    kind.range(index, 1)
        .filter(|&(first, last)| first == next && last <= top)
}

/// Every file `manifest` lists is in `dir` with its size and SHA-256.
fn check_files(dir: &Path, manifest: &Manifest) -> Result<(), ExportError> {
    for kind in Kind::ALL {
        for e in manifest.entries(kind) {
            let path = dir.join(e.file_name(kind));
            let (bytes, sha256) = match hash_file(&path) {
                Ok(found) => found,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(ExportError::FileMissing { file: path });
                }
                Err(err) => return Err(io_at(&path)(err)),
            };
            if bytes != e.bytes {
                let why = format!("{bytes} bytes, sealed with {}", e.bytes);
                return Err(ExportError::FileChanged { file: path, why });
            }
            if sha256 != e.sha256 {
                let why = format!("its SHA-256 is {}", hex::encode(sha256));
                return Err(ExportError::FileChanged { file: path, why });
            }
        }
    }
    Ok(())
}

/// The chain has, at each sealed file's last height, the block hash (headers) and filter
/// header (filter headers) the file was sealed with. Filter headers are checked only
/// against a chain that serves filters (a headers file has none: its headers, checked
/// here, fix the blocks the sealed filters were computed from).
fn check_chain(chain: &ServedChain, manifest: &Manifest) -> Result<(), ExportError> {
    for e in &manifest.headers {
        let held = chain.block_hash(e.last).map(|h| h.0);
        compare(Kind::Headers, e, held, Some(chain.tip().height))?;
    }
    if let Some(filters) = chain.filters() {
        for e in &manifest.filter_headers {
            let held = filters.entry(e.last).map(|x| x.header.0);
            compare(Kind::FilterHeaders, e, held, filters.tip())?;
        }
    }
    Ok(())
}

fn compare(
    kind: Kind,
    e: &Entry,
    held: Option<[u8; 32]>,
    reached: Option<u32>,
) -> Result<(), ExportError> {
    let file = e.file_name(kind);
    let Some(held) = held else {
        return Err(ExportError::ChainBehind {
            kind,
            height: e.last,
            file,
            reached,
        });
    };
    match e.top {
        Some(top) if top == held => Ok(()),
        sealed => Err(ExportError::ChainContradicts {
            kind,
            height: e.last,
            file,
            sealed: sealed.map_or("nothing".into(), |t| display_hex(&t)),
            chain: display_hex(&held),
        }),
    }
}

/// Write a new sealed file and list it. A file of that name already there (an earlier
/// run that stopped before its manifest) is kept when it holds these very bytes, and
/// refused otherwise: an existing sealed file is never opened for writing.
fn seal(
    dir: &Path,
    manifest: &mut Manifest,
    kind: Kind,
    (first, last): (u32, u32),
    bytes: &[u8],
    top: Option<[u8; 32]>,
    parts: Vec<(u32, u64)>,
) -> Result<(), ExportError> {
    // What the mirror reader checks a file against.
    let check = lightwire_proto::bulk::file_check(bytes);
    let entry = Entry {
        first,
        last,
        bytes: check.bytes,
        sha256: check.sha256,
        top,
        parts,
    };
    let name = entry.file_name(kind);
    let path = dir.join(&name);
    match hash_file(&path) {
        Ok(found) if found == (entry.bytes, entry.sha256) => {}
        Ok((len, sha256)) => {
            let why = format!("{len} bytes with SHA-256 {}", hex::encode(sha256));
            return Err(ExportError::FileChanged { file: path, why });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => write_atomically(dir, &name, bytes)?,
        Err(e) => return Err(io_at(&path)(e)),
    }
    // In its place: after the files before it, instead of the small files it covers.
    let list = manifest.entries_mut(kind);
    list.retain(|e| e.last < first || e.first > last);
    let at = list.partition_point(|e| e.last < first);
    list.insert(at, entry);
    Ok(())
}

/// A file's length and SHA-256, read in 64 KiB pieces (a filters file of recent mainnet
/// blocks is tens of megabytes).
fn hash_file(path: &Path) -> io::Result<(u64, [u8; 32])> {
    let mut f = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, hasher.finalize().into()))
}

/// Write `dir/name` so that it is either absent or whole, never partly written: a
/// temporary file in the same directory (a dot file: the nginx configuration serves only
/// the names an export lists), synced, then renamed over the name.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ExportError> {
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(io_at(&tmp)(e));
    }
    let path = dir.join(name);
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_at(&path)(e)
    })
}

/// Make the names written in `dir` durable (the rename itself), before a manifest names
/// them and after it is renamed into place. Directories cannot be opened to sync outside
/// Unix; there the rename is left to the file system.
fn sync_dir(dir: &Path) -> Result<(), ExportError> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The headers file of heights `first..=last`: `headers_compact` messages as a gateway
/// answers, written by the mirror reader's own counterpart
/// ([`lightwire_proto::bulk::write_headers`], the one writer of headers files).
fn headers_file(chain: &ServedChain, first: u32, last: u32) -> Result<Vec<u8>, ExportError> {
    let headers = (first..=last)
        .map(|h| {
            // Held: the range ends below the tip.
            chain.header(h).ok_or(ExportError::ChainBehind {
                kind: Kind::Headers,
                height: last,
                file: unnamed(Kind::Headers, first, last),
                reached: h.checked_sub(1),
            })
        })
        .collect::<Result<Vec<[u8; HEADER_LEN]>, _>>()?;
    let mut file = Vec::with_capacity(headers.len() * 42);
    lightwire_proto::bulk::write_headers(&mut file, first, headers.len(), |i| headers[i]);
    Ok(file)
}

/// The filter-headers file of heights `first..=last`: `filter_headers` messages as a
/// gateway answers, anchored on the filter header before `first` (zeros before genesis).
fn filter_headers_file(
    filters: &ServedFilters,
    first: u32,
    last: u32,
) -> Result<Vec<u8>, ExportError> {
    let unavailable = |height| ExportError::FilterUnavailable { height };
    let before = match first.checked_sub(1) {
        Some(h) => filters.entry(h).ok_or(unavailable(h))?.header.0,
        None => [0; 32],
    };
    let entries = (first..=last)
        .map(|h| {
            let e = filters.entry(h).ok_or(unavailable(h))?;
            Ok((e.header.0, e.hash.0))
        })
        .collect::<Result<Vec<_>, ExportError>>()?;
    let mut file = Vec::with_capacity(entries.len() * 32 + 256);
    lightwire_proto::bulk::write_filter_headers(&mut file, first, before, &entries);
    Ok(file)
}

/// The filters file of heights `first..=last`: `filters` messages as a gateway's session
/// answers `get_filters`, written by the mirror reader's own counterpart
/// ([`lightwire_proto::bulk::write_filters`], the one writer of filters files). The
/// filters are read one by one, outside the chain's lock (a node's are fetched while this
/// waits), so the block at `last` is read before and after: a filter checked against
/// another branch's filter hash would make a file no client accepts, sealed for good.
fn filters_file(
    src: &impl ExportSource,
    first: u32,
    last: u32,
) -> Result<(Vec<u8>, Parts), ExportError> {
    let before = src.read(|c| c.block_hash(last));
    // A part at each small file's range inside it: a scan from a block inside a large
    // file reads from the part holding it, not from the file's first block.
    let starts: Vec<u32> = (0..)
        .map_while(|i| Kind::Filters.range(i, 1))
        .map(|(f, _)| f)
        .skip_while(|&f| f <= first)
        .take_while(|&f| f <= last)
        .collect();
    let mut file = Vec::new();
    let written = write_filters(&mut file, (first, last), &starts, |height, out| {
        let header: Option<[u8; HEADER_LEN]> = src.read(|c| c.header(height));
        match header {
            Some(header) if src.filter(height, header, out) => Ok(()),
            _ => Err(()),
        }
    });
    match written {
        Ok(w) if before.is_some() && src.read(|c| c.block_hash(last)) == before => {
            Ok((file, w.starts))
        }
        Ok(_) => Err(ExportError::ChainMoved {
            kind: Kind::Filters,
            height: last,
        }),
        Err(WriteFiltersError::Source { height, .. }) => {
            Err(ExportError::FilterUnavailable { height })
        }
        Err(WriteFiltersError::Encode(source)) => Err(ExportError::Encode {
            kind: Kind::Filters,
            height: first,
            source,
        }),
    }
}

/// A file being written, before its hash names it.
fn unnamed(kind: Kind, first: u32, last: u32) -> String {
    format!("{}-{first}-{last}-*.bin", kind.prefix())
}

/// A hash or filter header as block explorers show it: byte-reversed hex.
fn display_hex(bytes: &[u8; 32]) -> String {
    BlockHash(*bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightwire_chain::hash_header_bytes;
    use lightwire_filter::{FilterHash, FilterHeader};
    use lightwire_wire::Message;
    use std::time::SystemTime;

    const NOW: u64 = 2_000_000_000;

    /// A fresh directory under the system's temporary one, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("lightwire-export-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn generated(n: u32) -> ServedChain {
        let mut chain = ServedChain::generate(n, NOW).unwrap();
        chain.serve_generated_filters(0);
        chain
    }

    /// The records of a bulk file, each one whole message.
    fn records(file: &[u8]) -> Vec<&[u8]> {
        lightwire_proto::bulk::records(file).collect()
    }

    /// Every file in `dir` (name -> bytes, modification time).
    fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, SystemTime)> {
        let mut all: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let meta = e.metadata().unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                    meta.modified().unwrap(),
                )
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Decode a headers file back into 80-byte headers, previous hashes rebuilt from the
    /// header before (and each segment's anchor checked against it).
    fn decode_headers(file: &[u8], first: u32, prev: Option<BlockHash>) -> Vec<[u8; 80]> {
        let messages = records(file);
        let mut out: Vec<[u8; 80]> = Vec::new();
        let mut prev = prev;
        for (i, m) in messages.iter().enumerate() {
            let Ok(Message::HeadersCompact(h)) = Message::decode(m) else {
                panic!("record {i} is not headers_compact");
            };
            assert_eq!(h.id, 0);
            assert_eq!(h.first_height, first + out.len() as u32);
            assert_eq!(
                h.last,
                i + 1 == messages.len(),
                "last only on the final message"
            );
            let n = usize::from(h.count);
            let mut buf = vec![0u8; n * 80];
            h.expand(&mut buf).unwrap();
            let (starts, segments) = h.segment_starts();
            for (j, raw) in buf.chunks_exact(80).enumerate() {
                let mut header: [u8; 80] = raw.try_into().unwrap();
                let want = prev.map_or([0; 32], |p| p.0);
                if starts[..segments].contains(&j) {
                    assert_eq!(header[4..36], want, "the anchor is the previous block hash");
                } else {
                    assert_eq!(header[4..36], [0; 32]);
                    header[4..36].copy_from_slice(&want);
                }
                prev = Some(hash_header_bytes(&header));
                out.push(header);
            }
        }
        out
    }

    /// Decode a filter-headers file into (filter header, filter hash) per block, the
    /// headers chained from each message's first anchor.
    fn decode_filter_headers(file: &[u8], first: u32) -> Vec<(FilterHeader, FilterHash)> {
        let messages = records(file);
        let mut out = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let Ok(Message::FilterHeaders(fh)) = Message::decode(m) else {
                panic!("record {i} is not filter_headers");
            };
            assert_eq!((fh.id, fh.first_height), (0, first + out.len() as u32));
            assert_eq!(fh.flags.last, i + 1 == messages.len());
            assert!(!fh.flags.stop_unknown);
            let (starts, segments) = fh.segment_starts();
            let mut prev = FilterHeader(fh.anchors[..32].try_into().unwrap());
            for (j, hash) in fh.hashes.chunks_exact(32).enumerate() {
                if let Some(k) = starts[..segments].iter().position(|s| *s == j) {
                    assert_eq!(fh.anchors[k * 32..k * 32 + 32], prev.0, "anchor {k}");
                }
                let hash = FilterHash(hash.try_into().unwrap());
                prev = prev.next(&hash);
                out.push((prev, hash));
            }
        }
        out
    }

    /// Decode a filters file into each block's filter, checking pieces come in order.
    fn decode_filters(file: &[u8], first: u32) -> Vec<Vec<u8>> {
        let messages = records(file);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut current: Option<Vec<u8>> = None;
        for (i, m) in messages.iter().enumerate() {
            let Ok(Message::Filters(f)) = Message::decode(m) else {
                panic!("record {i} is not filters");
            };
            assert_eq!(f.id, 0);
            assert_eq!(f.flags.last, i + 1 == messages.len());
            assert!(m.len() <= lightwire_wire::MAX_MESSAGE_LEN);
            for p in f.pieces() {
                assert_eq!(p.height, first + out.len() as u32);
                let filter = current.get_or_insert_with(Vec::new);
                assert_eq!(p.offset as usize, filter.len());
                filter.extend_from_slice(p.data);
                if p.ends_filter() {
                    out.push(current.take().unwrap());
                }
            }
        }
        assert!(current.is_none(), "no filter left unfinished");
        out
    }

    #[test]
    fn ranges_are_whole_periods_and_end_on_checkpoints() {
        assert_eq!(Kind::Headers.range(0, 1), Some((0, 2015)));
        assert_eq!(Kind::Headers.range(1, 1), Some((2016, 4031)));
        assert_eq!(Kind::FilterHeaders.range(0, 1), Some((0, 1000)));
        assert_eq!(Kind::FilterHeaders.range(1, 1), Some((1001, 2000)));
        assert_eq!(Kind::Filters.range(2, 1), Some((2001, 3000)));
        assert_eq!(Kind::Headers.range(u32::MAX, 1), None);
        assert_eq!(Kind::Filters.range(u32::MAX, 1), None);
        // Large files: ten of the small ones (twenty filter-headers files), on the same
        // boundaries; ten-file filter-headers files, as earlier exports wrote them, too.
        assert_eq!(Kind::Headers.range(1, 10), Some((20_160, 40_319)));
        assert_eq!(Kind::FilterHeaders.range(0, 20), Some((0, 20_000)));
        assert_eq!(Kind::FilterHeaders.range(1, 20), Some((20_001, 40_000)));
        assert_eq!(Kind::Filters.range(1, 10), Some((10_001, 20_000)));
        assert_eq!(Kind::Headers.span(20_160, 40_319), Some(10));
        assert_eq!(Kind::Headers.span(22_176, 24_191), Some(1));
        assert_eq!(Kind::Headers.span(2016, 22_175), None);
        assert_eq!(Kind::Headers.span(0, 40_319), None);
        assert_eq!(Kind::FilterHeaders.span(0, 1000), Some(1));
        assert_eq!(Kind::FilterHeaders.span(0, 20_000), Some(20));
        assert_eq!(Kind::FilterHeaders.span(0, 10_000), Some(10));
        assert_eq!(Kind::FilterHeaders.span(1, 1000), None);
        assert_eq!(Kind::Filters.span(10_001, 20_000), Some(10));
        assert_eq!(Kind::Filters.span(0, 20_000), None);
        assert_eq!(sealed_top(5000, 6), Some(4994));
        assert_eq!(sealed_top(5, 6), None);
    }

    /// Past a large file's range, the small files it covers give way to it in the
    /// manifest, unchanged on disk; what follows stays small.
    #[test]
    fn small_files_give_way_to_a_large_one_and_stay_on_disk() {
        let scratch = Scratch::new("large");
        let dir = scratch.0.join("regtest");
        let ranges = |kind: Kind| -> Vec<(u32, u32)> {
            let m = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
            m.entries(kind).iter().map(|e| (e.first, e.last)).collect()
        };
        // To 44,994: two large headers files and two small ones; four large filters
        // files and four small ones; two large filter-headers files and the same four.
        export(&generated(45_000), &scratch.0, 6).unwrap();
        let mut headers = vec![(0, 20_159), (20_160, 40_319)];
        headers.extend([(40_320, 42_335), (42_336, 44_351)]);
        assert_eq!(ranges(Kind::Headers), headers);
        let small = |from: u32, to: u32| (from..to).map(|i| Kind::Filters.range(i, 1).unwrap());
        let mut filters: Vec<(u32, u32)> = (0..4)
            .map(|i| Kind::Filters.range(i, 10).unwrap())
            .collect();
        filters.extend(small(40, 44));
        assert_eq!(ranges(Kind::Filters), filters);
        let mut filter_headers = vec![(0, 20_000), (20_001, 40_000)];
        filter_headers.extend(small(40, 44));
        assert_eq!(ranges(Kind::FilterHeaders), filter_headers);
        let before = snapshot(&dir);
        // To 59,994: the small filters files from 40,001 give way to one large file; the
        // filter headers' stay small until 60,000.
        export(&generated(60_000), &scratch.0, 6).unwrap();
        let mut filters: Vec<(u32, u32)> = (0..5)
            .map(|i| Kind::Filters.range(i, 10).unwrap())
            .collect();
        filters.extend(small(50, 59));
        assert_eq!(ranges(Kind::Filters), filters);
        let mut filter_headers = vec![(0, 20_000), (20_001, 40_000)];
        filter_headers.extend(small(40, 59));
        assert_eq!(ranges(Kind::FilterHeaders), filter_headers);
        let headers = ranges(Kind::Headers);
        assert_eq!(
            headers[..4],
            [
                (0, 20_159),
                (20_160, 40_319),
                (40_320, 42_335),
                (42_336, 44_351)
            ]
        );
        assert_eq!(headers.last(), Some(&(56_448, 58_463)));
        // Every file of the first run is still there, byte for byte (the manifest aside).
        let after = snapshot(&dir);
        for (name, bytes, _) in before.iter().filter(|f| f.0 != MANIFEST) {
            let kept = after.iter().find(|f| f.0 == *name).map(|f| &f.1);
            assert_eq!(kept, Some(bytes), "{name}");
        }
        // And the manifest reads back (large files before small ones).
        let m = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(m.filters.last().map(|e| e.last), Some(59_000));
        assert_eq!(m.filter_headers.last().map(|e| e.last), Some(59_000));
    }

    /// An export begun when a large filter-headers file held ten small ones goes on with
    /// ten-file ones (its manifest's layout stays whole).
    #[test]
    fn an_export_begun_with_ten_file_filter_headers_files_goes_on_with_them() {
        let scratch = Scratch::new("ten");
        let dir = scratch.0.join("regtest");
        let chain = generated(15_000);
        export(&chain, &scratch.0, 6).unwrap();
        // As an earlier export left it: 0-10,000 in one filter-headers file.
        let mut m = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        let filters = chain.filters().unwrap();
        let bytes = filter_headers_file(filters, 0, 10_000).unwrap();
        let top = filters.entry(10_000).unwrap().header.0;
        seal(
            &dir,
            &mut m,
            Kind::FilterHeaders,
            (0, 10_000),
            &bytes,
            Some(top),
            Vec::new(),
        )
        .unwrap();
        fs::write(dir.join(MANIFEST), m.to_json()).unwrap();
        export(&generated(25_000), &scratch.0, 6).unwrap();
        let m = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        let got: Vec<(u32, u32)> = m.filter_headers.iter().map(|e| (e.first, e.last)).collect();
        let mut want = vec![(0, 10_000), (10_001, 20_000)];
        want.extend((20..24).map(|i| Kind::FilterHeaders.range(i, 1).unwrap()));
        assert_eq!(got, want);
        // A list of large files of both sizes is no export's: refused, naming the entry.
        let mut mixed = m;
        let entry = |first, last| Entry {
            first,
            last,
            bytes: 1,
            sha256: [0; 32],
            top: Some([0; 32]),
            parts: Vec::new(),
        };
        mixed.filter_headers = vec![entry(0, 20_000), entry(20_001, 30_000)];
        let err = Manifest::parse(mixed.to_json().as_bytes()).unwrap_err();
        assert!(
            err.contains("[1]: a large file of 10 small ones after ones of 20"),
            "{err}"
        );
    }

    /// Every file decodes, with the gateway's own decoder, back into the chain's headers,
    /// filter headers and filters; names and manifest entries carry the files' SHA-256;
    /// ranges are whole and contiguous, and nothing above tip - confirmations is written.
    #[test]
    fn an_export_decodes_back_into_the_chain() {
        let scratch = Scratch::new("roundtrip");
        let chain = generated(5000);
        let filters = chain.filters().unwrap();
        let done = export(&chain, &scratch.0, 6).unwrap();
        let dir = scratch.0.join("regtest");
        assert_eq!(done.dir, dir);
        // Sealed to 4994: headers to 4031, filters to 4000.
        assert_eq!((done.headers_to, done.filters_to), (Some(4031), Some(4000)));
        assert_eq!(done.new_files, 2 + 4 + 4);
        assert!(done.manifest_written);
        assert_eq!(
            done.to_string(),
            format!(
                "exported 10 new files to {}: headers to 4031, filters to 4000",
                dir.display()
            )
        );

        let manifest = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(manifest.network, "regtest");
        assert_eq!(
            manifest.genesis,
            lightwire_chain::REGTEST.genesis.block_hash()
        );
        assert_eq!(manifest.top(), (4031, chain.block_hash(4031).unwrap()));
        let mut names: Vec<String> = vec![MANIFEST.into()];
        for kind in Kind::ALL {
            let list = manifest.entries(kind);
            for (i, e) in list.iter().enumerate() {
                assert_eq!(
                    Some((e.first, e.last)),
                    kind.range(i as u32, 1),
                    "{kind} {i}"
                );
                assert!(e.last <= 4994);
                let name = e.file_name(kind);
                let bytes = fs::read(dir.join(&name)).unwrap();
                assert_eq!(e.bytes, bytes.len() as u64);
                let sha: [u8; 32] = Sha256::digest(&bytes).into();
                assert_eq!(e.sha256, sha);
                assert!(name.ends_with(&format!("-{}.bin", hex::encode(sha))));
                names.push(name);
            }
        }
        let mut on_disk: Vec<String> = snapshot(&dir).into_iter().map(|f| f.0).collect();
        on_disk.sort();
        names.sort();
        assert_eq!(on_disk, names, "only listed files, no temporary ones");

        let mut prev = None;
        for e in &manifest.headers {
            let bytes = fs::read(dir.join(e.file_name(Kind::Headers))).unwrap();
            let got = decode_headers(&bytes, e.first, prev);
            assert_eq!(got.len(), 2016);
            for (i, h) in got.iter().enumerate() {
                assert_eq!(Some(*h), chain.header(e.first + i as u32));
            }
            assert_eq!(e.top, Some(chain.block_hash(e.last).unwrap().0));
            prev = Some(hash_header_bytes(got.last().unwrap()));
        }
        for (fh, fl) in manifest.filter_headers.iter().zip(&manifest.filters) {
            assert_eq!((fh.first, fh.last), (fl.first, fl.last));
            let bytes = fs::read(dir.join(fh.file_name(Kind::FilterHeaders))).unwrap();
            let got = decode_filter_headers(&bytes, fh.first);
            assert_eq!(got.len() as u32, fh.last - fh.first + 1);
            for (i, (header, hash)) in got.iter().enumerate() {
                let held = filters.entry(fh.first + i as u32).unwrap();
                assert_eq!((*header, *hash), (held.header, held.hash));
            }
            assert_eq!(fh.top, Some(got.last().unwrap().0.0));
            let bytes = fs::read(dir.join(fl.file_name(Kind::Filters))).unwrap();
            let got = decode_filters(&bytes, fl.first);
            assert_eq!(got.len() as u32, fl.last - fl.first + 1);
            for (i, f) in got.iter().enumerate() {
                let height = fl.first + i as u32;
                let header = chain.header(height);
                let want = filters.with_filter(height, header, <[u8]>::to_vec);
                assert_eq!(FilterLookup::Ready(f.clone()), want, "filter {height}");
                assert_eq!(FilterHash::of(f), filters.entry(height).unwrap().hash);
            }
        }
    }

    /// Filters that do not fit one message are continued in the next, as a gateway's
    /// answer: a file of big filters decodes back whole.
    #[test]
    fn large_filters_span_messages() {
        let mut chain = generated(1010);
        for h in 1..=1000u32 {
            let big: Vec<u8> = (0..30_000u32).map(|i| (i ^ h) as u8).collect();
            assert!(chain.filters_mut().unwrap().set_filter(h, big));
        }
        let (file, parts) = filters_file(&chain, 0, 1000).unwrap();
        assert!(parts.is_empty(), "a small file has no parts");
        assert!(records(&file).len() > 400, "30 MB in 64 KB messages");
        let got = decode_filters(&file, 0);
        assert_eq!(got.len(), 1001);
        for (h, f) in got.iter().enumerate().skip(1) {
            assert_eq!(f.len(), 30_000);
            assert_eq!(f[7], (7 ^ h as u32) as u8);
        }
    }

    /// A second run on a longer chain that extends the first appends: the first run's
    /// files are untouched (bytes and modification times), only new files are added, and
    /// the manifest lists all of them; a run with nothing new changes nothing.
    #[test]
    fn a_longer_chain_appends_and_a_run_with_nothing_new_changes_nothing() {
        let scratch = Scratch::new("append");
        let dir = scratch.0.join("regtest");
        export(&generated(5000), &scratch.0, 6).unwrap();
        let before = snapshot(&dir);
        // Nothing new: 5,005 blocks seal to 4,999, and the next files end at 6,047 (headers)
        // and 5,000 (filters).
        let again = export(&generated(5005), &scratch.0, 6).unwrap();
        assert_eq!((again.new_files, again.manifest_written), (0, false));
        assert_eq!(snapshot(&dir), before, "byte-identical, manifest included");

        std::thread::sleep(std::time::Duration::from_millis(20));
        let longer = generated(9000);
        let done = export(&longer, &scratch.0, 6).unwrap();
        assert_eq!((done.headers_to, done.filters_to), (Some(8063), Some(8000)));
        assert_eq!(done.new_files, 2 + 4 + 4);
        let after = snapshot(&dir);
        for old in before.iter().filter(|f| f.0 != MANIFEST) {
            assert!(after.contains(old), "{} changed", old.0);
        }
        let manifest = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(manifest.headers.len(), 4);
        assert_eq!(manifest.filter_headers.len(), 8);
        assert_eq!(after.len(), 1 + 4 + 8 + 8, "only listed files");
        // The chain from one run on 9,000 blocks writes the very same files.
        let fresh = Scratch::new("append-fresh");
        export(&longer, &fresh.0, 6).unwrap();
        let one_run = snapshot(&fresh.0.join("regtest"));
        let names = |s: &[(String, Vec<u8>, SystemTime)]| {
            s.iter()
                .map(|f| (f.0.clone(), f.1.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&one_run), names(&after));
    }

    #[test]
    fn a_changed_or_missing_file_is_refused_and_nothing_written() {
        let scratch = Scratch::new("changed");
        let dir = scratch.0.join("regtest");
        export(&generated(2100), &scratch.0, 6).unwrap();
        let manifest = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        let victim = dir.join(manifest.filters[1].file_name(Kind::Filters));
        let mut bytes = fs::read(&victim).unwrap();
        bytes[100] ^= 1;
        fs::write(&victim, &bytes).unwrap();
        let before = snapshot(&dir);
        let err = export(&generated(5000), &scratch.0, 6).unwrap_err();
        assert!(
            matches!(&err, ExportError::FileChanged { file, .. } if *file == victim),
            "{err}"
        );
        assert_eq!(snapshot(&dir), before, "nothing written");

        bytes.pop();
        fs::write(&victim, &bytes).unwrap();
        let err = export(&generated(5000), &scratch.0, 6).unwrap_err();
        assert!(err.to_string().contains("bytes, sealed with"), "{err}");

        fs::remove_file(&victim).unwrap();
        let err = export(&generated(5000), &scratch.0, 6).unwrap_err();
        assert!(matches!(&err, ExportError::FileMissing { file } if *file == victim));

        fs::write(dir.join(MANIFEST), b"{\"version\": 2}").unwrap();
        let err = export(&generated(5000), &scratch.0, 6).unwrap_err();
        assert!(
            matches!(&err, ExportError::ManifestUnreadable { why, .. } if why.contains("version 2")),
            "{err}"
        );
    }

    /// A large filters file lists a part at each small file's range inside it; read from
    /// a part's offset, it is the filters from that height to its end. The manifest keeps
    /// the parts, and refuses parts out of order, outside the file, or on another kind.
    #[test]
    fn a_large_filters_file_lists_where_each_part_starts() {
        let scratch = Scratch::new("parts");
        let dir = scratch.0.join("regtest");
        let chain = generated(10_100);
        let done = export(&chain, &scratch.0, 6).unwrap();
        let m = Manifest::parse(done.manifest.as_bytes()).unwrap();
        let large = &m.filters[0];
        assert_eq!((large.first, large.last), (0, 10_000));
        let heights: Vec<u32> = large.parts.iter().map(|p| p.0).collect();
        assert_eq!(heights, (1..10).map(|k| k * 1_000 + 1).collect::<Vec<_>>());
        let file = fs::read(dir.join(large.file_name(Kind::Filters))).unwrap();
        let filters = chain.filters().unwrap();
        for &(height, offset) in &large.parts {
            let got = decode_filters(&file[offset as usize..], height);
            assert_eq!(got.len() as u32, 10_000 - height + 1, "from {height}");
            for (i, f) in got.iter().enumerate() {
                let h = height + i as u32;
                assert_eq!(
                    lightwire_filter::filter_hash(f),
                    filters.entry(h).unwrap().hash
                );
            }
        }
        assert!(
            m.headers
                .iter()
                .chain(&m.filter_headers)
                .all(|e| e.parts.is_empty())
        );

        let with = |edit: &dyn Fn(&mut Manifest)| {
            let mut bad = m.clone();
            edit(&mut bad);
            Manifest::parse(bad.to_json().as_bytes())
        };
        assert_eq!(with(&|_| {}).unwrap(), m);
        assert!(with(&|b| b.filters[0].parts.swap(0, 1)).is_err());
        assert!(with(&|b| b.filters[0].parts[8].1 = b.filters[0].bytes).is_err());
        assert!(with(&|b| b.filters[0].parts[8].0 = 10_001).is_err());
        let err = with(&|b| b.headers[0].parts = vec![(5, 5)]).unwrap_err();
        assert!(err.contains("only filters files have"), "{err}");
    }

    /// The files of a manifest this process wrote itself are not hashed again
    /// ([`export_after`]); any other manifest's are, as by [`export`].
    #[test]
    fn a_manifest_written_by_this_process_is_not_checked_again() {
        let scratch = Scratch::new("checked");
        let dir = scratch.0.join("regtest");
        let done = export(&generated(2100), &scratch.0, 6).unwrap();
        let victim = dir.join(
            Manifest::parse(done.manifest.as_bytes()).unwrap().filters[1].file_name(Kind::Filters),
        );
        let mut bytes = fs::read(&victim).unwrap();
        bytes[100] ^= 1;
        fs::write(&victim, &bytes).unwrap();
        let again = export_after(&generated(2100), &scratch.0, 6, Some(&done.manifest)).unwrap();
        assert_eq!(again.new_files, 0);
        let other = format!("{} ", done.manifest);
        let err = export_after(&generated(2100), &scratch.0, 6, Some(&other)).unwrap_err();
        assert!(
            matches!(&err, ExportError::FileChanged { file, .. } if *file == victim),
            "{err}"
        );
    }

    /// A source whose chain falls back to `after` as the filter at `at` is read: the
    /// filters are read outside a shared chain's lock, and a node's chain can move then.
    struct Moving {
        before: ServedChain,
        after: ServedChain,
        at: u32,
        moved: std::cell::Cell<bool>,
    }

    impl ExportSource for Moving {
        fn read<R>(&self, read: impl FnOnce(&ServedChain) -> R) -> R {
            read(if self.moved.get() {
                &self.after
            } else {
                &self.before
            })
        }

        fn filter(&self, height: u32, header: [u8; HEADER_LEN], out: &mut Vec<u8>) -> bool {
            self.moved.set(self.moved.get() || height == self.at);
            self.before.filter(height, header, out)
        }
    }

    /// A filters file whose chain moved while its filters were read is not sealed (they
    /// were checked against filter hashes of a chain no longer served); nothing is
    /// listed, and a run on the chain as it is then writes it.
    #[test]
    fn a_filters_file_whose_chain_moved_meanwhile_is_not_sealed() {
        let scratch = Scratch::new("moved");
        let dir = scratch.0.join("regtest");
        let src = Moving {
            before: generated(2100),
            after: generated(900),
            at: 1000,
            moved: std::cell::Cell::new(false),
        };
        let err = export(&src, &scratch.0, 6).unwrap_err();
        assert!(
            matches!(
                err,
                ExportError::ChainMoved {
                    kind: Kind::Filters,
                    height: 1000
                }
            ),
            "{err}"
        );
        assert!(!dir.join(MANIFEST).exists(), "nothing listed");
        let done = export(&generated(2100), &scratch.0, 6).unwrap();
        assert_eq!(done.filters_to, Some(2000));
    }

    /// A file already at a new sealed file's name, listed by no manifest (a run that
    /// stopped before writing its manifest), is kept as it is when it holds the very
    /// bytes, and refused otherwise: it is never opened for writing.
    #[test]
    fn an_unlisted_file_at_a_sealed_name_is_kept_only_when_it_is_the_same() {
        let done = Scratch::new("stray-model");
        let chain = generated(2100);
        export(&chain, &done.0, 6).unwrap();
        let model = snapshot(&done.0.join("regtest"));
        let (name, bytes, _) = model
            .iter()
            .find(|f| f.0.starts_with("filters-0-"))
            .unwrap();

        let scratch = Scratch::new("stray");
        let dir = scratch.0.join("regtest");
        fs::create_dir_all(&dir).unwrap();
        let mut other = bytes.clone();
        other[20] ^= 1;
        fs::write(dir.join(name), &other).unwrap();
        let err = export(&chain, &scratch.0, 6).unwrap_err();
        assert!(
            matches!(&err, ExportError::FileChanged { file, .. } if *file == dir.join(name)),
            "{err}"
        );
        assert_eq!(fs::read(dir.join(name)).unwrap(), other, "not written over");
        assert!(!dir.join(MANIFEST).exists());

        fs::write(dir.join(name), bytes).unwrap();
        let kept = fs::metadata(dir.join(name)).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let run = export(&chain, &scratch.0, 6).unwrap();
        assert_eq!(run.new_files, 5, "listed now");
        let modified = fs::metadata(dir.join(name)).unwrap().modified().unwrap();
        assert_eq!(modified, kept, "kept, not rewritten");
        let names = |s: Vec<(String, Vec<u8>, SystemTime)>| {
            s.into_iter().map(|f| (f.0, f.1)).collect::<Vec<_>>()
        };
        assert_eq!(names(snapshot(&dir)), names(model));
    }

    /// A chain with another block at a sealed file's last height (here a heavier branch
    /// from 3,000, past the file that ends at 4,031) is refused naming the height; so is a
    /// manifest of another network; nothing is written.
    #[test]
    fn another_chain_is_refused_naming_the_height() {
        use lightwire_chain::REGTEST;
        use lightwire_chain::generate::headers_after;
        let scratch = Scratch::new("reorg");
        let dir = scratch.0.join("regtest");
        export(&generated(5000), &scratch.0, 6).unwrap();
        let before = snapshot(&dir);

        let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
        let branch = headers_after(&REGTEST, &main[2999], 3000, 3000, 1);
        let mut data = REGTEST.genesis.encode().to_vec();
        for h in main.iter().chain(&branch) {
            data.extend_from_slice(&h.encode());
        }
        let other = ServedChain::from_file(&REGTEST, &data, None, NOW).unwrap();
        let err = export(&other, &scratch.0, 6).unwrap_err();
        assert!(
            matches!(
                &err,
                ExportError::ChainContradicts {
                    kind: Kind::Headers,
                    height: 4031,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("at height 4031"), "{err}");
        assert_eq!(snapshot(&dir), before);

        // A filter set at 3,500 changes every filter header from there: the filter-headers
        // file ending at 4,000 is contradicted.
        let mut chain = generated(5000);
        chain.filters_mut().unwrap().set_filter(3500, vec![0]);
        let err = export(&chain, &scratch.0, 6).unwrap_err();
        assert!(
            matches!(
                &err,
                ExportError::ChainContradicts {
                    kind: Kind::FilterHeaders,
                    height: 4000,
                    ..
                }
            ),
            "{err}"
        );

        // A shorter chain cannot be checked against the files above its tip.
        let err = export(&generated(3000), &scratch.0, 6).unwrap_err();
        assert!(
            matches!(
                &err,
                ExportError::ChainBehind {
                    height: 4031,
                    reached: Some(3000),
                    ..
                }
            ),
            "{err}"
        );

        let text = fs::read_to_string(dir.join(MANIFEST)).unwrap();
        fs::write(
            dir.join(MANIFEST),
            text.replace("\"regtest\"", "\"signet\""),
        )
        .unwrap();
        let err = export(&generated(5000), &scratch.0, 6).unwrap_err();
        assert!(matches!(err, ExportError::NetworkMismatch { .. }), "{err}");
        assert_eq!(snapshot(&dir).len(), before.len());
    }

    /// A headers file has no filters: headers only are written, and filter files sealed
    /// by an earlier run (from a chain with filters) stay listed.
    #[test]
    fn a_headers_only_chain_writes_no_filter_files() {
        use lightwire_chain::REGTEST;
        use lightwire_chain::generate::headers_after;
        let scratch = Scratch::new("headers-only");
        let dir = scratch.0.join("regtest");
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0);
        let mut data = REGTEST.genesis.encode().to_vec();
        for h in &headers[..2500] {
            data.extend_from_slice(&h.encode());
        }
        let file = ServedChain::from_file(&REGTEST, &data, None, NOW).unwrap();
        let done = export(&file, &scratch.0, 6).unwrap();
        assert_eq!((done.new_files, done.filters_to), (1, None));
        let names: Vec<String> = snapshot(&dir).into_iter().map(|f| f.0).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("headers-0-2015-")));

        // Then a chain with filters seals filters; a headers file after it keeps them.
        export(&generated(2500), &scratch.0, 6).unwrap();
        for h in &headers[2500..] {
            data.extend_from_slice(&h.encode());
        }
        let file = ServedChain::from_file(&REGTEST, &data, None, NOW).unwrap();
        let done = export(&file, &scratch.0, 6).unwrap();
        assert_eq!((done.headers_to, done.filters_to), (Some(4031), Some(2000)));
        let manifest = Manifest::parse(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(manifest.filters.len(), 2);
    }

    /// The manifest's keys and order are the documented ones; what it writes, it reads.
    #[test]
    fn the_manifest_is_as_documented() {
        let chain = generated(2100);
        let scratch = Scratch::new("manifest");
        export(&chain, &scratch.0, 6).unwrap();
        let text = fs::read_to_string(scratch.0.join("regtest").join(MANIFEST)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["network"], "regtest");
        assert_eq!(
            v["genesis"],
            "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"
        );
        assert_eq!(v["height"], 2015);
        assert_eq!(v["hash"], chain.block_hash(2015).unwrap().to_string());
        let h = &v["headers"][0];
        assert_eq!(
            (h["first"].as_u64(), h["last"].as_u64()),
            (Some(0), Some(2015))
        );
        assert_eq!(h["top"], chain.block_hash(2015).unwrap().to_string());
        let fh = &v["filterHeaders"][1];
        let top = chain.filters().unwrap().entry(2000).unwrap().header;
        assert_eq!(fh["top"], top.to_string(), "display order, byte-reversed");
        assert!(v["filters"][0].get("top").is_none());
        let keys = [
            "\"version\"",
            "\"network\"",
            "\"genesis\"",
            "\"height\"",
            "\"hash\"",
        ];
        let at: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        let parsed = Manifest::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.to_json(), text);
    }
}
