//! The arithmetic of the memory proof, bit for bit as the GPU kernels compute it
//! (`pog-device`'s `memproof.cu`): ChaCha's block function with a chosen number of double
//! rounds, the data-set items it generates, and the walk that reads them.
//!
//! ChaCha (RFC 8439) is hand-written here because no crate exposes its block function with an
//! arbitrary round count, which is the knob that makes an item expensive to produce; it is
//! checked against the RFC's test vector at the standard 10 double rounds.

/// "expand 32-byte k", ChaCha's constant words.
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Bytes of one data-set item: one 128-byte line, what a GPU reads in one coalesced access.
pub const ITEM_BYTES: u64 = 128;
/// 32-bit words of one item.
pub const ITEM_WORDS: usize = 32;
/// Bytes of one walker's output.
pub const OUTPUT_BYTES: u64 = 16;

/// Domain tags in word 14 of the block, so item blocks and walker-start blocks never coincide.
const DOMAIN_ITEM: u32 = 0x6d65_6d31; // "mem1"
const DOMAIN_WALK: u32 = 0x7761_6c6b; // "walk"

/// Double rounds of the block that starts a walker's mix (cheap: it only has to spread the
/// walker's index over the 32 words).
pub const WALK_START_ROUNDS: u32 = 2;

const FNV_PRIME: u32 = 0x0100_0193;
const FNV_OFFSET: u32 = 0x811c_9dc5;

#[inline(always)]
fn quarter_round(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// ChaCha's block function: the state (constants, `key`, the four words `tail` where RFC 8439
/// puts the counter and nonce) after `double_rounds` double rounds, plus the input state.
pub fn chacha_block(key: &[u32; 8], tail: [u32; 4], double_rounds: u32) -> [u32; 16] {
    let mut input = [0u32; 16];
    input[..4].copy_from_slice(&SIGMA);
    input[4..12].copy_from_slice(key);
    input[12..].copy_from_slice(&tail);
    let mut s = input;
    self::double_rounds(&mut s, double_rounds);
    for (word, start) in s.iter_mut().zip(input) {
        *word = word.wrapping_add(start);
    }
    s
}

/// `n` ChaCha double rounds (a column round, then a diagonal round) on `s`, in place: the
/// permutation inside [`chacha_block`], without its constants or feed-forward (the proof of
/// storage builds its items from it).
#[inline]
pub fn double_rounds(s: &mut [u32; 16], n: u32) {
    for _ in 0..n {
        quarter_round(s, 0, 4, 8, 12);
        quarter_round(s, 1, 5, 9, 13);
        quarter_round(s, 2, 6, 10, 14);
        quarter_round(s, 3, 7, 11, 15);
        quarter_round(s, 0, 5, 10, 15);
        quarter_round(s, 1, 6, 11, 12);
        quarter_round(s, 2, 7, 8, 13);
        quarter_round(s, 3, 4, 9, 14);
    }
}

/// Two blocks under `key` for a 64-bit `index` in `domain`: words 0–15 from block 0, 16–31
/// from block 1.
fn two_blocks(key: &[u32; 8], index: u64, domain: u32, double_rounds: u32) -> [u32; ITEM_WORDS] {
    let mut out = [0u32; ITEM_WORDS];
    for half in 0..2u32 {
        let tail = [index as u32, (index >> 32) as u32, domain, half];
        let block = chacha_block(key, tail, double_rounds);
        out[half as usize * 16..][..16].copy_from_slice(&block);
    }
    out
}

/// Item `index` of the data set under `key`: two ChaCha blocks of `rounds` double rounds.
/// Producing one costs 2 × rounds × 96 integer operations; reading one costs one 128-byte
/// line of memory traffic — the ratio the proof's capacity argument rests on.
pub fn item(key: &[u32; 8], index: u64, rounds: u32) -> [u32; ITEM_WORDS] {
    two_blocks(key, index, DOMAIN_ITEM, rounds)
}

/// [`chacha_block`] for `LANES` tails at once under one key, the state held word by word
/// (`s[w][lane]`) so that each step of a quarter round is one vector operation: 16 lanes
/// fill an AVX-512 register (which rotates in one instruction), 8 an AVX2 one.
#[inline(always)]
fn blocks_side_by_side<const LANES: usize>(
    key: &[u32; 8],
    tails: &[[u32; 4]; LANES],
    double_rounds: u32,
) -> [[u32; LANES]; 16] {
    let mut s = [[0u32; LANES]; 16];
    for (w, word) in SIGMA.iter().chain(key).enumerate() {
        s[w] = [*word; LANES];
    }
    for (lane, tail) in tails.iter().enumerate() {
        for (w, word) in tail.iter().enumerate() {
            s[12 + w][lane] = *word;
        }
    }
    let input = s;
    // Lane by lane across four rows at once: the loop the compiler turns into vector
    // operations (an iterator over one row would hide the other three).
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    fn quarter<const LANES: usize>(
        s: &mut [[u32; LANES]; 16],
        a: usize,
        b: usize,
        c: usize,
        d: usize,
    ) {
        for l in 0..LANES {
            s[a][l] = s[a][l].wrapping_add(s[b][l]);
            s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(16);
            s[c][l] = s[c][l].wrapping_add(s[d][l]);
            s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(12);
            s[a][l] = s[a][l].wrapping_add(s[b][l]);
            s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(8);
            s[c][l] = s[c][l].wrapping_add(s[d][l]);
            s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(7);
        }
    }
    for _ in 0..double_rounds {
        quarter(&mut s, 0, 4, 8, 12);
        quarter(&mut s, 1, 5, 9, 13);
        quarter(&mut s, 2, 6, 10, 14);
        quarter(&mut s, 3, 7, 11, 15);
        quarter(&mut s, 0, 5, 10, 15);
        quarter(&mut s, 1, 6, 11, 12);
        quarter(&mut s, 2, 7, 8, 13);
        quarter(&mut s, 3, 4, 9, 14);
    }
    for (word, start) in s.iter_mut().zip(input) {
        for l in 0..LANES {
            word[l] = word[l].wrapping_add(start[l]);
        }
    }
    s
}

/// [`items`]'s body, `LANES` blocks at once, inlined into each instruction set it is
/// compiled for.
#[inline(always)]
fn items_side_by_side<const LANES: usize>(
    key: &[u32; 8],
    first: u64,
    rounds: u32,
    out: &mut [[u32; ITEM_WORDS]],
) {
    let items_a_pass = LANES / 2; // two blocks an item
    for (pass, chunk) in out.chunks_mut(items_a_pass).enumerate() {
        let base = first.wrapping_add((pass * items_a_pass) as u64);
        let tails: [[u32; 4]; LANES] = std::array::from_fn(|lane| {
            let index = base.wrapping_add((lane / 2) as u64);
            [
                index as u32,
                (index >> 32) as u32,
                DOMAIN_ITEM,
                (lane % 2) as u32,
            ]
        });
        let s = blocks_side_by_side(key, &tails, rounds);
        for (i, item) in chunk.iter_mut().enumerate() {
            for w in 0..16 {
                item[w] = s[w][2 * i];
                item[16 + w] = s[w][2 * i + 1];
            }
        }
    }
}

/// The items `first`, `first + 1`, … into `out`, each equal to [`item`]'s: the validator's
/// recomputation of a walker's spans (one ChaCha block a lane, 16 lanes at once with AVX-512,
/// 8 with AVX2 or without). It changes no output, only what a check costs the validator; the
/// provers keep [`item`], so the RAM proof's build, against which its walk is bounded, is
/// what it was.
pub fn items(key: &[u32; 8], first: u64, rounds: u32, out: &mut [[u32; ITEM_WORDS]]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU was just found to have AVX-512F, the feature the function enables.
            unsafe { items_avx512(key, first, rounds, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU was just found to have AVX2, the feature the function enables.
            unsafe { items_avx2(key, first, rounds, out) };
            return;
        }
    }
    items_side_by_side::<8>(key, first, rounds, out);
}

/// [`items_side_by_side`] compiled for AVX-512F, 16 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn items_avx512(key: &[u32; 8], first: u64, rounds: u32, out: &mut [[u32; ITEM_WORDS]]) {
    items_side_by_side::<16>(key, first, rounds, out);
}

/// [`items_side_by_side`] compiled for AVX2, 8 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn items_avx2(key: &[u32; 8], first: u64, rounds: u32, out: &mut [[u32; ITEM_WORDS]]) {
    items_side_by_side::<8>(key, first, rounds, out);
}

/// The block of items a walker reads at `step`: a 64-bit word from two mix words (the first
/// mixed with the step, so a mix that stopped changing still moves), scaled onto `blocks` by
/// a multiply-high (uniform up to 2⁻⁶⁴ bias, no division).
pub fn next_block(mix: &[u32; ITEM_WORDS], step: u32, blocks: u64) -> u64 {
    let a = mix[4 * (step as usize % 8)] ^ step;
    let b = mix[4 * ((step as usize + 3) % 8) + 1];
    let x = (u64::from(a) << 32) | u64::from(b);
    ((u128::from(x) * u128::from(blocks)) >> 64) as u64
}

/// One walker: a 128-byte mix started from the walk key and the walker's index, then `steps`
/// reads of `span` consecutive items each, at a block that depends on everything read before
/// (no read can be issued, or an item generated, before the previous step is known), each
/// item folded into every mix word with FNV-1. The 16-byte output folds the mix's 32 words
/// into 4. Reading `span` items at a time keeps the GPU's address translation out of the
/// way: one random 128-byte line per step over a data set of 100+ GB ran at a fifth of the
/// H200's bandwidth (docs/protocol.md).
///
/// `read` returns item `i` (from memory on the GPU; recomputed on the validator's CPU).
pub fn walk(
    walk_key: &[u32; 8],
    walker: u64,
    (steps, span): (u32, u32),
    items: u64,
    mut read: impl FnMut(u64) -> [u32; ITEM_WORDS],
) -> [u8; OUTPUT_BYTES as usize] {
    let span = u64::from(span.max(1));
    let mut mix = two_blocks(walk_key, walker, DOMAIN_WALK, WALK_START_ROUNDS);
    for step in 0..steps {
        let block = next_block(&mix, step, items / span);
        for j in 0..span {
            let line = read(block * span + j);
            for (m, d) in mix.iter_mut().zip(line) {
                *m = m.wrapping_mul(FNV_PRIME) ^ d;
            }
        }
    }
    let mut out = [0u8; OUTPUT_BYTES as usize];
    for k in 0..4 {
        let folded = (0..8).fold(FNV_OFFSET, |h, lane| {
            h.wrapping_mul(FNV_PRIME) ^ mix[4 * lane + k]
        });
        out[4 * k..4 * k + 4].copy_from_slice(&folded.to_le_bytes());
    }
    out
}

/// A 32-byte digest as the eight little-endian words a key is.
pub fn key_words(digest: &[u8; 32]) -> [u32; 8] {
    let mut key = [0u32; 8];
    for (word, bytes) in key.iter_mut().zip(digest.chunks_exact(4)) {
        *word = u32::from_le_bytes(bytes.try_into().expect("4-byte chunk"));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_function_is_rfc_8439_chacha20_at_ten_double_rounds() {
        // RFC 8439 §2.3.2: key 00..1f, counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
        let key_bytes: [u8; 32] = std::array::from_fn(|i| i as u8);
        let block = chacha_block(&key_words(&key_bytes), [1, 0x0900_0000, 0x4a00_0000, 0], 10);
        assert_eq!(
            block,
            [
                0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204,
                0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de,
                0xe883d0cb, 0x4e3c50a2
            ]
        );
    }

    #[test]
    fn items_side_by_side_are_the_items_one_at_a_time() {
        let key = [0x0102_0304, 5, 6, 7, 8, 9, 10, u32::MAX];
        // Lengths that fill no pass, one, several and a part; a first index that crosses 2^32.
        for (first, count) in [
            (0u64, 1usize),
            (3, 4),
            ((1 << 32) - 5, 11),
            (u64::MAX - 2, 3),
        ] {
            for rounds in [0, 2, 40] {
                let mut out = vec![[0u32; ITEM_WORDS]; count];
                items(&key, first, rounds, &mut out);
                let one_at_a_time: Vec<_> = (0..count as u64)
                    .map(|i| item(&key, first.wrapping_add(i), rounds))
                    .collect();
                assert_eq!(
                    out, one_at_a_time,
                    "first {first}, {count} items, {rounds} rounds"
                );
                // Both widths, whichever the CPU took.
                let mut eight = vec![[0u32; ITEM_WORDS]; count];
                items_side_by_side::<8>(&key, first, rounds, &mut eight);
                let mut sixteen = vec![[0u32; ITEM_WORDS]; count];
                items_side_by_side::<16>(&key, first, rounds, &mut sixteen);
                assert_eq!((eight, sixteen), (one_at_a_time.clone(), one_at_a_time));
            }
        }
    }

    #[test]
    fn items_depend_on_key_index_and_rounds() {
        let key = [1u32; 8];
        let a = item(&key, 5, 8);
        assert_ne!(a, item(&key, 6, 8));
        assert_ne!(a, item(&[2u32; 8], 5, 8));
        assert_ne!(a, item(&key, 5, 9));
        assert_eq!(a, item(&key, 5, 8));
        // The two halves are different blocks.
        assert_ne!(a[..16], a[16..]);
        // Index bits above 32 matter.
        assert_ne!(item(&key, 1, 8), item(&key, 1 | 1 << 32, 8));
    }

    #[test]
    fn indices_stay_in_range_and_spread() {
        let mut seen = [0u32; 16];
        for w in 0..2000u64 {
            let mix = two_blocks(&[3; 8], w, DOMAIN_WALK, 2);
            for step in 0..8 {
                let i = next_block(&mix, step, 16);
                assert!(i < 16);
                seen[i as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(next_block(&[u32::MAX; 32], 0, u64::MAX), u64::MAX - 1);
    }

    #[test]
    fn a_walk_reads_data_dependent_items_and_its_output_depends_on_each() {
        let key = [9u32; 8];
        let data: Vec<[u32; 32]> = (0..64).map(|i| item(&key, i, 2)).collect();
        let mut read = Vec::new();
        let out = walk(&[4; 8], 7, (8, 2), 64, |i| {
            read.push(i);
            data[i as usize]
        });
        assert_eq!(read.len(), 16);
        // Each step reads a whole aligned block of `span` items.
        for pair in read.chunks(2) {
            assert!(pair[0] % 2 == 0 && pair[1] == pair[0] + 1, "{read:?}");
        }
        // Changing the item of any step changes the output.
        for changed in 0..16 {
            let mut step = 0;
            let other = walk(&[4; 8], 7, (8, 2), 64, |i| {
                let mut line = data[i as usize];
                if step == changed {
                    line[31] ^= 1;
                }
                step += 1;
                line
            });
            assert_ne!(out, other, "step {changed}");
        }
        assert_ne!(out, walk(&[4; 8], 8, (8, 2), 64, |i| data[i as usize]));
        assert_ne!(out, walk(&[5; 8], 7, (8, 2), 64, |i| data[i as usize]));
    }
}
