//! A block's silent-payment tweak list (`lightwire_primitives::tweaks`) from arbitrary
//! bytes, against a reference parser written here from the list's rules
//! (docs/PROTOCOL.md, "Silent-payment tweaks"): a canonical CompactSize count, then
//! exactly that many 33-byte entries, each starting `02` or `03`, strictly ascending.
//!
//! Input: `selector || rest`.
//! * selector even: `rest` is the list's bytes as they are.
//! * selector odd: `rest` describes a list, so that long and valid ones are reached:
//!   `n u16 (% 300) || count form u8 || defect u8 || where u16 || seed u8 || entries`.
//!   `n` entries are made, each `02`/`03` then 32 bytes, from the entry bytes while they
//!   last and the seed after (the entry bytes for entry `i`: `prefix u8 || fill 32`), then
//!   sorted unless the defect says not; the count is written canonically, with a
//!   non-canonical longer form, or off by one (count form); a defect changes one thing:
//!   an entry's prefix (to any byte), a duplicate, two entries swapped, a byte cut or
//!   added at the end (defect and `where` say which).
//!
//! Checked, for any bytes: `TweakList::parse` gives exactly the reference's answer, the
//! same tweaks in order (`iter`, `len`, `is_empty`) or the same `TweakListError` with the
//! same fields (a count missing or not canonical is `Count`; bytes after it not exactly
//! `count·33` are `Length { count, len }`; then, entry by entry, a first byte not `02`/`03`
//! is `NotCompressed { index }` and an entry not above the one before is
//! `Unsorted { index }`). Each error's `Display` is non-empty. For a list that parses:
//! `write_tweak_list` of its tweaks, in any order, writes the input bytes back, and
//! `tweak_list_hash` is SHA-256 of the bytes (once, not twice). For the entries of the
//! structured form, whatever they are: `write_tweak_list` writes the canonical count and
//! the entries sorted (repeats kept), appending to what the buffer held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_primitives::{
    TWEAK_LEN, TweakList, TweakListError, tweak_list_hash, write_tweak_list,
};
use lightwire_wallet_fuzz::{Cursor, ref_compact_size, ref_write_compact_size, sha256};

/// The reference: the list's rules, in the order they are stated.
fn reference(bytes: &[u8]) -> Result<Vec<[u8; TWEAK_LEN]>, TweakListError> {
    let (count, at) = ref_compact_size(bytes).ok_or(TweakListError::Count)?;
    let rest = &bytes[at..];
    if rest.len() as u128 != u128::from(count) * TWEAK_LEN as u128 {
        return Err(TweakListError::Length {
            count,
            len: rest.len(),
        });
    }
    let mut out: Vec<[u8; TWEAK_LEN]> = Vec::new();
    for index in 0..rest.len() / TWEAK_LEN {
        let mut t = [0u8; TWEAK_LEN];
        t.copy_from_slice(&rest[index * TWEAK_LEN..][..TWEAK_LEN]);
        if t[0] != 2 && t[0] != 3 {
            return Err(TweakListError::NotCompressed { index });
        }
        if let Some(before) = out.last()
            && *before >= t
        {
            return Err(TweakListError::Unsorted { index });
        }
        out.push(t);
    }
    Ok(out)
}

/// A list described by the structured input, and the entries it was made from.
fn structured(input: &mut Cursor<'_>) -> (Vec<u8>, Vec<[u8; TWEAK_LEN]>) {
    let n = usize::from(input.u16() % 300);
    let form = input.u8();
    let defect = input.u8();
    let place = usize::from(input.u16());
    let seed = input.u8();
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let mut t = [0u8; TWEAK_LEN];
        if input.is_empty() {
            // Distinct filler: the index in the last bytes, the seed before.
            t[0] = 2 + (seed & 1);
            t[1..].fill(seed);
            t[29..].copy_from_slice(&(i as u32).to_be_bytes());
        } else {
            t[0] = 2 + (input.u8() & 1);
            let fill = input.bytes(32);
            t[1..1 + fill.len()].copy_from_slice(fill);
        }
        entries.push(t);
    }
    if defect % 8 != 3 {
        entries.sort_unstable();
    }
    let made = entries.clone();
    let at = if n == 0 { 0 } else { place % n };
    match defect % 8 {
        1 if n > 0 => entries[at][0] = (place >> 8) as u8,
        2 if n > 1 => entries[at] = entries[(at + 1) % n],
        3 if n > 1 => entries.swap(at, (at + 1) % n),
        _ => {}
    }
    let count = n as u64;
    let mut bytes = Vec::new();
    match form % 6 {
        // Canonical.
        0 | 1 => ref_write_compact_size(&mut bytes, count),
        // The value in a longer form than it needs.
        2 => {
            bytes.push(0xfd);
            bytes.extend_from_slice(&(count as u16).to_le_bytes());
        }
        3 => {
            bytes.push(0xfe);
            bytes.extend_from_slice(&(count as u32).to_le_bytes());
        }
        // One too many, one too few.
        4 => ref_write_compact_size(&mut bytes, count + 1),
        _ => ref_write_compact_size(&mut bytes, count.wrapping_sub(1)),
    }
    entries.iter().for_each(|t| bytes.extend_from_slice(t));
    match defect % 8 {
        5 => {
            bytes.pop();
        }
        6 => bytes.push(place as u8),
        7 if bytes.len() > 1 => {
            bytes.truncate(bytes.len() - 1 - place % bytes.len().min(TWEAK_LEN));
        }
        _ => {}
    }
    (bytes, made)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8();
    let (bytes, made) = if selector.is_multiple_of(2) {
        (input.rest().to_vec(), None)
    } else {
        let (bytes, made) = structured(&mut input);
        (bytes, Some(made))
    };

    let want = reference(&bytes);
    let got = TweakList::parse(&bytes);
    match (&got, &want) {
        (Ok(list), Ok(tweaks)) => {
            let read: Vec<[u8; TWEAK_LEN]> = list.iter().copied().collect();
            assert_eq!(&read, tweaks, "the tweaks of {}", hex(&bytes));
            assert_eq!(list.len(), tweaks.len());
            assert_eq!(list.is_empty(), tweaks.is_empty());
            // Written back, from the tweaks in their order and reversed, after other bytes.
            let mut again = tweaks.clone();
            let mut out = Vec::new();
            write_tweak_list(&mut again, &mut out);
            assert_eq!(out, bytes, "written back");
            again.reverse();
            let mut out = vec![0xee];
            write_tweak_list(&mut again, &mut out);
            assert_eq!(out[0], 0xee);
            assert_eq!(
                &out[1..],
                &bytes[..],
                "written back from the reversed tweaks"
            );
            assert_eq!(tweak_list_hash(&bytes).0, sha256(&bytes), "one SHA-256");
        }
        (Err(e), Err(w)) => {
            assert_eq!(e, w, "the error for {}", hex(&bytes));
            assert!(!e.to_string().is_empty());
        }
        _ => panic!(
            "parse gave {:?}, the reference {:?}, for {}",
            got.map(|l| l.len()),
            want.map(|t| t.len()),
            hex(&bytes)
        ),
    }

    // Any entries: the canonical count, then the entries sorted, repeats kept.
    if let Some(mut entries) = made {
        let mut out = vec![7];
        write_tweak_list(&mut entries.clone(), &mut out);
        entries.sort();
        let mut expect = vec![7];
        ref_write_compact_size(&mut expect, entries.len() as u64);
        entries.iter().for_each(|t| expect.extend_from_slice(t));
        assert_eq!(out, expect);
        let distinct = entries.windows(2).all(|w| w[0] != w[1]);
        assert_eq!(TweakList::parse(&out[1..]).is_ok(), distinct);
    }
});

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
