//! C2SP `tlog-tiles` (c2sp.org/tlog-tiles): the log as static resources.
//!
//! - `tile/<L>/<N>[.p/<W>]`: the hashes at tree level 8·L, 256 per full tile, hash *i* of tile
//!   *N* being MTH(D[(N·256+i)·256^L : (N·256+i+1)·256^L]); a partial tile holds the first W.
//! - `tile/entries/<N>[.p/<W>]`: the entries of level-0 tile *N*, each a big-endian u16 length
//!   and its bytes.
//! - `<N>` in zero-padded 3-digit path elements, all but the last prefixed with `x`
//!   (1234067 → `x001/x234/067`).
//!
//! [`TiledTree`] computes roots and proofs from tiles alone (through any [`TileSource`]: a
//! mirror, a directory, the log itself), so a verifier needs nothing but static files, and
//! checks what it computed against a signed checkpoint.

use pog_merkle::{node_hash, Hash};
use std::collections::HashMap;

/// Hashes per full tile.
pub const TILE_WIDTH: u64 = 256;
/// Tree levels per tile level.
pub const TILE_HEIGHT: u32 = 8;

/// Why a tile path, tile or entry bundle was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TileError {
    /// Not a tile path in its one canonical spelling.
    #[error("malformed tile path {0:?}")]
    BadPath(String),
    /// A tile of the wrong length for its width.
    #[error("tile {path} has {got} bytes, expected {expected} ({width} hashes)")]
    BadTileLength {
        /// The tile's path.
        path: String,
        /// The tile's length (bytes).
        got: usize,
        /// The length its width needs (bytes, 32 per hash).
        expected: usize,
        /// The tile's width (hashes).
        width: u64,
    },
    /// An entry bundle that does not split into its width of entries, or whose entry does not hash to its tile.
    #[error("entry bundle {path} is malformed: {why}")]
    BadBundle {
        /// The entry bundle's path.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The tile source failed.
    #[error("cannot read {path}: {why}")]
    Source {
        /// The path that was asked for.
        path: String,
        /// The source's error, as text.
        why: String,
    },
    /// A tile the tree of this size does not have.
    #[error("tile {path} does not exist in a tree of {size} entries")]
    NotInTree {
        /// The tile's path.
        path: String,
        /// The tree's size (entries).
        size: u64,
    },
    /// An index or size beyond the tree.
    #[error("index {index} is not below the tree size {size}")]
    OutOfRange {
        /// The entry index (or size) asked for.
        index: u64,
        /// The tree's size (entries).
        size: u64,
    },
}

/// Which tile: level (or the entry bundles), index, and width (256 for a full tile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileId {
    /// Tile level L (tree level 8·L); ignored for entry bundles.
    pub level: u8,
    /// Index N within the level.
    pub index: u64,
    /// Number of hashes (or entries), 1..=256.
    pub width: u64,
    /// An entry bundle rather than a hash tile.
    pub entries: bool,
}

/// `<N>` as 3-digit path elements, all but the last prefixed with `x`.
pub fn encode_index(n: u64) -> String {
    let mut groups = vec![n % 1000];
    let mut rest = n / 1000;
    while rest > 0 {
        groups.push(rest % 1000);
        rest /= 1000;
    }
    let last = groups.len() - 1;
    groups
        .iter()
        .rev()
        .enumerate()
        .map(|(i, g)| {
            if i == last {
                format!("{g:03}")
            } else {
                format!("x{g:03}")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

impl TileId {
    /// The path under the log's prefix: `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        let head = if self.entries {
            "tile/entries".to_string()
        } else {
            format!("tile/{}", self.level)
        };
        let mut path = format!("{head}/{}", encode_index(self.index));
        if self.width < TILE_WIDTH {
            path.push_str(&format!(".p/{}", self.width));
        }
        path
    }

    /// Parses a path as [`TileId::path`] writes it (exactly: no leading zeros, no other
    /// spelling of the same tile).
    pub fn parse_path(path: &str) -> Result<TileId, TileError> {
        let bad = || TileError::BadPath(path.into());
        let rest = path.strip_prefix("tile/").ok_or_else(bad)?;
        let (head, rest) = rest.split_once('/').ok_or_else(bad)?;
        let (entries, level) = if head == "entries" {
            (true, 0)
        } else {
            let level: u8 = parse_decimal(head).ok_or_else(bad)?;
            if level > 63 {
                return Err(bad());
            }
            (false, level)
        };
        let (index_part, width) = match rest.split_once(".p/") {
            Some((i, w)) => {
                let w: u64 = parse_decimal(w).ok_or_else(bad)?;
                if !(1..TILE_WIDTH).contains(&w) {
                    return Err(bad());
                }
                (i, w)
            }
            None => (rest, TILE_WIDTH),
        };
        let elements: Vec<&str> = index_part.split('/').collect();
        if elements.len() > 7 {
            return Err(bad());
        }
        let mut index: u64 = 0;
        for (i, e) in elements.iter().enumerate() {
            let digits = if i + 1 < elements.len() {
                e.strip_prefix('x').ok_or_else(bad)?
            } else {
                e
            };
            if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let group: u64 = digits.parse().map_err(|_| bad())?;
            index = index
                .checked_mul(1000)
                .and_then(|v| v.checked_add(group))
                .ok_or_else(bad)?;
        }
        let id = TileId {
            level,
            index,
            width,
            entries,
        };
        // One spelling per tile: "x000/001" is "001".
        if id.path() != path {
            return Err(bad());
        }
        Ok(id)
    }

    /// The tile of `level` and `index` as it exists in a tree of `size` entries (full or
    /// partial); `None` when the tree has no such tile.
    pub fn in_tree(level: u8, index: u64, size: u64, entries: bool) -> Option<TileId> {
        let width = tile_width(level, index, size)?;
        Some(TileId {
            level,
            index,
            width,
            entries,
        })
    }
}

fn parse_decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// The number of hashes at tree level `level` (perfect subtrees of 2^level leaves) in a tree
/// of `size` leaves.
fn hashes_at(tree_level: u32, size: u64) -> u64 {
    if tree_level >= 64 {
        0
    } else {
        size >> tree_level
    }
}

/// The width of tile (`level`, `index`) in a tree of `size` entries; `None` when empty.
pub fn tile_width(level: u8, index: u64, size: u64) -> Option<u64> {
    let hashes = hashes_at(u32::from(level) * TILE_HEIGHT, size);
    let start = index.checked_mul(TILE_WIDTH)?;
    let width = hashes.checked_sub(start)?.min(TILE_WIDTH);
    (width > 0).then_some(width)
}

/// Every tile (hash tiles and entry bundles) a tree of `size` entries has, as served.
pub fn tiles_of(size: u64) -> Vec<TileId> {
    let mut out = Vec::new();
    for level in 0u8..=7 {
        let hashes = hashes_at(u32::from(level) * TILE_HEIGHT, size);
        if hashes == 0 {
            break;
        }
        for index in 0..hashes.div_ceil(TILE_WIDTH) {
            out.extend(TileId::in_tree(level, index, size, false));
            if level == 0 {
                out.extend(TileId::in_tree(0, index, size, true));
            }
        }
    }
    out
}

/// Splits a hash tile into its hashes, checking its length against its width.
pub fn decode_tile(id: &TileId, bytes: &[u8]) -> Result<Vec<Hash>, TileError> {
    let expected = id.width as usize * 32;
    if bytes.len() != expected {
        return Err(TileError::BadTileLength {
            path: id.path(),
            got: bytes.len(),
            expected,
            width: id.width,
        });
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| c.try_into().expect("32 bytes"))
        .collect())
}

/// Encodes entries as an entry bundle (u16 big-endian length ‖ bytes each).
pub fn encode_entry_bundle<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let len = u16::try_from(e.len()).expect("entries are at most u16::MAX bytes");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// Splits an entry bundle into its entries; it must hold exactly `id.width` of them.
pub fn decode_entry_bundle(id: &TileId, bytes: &[u8]) -> Result<Vec<Vec<u8>>, TileError> {
    let bad = |why| TileError::BadBundle {
        path: id.path(),
        why,
    };
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if rest.len() < 2 {
            return Err(bad("a length prefix is cut short"));
        }
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        if rest.len() - 2 < len {
            return Err(bad("an entry is cut short"));
        }
        out.push(rest[2..2 + len].to_vec());
        rest = &rest[2 + len..];
        if out.len() as u64 > id.width {
            return Err(bad("more entries than the bundle's width"));
        }
    }
    if out.len() as u64 != id.width {
        return Err(bad("fewer entries than the bundle's width"));
    }
    Ok(out)
}

/// Where tiles come from: a mirror, a directory, the log.
pub trait TileSource {
    /// The bytes of tile `id` (a hash tile or an entry bundle).
    fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError>;
}

/// A source lent out: one source (and its deadline) serves several reads of a tree in turn.
impl<S: TileSource + ?Sized> TileSource for &mut S {
    fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
        (**self).read_tile(id)
    }
}

/// A tree of a known size, read through tiles: roots and proofs computed from tile hashes
/// only, O(log n) tiles each (tiles are cached).
pub struct TiledTree<S> {
    source: S,
    size: u64,
    cache: HashMap<TileId, Vec<Hash>>,
}

impl<S: TileSource> TiledTree<S> {
    /// The tree of `size` entries served by `source` (take the size from a verified
    /// checkpoint, and check the root this computes against the checkpoint's).
    pub fn new(source: S, size: u64) -> TiledTree<S> {
        TiledTree {
            source,
            size,
            cache: HashMap::new(),
        }
    }

    /// The tree size.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn tile(&mut self, level: u8, index: u64) -> Result<&Vec<Hash>, TileError> {
        let id = TileId::in_tree(level, index, self.size, false).ok_or_else(|| {
            TileError::NotInTree {
                path: format!("tile/{level}/{}", encode_index(index)),
                size: self.size,
            }
        })?;
        if !self.cache.contains_key(&id) {
            let bytes = self.source.read_tile(&id)?;
            let hashes = decode_tile(&id, &bytes)?;
            self.cache.insert(id, hashes);
        }
        Ok(&self.cache[&id])
    }

    /// The hash of the perfect subtree at tree level `level`, index `index`, from the tile
    /// that holds its descendants at the tile level below it (at most 255 hashings).
    pub fn perfect(&mut self, level: u32, index: u64) -> Result<Hash, TileError> {
        let tile_level = (level / TILE_HEIGHT) as u8;
        let within = level % TILE_HEIGHT;
        let first = index << within;
        let count = 1u64 << within;
        let tile = self.tile(tile_level, first / TILE_WIDTH)?;
        let offset = (first % TILE_WIDTH) as usize;
        let Some(hashes) = tile.get(offset..offset + count as usize) else {
            return Err(TileError::NotInTree {
                path: format!("tile/{tile_level}/{}", encode_index(first / TILE_WIDTH)),
                size: self.size,
            });
        };
        let mut row = hashes.to_vec();
        while row.len() > 1 {
            row = row
                .chunks_exact(2)
                .map(|p| node_hash(&p[0], &p[1]))
                .collect();
        }
        Ok(row[0])
    }

    /// The root of the whole tree.
    pub fn root(&mut self) -> Result<Hash, TileError> {
        let size = self.size;
        pog_merkle::root_with(size, &mut |l, i| self.perfect(l, i))
    }

    /// The root of the tree's first `size` entries (for a consistency check).
    pub fn root_at(&mut self, size: u64) -> Result<Hash, TileError> {
        if size > self.size {
            return Err(TileError::OutOfRange {
                index: size,
                size: self.size,
            });
        }
        pog_merkle::root_with(size, &mut |l, i| self.perfect(l, i))
    }

    /// The inclusion proof of entry `index`.
    pub fn inclusion_proof(&mut self, index: u64) -> Result<Vec<Hash>, TileError> {
        let size = self.size;
        pog_merkle::inclusion_proof_with(index, size, &mut |l, i| self.perfect(l, i))?
            .ok_or(TileError::OutOfRange { index, size })
    }

    /// The consistency proof from size `old` to the tree's size.
    pub fn consistency_proof(&mut self, old: u64) -> Result<Vec<Hash>, TileError> {
        let size = self.size;
        pog_merkle::consistency_proof_with(old, size, &mut |l, i| self.perfect(l, i))?
            .ok_or(TileError::OutOfRange { index: old, size })
    }

    /// Calls `visit(index, entry)` for every entry from `start` to `end` (exclusive, at most the
    /// tree size), in order, reading each entry bundle once and checking every entry against
    /// its level-0 tile hash, and each level-0 tile against the tree's root (the inclusion of
    /// its first hash, whose proof hashes the rest of the tile: a server cannot swap a tile
    /// and its bundle for others); stops at the first error, or when `visit` returns false.
    pub fn for_each_entry(
        &mut self,
        start: u64,
        end: u64,
        mut visit: impl FnMut(u64, &[u8]) -> bool,
    ) -> Result<(), TileError> {
        let size = self.size;
        if end > size {
            return Err(TileError::OutOfRange { index: end, size });
        }
        let root = self.root()?;
        let mut index = start;
        while index < end {
            let tile = index / TILE_WIDTH;
            let id = TileId::in_tree(0, tile, size, true).expect("index below size");
            let bundle = decode_entry_bundle(&id, &self.source.read_tile(&id)?)?;
            // Each level-0 tile is read once here: not cached, so that walking a tail of n
            // entries holds one tile, not n·32 bytes (the tree's size is the log's to say).
            let hash_id = TileId {
                entries: false,
                ..id
            };
            let cached = self.cache.contains_key(&hash_id);
            if !cached {
                let hashes = decode_tile(&hash_id, &self.source.read_tile(&hash_id)?)?;
                self.cache.insert(hash_id, hashes);
            }
            // The proof of the tile's first entry reads the tile's other hashes from the copy
            // just cached, and higher tiles, and must lead to the root.
            let first = tile * TILE_WIDTH;
            let proof = self.inclusion_proof(first);
            let hashes = if cached {
                self.cache[&hash_id].clone()
            } else {
                self.cache.remove(&hash_id).expect("inserted above")
            };
            if !pog_merkle::verify_inclusion(&hashes[0], first, size, &proof?, &root) {
                return Err(TileError::BadBundle {
                    path: hash_id.path(),
                    why: "a level-0 tile does not lead to the tree's root",
                });
            }
            let last = end.min((tile + 1) * TILE_WIDTH);
            for i in index..last {
                let at = (i % TILE_WIDTH) as usize;
                if pog_merkle::leaf_hash(&bundle[at]) != hashes[at] {
                    return Err(TileError::BadBundle {
                        path: id.path(),
                        why: "an entry does not hash to its level-0 tile hash",
                    });
                }
                if !visit(i, &bundle[at]) {
                    return Ok(());
                }
            }
            index = last;
        }
        Ok(())
    }

    /// Entry `index`, from its entry bundle, checked against the tree's root (its inclusion
    /// proof from the tiles).
    pub fn entry(&mut self, index: u64) -> Result<Vec<u8>, TileError> {
        let size = self.size;
        if index >= size {
            return Err(TileError::OutOfRange { index, size });
        }
        let id = TileId::in_tree(0, index / TILE_WIDTH, size, true).expect("index below size");
        let bundle = decode_entry_bundle(&id, &self.source.read_tile(&id)?)?;
        let entry = bundle[(index % TILE_WIDTH) as usize].clone();
        let (proof, root) = (self.inclusion_proof(index)?, self.root()?);
        if !pog_merkle::verify_inclusion(&pog_merkle::leaf_hash(&entry), index, size, &proof, &root)
        {
            return Err(TileError::BadBundle {
                path: id.path(),
                why: "an entry does not lead to the tree's root",
            });
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_merkle::{leaf_hash, verify_consistency, verify_inclusion, Tree};
    use proptest::prelude::*;

    #[test]
    fn paths_as_the_specification_writes_them() {
        assert_eq!(encode_index(1234067), "x001/x234/067");
        assert_eq!(encode_index(0), "000");
        assert_eq!(encode_index(1000), "x001/000");
        let id = TileId {
            level: 2,
            index: 1234067,
            width: 17,
            entries: false,
        };
        assert_eq!(id.path(), "tile/2/x001/x234/067.p/17");
        assert_eq!(TileId::parse_path(&id.path()), Ok(id));
        let bundle = TileId {
            entries: true,
            level: 0,
            width: 256,
            index: 5,
        };
        assert_eq!(bundle.path(), "tile/entries/005");
        assert_eq!(TileId::parse_path("tile/entries/005"), Ok(bundle));
        for bad in [
            "tile/0/5",
            "tile/0/x000/005",
            "tile/01/005",
            "tile/0/005.p/256",
            "tile/0/005.p/0",
            "tile/64/000",
            "tile/0/001/002",
            "tile/0/x99999999999999999999/000",
        ] {
            assert!(TileId::parse_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_specification_example_of_70000_entries() {
        // 273 full level-0 tiles, one partial of 112; one full level-1 tile, one partial of
        // 17; one partial level-2 tile of 1.
        let tiles: Vec<TileId> = tiles_of(70_000)
            .into_iter()
            .filter(|t| !t.entries)
            .collect();
        let level = |l| tiles.iter().filter(move |t| t.level == l);
        assert_eq!(level(0).filter(|t| t.width == 256).count(), 273);
        assert_eq!(
            level(0)
                .filter(|t| t.width < 256)
                .map(|t| t.width)
                .collect::<Vec<_>>(),
            [112]
        );
        assert_eq!(level(1).map(|t| t.width).collect::<Vec<_>>(), [256, 17]);
        assert_eq!(level(2).map(|t| t.width).collect::<Vec<_>>(), [1]);
        assert_eq!(level(3).count(), 0);
        assert_eq!(tiles_of(256).iter().filter(|t| !t.entries).count(), 2);
    }

    /// Tiles from an in-memory tree, as a server would compute them.
    struct Memory {
        entries: Vec<Vec<u8>>,
        tree: Tree,
    }

    impl TileSource for Memory {
        fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
            let start = id.index * TILE_WIDTH;
            if id.entries {
                let slice = &self.entries[start as usize..(start + id.width) as usize];
                return Ok(encode_entry_bundle(slice.iter().map(|e| e.as_slice())));
            }
            let level = u32::from(id.level) * TILE_HEIGHT;
            let mut out = Vec::new();
            for i in start..start + id.width {
                let leaves = 1u64 << level;
                let sub = Tree::from_leaf_hashes(
                    (i * leaves..(i + 1) * leaves)
                        .map(|j| self.tree.leaf(j).unwrap())
                        .collect(),
                );
                out.extend_from_slice(&sub.root());
            }
            Ok(out)
        }
    }

    fn memory(n: u64) -> Memory {
        let entries: Vec<Vec<u8>> = (0..n).map(|i| format!("entry {i}").into_bytes()).collect();
        let tree = Tree::from_leaf_hashes(entries.iter().map(|e| leaf_hash(e)).collect());
        Memory { entries, tree }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn proofs_from_tiles_verify(n in 1u64..70_000, pick in any::<u64>(), old_pick in any::<u64>()) {
            let mem = memory(n);
            let root = mem.tree.root();
            let mut tiled = TiledTree::new(mem, n);
            prop_assert_eq!(tiled.root().unwrap(), root);
            let index = pick % n;
            let proof = tiled.inclusion_proof(index).unwrap();
            let entry = tiled.entry(index).unwrap();
            prop_assert!(verify_inclusion(&leaf_hash(&entry), index, n, &proof, &root));
            let old = old_pick % (n + 1);
            let old_root = tiled.root_at(old).unwrap();
            let cproof = tiled.consistency_proof(old).unwrap();
            prop_assert!(verify_consistency(old, n, &old_root, &root, &cproof));
        }

        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}", bytes in proptest::collection::vec(any::<u8>(), 0..600), w in 1u64..=256) {
            let _ = TileId::parse_path(&text);
            let _ = TileId::parse_path(&format!("tile/{text}"));
            let id = TileId { level: 0, index: 0, width: w, entries: true };
            let _ = decode_entry_bundle(&id, &bytes);
            let _ = decode_tile(&id, &bytes);
        }
    }

    #[test]
    fn walking_entries_keeps_no_tile_per_entry_bundle() {
        let mut tiled = TiledTree::new(memory(70_000), 70_000);
        let mut seen = 0u64;
        tiled
            .for_each_entry(0, 70_000, |i, _| {
                seen += 1;
                i + 1 < 70_000
            })
            .unwrap();
        assert_eq!(seen, 70_000);
        // Without the care: 274 level-0 tiles (8 KiB each) held to the end (the higher tiles
        // the checks read stay: one per 65,536 entries).
        let level_0 = tiled.cache.keys().filter(|id| id.level == 0).count();
        assert!(level_0 <= 1, "{level_0} level-0 tiles cached");
    }

    #[test]
    fn a_forged_full_tile_with_its_bundle_is_caught() {
        // A server that swaps a full level-0 tile (one the root is not computed from) and its
        // entry bundle for another, self-consistent pair: entry 5 of 600 rewritten.
        struct Forger(Memory);
        impl TileSource for Forger {
            fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
                if id.level == 0 && id.index == 0 {
                    let mut entries = self.0.entries[..256].to_vec();
                    entries[5] = b"forged".to_vec();
                    if id.entries {
                        return Ok(encode_entry_bundle(entries.iter().map(|e| e.as_slice())));
                    }
                    return Ok(entries.iter().flat_map(|e| leaf_hash(e)).collect());
                }
                self.0.read_tile(id)
            }
        }
        let mut tiled = TiledTree::new(Forger(memory(600)), 600);
        // The root does not read that tile: it still matches.
        assert_eq!(tiled.root().unwrap(), memory(600).tree.root());
        let e = tiled.for_each_entry(0, 600, |_, _| true).unwrap_err();
        assert!(
            e.to_string().contains("does not lead to the tree's root"),
            "{e}"
        );
        let e = tiled.entry(5).unwrap_err();
        assert!(e.to_string().contains("does not lead"), "{e}");
        // Honest tiles walk through.
        let mut honest = TiledTree::new(memory(600), 600);
        honest.for_each_entry(0, 600, |_, _| true).unwrap();
    }

    #[test]
    fn a_lying_entry_bundle_is_caught() {
        struct Liar(Memory);
        impl TileSource for Liar {
            fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
                let mut bytes = self.0.read_tile(id)?;
                if id.entries {
                    let last = bytes.len() - 1;
                    bytes[last] ^= 1;
                }
                Ok(bytes)
            }
        }
        let mut tiled = TiledTree::new(Liar(memory(300)), 300);
        assert!(matches!(tiled.entry(299), Err(TileError::BadBundle { .. })));
    }
}
