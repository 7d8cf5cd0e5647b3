//! Mirrors: the chain's history from static files (docs/PROTOCOL.md, "Bulk files"), any
//! host a web app already serves assets from. A mirror is a base URL with a
//! `manifest.json` naming immutable files by range, length and SHA-256; the shell fetches
//! what the engine names ([`Action::FetchManifest`], [`Action::Fetch`]) and streams the
//! bodies in ([`super::Engine::mirror_data`]).
//!
//! A mirror carries no trust. Its files are read by the decoder a gateway's messages go
//! through (`lightwire_proto::bulk`) and their headers validated by the same syncer, as
//! the answer to a request the headers task made of the mirror instead of a gateway: a
//! mirror can make the sync slower, never wrong. Gateways are still what the sync heads
//! for (their announced tips set the target); a mirror answers only for the heights its
//! sealed files hold, and the gateways serve the edge above.
//!
//! A mirror that fails in any way (a file missing, cut short, longer, of other bytes than
//! its name, a header that fails validation, files of another chain, a manifest that
//! claims what its files do not hold, a body slower than [`MIN_RATE`] over [`RATE_WINDOW`]
//! or stalled) is dropped for the session with a typed [`MirrorFault`] (an
//! [`Event::Mirror`]); the sync goes on from the next mirror or the gateways. What was
//! validated before the fault stays: it was validated.
//!
//! Headers and filter headers are read from mirrors (filter headers checked against what
//! the gateways agree on: `bulk_filters.rs`); the filters a scan reads are still the
//! gateways' (their files are in the manifest, not read yet). Mirrors come from the
//! application, or, when it lists none, from the gateways' `init` (at most four each,
//! [`MAX_MIRRORS`] in all).

use core::time::Duration;

use lightwire_chain::BlockHash;
use lightwire_proto::Millis;
use lightwire_proto::bulk::{BulkError, FileCheck};

use super::event::{Action, Event};
use crate::sync::NotYet;
use lightwire_chain::ConnectError;

/// A mirror is dropped when its body brings fewer than this many bytes per second over
/// [`RATE_WINDOW`] (100 KB/s: a gateway delivers the whole chain's headers at several
/// MB/s; a mirror slower than that makes the sync slower than the gateways alone).
pub const MIN_RATE: u64 = 100_000;
/// The window [`MIN_RATE`] is measured over; a body that brings nothing for this long is
/// stalled.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);
/// A manifest not read within this long is given up (the mirror dropped).
pub const MANIFEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most files a manifest may list in each kind (a mainnet export has about 500
/// headers files and 1,000 of the others): a bound on what one mirror makes the tab hold.
pub const MAX_FILES: usize = 100_000;
/// The longest file name taken from a manifest.
pub const MAX_NAME: usize = 200;

/// Index in the mirror list.
pub type MirrorId = u32;

/// One file a manifest lists: the heights it holds, its length and SHA-256, its name
/// (relative to the mirror's URL).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileEntry {
    /// The first height it holds.
    pub first: u32,
    /// The last.
    pub last: u32,
    /// Its length and SHA-256.
    pub check: FileCheck,
    /// Its name.
    pub name: String,
    /// Where a filters file may be read from instead of its start: a height and the
    /// offset of the record that begins with it (docs/PROTOCOL.md, "Bulk files"), ascending.
    pub parts: Vec<(u32, u64)>,
}

/// A mirror's manifest, as the shell parsed it (the engine checks it: [`Manifest::check`]).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Manifest {
    /// The genesis block of its chain (another network's mirror is refused at once).
    pub genesis: BlockHash,
    /// The highest header its files hold, as it claims.
    pub height: u32,
    /// That header's hash, as it claims.
    pub hash: BlockHash,
    /// The headers files, in height order from 0.
    pub headers: Vec<FileEntry>,
    /// The filter-headers files, in height order from 0, each ending on a checkpoint
    /// height (a multiple of 1,000), where its last filter header is checked against
    /// what the gateways agree on.
    pub filter_headers: Vec<FileEntry>,
    /// The filters files, in height order from 0, each of at most
    /// [`crate::scan::MOST_PER_MIRROR_FILE`] blocks: a scan reads them, each filter
    /// checked against the stored filter headers.
    pub filters: Vec<FileEntry>,
}

impl Manifest {
    /// Whether it is well formed: files in height order, each range after the one before
    /// it without a gap from 0, names that stay inside the mirror, at most [`MAX_FILES`];
    /// the claimed top is the last headers file's.
    pub fn check(&self, genesis: &BlockHash) -> Result<(), MirrorFault> {
        let bad = |why| Err(MirrorFault::ManifestInvalid(why));
        if self.genesis != *genesis {
            return bad("it is of another network (its genesis block is not ours)");
        }
        if self.headers.len() > MAX_FILES {
            return bad("it lists too many files");
        }
        let mut next = 0u32;
        for f in &self.headers {
            if f.first != next || f.last < f.first {
                return bad("its headers files are not contiguous from height 0");
            }
            let headers = u64::from(f.last - f.first) + 1;
            // The shortest coded header, with its share of the framing: a file shorter
            // than this cannot hold its range (a longer one is bounded by its records).
            if f.check.bytes < headers * lightwire_wire::compact::MIN_CODED_LEN as u64 {
                return bad("a headers file is too short for its range");
            }
            if !safe_name(&f.name) {
                return bad("a file name is not a plain name");
            }
            next = match f.last.checked_add(1) {
                Some(n) => n,
                None => return bad("a range ends past the last height"),
            };
        }
        if self.headers.last().is_some_and(|f| f.last != self.height) {
            return bad("its height is not its last headers file's");
        }
        if self.filter_headers.len() > MAX_FILES {
            return bad("it lists too many files");
        }
        let mut next = 0u32;
        for f in &self.filter_headers {
            let interval = lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;
            let count = f.last.checked_sub(f.first).map(|n| n + 1);
            if f.first != next
                || f.last % interval != 0
                || f.last == 0
                || count > Some(super::bulk_filters::MOST_PER_FILE)
            {
                return bad(
                    "its filter-headers files do not run from 0 from checkpoint to checkpoint",
                );
            }
            if !safe_name(&f.name) {
                return bad("a file name is not a plain name");
            }
            next = f.last + 1;
        }
        if self.filters.len() > MAX_FILES {
            return bad("it lists too many files");
        }
        let mut next = 0u32;
        for f in &self.filters {
            let count = f.last.checked_sub(f.first).map(|n| n + 1);
            if f.first != next || count.is_none_or(|n| n > crate::scan::MOST_PER_MIRROR_FILE) {
                return bad("its filters files do not run from 0 in ranges a scan can read");
            }
            if !safe_name(&f.name) {
                return bad("a file name is not a plain name");
            }
            if f.parts.len() > MAX_PARTS {
                return bad(PARTS);
            }
            let mut after = (f.first, 0);
            for &(height, offset) in &f.parts {
                if height <= after.0
                    || height > f.last
                    || offset <= after.1
                    || offset >= f.check.bytes
                {
                    return bad(PARTS);
                }
                after = (height, offset);
            }
            next = f.last.saturating_add(1);
        }
        if self
            .headers
            .iter()
            .chain(&self.filter_headers)
            .any(|f| !f.parts.is_empty())
        {
            return bad(PARTS);
        }
        Ok(())
    }

    /// Its files of `kind`.
    pub fn files(&self, kind: Kind) -> &[FileEntry] {
        match kind {
            Kind::Headers => &self.headers,
            Kind::FilterHeaders => &self.filter_headers,
            Kind::Filters => &self.filters,
        }
    }

    /// The headers file holding `height`, if any.
    pub fn headers_file(&self, height: u32) -> Option<&FileEntry> {
        let i = self.headers.partition_point(|f| f.last < height);
        self.headers.get(i).filter(|f| f.first <= height)
    }
}

/// A name fetched from the mirror's base URL: letters, digits, `.`, `-`, `_`, and not a
/// path (no `/`, no `..`), so that a manifest cannot send the tab elsewhere.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Why the shell could not fetch a file or a manifest.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum FetchError {
    /// The server answered with this HTTP status (not 200).
    #[error("the mirror answered HTTP {0}")]
    Status(u16),
    /// The request failed (network, CORS, a reset connection), as the browser said.
    #[error("the request failed: {0}")]
    Failed(String),
    /// A manifest that is not the JSON the format says, as the shell found it.
    #[error("its manifest is not valid: {0}")]
    Manifest(String),
}

/// Why a mirror was dropped for the session.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MirrorFault {
    /// Its manifest or a file could not be fetched.
    #[error("{0}")]
    Fetch(FetchError),
    /// Its manifest breaks the format.
    #[error("its manifest is not valid: {0}")]
    ManifestInvalid(&'static str),
    /// A file's bytes are not what its manifest names (or do not decode).
    #[error("the file {name} was refused: {error}")]
    File {
        /// The file.
        name: String,
        /// What was wrong.
        error: BulkError,
    },
    /// A header of its files failed validation (the rule and height named).
    #[error("a header of its files is not valid: {0}")]
    Invalid(ConnectError),
    /// A header of its sealed files is more than two hours ahead of our clock.
    #[error("a header of its files is too far ahead of our clock: height {}, time {}", .0.height, .0.time)]
    NotYet(NotYet),
    /// A file's headers link to nothing our chain holds, or did not become our best
    /// chain up to the file's end (files of another chain, or of a branch with less work).
    #[error("the file {0} is not of our chain")]
    NotOurChain(String),
    /// A filter of its files does not hash to our filter header of its block (or the
    /// file does not hold each filter of its range, in order).
    #[error("the filters of the file {name} are not those our filter headers commit to: {error}")]
    Filters {
        /// The file.
        name: String,
        /// What was wrong.
        error: crate::scan::ScanError,
    },
    /// A filter-headers file does not link from ours, or does not end on the filter
    /// header the gateways agree on at its last height.
    #[error("the filter headers of the file {0} are not those the gateways agree on")]
    FilterHeadersContradicted(String),
    /// A file's answer ended before its last header, or went on after it.
    #[error("the file {0} does not hold the range its manifest names")]
    WrongRange(String),
    /// Its body brought fewer than [`MIN_RATE`] bytes a second over [`RATE_WINDOW`].
    #[error("it served {0} bytes in 10 s (under 100 KB/s)")]
    Slow(u64),
    /// Its body brought nothing for [`RATE_WINDOW`], or its manifest nothing for
    /// [`MANIFEST_TIMEOUT`].
    #[error("it stopped sending")]
    Stalled,
}

impl MirrorFault {
    /// A stable code for the application.
    pub fn code(&self) -> &'static str {
        match self {
            MirrorFault::Fetch(FetchError::Status(404)) => "not-found",
            MirrorFault::Fetch(FetchError::Status(_)) => "http-error",
            MirrorFault::Fetch(FetchError::Failed(_)) => "fetch-failed",
            MirrorFault::Fetch(FetchError::Manifest(_)) | MirrorFault::ManifestInvalid(_) => {
                "manifest-invalid"
            }
            MirrorFault::File {
                error: BulkError::WrongHash,
                ..
            } => "wrong-hash",
            MirrorFault::File {
                error: BulkError::Truncated { .. },
                ..
            } => "truncated",
            MirrorFault::File {
                error: BulkError::TooLong { .. },
                ..
            } => "too-long",
            MirrorFault::File { .. } => "corrupt-file",
            MirrorFault::Invalid(_) => "invalid-header",
            MirrorFault::NotYet(_) => "future-header",
            MirrorFault::NotOurChain(_) => "not-our-chain",
            MirrorFault::FilterHeadersContradicted(_) => "filter-headers-contradicted",
            MirrorFault::Filters {
                error: crate::scan::ScanError::Mismatch { .. },
                ..
            } => "filter-mismatch",
            MirrorFault::Filters { .. } => "wrong-range",
            MirrorFault::WrongRange(_) => "wrong-range",
            MirrorFault::Slow(_) => "slow",
            MirrorFault::Stalled => "stalled",
        }
    }
}

/// Where a mirror is.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MirrorState {
    /// Its manifest is not asked yet.
    Unread,
    /// Its manifest is being fetched (since then).
    Reading(Millis),
    /// Its manifest was read.
    Ready(Manifest),
    /// Dropped for the session.
    Dropped,
}

/// One mirror.
#[derive(Clone, Debug)]
pub struct Mirror {
    /// Its base URL (ending in `/`).
    pub url: String,
    /// Where it is.
    pub state: MirrorState,
    /// Bytes of its bodies taken (manifests not counted).
    pub bytes: u64,
    /// Its rate window: the time its files were streaming in it, and the bytes they
    /// brought. It runs across files (a slow mirror of small files is slow all the same)
    /// and stands still between them (while the engine does not ask it).
    window: (Duration, u64),
    /// Its files streaming now, and since when one has been (the window's running part).
    active: (u32, Millis),
}

/// What a bulk file holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// Headers.
    Headers,
    /// Filter headers.
    FilterHeaders,
    /// Filters (a scan's).
    Filters,
}

/// The file being streamed.
pub struct Stream {
    /// The fetch (the shell's data for another is stale).
    pub fetch: u32,
    /// From which mirror.
    pub mirror: MirrorId,
    /// The file.
    pub file: FileEntry,
    /// What it holds.
    pub kind: Kind,
    /// Its reader was started on it (at its first bytes).
    pub reading: bool,
    /// The part of the file asked for (a height and the offset its bytes start at),
    /// when not the whole file.
    pub from: Option<(u32, u64)>,
}

impl Stream {
    /// What the bytes asked for must be: the file's length less the part's offset (a part
    /// is read only of a filters file, whose hash nobody checks: each filter is checked
    /// against our filter headers).
    pub fn check(&self) -> FileCheck {
        let skipped = self.from.map_or(0, |(_, offset)| offset);
        FileCheck {
            bytes: self.file.check.bytes.saturating_sub(skipped),
            sha256: self.file.check.sha256,
        }
    }
}

/// The most parts a file's manifest entry may list (a large filters file has nine).
pub const MAX_PARTS: usize = 64;
/// What is wrong with a manifest whose parts are not as [`FileEntry::parts`] says.
const PARTS: &str = "a file's parts are not inside a filters file, in order, at most 64";

/// The most mirrors a client reads (the application's and those gateways advertise).
pub const MAX_MIRRORS: usize = 8;

/// Every mirror, and the files streamed: at most one of each [`Kind`] at a time (their
/// readers are the engine's, apart from the context, so that what they hand out goes to
/// the tasks where it lies).
pub struct Mirrors {
    /// As the application listed them, then as gateways advertised them.
    pub list: Vec<Mirror>,
    /// Whether mirrors the gateways advertise are read (the application listed none).
    pub take_advertised: bool,
    /// The files in flight.
    pub streams: Vec<Stream>,
    next_fetch: u32,
}

impl Mirrors {
    /// Mirrors at these base URLs (a `/` added where missing), none read yet.
    pub fn new(urls: Vec<String>) -> Mirrors {
        let mut m = Mirrors {
            list: Vec::new(),
            take_advertised: false,
            streams: Vec::with_capacity(2),
            next_fetch: 0,
        };
        for url in urls {
            m.add(url);
        }
        m
    }

    /// Add a mirror at `url` (a `/` added where missing), unless it is listed already or
    /// [`MAX_MIRRORS`] are.
    fn add(&mut self, mut url: String) {
        if !url.ends_with('/') {
            url.push('/');
        }
        if self.list.len() >= MAX_MIRRORS || self.list.iter().any(|m| m.url == url) {
            return;
        }
        self.list.push(Mirror {
            url,
            state: MirrorState::Unread,
            bytes: 0,
            window: (Duration::ZERO, 0),
            active: (0, Millis(0)),
        });
    }

    /// A gateway advertised these mirrors in its `init`: taken (when the application
    /// listed none) if they are absolute http(s) URLs without spaces; their manifests
    /// are asked. A hostile gateway can list only mirrors, which carry no trust.
    pub fn advertised(
        &mut self,
        urls: &[String],
        now: Millis,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        if !self.take_advertised {
            return;
        }
        for url in urls {
            let absolute = url.starts_with("https://") || url.starts_with("http://");
            if absolute
                && !url
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                self.add(url.clone());
            }
        }
        self.read_manifests(now, actions);
    }

    /// Ask for every unread manifest (at the start: they are small, and read while the
    /// gateways handshake).
    pub fn read_manifests(
        &mut self,
        now: Millis,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        for (m, mirror) in self.list.iter_mut().enumerate() {
            if mirror.state == MirrorState::Unread {
                mirror.state = MirrorState::Reading(now);
                actions.push_back(Action::FetchManifest {
                    mirror: m as MirrorId,
                });
            }
        }
    }

    /// The manifest of mirror `m` as the shell read it (or why it could not).
    pub fn on_manifest(
        &mut self,
        m: MirrorId,
        manifest: Result<Manifest, FetchError>,
        genesis: &BlockHash,
        events: &mut std::collections::VecDeque<Event>,
    ) {
        let Some(mirror) = self.list.get_mut(m as usize) else {
            return;
        };
        if !matches!(mirror.state, MirrorState::Reading(_)) {
            return;
        }
        match manifest.map_err(MirrorFault::Fetch).and_then(|manifest| {
            manifest.check(genesis)?;
            Ok(manifest)
        }) {
            Ok(manifest) => {
                events.push_back(Event::MirrorReady {
                    mirror: m,
                    height: manifest.height,
                });
                mirror.state = MirrorState::Ready(manifest);
            }
            Err(fault) => {
                mirror.state = MirrorState::Dropped;
                events.push_back(Event::Mirror { mirror: m, fault });
            }
        }
    }

    /// A mirror whose manifest has a headers file holding `height`, and that file: the
    /// first such in list order.
    pub fn headers_file(&self, height: u32) -> Option<(MirrorId, &FileEntry)> {
        self.ready()
            .find_map(|(m, manifest)| manifest.headers_file(height).map(|f| (m, f)))
    }

    /// A mirror whose manifest has a filter-headers file holding `height`, and that file:
    /// the first such in list order.
    pub fn filter_headers_file(&self, height: u32) -> Option<(MirrorId, &FileEntry)> {
        self.file(Kind::FilterHeaders, height)
    }

    /// A mirror whose manifest has a file of `kind` holding `height`, and that file: the
    /// first such in list order.
    pub fn file(&self, kind: Kind, height: u32) -> Option<(MirrorId, &FileEntry)> {
        self.ready().find_map(|(m, manifest)| {
            let files = manifest.files(kind);
            let i = files.partition_point(|f| f.last < height);
            let f = files.get(i).filter(|f| f.first <= height)?;
            Some((m, f))
        })
    }

    /// Whether a mirror's manifest is being read: the gateways are not asked for what it
    /// may hold meanwhile (at most [`MANIFEST_TIMEOUT`]).
    pub fn reading_manifest(&self) -> bool {
        self.list
            .iter()
            .any(|m| matches!(m.state, MirrorState::Reading(_)))
    }

    /// Whether some mirror lists filter-headers files ending at `height` or above.
    pub fn has_filter_headers_to(&self, height: u32) -> bool {
        self.ready().any(|(_, manifest)| {
            manifest
                .filter_headers
                .last()
                .is_some_and(|f| f.last >= height)
        })
    }

    /// Every mirror whose manifest was read, with it.
    fn ready(&self) -> impl Iterator<Item = (MirrorId, &Manifest)> {
        self.list
            .iter()
            .enumerate()
            .filter_map(|(m, mirror)| match &mirror.state {
                MirrorState::Ready(manifest) => Some((m as MirrorId, manifest)),
                _ => None,
            })
    }

    /// The file of `kind` streaming, if one is.
    pub fn streaming(&self, kind: Kind) -> Option<&Stream> {
        self.streams.iter().find(|s| s.kind == kind)
    }

    /// Start streaming `file` (of `kind`) from mirror `m` at `now`: the shell is asked to
    /// fetch it.
    pub fn start(
        &mut self,
        m: MirrorId,
        file: FileEntry,
        kind: Kind,
        now: Millis,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        self.start_part(m, (file, None), kind, now, actions);
    }

    /// [`Self::start`] from `from` (a part of the file: its height and the offset its
    /// bytes start at), or from its start.
    pub fn start_part(
        &mut self,
        m: MirrorId,
        (file, from): (FileEntry, Option<(u32, u64)>),
        kind: Kind,
        now: Millis,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        let fetch = self.next_fetch;
        self.next_fetch = self.next_fetch.wrapping_add(1);
        actions.push_back(Action::Fetch { mirror: m, fetch });
        if let Some(mirror) = self.list.get_mut(m as usize) {
            if mirror.active.0 == 0 {
                mirror.active.1 = now;
            }
            mirror.active.0 += 1;
        }
        self.streams.push(Stream {
            fetch,
            mirror: m,
            file,
            kind,
            reading: false,
            from,
        });
    }

    /// Stop streaming the file of `kind`, if one is (at `now`): its fetch is aborted.
    pub fn cancel(
        &mut self,
        kind: Kind,
        now: Millis,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        if let Some(fetch) = self.streaming(kind).map(|s| s.fetch) {
            self.end_stream(fetch, now);
            actions.push_back(Action::CancelFetch { fetch });
        }
    }

    /// The highest height of a filter-headers file any mirror lists.
    pub fn filter_headers_top(&self) -> u32 {
        self.ready()
            .filter_map(|(_, manifest)| manifest.filter_headers.last().map(|f| f.last))
            .max()
            .unwrap_or(0)
    }

    /// The stream of fetch `fetch`, if it is one.
    pub fn stream_mut(&mut self, fetch: u32) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.fetch == fetch)
    }

    /// The URL of what the shell is asked to fetch: mirror `m`'s manifest, or (with
    /// `fetch`) the file streamed.
    pub fn url(&self, m: MirrorId, fetch: Option<u32>) -> Option<String> {
        let mirror = self.list.get(m as usize)?;
        match fetch {
            None => Some(format!("{}manifest.json", mirror.url)),
            Some(f) => {
                let s = self.streams.iter().find(|s| s.fetch == f)?;
                Some(format!("{}{}", mirror.url, s.file.name))
            }
        }
    }

    /// The offset of the first byte fetch `fetch` asks for, when it asks for a part of its
    /// file (an HTTP `Range` from there) rather than the whole.
    pub fn range_from(&self, fetch: u32) -> Option<u64> {
        let s = self.streams.iter().find(|s| s.fetch == fetch)?;
        s.from.map(|(_, offset)| offset)
    }

    /// The mirror and the file fetch `fetch` streams.
    pub fn file_of(&self, fetch: u32) -> Option<(MirrorId, &FileEntry)> {
        let s = self.streams.iter().find(|s| s.fetch == fetch)?;
        Some((s.mirror, &s.file))
    }

    /// The URL of the file after the one fetch `fetch` streams, of its kind, in its
    /// mirror's manifest.
    pub fn next_url(&self, fetch: u32) -> Option<String> {
        let s = self.streams.iter().find(|s| s.fetch == fetch)?;
        let mirror = self.list.get(s.mirror as usize)?;
        let MirrorState::Ready(manifest) = &mirror.state else {
            return None;
        };
        let files = manifest.files(s.kind);
        let next = s.file.last.checked_add(1)?;
        let i = files.partition_point(|f| f.first < next);
        let f = files.get(i).filter(|f| f.first == next)?;
        Some(format!("{}{}", mirror.url, f.name))
    }

    /// Bytes of fetch `fetch` came: counted (for the rate and the mirror's total);
    /// false when the fetch is not the one streamed (stale: ignored).
    pub fn took(&mut self, fetch: u32, bytes: usize) -> bool {
        let Some(s) = self.streams.iter().find(|s| s.fetch == fetch) else {
            return false;
        };
        if let Some(mirror) = self.list.get_mut(s.mirror as usize) {
            mirror.bytes += bytes as u64;
            mirror.window.1 += bytes as u64;
        }
        true
    }

    /// The stream of fetch `fetch` ended at `now`: taken, its time counted in its mirror's
    /// rate window.
    pub fn end_stream(&mut self, fetch: u32, now: Millis) -> Option<Stream> {
        let i = self.streams.iter().position(|s| s.fetch == fetch)?;
        let stream = self.streams.swap_remove(i);
        if let Some(mirror) = self.list.get_mut(stream.mirror as usize) {
            mirror.active.0 = mirror.active.0.saturating_sub(1);
            if mirror.active.0 == 0 {
                mirror.window.0 += now.since(mirror.active.1);
            }
        }
        Some(stream)
    }

    /// Drop mirror `m` for `fault`: the application hears of it; its streams are
    /// cancelled (the tasks give up what they asked of it).
    pub fn drop_mirror(
        &mut self,
        m: MirrorId,
        fault: MirrorFault,
        events: &mut std::collections::VecDeque<Event>,
        actions: &mut std::collections::VecDeque<Action>,
    ) {
        let Some(mirror) = self.list.get_mut(m as usize) else {
            return;
        };
        if mirror.state == MirrorState::Dropped {
            return;
        }
        mirror.state = MirrorState::Dropped;
        mirror.active.0 = 0;
        events.push_back(Event::Mirror { mirror: m, fault });
        for s in self.streams.iter().filter(|s| s.mirror == m) {
            actions.push_back(Action::CancelFetch { fetch: s.fetch });
        }
        self.streams.retain(|s| s.mirror != m);
    }

    /// When [`Self::timed_out`] must next run.
    pub fn deadline(&self) -> Option<Millis> {
        self.list
            .iter()
            .filter_map(|m| match m.state {
                MirrorState::Reading(since) => Some(since + MANIFEST_TIMEOUT),
                _ if m.active.0 > 0 => Some(m.active.1 + RATE_WINDOW.saturating_sub(m.window.0)),
                _ => None,
            })
            .min()
    }

    /// At `now`: a mirror whose stream's window ended below [`MIN_RATE`] (or empty), or
    /// whose manifest has not come, with its fault (the caller drops it). A window that
    /// ended fast enough starts the next.
    pub fn timed_out(&mut self, now: Millis) -> Option<(MirrorId, MirrorFault)> {
        for (m, mirror) in self.list.iter_mut().enumerate() {
            if mirror.active.0 == 0 || mirror.window.0 + now.since(mirror.active.1) < RATE_WINDOW {
                continue;
            }
            let (_, bytes) = mirror.window;
            let least = MIN_RATE * RATE_WINDOW.as_secs();
            if bytes == 0 {
                return Some((m as MirrorId, MirrorFault::Stalled));
            }
            if bytes < least {
                return Some((m as MirrorId, MirrorFault::Slow(bytes)));
            }
            mirror.window = (Duration::ZERO, 0);
            mirror.active.1 = now;
        }
        self.list
            .iter()
            .enumerate()
            .find_map(|(m, mirror)| match mirror.state {
                MirrorState::Reading(since) if since + MANIFEST_TIMEOUT <= now => {
                    Some((m as MirrorId, MirrorFault::Stalled))
                }
                _ => None,
            })
    }

    /// Bytes taken from every mirror.
    pub fn bytes(&self) -> u64 {
        self.list.iter().map(|m| m.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testnet::{Net, Serve, TestMirror, memory};
    use lightwire_proto::testing::TestChain;
    use lightwire_store::HeaderStore;

    /// Every header the store holds, genesis first.
    fn stored_chain(net: &Net<lightwire_store::MemoryStore>) -> Vec<lightwire_chain::Header> {
        let tip = net.stored().height;
        let mut out = Vec::new();
        crate::testnet::block_on(net.store.headers(0, tip, &mut out)).unwrap();
        out
    }

    /// The mirror events the engine gave, as (mirror, code).
    fn faults(net: &Net<lightwire_store::MemoryStore>) -> Vec<(MirrorId, &'static str)> {
        net.host
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Mirror { mirror, fault } => Some((*mirror, fault.code())),
                _ => None,
            })
            .collect()
    }

    /// A chain of 10,000 headers, a mirror of its first four periods (to 8,063), and a
    /// gateway serving all of it; the mirror as `serve` says.
    fn synced_with(mirror: TestMirror) -> Net<lightwire_store::MemoryStore> {
        let chain = TestChain::generate(10_000);
        // Filter headers are the gateways' still: off, so that what the gateway sends is
        // the headers' alone.
        let mut net = Net::new(memory(), vec![chain], |e| e.set_filters(false));
        net.mirrors(vec![mirror]);
        net.drive();
        net
    }

    #[test]
    fn a_new_store_takes_the_history_from_the_mirror_and_the_edge_from_the_gateway() {
        let chain = TestChain::generate(10_000);
        let mirror = TestMirror::of(&chain, 8_063, 2_016);
        let file_bytes: u64 = mirror.files.iter().map(|(_, b)| b.len() as u64).sum();
        let net = synced_with(mirror);
        assert_eq!(net.stored().height, 10_000);
        assert!(net.host.engine.is_synced());
        assert_eq!(faults(&net), []);
        // Every file was read, and the gateway sent only the edge: 1,937 headers (at most
        // 80 bytes each) and its handshake.
        assert_eq!(net.host.engine.mirrors()[0].bytes, file_bytes);
        let gateway = net.host.engine.counters().bytes_in;
        assert!(
            gateway < 1_937 * 80 + 20_000,
            "the gateway sent {gateway} bytes"
        );
        // The same bytes stored as from the gateway alone.
        let mut alone = Net::new(memory(), vec![TestChain::generate(10_000)], |e| {
            e.set_filters(false)
        });
        alone.drive();
        let all = alone.host.engine.counters().bytes_in;
        assert!(
            all > 4 * gateway,
            "{all} bytes from the gateway alone, {gateway} with"
        );
        assert_eq!(stored_chain(&net), stored_chain(&alone));
        assert_eq!(stored_chain(&net), chain.headers());
    }

    #[test]
    fn a_store_ahead_of_the_mirror_or_in_the_middle_of_a_file_reads_only_what_it_lacks() {
        let chain = TestChain::generate(10_000);
        // A store at 3,000 (from a gateway serving 3,000), then the mirror and the full
        // gateway: the file from 2,016 is read (its first headers known), then the next.
        let short = TestChain::generate(3_000);
        let mut net = Net::new(memory(), vec![short], |_| {});
        net.drive();
        assert_eq!(net.stored().height, 3_000);
        let store = net.store;
        let mut net = Net::new(store, vec![TestChain::generate(10_000)], |_| {});
        net.mirrors(vec![TestMirror::of(&chain, 8_063, 2_016)]);
        net.drive();
        assert_eq!(faults(&net), []);
        assert_eq!(net.stored().height, 10_000);
        assert_eq!(stored_chain(&net), chain.headers());
        let files = &net.host.mirrors[0].files;
        let read: u64 = files[1..].iter().map(|(_, b)| b.len() as u64).sum();
        assert_eq!(net.host.engine.mirrors()[0].bytes, read);
    }

    #[test]
    fn every_broken_or_hostile_mirror_is_dropped_and_the_gateway_syncs_the_rest() {
        let chain = TestChain::generate(10_000);
        let honest = TestMirror::of(&chain, 8_063, 2_016);
        let first_len = honest.files[0].1.len();
        let with = |serve| TestMirror {
            serve,
            ..honest.clone()
        };
        // A header whose hash misses its target, and one of lower difficulty (its nBits
        // not the network's): a forged file.
        let mut high_hash = TestChain::generate(10_000);
        high_hash.corrupt(1_000);
        let mut low = chain.headers().to_vec();
        low[1_000].bits = lightwire_chain::CompactTarget(0x207e_ffff);
        // A manifest that claims a file it does not hold, and one claiming more than its
        // files do.
        let mut missing = honest.clone();
        missing.files.pop();
        let mut overclaim = honest.clone();
        if let Ok(m) = overclaim.manifest.as_mut() {
            m.height += 2_016;
        }
        let cases: Vec<(&str, TestMirror, &[&str])> = vec![
            ("404", with(Serve::Status(404)), &["not-found"]),
            ("500", with(Serve::Status(500)), &["http-error"]),
            (
                "truncated",
                with(Serve::Truncate(first_len / 2)),
                &["truncated"],
            ),
            // A flipped byte: a Merkle root or time changes the header (a segment then
            // fails to join its anchor, or the hash of the file gives it away).
            (
                "flipped",
                with(Serve::Flip(first_len / 2)),
                &["corrupt-file", "wrong-hash", "invalid-header"],
            ),
            (
                "last byte",
                with(Serve::Flip(first_len - 1)),
                &["wrong-hash", "invalid-header"],
            ),
            (
                "high hash",
                TestMirror::of(&high_hash, 8_063, 2_016),
                &["invalid-header"],
            ),
            (
                "low difficulty",
                TestMirror::of_headers(&low, 8_063, 2_016),
                &["invalid-header"],
            ),
            // Bytes after those its manifest declares, in a piece of their own.
            ("longer", with(Serve::Append(100)), &["too-long"]),
            ("missing file", missing, &["not-found"]),
            ("overclaiming", overclaim, &["manifest-invalid"]),
        ];
        for (name, mirror, codes) in cases {
            let net = synced_with(mirror);
            let got = faults(&net);
            assert!(
                got.len() == 1 && codes.contains(&got[0].1),
                "{name}: {got:?}"
            );
            assert_eq!(net.stored().height, 10_000, "{name}");
            assert_eq!(stored_chain(&net), chain.headers(), "{name}");
        }
    }

    #[test]
    fn a_stalled_or_slow_mirror_is_dropped_after_one_window() {
        let chain = TestChain::generate(10_000);
        let honest = TestMirror::of(&chain, 8_063, 2_016);
        for (stop, code) in [(0, "stalled"), (5_000, "slow")] {
            let mut net = synced_with(TestMirror {
                serve: Serve::Stall(stop),
                ..honest.clone()
            });
            // Waiting on the mirror: the gateway is not asked meanwhile.
            assert!(net.stored().height < 10_000);
            net.advance(RATE_WINDOW);
            assert_eq!(faults(&net), [(0, code)]);
            assert_eq!(net.stored().height, 10_000);
            assert_eq!(stored_chain(&net), chain.headers());
        }
    }

    #[test]
    fn a_mirror_of_another_branch_is_not_our_chain() {
        // A store at 3,000 of the chain; the mirror serves a branch forked at 100: its
        // file holding 3,001 links to nothing the store holds.
        let chain = TestChain::generate(10_000);
        let short = TestChain::generate(3_000);
        let mut net = Net::new(memory(), vec![short], |_| {});
        net.drive();
        let mut branch = TestChain::generate(10_000);
        branch.reorg(100, 9_000, 7);
        let mut net = Net::new(net.store, vec![TestChain::generate(10_000)], |_| {});
        net.mirrors(vec![TestMirror::of(&branch, 8_063, 2_016)]);
        net.drive();
        assert_eq!(faults(&net), [(0, "not-our-chain")]);
        assert_eq!(stored_chain(&net), chain.headers());
    }

    /// Every filter header the store holds, from genesis.
    fn stored_filter_headers(net: &Net<lightwire_store::MemoryStore>) -> Vec<[u8; 32]> {
        let mut out = Vec::new();
        let top = net.host.engine.filters().height().unwrap_or(0);
        crate::testnet::block_on(net.store.filter_headers(0, top, &mut out)).unwrap();
        out.into_iter().map(|h| h.0).collect()
    }

    fn chain_filter_headers(chain: &TestChain, to: u32) -> Vec<[u8; 32]> {
        (0..=to)
            .map(|h| {
                lightwire_proto::Served::filter_entry(chain, h)
                    .unwrap()
                    .header
                    .0
            })
            .collect()
    }

    #[test]
    fn filter_headers_come_from_the_mirror_where_the_gateways_agree_on_each_files_end() {
        let chain = TestChain::generate(10_000);
        let mirror =
            TestMirror::of(&chain, 8_063, 2_016).with_filter_headers(&chain, 8_000, |_, _| {});
        let mut net = Net::new(memory(), vec![TestChain::generate(10_000)], |_| {});
        net.mirrors(vec![mirror]);
        net.drive();
        assert_eq!(faults(&net), []);
        assert_eq!(net.stored().height, 10_000);
        assert_eq!(net.host.engine.filters().height(), Some(10_000));
        assert_eq!(
            stored_filter_headers(&net),
            chain_filter_headers(&chain, 10_000)
        );
        // The gateway sent the edges (1,937 headers, 2,000 filter hashes), its
        // checkpoints and its handshake; the same sync from it alone, everything.
        let gateway = net.host.engine.counters().bytes_in;
        assert!(
            gateway < 1_937 * 80 + 2_000 * 32 + 20_000,
            "the gateway sent {gateway} bytes"
        );
        let mut alone = Net::new(memory(), vec![TestChain::generate(10_000)], |_| {});
        alone.drive();
        let all = alone.host.engine.counters().bytes_in;
        assert!(
            all > 4 * gateway,
            "{all} bytes from the gateway alone, {gateway} with"
        );
        assert_eq!(stored_filter_headers(&alone), stored_filter_headers(&net));
        // Each file's end was probed (our block there validated this session), one
        // filter header each, and no checkpoints list was asked.
        assert_eq!(net.host.engine.filter_headers_asked(), (8, 0));
    }

    #[test]
    fn a_mirror_whose_filter_headers_the_gateways_contradict_is_dropped() {
        // The file from 4,001 to 5,000 says another filter at 4,500 (its chain linked
        // from there, consistent in itself): its end is not the gateways' checkpoint.
        let chain = TestChain::generate(10_000);
        let mirror =
            TestMirror::of(&chain, 8_063, 2_016).with_filter_headers(&chain, 8_000, |h, hash| {
                if h == 4_500 {
                    hash[0] ^= 1;
                }
            });
        let mut net = Net::new(memory(), vec![TestChain::generate(10_000)], |_| {});
        net.mirrors(vec![mirror]);
        net.drive();
        assert_eq!(faults(&net), [(0, "filter-headers-contradicted")]);
        assert_eq!(net.host.engine.filters().height(), Some(10_000));
        assert_eq!(
            stored_filter_headers(&net),
            chain_filter_headers(&chain, 10_000)
        );
    }

    #[test]
    fn where_the_gateways_disagree_the_mirror_is_not_used_and_a_dispute_settles_it() {
        // A second gateway whose filter at 6,500 is another (its chain consistent): the
        // gateways do not agree on 7,000 and above, so the mirror is not read there; the
        // gateways serve it and the dispute finds the liar out by the block.
        let chain = TestChain::generate(10_000);
        let mirror =
            TestMirror::of(&chain, 8_063, 2_016).with_filter_headers(&chain, 8_000, |_, _| {});
        let mut liar = TestChain::generate(10_000);
        let mut other = liar.filter(6_500).to_vec();
        other.push(0);
        liar.rewrite_filter(6_500, other);
        let mut net = Net::new(memory(), vec![TestChain::generate(10_000), liar], |_| {});
        net.mirrors(vec![mirror]);
        net.drive();
        assert_eq!(faults(&net), []);
        assert_eq!(net.host.engine.filters().height(), Some(10_000));
        assert_eq!(
            stored_filter_headers(&net),
            chain_filter_headers(&chain, 10_000)
        );
    }

    #[test]
    fn a_gateway_silent_on_the_checkpoints_a_mirror_waits_for_is_dropped_in_time() {
        // The headers stored, both gateways connected; then the second goes silent (its
        // messages held) and the mirror's filter-headers files wait for both gateways'
        // checkpoints. The silent one is dropped when its request runs out of time (30 s),
        // not at its keepalive (50 s), and the files are read on the first one's word.
        let chain = TestChain::generate(10_000);
        let mut net = Net::new(memory(), vec![TestChain::generate(10_000)], |e| {
            e.set_filters(false)
        });
        net.drive();
        assert_eq!(net.stored().height, 10_000);
        let store = net.store;
        let gateways = vec![TestChain::generate(10_000), TestChain::generate(10_000)];
        let mut net = Net::new(store, gateways, |e| e.set_filters(false));
        net.drive();
        net.hold(crate::ids::GatewayId(1));
        net.host.engine.set_filters(true);
        let mirror =
            TestMirror::of(&chain, 8_063, 2_016).with_filter_headers(&chain, 8_000, |_, _| {});
        net.mirrors(vec![mirror]);
        net.drive();
        read_on_the_first_ones_word(&mut net, &chain);
        // The headers came from the store, not validated this session: no block is known
        // at the files' ends, and the checkpoints were asked instead of probes.
        assert_eq!(net.host.engine.filter_headers_asked().0, 0);
    }

    /// The mirror's filter-headers files wait for gateway 1, silent: it is dropped when
    /// its request runs out of time (30 s, not at its keepalive's 50 s), and the files are
    /// read on gateway 0's word.
    fn read_on_the_first_ones_word(net: &mut Net<lightwire_store::MemoryStore>, chain: &TestChain) {
        assert_eq!(net.host.engine.filters().height(), None, "waiting");
        net.advance(crate::engine::REQUEST_TIMEOUT + Duration::from_secs(1));
        assert_eq!(net.host.engine.filters().height(), Some(10_000));
        assert_eq!(
            stored_filter_headers(net),
            chain_filter_headers(chain, 10_000)
        );
        let dropped = net.host.events.iter().any(|e| {
            matches!(e, Event::Gateway { gateway, reason: Some(crate::reason::DropReason::RequestTimeout), .. }
                if gateway.index() == 1)
        });
        assert!(
            dropped,
            "the silent gateway was not dropped for its request"
        );
        assert_eq!(faults(net), []);
    }

    #[test]
    fn a_gateway_silent_on_the_probes_a_mirror_waits_for_is_dropped_in_time() {
        // The headers synced this session from the mirror (so each file's end is probed),
        // with filters off; then the second gateway goes silent and filters are turned on:
        // its probes go unanswered, it is dropped when they run out of time, and the
        // files are read on the first one's word.
        let chain = TestChain::generate(10_000);
        let gateways = vec![TestChain::generate(10_000), TestChain::generate(10_000)];
        let mut net = Net::new(memory(), gateways, |e| e.set_filters(false));
        let mirror =
            TestMirror::of(&chain, 8_063, 2_016).with_filter_headers(&chain, 8_000, |_, _| {});
        net.mirrors(vec![mirror]);
        net.drive();
        assert_eq!(net.stored().height, 10_000);
        net.hold(crate::ids::GatewayId(1));
        net.host.engine.set_filters(true);
        net.drive();
        read_on_the_first_ones_word(&mut net, &chain);
        let (probes, checkpoints) = net.host.engine.filter_headers_asked();
        assert!(
            probes > 0 && checkpoints == 0,
            "{probes} probes, {checkpoints} checkpoints"
        );
    }

    /// A store synced to 12,000 by the gateway, then a mirror with filters to 11,000 in
    /// files of `per_file` (each filter as `rewrite` leaves it) and a scan of block
    /// 10,500's coinbase from `from`: the net after it, and the gateway's bytes for it.
    fn scanned(
        per_file: u32,
        from: u32,
        rewrite: impl Fn(u32, &mut Vec<u8>),
    ) -> (Net<lightwire_store::MemoryStore>, u64) {
        scanned_with(per_file, from, rewrite, |_| {})
    }

    /// [`scanned`], the mirror changed by `mirror` first.
    fn scanned_with(
        per_file: u32,
        from: u32,
        rewrite: impl Fn(u32, &mut Vec<u8>),
        mirror: impl FnOnce(&mut TestMirror),
    ) -> (Net<lightwire_store::MemoryStore>, u64) {
        let chain = TestChain::generate(12_000);
        let mut net = Net::new(memory(), vec![TestChain::generate(12_000)], |_| {});
        net.drive();
        assert_eq!(net.host.engine.filters().height(), Some(12_000));
        let mut net = Net::new(net.store, vec![TestChain::generate(12_000)], |_| {});
        let mut m =
            TestMirror::of(&chain, 8_063, 2_016).with_filters(&chain, (11_000, per_file), rewrite);
        mirror(&mut m);
        net.mirrors(vec![m]);
        net.drive();
        let before = net.host.engine.counters().bytes_in;
        let script = crate::scenarios::coinbase_script(10_500, 0);
        net.host.engine.start_scan(vec![script], from);
        net.drive();
        let sent = net.host.engine.counters().bytes_in - before;
        (net, sent)
    }

    #[test]
    fn a_scan_reads_the_filters_from_the_mirror_and_the_rest_from_the_gateway() {
        let chain = TestChain::generate(12_000);
        let paid = chain.header(10_500).block_hash();
        // Files of 1,000 and of 10,000 (the export's small and large ones), a scan from
        // genesis and one from the middle of a file: the same match, the mirror's filters
        // checked against the stored filter headers, the gateway sending the 1,000 above.
        for (per_file, from) in [(1_000, 0), (10_000, 0), (10_000, 4_321), (1_000, 10_321)] {
            let (net, sent) = scanned(per_file, from, |_, _| {});
            let scan = net.host.engine.scan().unwrap();
            assert_eq!(
                (scan.next(), scan.matches()),
                (12_001, &[(10_500, paid)][..]),
                "files of {per_file} from {from}"
            );
            assert_eq!(faults(&net), [], "files of {per_file} from {from}");
            // 1,000 filters of a few dozen bytes and their framing, nothing below.
            assert!(
                sent < 60_000,
                "the gateway sent {sent} bytes ({per_file}, {from})"
            );
        }
        let (_, alone) = {
            let mut net = Net::new(memory(), vec![TestChain::generate(12_000)], |_| {});
            net.drive();
            let before = net.host.engine.counters().bytes_in;
            net.host
                .engine
                .start_scan(vec![crate::scenarios::coinbase_script(10_500, 0)], 0);
            net.drive();
            ((), net.host.engine.counters().bytes_in - before)
        };
        let (_, with) = scanned(10_000, 0, |_, _| {});
        assert!(
            alone > 8 * with,
            "{alone} bytes from the gateway alone, {with} with"
        );
    }

    /// A scan from inside a large filters file asks for the file from the part holding
    /// its first block (an HTTP `Range` from the part's record): the filters before it
    /// are not fetched. A file whose entry lists no parts (an export from before them) is
    /// read from its start, and a part whose offset is not a record's start drops the
    /// mirror, the gateway serving the scan: the same match every time.
    #[test]
    fn a_scan_from_inside_a_large_file_reads_from_the_part_holding_its_first_block() {
        let chain = TestChain::generate(12_000);
        let paid = chain.header(10_500).block_hash();
        let served = |net: &Net<lightwire_store::MemoryStore>| net.host.engine.mirrors()[0].bytes;
        let mut offset = 0;
        let (with, _) = scanned_with(
            10_000,
            4_321,
            |_, _| {},
            |m| {
                let entry = &m.manifest.as_ref().unwrap().filters[0];
                offset = entry.parts.iter().find(|(h, _)| *h == 4_001).unwrap().1;
            },
        );
        let (without, _) = scanned_with(
            10_000,
            4_321,
            |_, _| {},
            |m| {
                for f in &mut m.manifest.as_mut().unwrap().filters {
                    f.parts.clear();
                }
            },
        );
        for net in [&with, &without] {
            let scan = net.host.engine.scan().unwrap();
            assert_eq!(
                (scan.next(), scan.matches()),
                (12_001, &[(10_500, paid)][..])
            );
            assert_eq!(faults(net), []);
        }
        assert!(offset > 0);
        assert_eq!(
            served(&without) - served(&with),
            offset,
            "the 4,000 filters before the part"
        );

        let (broken, _) = scanned_with(
            10_000,
            4_321,
            |_, _| {},
            |m| {
                let entry = &mut m.manifest.as_mut().unwrap().filters[0];
                for part in &mut entry.parts {
                    part.1 += 1;
                }
            },
        );
        let scan = broken.host.engine.scan().unwrap();
        assert_eq!(
            (scan.next(), scan.matches()),
            (12_001, &[(10_500, paid)][..])
        );
        assert_eq!(faults(&broken).len(), 1, "{:?}", faults(&broken));

        // Parts in order and inside the file, each naming the record of the part after
        // it: the scan from 4,321 would be handed filters from 5,001. A gap is never
        // taken (filters must come from the block the scan stands at): the mirror is
        // dropped and the gateway serves the scan from 4,321.
        let (shifted, _) = scanned_with(
            10_000,
            4_321,
            |_, _| {},
            |m| {
                let entry = &mut m.manifest.as_mut().unwrap().filters[0];
                let offsets: Vec<u64> = entry.parts.iter().skip(1).map(|p| p.1).collect();
                entry.parts.truncate(offsets.len());
                for (part, offset) in entry.parts.iter_mut().zip(offsets) {
                    part.1 = offset;
                }
            },
        );
        let scan = shifted.host.engine.scan().unwrap();
        assert_eq!(
            (scan.next(), scan.matches()),
            (12_001, &[(10_500, paid)][..])
        );
        assert_eq!(faults(&shifted), [(0, "wrong-range")]);
    }

    #[test]
    fn a_mirror_whose_filter_is_not_the_one_our_filter_headers_commit_to_is_dropped() {
        // The file holding 10,500 says another filter there (one that matches the scan's
        // script, or one that hides it): the mirror is dropped, and the gateway serves
        // the scan from where it stands; the match is the real one either way.
        let chain = TestChain::generate(12_000);
        let paid = chain.header(10_500).block_hash();
        let hidden = |h: u32, f: &mut Vec<u8>| {
            if h == 10_500 {
                f.clear();
                f.push(0);
            }
        };
        let invented = |h: u32, f: &mut Vec<u8>| {
            if h == 7_000 {
                *f = chain.filter(10_500).to_vec();
            }
        };
        let (net, _) = scanned(1_000, 0, hidden);
        assert_eq!(faults(&net), [(0, "filter-mismatch")]);
        let scan = net.host.engine.scan().unwrap();
        assert_eq!(
            (scan.next(), scan.matches()),
            (12_001, &[(10_500, paid)][..])
        );
        let (net, _) = scanned(10_000, 0, invented);
        assert_eq!(faults(&net), [(0, "filter-mismatch")]);
        let scan = net.host.engine.scan().unwrap();
        assert_eq!(
            (scan.next(), scan.matches()),
            (12_001, &[(10_500, paid)][..])
        );
    }

    /// A gateway whose `init` advertises these mirror URLs.
    fn advertising(urls: &[&str]) -> TestChain {
        let mut chain = TestChain::generate(10_000);
        let mut value = [0u8; 512];
        let n = lightwire_wire::Init::encode_mirrors(urls, &mut value).unwrap();
        chain.mirrors = value[..n].to_vec();
        chain
    }

    #[test]
    fn a_mirror_a_gateway_advertises_is_read_unless_the_application_lists_its_own() {
        let chain = TestChain::generate(10_000);
        let mirror = TestMirror::of(&chain, 8_063, 2_016);
        // Not absolute, spaces, or more than four: not taken.
        let urls = ["http://127.0.0.1/bulk/", "/relative/", "http://a b/"];
        let mut net = Net::new(memory(), vec![advertising(&urls)], |e| {
            e.set_filters(false);
            e.set_mirrors(None);
        });
        net.host.mirrors = vec![mirror.clone()];
        net.drive();
        let listed: Vec<&str> = net
            .host
            .engine
            .mirrors()
            .iter()
            .map(|m| m.url.as_str())
            .collect();
        assert_eq!(listed, ["http://127.0.0.1/bulk/"]);
        assert_eq!(faults(&net), []);
        assert_eq!(net.stored().height, 10_000);
        assert!(net.host.engine.mirrors()[0].bytes > 0);
        let gateway = net.host.engine.counters().bytes_in;
        assert!(
            gateway < 1_937 * 80 + 20_000,
            "the gateway sent {gateway} bytes"
        );
        // An application that lists its mirrors (none, here) takes none from gateways.
        let mut net = Net::new(memory(), vec![advertising(&urls)], |e| {
            e.set_filters(false);
            e.set_mirrors(Some(Vec::new()));
        });
        net.drive();
        assert!(net.host.engine.mirrors().is_empty());
        assert_eq!(net.stored().height, 10_000);
    }

    #[test]
    fn the_next_mirror_takes_over_from_a_dropped_one() {
        let chain = TestChain::generate(10_000);
        let honest = TestMirror::of(&chain, 8_063, 2_016);
        let broken = TestMirror {
            serve: Serve::Status(404),
            ..honest.clone()
        };
        let mut net = Net::new(memory(), vec![TestChain::generate(10_000)], |e| {
            e.set_filters(false)
        });
        net.mirrors(vec![broken, honest]);
        net.drive();
        assert_eq!(faults(&net), [(0, "not-found")]);
        assert_eq!(net.stored().height, 10_000);
        assert!(net.host.engine.mirrors()[1].bytes > 0);
        let gateway = net.host.engine.counters().bytes_in;
        assert!(
            gateway < 1_937 * 80 + 20_000,
            "the gateway sent {gateway} bytes"
        );
    }

    fn entry(first: u32, last: u32, name: &str) -> FileEntry {
        FileEntry {
            first,
            last,
            check: FileCheck {
                bytes: u64::from(last - first + 1) * 40,
                sha256: [0; 32],
            },
            name: name.to_string(),
            parts: Vec::new(),
        }
    }

    #[test]
    fn a_manifest_is_checked_before_it_is_used() {
        let genesis = lightwire_chain::REGTEST.genesis.block_hash();
        let good = Manifest {
            genesis,
            height: 4_031,
            hash: BlockHash::ZERO,
            headers: vec![
                entry(0, 2_015, "headers-0-2015-ab.bin"),
                entry(2_016, 4_031, "b.bin"),
            ],
            filter_headers: vec![entry(0, 1_000, "f0.bin"), entry(1_001, 2_000, "f1.bin")],
            filters: vec![entry(0, 10_000, "g0.bin"), entry(10_001, 10_001, "g1.bin")],
        };
        assert_eq!(good.check(&genesis), Ok(()));
        assert_eq!(good.headers_file(2_016).map(|f| f.first), Some(2_016));
        assert_eq!(good.headers_file(4_031).map(|f| f.first), Some(2_016));
        assert_eq!(good.headers_file(4_032), None);
        let with = |f: &dyn Fn(&mut Manifest)| {
            let mut m = good.clone();
            f(&mut m);
            m.check(&genesis)
        };
        // A gap, an overlap, a file out of order, a name that leaves the mirror, a top
        // that is not the files', a file too short for its range: each refused.
        assert!(with(&|m| m.headers[1].first = 2_017).is_err());
        assert!(with(&|m| m.headers[1].first = 2_000).is_err());
        assert!(with(&|m| m.headers.swap(0, 1)).is_err());
        for name in ["../x.bin", "a/b.bin", "", ".hidden", "https:x", "a b"] {
            assert!(
                with(&|m| m.headers[0].name = name.to_string()).is_err(),
                "{name}"
            );
        }
        assert!(with(&|m| m.height = 5_000).is_err());
        assert!(with(&|m| m.headers[0].check.bytes = 100).is_err());
        // A filters file larger than a scan's window, or a gap between filters files.
        assert!(with(&|m| m.filters[0].last = 10_001).is_err());
        assert!(with(&|m| m.filters[1].first = 10_002).is_err());
        // Parts: inside a filters file and ascending, at most 64; none on other kinds.
        let parted =
            |parts: Vec<(u32, u64)>| move |m: &mut Manifest| m.filters[0].parts = parts.clone();
        assert!(with(&parted(vec![(1_001, 10), (2_001, 20)])).is_ok());
        assert!(with(&parted(vec![(2_001, 10), (1_001, 20)])).is_err());
        assert!(with(&parted(vec![(1_001, 20), (2_001, 10)])).is_err());
        assert!(
            with(&parted(vec![(0, 10)])).is_err(),
            "the file's first block"
        );
        assert!(with(&parted(vec![(10_001, 10)])).is_err(), "past its last");
        assert!(
            with(&parted(vec![(1_001, 400_040)])).is_err(),
            "past its bytes"
        );
        assert!(with(&parted((1..=65).map(|k| (k, u64::from(k))).collect())).is_err());
        assert!(with(&|m| m.headers[0].parts = vec![(1, 1)]).is_err());
        // Another network's mirror.
        let mainnet = lightwire_chain::MAINNET.genesis.block_hash();
        assert!(with(&|m| m.genesis = mainnet).is_err());
        // The file after the one streamed, of its kind, is what the shell asks ahead.
        let mut mirrors = Mirrors::new(vec!["http://127.0.0.1/m".into()]);
        let (mut events, mut actions) = (Default::default(), Default::default());
        mirrors.read_manifests(Millis(0), &mut actions);
        mirrors.on_manifest(0, Ok(good.clone()), &genesis, &mut events);
        let f0 = good.headers[0].clone();
        mirrors.start(0, f0, Kind::Headers, Millis(0), &mut actions);
        let fh = good.filter_headers[1].clone();
        mirrors.start(0, fh, Kind::FilterHeaders, Millis(0), &mut actions);
        assert_eq!(
            mirrors.next_url(0).as_deref(),
            Some("http://127.0.0.1/m/b.bin")
        );
        assert_eq!(mirrors.next_url(1), None);
    }

    #[test]
    fn a_slow_or_stalled_body_is_found_out_in_one_window() {
        let mut mirrors = Mirrors::new(vec!["http://127.0.0.1/m".into()]);
        let mut actions = std::collections::VecDeque::new();
        let t0 = Millis::from_f64(1_000.0);
        mirrors.start(0, entry(0, 2_015, "h.bin"), Kind::Headers, t0, &mut actions);
        assert_eq!(
            mirrors.url(0, Some(0)).as_deref(),
            Some("http://127.0.0.1/m/h.bin")
        );
        assert_eq!(mirrors.deadline(), Some(t0 + RATE_WINDOW));
        // A window at exactly the rate passes and the next starts.
        assert!(mirrors.took(0, 1_000_000));
        let t1 = t0 + RATE_WINDOW;
        assert_eq!(mirrors.timed_out(t1), None);
        // The next brings one byte short of it.
        assert!(mirrors.took(0, 999_999));
        assert_eq!(
            mirrors.timed_out(t1 + RATE_WINDOW),
            Some((0, MirrorFault::Slow(999_999)))
        );
        // Stale data is not counted.
        assert!(!mirrors.took(7, 10));
        // Small files, each quick but together slow: the window runs across them (and
        // stands still between them).
        let mut m = Mirrors::new(vec!["http://127.0.0.1/m/".into()]);
        let mut t = t0;
        for i in 0..4u32 {
            m.start(0, entry(0, 2_015, "h.bin"), Kind::Headers, t, &mut actions);
            assert!(m.took(i, 50_000));
            assert_eq!(m.timed_out(t + Duration::from_secs(2)), None);
            assert!(m.end_stream(i, t + Duration::from_secs(2)).is_some());
            // An idle minute between files does not count.
            t = t + Duration::from_secs(62);
        }
        // Eight seconds of the window spent: the fifth file has two.
        m.start(0, entry(0, 2_015, "h.bin"), Kind::Headers, t, &mut actions);
        assert_eq!(m.deadline(), Some(t + Duration::from_secs(2)));
        assert!(m.took(4, 50_000));
        let end = t + Duration::from_secs(2);
        assert_eq!(m.timed_out(end), Some((0, MirrorFault::Slow(250_000))));
        let mut m = Mirrors::new(vec!["http://127.0.0.1/m/".into()]);
        m.start(0, entry(0, 2_015, "h.bin"), Kind::Headers, t0, &mut actions);
        assert_eq!(
            m.timed_out(t0 + RATE_WINDOW),
            Some((0, MirrorFault::Stalled))
        );
    }
}
