//! Checking a block against its header allocates nothing: every allocation counted while
//! a block of 1,001 transactions (with witnesses) is parsed, every txid computed, its
//! Merkle root streamed and compared, and its transactions walked, many times over.
#![cfg(not(target_arch = "wasm32"))]

use lightwire_alloc::{CountingAllocator, snapshot};
use lightwire_primitives::{Block, BlockHash, write_compact_size};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

/// A segwit transaction numbered `i`: one input with a two-item witness, two outputs.
fn tx(i: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&[0, 1, 1]);
    if i == 0 {
        // The first is the coinbase: it spends the null outpoint.
        out.extend_from_slice(&[0; 32]);
        out.extend_from_slice(&[0xff; 4]);
    } else {
        out.extend_from_slice(&[7; 28]);
        out.extend_from_slice(&i.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
    }
    out.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff, 2]);
    for j in 0..2u64 {
        out.extend_from_slice(&(1_000 + j).to_le_bytes());
        out.extend_from_slice(&[22, 0x00, 0x14]);
        out.extend_from_slice(&[(i % 251) as u8; 20]);
    }
    out.extend_from_slice(&[2, 72]);
    out.extend_from_slice(&[0x30; 72]);
    out.push(33);
    out.extend_from_slice(&[0x02; 33]);
    out.extend_from_slice(&0u32.to_le_bytes());
}

#[test]
fn checking_a_block_allocates_nothing() {
    let mut block = vec![0u8; 80];
    write_compact_size(&mut block, 1_001);
    for i in 0..1_001 {
        tx(i, &mut block);
    }
    let root = Block::parse(&block).unwrap().merkle_root().0;
    block[36..68].copy_from_slice(&root);
    let hash = BlockHash::of_header(block[..80].try_into().unwrap());
    let mut outputs = 0;
    // The counters are the whole process's: the test harness's own thread can allocate
    // while a round runs (seen on a loaded machine). Code that allocates per block does so
    // in every round, so the fewest allocations of a few rounds is what it made.
    let mut fewest = u64::MAX;
    for _ in 0..3 {
        let before = snapshot();
        for _ in 0..10 {
            let checked = Block::check(&block, &hash).unwrap();
            outputs += checked
                .transactions()
                .map(|t| t.outputs().count() + t.inputs().map(|i| i.witness.len()).sum::<usize>())
                .sum::<usize>();
        }
        fewest = fewest.min(snapshot().since(&before).allocations);
    }
    assert_eq!(outputs, 30 * 1_001 * 4);
    assert_eq!(fewest, 0, "{fewest} allocations in every round");
}
