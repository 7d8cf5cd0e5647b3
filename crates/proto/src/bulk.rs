//! Bulk files: a mirror's immutable ranges of the chain (docs/PROTOCOL.md, "Bulk files"),
//! written and read sans-IO.
//!
//! A bulk file is a run of records, each a 2-byte big-endian length and one protocol
//! message: the very answer a gateway sends (`headers_compact`, `filter_headers`,
//! `filters`, request id 0). So a file is read by the decoder a gateway's messages go
//! through ([`crate::initiator`]'s), its headers expanded and hashed in the same buffers,
//! and what comes out is the same [`PeerEvent`] the engine validates: one pipeline, the
//! file carrying no more trust than a gateway's answer. What a file adds is its name: the
//! manifest gives its length and SHA-256, checked as the bytes go by (a mirror that
//! serves other bytes under a name is found out at the end, whatever it sent meanwhile
//! was validated as any answer is). A shell that can hash off the thread that validates
//! (the browser's WebCrypto, natively) turns the reader's hashing off
//! ([`BulkReader::set_hashing`]) and checks the bytes itself: the hash decides only
//! whether the mirror is read further, never whether a header is taken.
//!
//! The reader takes the body in any chunking (a `fetch()` stream's); a record inside one
//! chunk is decoded where it lies, one straddling chunks is gathered first (at most one
//! message, 64 KiB).

use lightwire_chain::HEADER_LEN;
use lightwire_wire::MAX_MESSAGE_LEN;
use lightwire_wire::filters::MAX_FILTER_HASHES_PER_MESSAGE;
use lightwire_wire::{AnswerFlags, EncodeError, FilterHeaders, FiltersWriter, HeadersCompact};
use sha2::{Digest, Sha256};

use crate::compact::Expanded;
use crate::initiator::{Interpreted, PeerError, PeerEvent, interpret};

/// Bytes of a record's length prefix.
pub const RECORD_PREFIX: usize = 2;

/// What a bulk file must be, as its manifest says: its length and SHA-256.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FileCheck {
    /// Its length in bytes.
    pub bytes: u64,
    /// The SHA-256 of its bytes (its name carries it too).
    pub sha256: [u8; 32],
}

/// Why a bulk file was refused. The mirror that served it is not asked again this
/// session; what was validated before the fault is kept (it was validated as any
/// gateway's answer is).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BulkError {
    /// More bytes than the manifest names.
    #[error("the file is longer than the {expected} bytes its manifest names")]
    TooLong {
        /// The length the manifest gave.
        expected: u64,
    },
    /// The body ended before the length the manifest names (or inside a record).
    #[error("the file ended after {read} of the {expected} bytes its manifest names")]
    Truncated {
        /// Bytes received.
        read: u64,
        /// The length the manifest gave.
        expected: u64,
    },
    /// Its bytes do not hash to the SHA-256 its manifest names.
    #[error("the file's bytes do not hash to the SHA-256 its manifest names")]
    WrongHash,
    /// A record that does not decode as a protocol message.
    #[error("a record of the file does not decode: {0}")]
    Decode(PeerError),
    /// A message no bulk file holds (anything but headers, filter headers and filters).
    #[error("the file holds a message of type {kind}, which no bulk file holds")]
    Unexpected {
        /// Its type.
        kind: u16,
    },
    /// The reader failed before.
    #[error("the file was refused before")]
    Failed,
}

/// A bulk file's reader: records in, [`PeerEvent`]s out, its length and hash checked.
pub struct BulkReader {
    expanded: Expanded,
    /// A record straddling chunks, its prefix included, while it is gathered.
    partial: Vec<u8>,
    /// `partial` holds a whole record, handed out: cleared at the next read.
    handed: bool,
    hasher: Sha256,
    /// Whether the SHA-256 is checked here (see [`Self::set_hashing`]).
    hashing: bool,
    read: u64,
    check: FileCheck,
    failed: bool,
}

impl Default for BulkReader {
    fn default() -> Self {
        Self::new()
    }
}

impl BulkReader {
    /// A reader with its buffers (the expansion's, about 190 KB, and one record's),
    /// allocated once and reused for every file.
    pub fn new() -> BulkReader {
        BulkReader {
            expanded: Expanded::new(),
            partial: Vec::with_capacity(RECORD_PREFIX + MAX_MESSAGE_LEN),
            handed: false,
            hasher: Sha256::new(),
            hashing: true,
            read: 0,
            check: FileCheck {
                bytes: 0,
                sha256: [0; 32],
            },
            failed: false,
        }
    }

    /// Whether files' SHA-256 is checked here (on by default). Off, only their length is,
    /// and the caller checks their bytes against [`FileCheck::sha256`] itself.
    pub fn set_hashing(&mut self, on: bool) {
        self.hashing = on;
    }

    /// Start on a file that must be as `check` says.
    pub fn start(&mut self, check: FileCheck) {
        self.partial.clear();
        self.handed = false;
        self.hasher = Sha256::new();
        self.read = 0;
        self.check = check;
        self.failed = false;
    }

    /// Bytes of the file taken so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Take bytes of the file (any chunking): returns how many were taken and at most one
    /// event. Call again with the rest. After an error the reader stays failed.
    pub fn read<'a>(
        &'a mut self,
        data: &'a [u8],
    ) -> Result<(usize, Option<PeerEvent<'a>>), BulkError> {
        if self.failed {
            return Err(BulkError::Failed);
        }
        if self.handed {
            self.partial.clear();
            self.handed = false;
        }
        if self.read + data.len() as u64 > self.check.bytes {
            self.failed = true;
            return Err(BulkError::TooLong {
                expected: self.check.bytes,
            });
        }
        let (taken, record) = if self.partial.is_empty()
            && let Some(len) = record_len(data)
            && data.len() >= RECORD_PREFIX + len
        {
            // The whole record in this chunk: decoded where it lies.
            let whole = &data[..RECORD_PREFIX + len];
            if self.hashing {
                self.hasher.update(whole);
            }
            (whole.len(), &whole[RECORD_PREFIX..])
        } else {
            let want = match record_len(&self.partial) {
                Some(len) => RECORD_PREFIX + len - self.partial.len(),
                None => RECORD_PREFIX - self.partial.len(),
            };
            let n = want.min(data.len());
            self.partial.extend_from_slice(&data[..n]);
            if self.hashing {
                self.hasher.update(&data[..n]);
            }
            self.read += n as u64;
            let whole = record_len(&self.partial)
                .is_some_and(|len| self.partial.len() == RECORD_PREFIX + len);
            if !whole {
                return Ok((n, None));
            }
            self.handed = true;
            self.read -= n as u64;
            (n, &self.partial[RECORD_PREFIX..])
        };
        self.read += taken as u64;
        let failed = &mut self.failed;
        let message = interpret(record, &[0; 32], true, &mut self.expanded, true);
        let event = match message {
            Ok(Interpreted::Event(event)) => event,
            Ok(Interpreted::Ready { .. }) | Ok(Interpreted::Pong(_)) => None,
            Err(e) => {
                *failed = true;
                return Err(BulkError::Decode(e));
            }
        };
        match event {
            None => {
                // An odd type this reader does not know is skipped (BOLT 1); an even
                // one does not decode. A `ping` or `init` is no file's.
                let kind = message_type(record);
                if matches!(kind, 16 | 18) {
                    *failed = true;
                    return Err(BulkError::Unexpected { kind });
                }
                Ok((taken, None))
            }
            Some(
                e @ (PeerEvent::Headers { .. }
                | PeerEvent::FilterHeaders { .. }
                | PeerEvent::Filters(_)),
            ) => Ok((taken, Some(e))),
            Some(_) => {
                *failed = true;
                Err(BulkError::Unexpected {
                    kind: message_type(record),
                })
            }
        }
    }

    /// The body ended: it must be whole, of the length and SHA-256 the manifest names.
    pub fn finish(&mut self) -> Result<(), BulkError> {
        if self.failed {
            return Err(BulkError::Failed);
        }
        self.failed = true;
        let inside = !self.partial.is_empty() && !self.handed;
        if inside || self.read != self.check.bytes {
            return Err(BulkError::Truncated {
                read: self.read,
                expected: self.check.bytes,
            });
        }
        let hash: [u8; 32] = core::mem::take(&mut self.hasher).finalize().into();
        if self.hashing && hash != self.check.sha256 {
            return Err(BulkError::WrongHash);
        }
        Ok(())
    }
}

/// The length a record's prefix gives, once the prefix is there.
fn record_len(data: &[u8]) -> Option<usize> {
    match data {
        [a, b, ..] => Some(usize::from(u16::from_be_bytes([*a, *b]))),
        _ => None,
    }
}

fn message_type(record: &[u8]) -> u16 {
    match record {
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
        _ => 0,
    }
}

/// Append the records of a headers file to `out`: `count` headers from `first_height`,
/// `header(i)` the 80-byte encoding of the `i`-th, as `headers_compact` messages (id 0),
/// the last one flagged `last`. Returns the records written.
pub fn write_headers(
    out: &mut Vec<u8>,
    first_height: u32,
    count: usize,
    header: impl Fn(usize) -> [u8; HEADER_LEN],
) -> usize {
    let mut message = vec![0u8; MAX_MESSAGE_LEN];
    let mut done = 0;
    let mut records = 0;
    while done < count || records == 0 {
        let at = done;
        let encoded = HeadersCompact::encode_answer(
            &mut message,
            0,
            first_height + at as u32,
            count - at,
            |i| (at + i < count).then(|| header(at + i)),
        );
        // A buffer of a whole message always takes at least one header.
        let Ok((len, n)) = encoded else { break };
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&message[..len]);
        done += n;
        records += 1;
        if n == 0 {
            break;
        }
    }
    records
}

/// Append the records of a filter-headers file to `out`: `entries` the filter header and
/// the filter hash of each block from `first_height` on, `before` the filter header of the
/// block before the first (zeros before genesis), as `filter_headers` messages (id 0), the
/// last one flagged `last`. Returns the records written.
pub fn write_filter_headers(
    out: &mut Vec<u8>,
    first_height: u32,
    before: [u8; 32],
    entries: &[([u8; 32], [u8; 32])],
) -> usize {
    let mut message = vec![0u8; MAX_MESSAGE_LEN];
    let mut records = 0;
    let mut at = 0;
    let mut before = before;
    while at < entries.len() || records == 0 {
        let count = (entries.len() - at).min(MAX_FILTER_HASHES_PER_MESSAGE);
        let flags = AnswerFlags {
            last: at + count == entries.len(),
            stop_unknown: false,
        };
        let chunk = &entries[at..at + count];
        let encoded = FilterHeaders::encode_answer(
            &mut message,
            0,
            first_height + at as u32,
            flags,
            count,
            before,
            |i| chunk[i],
        );
        // A buffer of a whole message always takes a message's worth.
        let Ok(len) = encoded else { break };
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&message[..len]);
        records += 1;
        if let Some((h, _)) = chunk.last() {
            before = *h;
        }
        at += count;
        if count == 0 {
            break;
        }
    }
    records
}

/// Append the records of a filters file to `out`: the filters of heights `first..=last`,
/// `filter(height, buf)` writing each into `buf` (cleared before each), as `filters`
/// messages (id 0) with pieces packed and a filter continued in the next message exactly
/// as a gateway's session answers `get_filters` (the same [`FiltersWriter`]), the last
/// message flagged `last`. At each height of `starts` (ascending, inside the range) a
/// new message begins: the file read from that record on is a whole answer from that
/// height (a client reading from a block inside the file asks for the bytes from there,
/// docs/PROTOCOL.md, "Bulk files"). A source's error stops it.
pub fn write_filters<E>(
    out: &mut Vec<u8>,
    (first, last): (u32, u32),
    starts: &[u32],
    mut filter: impl FnMut(u32, &mut Vec<u8>) -> Result<(), E>,
) -> Result<Written, WriteFiltersError<E>> {
    let began = out.len();
    let mut message = vec![0u8; MAX_MESSAGE_LEN];
    let mut written = Written {
        records: 0,
        starts: Vec::with_capacity(starts.len()),
    };
    let mut bytes = Vec::new();
    let mut w = FiltersWriter::new(&mut message, 0).map_err(WriteFiltersError::Encode)?;
    let flush = |out: &mut Vec<u8>, len: usize, records: &mut usize, message: &[u8]| {
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&message[..len]);
        *records += 1;
    };
    let mut next_start = starts
        .iter()
        .copied()
        .filter(|&h| h > first && h <= last)
        .peekable();
    for height in first..=last {
        if next_start.next_if_eq(&height).is_some() {
            if w.pieces() > 0 {
                let len = w.finish(AnswerFlags::default());
                flush(out, len, &mut written.records, &message);
                w = FiltersWriter::new(&mut message, 0).map_err(WriteFiltersError::Encode)?;
            }
            // Where this height's record will begin: after every record flushed so far.
            written.starts.push((height, (out.len() - began) as u64));
        }
        bytes.clear();
        filter(height, &mut bytes).map_err(|e| WriteFiltersError::Source { height, error: e })?;
        let mut offset = 0;
        loop {
            let pushed = if w.has_room() {
                w.push(height, &bytes, offset)
            } else {
                None
            };
            match pushed {
                Some(n) => {
                    offset += n;
                    if offset == bytes.len() {
                        break;
                    }
                }
                // Not even a piece fits an empty message: cannot be (65,535 bytes).
                None if w.pieces() == 0 => {
                    return Err(WriteFiltersError::Encode(EncodeError::BufferTooSmall {
                        needed: bytes.len(),
                        available: MAX_MESSAGE_LEN,
                    }));
                }
                None => {
                    let len = w.finish(AnswerFlags::default());
                    flush(out, len, &mut written.records, &message);
                    w = FiltersWriter::new(&mut message, 0).map_err(WriteFiltersError::Encode)?;
                }
            }
        }
    }
    let len = w.finish(AnswerFlags {
        last: true,
        stop_unknown: false,
    });
    flush(out, len, &mut written.records, &message);
    Ok(written)
}

/// What [`write_filters`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its records.
    pub records: usize,
    /// Each start height asked for inside the range, with the offset (from the file's
    /// first byte) of the record that begins with it.
    pub starts: Vec<(u32, u64)>,
}

/// Why a filters file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteFiltersError<E> {
    /// The filter of `height` could not be had.
    #[error("the filter of block {height} could not be read: {error}")]
    Source {
        /// Its height.
        height: u32,
        /// Why.
        error: E,
    },
    /// A message could not be encoded.
    #[error("a filters message could not be encoded: {0}")]
    Encode(EncodeError),
}

/// The messages of a bulk file's records, in order (stopping at a record cut short): for
/// tools and tests that read a whole file at once.
pub fn records(file: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = file;
    core::iter::from_fn(move || {
        let len = record_len(rest)?;
        let message = rest.get(RECORD_PREFIX..RECORD_PREFIX + len)?;
        rest = &rest[RECORD_PREFIX + len..];
        Some(message)
    })
}

/// The SHA-256 of `bytes`, and their length: what a manifest names a file by.
pub fn file_check(bytes: &[u8]) -> FileCheck {
    FileCheck {
        bytes: bytes.len() as u64,
        sha256: Sha256::digest(bytes).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestChain;

    fn file(chain: &TestChain, first: u32, count: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_headers(&mut out, first, count, |i| {
            chain.header(first + i as u32).encode()
        });
        out
    }

    /// Every header of the file, read in chunks of `chunk`, with its hash.
    fn read_all(file: &[u8], check: FileCheck, chunk: usize) -> Result<Vec<[u8; 80]>, BulkError> {
        read_with(BulkReader::new(), file, check, chunk)
    }

    fn read_with(
        mut r: BulkReader,
        file: &[u8],
        check: FileCheck,
        chunk: usize,
    ) -> Result<Vec<[u8; 80]>, BulkError> {
        r.start(check);
        let mut got = Vec::new();
        for piece in file.chunks(chunk) {
            let mut rest = piece;
            while !rest.is_empty() {
                let (taken, event) = r.read(rest)?;
                rest = &rest[taken..];
                if let Some(PeerEvent::Headers {
                    headers, hashes, ..
                }) = event
                {
                    for (h, hash) in headers.chunks_exact(80).zip(hashes) {
                        let h: [u8; 80] = h.try_into().unwrap();
                        assert_eq!(lightwire_chain::Header::decode(&h).block_hash(), *hash);
                        got.push(h);
                    }
                }
            }
        }
        r.finish()?;
        Ok(got)
    }

    #[test]
    fn a_file_reads_back_in_any_chunking() {
        let chain = TestChain::generate(5_000);
        let bytes = file(&chain, 2_016, 2_016);
        let check = file_check(&bytes);
        for chunk in [1, 2, 3, 1_000, 65_537, bytes.len()] {
            let got = read_all(&bytes, check, chunk).unwrap();
            assert_eq!(got.len(), 2_016, "chunks of {chunk}");
            for (i, h) in got.iter().enumerate() {
                assert_eq!(*h, chain.header(2_016 + i as u32).encode());
            }
        }
    }

    #[test]
    fn a_wrong_length_or_hash_is_refused() {
        let chain = TestChain::generate(3_000);
        let bytes = file(&chain, 0, 2_016);
        let check = file_check(&bytes);
        let cut = &bytes[..bytes.len() - 1];
        assert!(matches!(
            read_all(cut, check, 4_096),
            Err(BulkError::Truncated { .. })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            read_all(&longer, check, 4_096),
            Err(BulkError::TooLong { .. })
        ));
        let mut other = check;
        other.sha256[0] ^= 1;
        assert_eq!(read_all(&bytes, other, 4_096), Err(BulkError::WrongHash));
        // A flipped byte in a header's nonce decodes (the file is refused by its hash at
        // the end; the header itself fails validation in the engine before that).
        let mut flipped = bytes.clone();
        let at = bytes.len() - 1;
        flipped[at] ^= 1;
        assert_eq!(read_all(&flipped, check, 4_096), Err(BulkError::WrongHash));
        // With the hashing left to the caller, the length is still checked, the hash not.
        let mut unhashed = BulkReader::new();
        unhashed.set_hashing(false);
        assert!(read_with(unhashed, &bytes, other, 4_096).is_ok());
        let mut unhashed = BulkReader::new();
        unhashed.set_hashing(false);
        assert!(matches!(
            read_with(unhashed, cut, check, 4_096),
            Err(BulkError::Truncated { .. })
        ));
    }

    #[test]
    fn a_record_that_is_no_file_message_is_refused() {
        // A ping in a file: no file holds one.
        let ping = [0u8, 18, 0, 4, 0, 0];
        let mut bytes = vec![0, ping.len() as u8];
        bytes.extend_from_slice(&ping);
        let check = file_check(&bytes);
        assert_eq!(
            read_all(&bytes, check, 3),
            Err(BulkError::Unexpected { kind: 18 })
        );
        // A record that does not decode (an even unknown type).
        let bytes = [0u8, 2, 0, 2];
        let check = file_check(&bytes);
        assert!(matches!(
            read_all(&bytes, check, 1),
            Err(BulkError::Decode(_))
        ));
    }

    /// A filters file written with starts reads, from each start's offset on, as a whole
    /// answer from that height: every filter after it, whole, in order, and nothing else;
    /// without starts the file is as before (the parts cost only a message cut short at
    /// each start).
    #[test]
    fn a_filters_file_reads_from_each_start() {
        let filter = |h: u32, out: &mut Vec<u8>| {
            // Big enough that messages hold few filters and straddle starts.
            out.extend((0..(9_000 + h % 5_000)).map(|i| (i ^ h) as u8));
            Ok::<(), ()>(())
        };
        let (first, last) = (10_001, 13_000);
        let mut plain = Vec::new();
        write_filters(&mut plain, (first, last), &[], filter).unwrap();
        let mut parted = Vec::new();
        let written = write_filters(&mut parted, (first, last), &[11_001, 12_001], filter).unwrap();
        assert_eq!(written.starts.len(), 2);
        // A message cut short at each start: a record header and a piece header more or less.
        assert!(
            parted.len().abs_diff(plain.len()) < 200,
            "{} against {}",
            parted.len(),
            plain.len()
        );
        for &(start, offset) in &written.starts {
            let from = &parted[offset as usize..];
            let mut r = BulkReader::new();
            r.set_hashing(false);
            r.start(FileCheck {
                bytes: from.len() as u64,
                sha256: [0; 32],
            });
            let mut rest = from;
            let (mut height, mut current) = (start, Vec::new());
            while !rest.is_empty() {
                let (taken, event) = r.read(rest).unwrap();
                rest = &rest[taken..];
                let Some(PeerEvent::Filters(f)) = event else {
                    continue;
                };
                for p in f.pieces() {
                    assert_eq!((p.height, p.offset as usize), (height, current.len()));
                    current.extend_from_slice(p.data);
                    if p.ends_filter() {
                        let mut want = Vec::new();
                        filter(height, &mut want).unwrap();
                        assert_eq!(current, want, "the filter of {height}");
                        current.clear();
                        height += 1;
                    }
                }
            }
            r.finish().unwrap();
            assert_eq!(height, last + 1, "read from {start} to the end");
        }
        // Starts outside the range, or at its first height, make no part.
        let mut again = Vec::new();
        let none =
            write_filters(&mut again, (first, last), &[first, 9_000, 20_000], filter).unwrap();
        assert!(none.starts.is_empty());
        assert_eq!(again, plain);
    }
}
