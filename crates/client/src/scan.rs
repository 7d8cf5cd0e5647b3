//! A rescan, sans-IO: the filters of a range of blocks fetched from a gateway, each checked
//! against the stored filter-header chain before it is used, and matched against the
//! watched scripts (BIP157/158), a window of 1,000 blocks at a time.
//!
//! For each window the shell reads from the store the block hashes (a filter is keyed by
//! its block's hash) and the filter headers from the one before the window on; then one
//! `get_filters` goes out. Pieces are put together in one buffer, grown to the largest
//! filter seen (at most 1 MiB); a filter is hashed, chained on the stored filter header
//! before it and compared with the stored one, then matched: no allocation per filter once
//! warm. A filter that does not match its stored header is the gateway's lie (or, until
//! filter headers are cross-checked across gateways, the lie of the gateway the headers
//! came from: see docs/PROTOCOL.md). Filters are not kept.

use lightwire_chain::BlockHash;
use lightwire_filter::{FilterError, Matcher, filter_hash, filter_header};
use lightwire_wire::filters::MAX_FILTER_LEN;
use lightwire_wire::{FilterPiece, Filters};

/// Blocks per window (one `get_filters`; BIP157's limit).
pub const SCAN_WINDOW: u32 = 1000;
/// Request ids for filters have these bits set.
pub const SCAN_ID_BITS: u32 = 3 << 30;

/// A `filters` answer that breaks a rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ScanError {
    /// A piece that is not the next one: another block, another offset, or another length
    /// than the filter's first piece said.
    #[error("a filter piece for height {height} out of order")]
    OutOfOrder {
        /// The piece's height.
        height: u32,
    },
    /// A filter whose hash does not chain to the stored filter header.
    #[error("the filter of height {height} does not match its filter header")]
    Mismatch {
        /// The block's height.
        height: u32,
    },
    /// A filter that matches its header but does not decode (bad Golomb coding, a count
    /// too large for its bytes): the filter-header chain itself commits to a broken
    /// filter.
    #[error("the filter of height {height} does not decode: {error}")]
    Undecodable {
        /// The block's height.
        height: u32,
        /// Why.
        #[source]
        error: FilterError,
    },
    /// The answer ended with its window unfinished.
    #[error("the filters answer ended at height {height}, short of the window")]
    Short {
        /// The next height that was due.
        height: u32,
    },
}

/// What changed in the scan's results.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScanChange {
    /// A block's filter matches a watched script.
    Matched {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// A matched block was disconnected by a reorganisation.
    Withdrawn {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Window {
    /// Nothing read yet.
    Empty,
    /// The shell reads heights `start..=end` from the store.
    Reading { start: u32, end: u32 },
    /// Read; the request is due.
    Ready,
    /// Requested from a gateway.
    Requested { id: u32, gateway: usize },
}

/// One rescan: its scripts, where it stands, what matched.
#[derive(Debug)]
pub struct Scan {
    scripts: Vec<Vec<u8>>,
    matcher: Matcher,
    from: u32,
    /// The next height to match.
    next: u32,
    matches: Vec<(u32, BlockHash)>,
    window: Window,
    /// The window's first height, its block hashes and its filter headers (from the one
    /// before its first block).
    start: u32,
    hashes: Vec<BlockHash>,
    headers: Vec<[u8; 32]>,
    /// The filter being put together: its bytes so far and its whole length.
    buf: Vec<u8>,
    filter_len: Option<u32>,
    ids: u32,
    /// Filters matched so far, and their bytes.
    pub filters: u64,
    /// Filter bytes taken.
    pub bytes: u64,
    /// Whether the scan has reached the stored filter tip since it last moved.
    reported_tip: bool,
}

impl Scan {
    /// A scan of `scripts` (output scripts) from block `from` on.
    pub fn new(scripts: Vec<Vec<u8>>, from: u32) -> Scan {
        Scan {
            matcher: Matcher::with_capacity(scripts.len()),
            scripts,
            from,
            next: from,
            matches: Vec::new(),
            window: Window::Empty,
            start: from,
            hashes: Vec::with_capacity(SCAN_WINDOW as usize),
            headers: Vec::with_capacity(SCAN_WINDOW as usize + 1),
            buf: Vec::new(),
            filter_len: None,
            ids: 0,
            filters: 0,
            bytes: 0,
            reported_tip: false,
        }
    }

    /// The first height scanned.
    pub fn from(&self) -> u32 {
        self.from
    }

    /// The next height to match (every height below it is done).
    pub fn next(&self) -> u32 {
        self.next
    }

    /// The blocks that matched, ascending.
    pub fn matches(&self) -> &[(u32, BlockHash)] {
        &self.matches
    }

    /// The window to read from the store, if one is due: heights `start..=end`, up to the
    /// last stored filter header `stored`.
    pub fn need_data(&mut self, stored: Option<u32>) -> Option<(u32, u32)> {
        match self.window {
            Window::Reading { start, end } => Some((start, end)),
            Window::Empty => {
                let tip = stored.filter(|&t| t >= self.next)?;
                let end = tip.min(self.next.saturating_add(SCAN_WINDOW - 1));
                self.window = Window::Reading {
                    start: self.next,
                    end,
                };
                Some((self.next, end))
            }
            _ => None,
        }
    }

    /// The store's answer to [`Self::need_data`]: the block hashes of `start..=end` and the
    /// filter headers of `start - 1..=end` (32 zero bytes before genesis). Ignored if the
    /// window was dropped meanwhile (a reorganisation) or does not fit.
    pub fn on_data(&mut self, start: u32, hashes: &[BlockHash], headers: &[[u8; 32]]) {
        if !matches!(self.window, Window::Reading { start: s, .. } if s == start)
            || headers.len() != hashes.len() + 1
            || hashes.is_empty()
        {
            self.window = Window::Empty;
            return;
        }
        self.start = start;
        self.hashes.clear();
        self.hashes.extend_from_slice(hashes);
        self.headers.clear();
        self.headers.extend_from_slice(headers);
        self.window = Window::Ready;
    }

    /// The request for the window, if it is due: id, first height and the last block's
    /// hash. `gateway` is where it goes.
    pub fn next_request(&mut self, gateway: usize) -> Option<(u32, u32, BlockHash)> {
        if self.window != Window::Ready {
            return None;
        }
        self.ids = self.ids.wrapping_add(1);
        let id = SCAN_ID_BITS | (self.ids & !SCAN_ID_BITS);
        self.window = Window::Requested { id, gateway };
        self.buf.clear();
        self.filter_len = None;
        Some((id, self.next, *self.hashes.last()?))
    }

    /// The gateway a request is in flight to.
    pub fn asked(&self) -> Option<(usize, u32)> {
        match self.window {
            Window::Requested { id, gateway } => Some((gateway, id)),
            _ => None,
        }
    }

    /// The request in flight is given up (its gateway dropped): asked again.
    pub fn abandon(&mut self) {
        if matches!(self.window, Window::Requested { .. }) {
            self.window = Window::Ready;
        }
    }

    /// Whether `id` from `gateway` is the request in flight.
    pub fn is_in_flight(&self, gateway: usize, id: u32) -> bool {
        self.asked() == Some((gateway, id))
    }

    /// Whether the scan stands at the stored filter tip `stored` (everything stored is
    /// matched) for the first time since it last moved: the shell reports it once.
    pub fn reached(&mut self, stored: Option<u32>) -> bool {
        let at_tip = stored.is_some_and(|t| self.next > t) && self.window == Window::Empty;
        let first = at_tip && !self.reported_tip;
        self.reported_tip = at_tip;
        first
    }

    /// One `filters` message. Matches and filters taken are reported to `change`.
    pub fn on_filters(
        &mut self,
        m: &Filters<'_>,
        mut change: impl FnMut(ScanChange),
    ) -> Result<(), ScanError> {
        for piece in m.pieces() {
            self.on_piece(&piece, &mut change)?;
        }
        if m.flags.last && matches!(self.window, Window::Requested { .. }) {
            // Short of the window: the gateway's chain moved (a reorg: it says the stop
            // block is not on its chain, and a new tip follows), or it is behind. Read the
            // window again once things settle; an answer cut short otherwise is a strike.
            self.window = Window::Empty;
            if !m.flags.stop_unknown {
                return Err(ScanError::Short { height: self.next });
            }
        }
        Ok(())
    }

    fn on_piece(
        &mut self,
        p: &FilterPiece<'_>,
        change: &mut impl FnMut(ScanChange),
    ) -> Result<(), ScanError> {
        let height = p.height;
        let out_of_order = ScanError::OutOfOrder { height };
        if !matches!(self.window, Window::Requested { .. }) || height != self.next {
            return Err(out_of_order);
        }
        match self.filter_len {
            None if p.offset == 0 && p.filter_len <= MAX_FILTER_LEN => {
                self.filter_len = Some(p.filter_len);
                self.buf.clear();
            }
            Some(len) if len == p.filter_len && p.offset as usize == self.buf.len() => {}
            _ => return Err(out_of_order),
        }
        self.buf.extend_from_slice(p.data);
        self.bytes += p.data.len() as u64;
        if !p.ends_filter() {
            return Ok(());
        }
        self.filter_len = None;
        let i = (height - self.start) as usize;
        let (Some(before), Some(stored), Some(hash)) = (
            self.headers.get(i),
            self.headers.get(i + 1),
            self.hashes.get(i),
        ) else {
            return Err(out_of_order);
        };
        if filter_header(&filter_hash(&self.buf), before) != *stored {
            return Err(ScanError::Mismatch { height });
        }
        let scripts = self.scripts.iter().map(Vec::as_slice);
        let matched = self
            .matcher
            .match_any(&self.buf, &hash.0, scripts)
            .map_err(|error| ScanError::Undecodable { height, error })?;
        if matched {
            self.matches.push((height, *hash));
            change(ScanChange::Matched {
                height,
                hash: *hash,
            });
        }
        self.filters += 1;
        self.next += 1;
        if i + 1 == self.hashes.len() {
            self.window = Window::Empty;
        }
        Ok(())
    }

    /// The best chain switched branches at `fork`: matches above it are withdrawn (to
    /// `change`), and the scan goes on from the fork.
    pub fn reorg(&mut self, fork: u32, mut change: impl FnMut(ScanChange)) {
        while let Some(&(height, hash)) = self.matches.last().filter(|(h, _)| *h > fork) {
            self.matches.pop();
            change(ScanChange::Withdrawn { height, hash });
        }
        if self.next > fork + 1 {
            self.next = (fork + 1).max(self.from);
        }
        let touches = match self.window {
            Window::Reading { end, .. } => end > fork,
            Window::Ready | Window::Requested { .. } => {
                self.start + self.hashes.len() as u32 > fork + 1
            }
            Window::Empty => false,
        };
        if touches {
            self.window = Window::Empty;
            self.filter_len = None;
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_filter::build_filter;
    use lightwire_wire::{AnswerFlags, FiltersWriter, Message};

    use super::*;

    fn hash(h: u32) -> BlockHash {
        let mut b = [1u8; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        BlockHash(b)
    }

    /// Blocks 0..n: block h's filter holds script [h; 4] (and block 7's also "ours").
    fn chain(n: u32) -> (Vec<Vec<u8>>, Vec<[u8; 32]>) {
        let mut filters = Vec::new();
        let mut headers = vec![[0u8; 32]];
        for h in 0..n {
            let mut f = Vec::new();
            let mine = b"ours".to_vec();
            let items: Vec<Vec<u8>> = if h == 7 || h == 1500 {
                vec![vec![h as u8; 4], mine]
            } else {
                vec![vec![h as u8; 4]]
            };
            build_filter(&hash(h).0, items.iter().map(Vec::as_slice), &mut f);
            let prev = *headers.last().unwrap();
            headers.push(filter_header(&filter_hash(&f), &prev));
            filters.push(f);
        }
        (filters, headers)
    }

    /// The gateway's messages for heights `a..=b`, `per` pieces' worth of room each.
    fn answer(id: u32, filters: &[Vec<u8>], a: u32, b: u32, room: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; room];
        let (mut h, mut off) = (a, 0);
        while h <= b {
            let mut w = FiltersWriter::new(&mut buf, id).unwrap();
            while h <= b {
                let Some(n) = w.push(h, &filters[h as usize], off) else {
                    break;
                };
                off += n;
                if off == filters[h as usize].len() {
                    (h, off) = (h + 1, 0);
                }
            }
            let len = w.finish(AnswerFlags {
                last: h > b,
                stop_unknown: false,
            });
            out.push(buf[..len].to_vec());
        }
        out
    }

    fn feed(s: &mut Scan, msgs: &[Vec<u8>]) -> (Vec<ScanChange>, Result<(), ScanError>) {
        let mut changes = Vec::new();
        for m in msgs {
            let Ok(Message::Filters(f)) = Message::decode(m) else {
                panic!("filters")
            };
            if let Err(e) = s.on_filters(&f, |c| changes.push(c)) {
                return (changes, Err(e));
            }
        }
        (changes, Ok(()))
    }

    fn window(s: &mut Scan, headers: &[[u8; 32]], stored: u32) -> (u32, u32, u32) {
        let (a, b) = s.need_data(Some(stored)).unwrap();
        let hashes: Vec<BlockHash> = (a..=b).map(hash).collect();
        s.on_data(a, &hashes, &headers[a as usize..=b as usize + 1]);
        let (id, start, stop) = s.next_request(0).unwrap();
        assert_eq!((start, stop), (a, hash(b)));
        (id, a, b)
    }

    #[test]
    fn windows_of_filters_are_checked_then_matched() {
        let (filters, headers) = chain(2000);
        let mut s = Scan::new(vec![b"ours".to_vec(), b"not".to_vec()], 0);
        assert_eq!(s.need_data(None), None, "nothing stored");
        let (id, a, b) = window(&mut s, &headers, 1999);
        assert_eq!((a, b), (0, 999));
        // Small messages: filters cut in pieces across them.
        let (changes, r) = feed(&mut s, &answer(id, &filters, a, b, 40));
        r.unwrap();
        assert_eq!(
            changes,
            [ScanChange::Matched {
                height: 7,
                hash: hash(7)
            }]
        );
        assert_eq!(s.next(), 1000);
        let (id, a, b) = window(&mut s, &headers, 1999);
        assert_eq!((a, b), (1000, 1999));
        let (changes, r) = feed(&mut s, &answer(id, &filters, a, b, 65_535));
        r.unwrap();
        assert_eq!(changes.len(), 1);
        assert!(s.reached(Some(1999)));
        assert!(!s.reached(Some(1999)), "reported once");
        assert_eq!(s.matches(), [(7, hash(7)), (1500, hash(1500))]);
        // A reorg at 1,200 withdraws the match at 1,500 and goes on from 1,201.
        let mut withdrawn = Vec::new();
        s.reorg(1200, |c| withdrawn.push(c));
        assert_eq!(
            withdrawn,
            [ScanChange::Withdrawn {
                height: 1500,
                hash: hash(1500)
            }]
        );
        assert_eq!(s.next(), 1201);
        assert_eq!(s.filters, 2000);
    }

    #[test]
    fn a_wrong_filter_or_pieces_out_of_order_are_refused() {
        let (mut filters, headers) = chain(1000);
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let (id, a, b) = window(&mut s, &headers, 999);
        // Block 5's filter without its item: it does not chain to the stored header.
        build_filter(&hash(5).0, [&b"other"[..]], &mut filters[5]);
        let (_, r) = feed(&mut s, &answer(id, &filters, a, b, 65_535));
        assert_eq!(r, Err(ScanError::Mismatch { height: 5 }));
        // Pieces from another height than the next.
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let (id, _, b) = window(&mut s, &headers, 999);
        let (_, r) = feed(&mut s, &answer(id, &filters, 1, b, 65_535));
        assert_eq!(r, Err(ScanError::OutOfOrder { height: 1 }));
        // An answer that ends early.
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let (id, a, _) = window(&mut s, &headers, 999);
        let mut short = answer(id, &filters, a, 3, 65_535);
        let (_, r) = feed(&mut s, &short.split_off(0));
        assert_eq!(r, Err(ScanError::Short { height: 4 }));
    }
}
