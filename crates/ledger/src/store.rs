//! The log on disk: append-only files in one directory.
//!
//! - `entries`: the entries' bytes, one after another.
//! - `hashes`: every perfect-subtree hash of the RFC 6962 tree (leaf hashes and every complete
//!   interior node), 32 bytes each, in post-order: appending leaf *m* writes its leaf hash and
//!   then each subtree it completes, so the file only ever grows at its end, and the hash of
//!   the perfect subtree (level *l*, index *i*) sits at a position computed from (*l*, *i*)
//!   alone ([`hash_position`]). A tree of *n* leaves holds 2n − popcount(n) hashes. Any
//!   root, inclusion or consistency proof reads O(log n) of them.
//! - `index`: the end offset of each entry in `entries`, big-endian u64: entry *i* is
//!   `entries[index[i-1]..index[i]]`. The `index` is the commit record: its length says how
//!   many entries the log holds.
//! - `checkpoint`: the latest signed checkpoint (replaced atomically).
//! - `lock`: held (flock) by the one process that writes the log.
//!
//! An append writes the entries and syncs them, writes the hashes and syncs them, then writes
//! the index records and syncs those: a crash at any moment leaves the index pointing only at
//! durable entries and hashes. On open, a torn index tail (a partial record, or offsets that
//! do not grow within the entries file) is cut off, and the entries and hashes files are
//! truncated to what the index covers; the last entry is checked against its stored leaf
//! hash. An append returns only after all three syncs: an acknowledged entry is durable.
//! [`GroupCommit`] batches concurrent appends into one set of syncs.
//!
//! Files rather than SQLite: the data is append-only and positional (no queries), the hash
//! layout makes proofs a few positional reads, and three sequential files with a batched
//! fsync outrun a B-tree on the same disk.

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::entry::{Entry, EntryError, MAX_ENTRY_BYTES, NO_PREVIOUS};

use crate::note::NoteSigner;
use crate::tiles::{TileError, TileId, TileSource, TILE_HEIGHT, TILE_WIDTH};
use pog_merkle::{leaf_hash, node_hash, Hash};
use pog_signed::RecordKind;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};

/// Why the log store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A read, write or sync failed.
    #[error("ledger I/O failed on {path}: {cause}; check the disk and the data dir's permissions")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// Another process holds the log's lock.
    #[error(
        "the ledger in {0} is open in another process (its lock is held); stop that process first"
    )]
    Locked(PathBuf),
    /// The files contradict each other beyond a torn tail.
    #[error("the ledger in {dir} is corrupt: {why}; restore it from a mirror or backup")]
    Corrupt {
        /// The log's directory.
        dir: PathBuf,
        /// Which files disagree, and how.
        why: String,
    },
    /// An entry over the u16 entry-bundle limit.
    #[error("entry of {0} bytes exceeds the {MAX_ENTRY_BYTES}-byte limit")]
    EntryTooLarge(usize),
    /// An index, size or tile the log does not have.
    #[error("entry {index} does not exist (the log holds {size})")]
    OutOfRange {
        /// The entry index, subtree index or tree size asked for.
        index: u64,
        /// The tree size (entries) it was checked against.
        size: u64,
    },
    /// A record was refused (its signature or body).
    #[error("record refused: {0}")]
    Record(#[from] EntryError),
    /// The group-commit thread is gone.
    #[error("the group-commit writer has stopped")]
    WriterGone,
    /// An append or checkpoint through a log opened for reading.
    #[error("the ledger in {0} is open for reading only")]
    ReadOnly(PathBuf),
    /// The group commit's append failed (the writer's error, shared by every caller of the
    /// batch).
    #[error("the group commit failed: {0}")]
    Commit(#[source] Arc<StoreError>),
    /// An earlier append failed; reopen the log.
    #[error("an earlier append to the ledger in {0} failed; restart to recover it from disk (appends after a failed write or fsync cannot be trusted)")]
    Poisoned(PathBuf),
}

/// Where the hash of the perfect subtree at (`level`, `index`) sits in the post-order hash
/// file (counted in hashes).
pub fn hash_position(level: u32, index: u64) -> u64 {
    let m = (index + 1) << level;
    2 * m - u64::from(m.count_ones()) - 1 - u64::from(m.trailing_zeros() - level)
}

/// Number of hashes stored for a tree of `size` leaves.
pub fn hash_count(size: u64) -> u64 {
    2 * size - u64::from(size.count_ones())
}

struct State {
    size: u64,
    entries_len: u64,
    /// Roots of the perfect subtrees that make up the tree, largest first (one per set bit
    /// of `size`).
    frontier: Vec<Hash>,
    /// An append failed part-way (a write or an fsync): what is on disk past `size` is
    /// unknown, and after a failed fsync a retry may report success for lost data, so no
    /// append is taken until the log is reopened (which recovers from the files).
    poisoned: bool,
}

/// A tlog-tiles resource of a [`Log`] (hash tile or entry bundle) read in pieces of bounded
/// size ([`Log::read_tile_piece`]), so that serving an entry bundle (up to 16 MiB) holds one
/// piece in memory at a time rather than the whole bundle. The pieces, in order, are
/// [`Log::tile`]'s bytes; tiles are immutable once in the tree, so appends meanwhile change
/// nothing.
#[derive(Debug)]
pub struct TileReader {
    layout: Layout,
    /// Bytes of the resource read so far.
    done: u64,
    /// The resource's length in bytes.
    total: u64,
}

/// Where a tile's bytes come from.
#[derive(Debug)]
enum Layout {
    /// A hash tile: consecutive hashes of tree level `level`, from index `start`.
    Hashes { level: u32, start: u64 },
    /// An entry bundle: the first entry's offset in `entries`, then each entry's end.
    Entries { bounds: Vec<u64> },
}

impl TileReader {
    /// The resource's length in bytes (its `Content-Length`).
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> u64 {
        self.total - self.done
    }
}

/// An append-only RFC 6962 log of opaque entries in a directory.
pub struct Log {
    dir: PathBuf,
    entries: File,
    hashes: File,
    index: File,
    /// The writer's flock (none for a reader).
    _lock: Option<File>,
    /// Opened by [`Log::open`] (appends allowed) rather than [`Log::open_reader`].
    writable: bool,
    state: Mutex<State>,
}

/// Takes `mutex` as a panic while it was held left it: the one policy of the services'
/// `pog_net::locked::Locked`, which this crate (below the network layer) does not depend on.
/// Every critical section here changes its state in steps that each leave it valid; a failed
/// write is a different matter, and marks the log itself poisoned ([`StoreError::Poisoned`]).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |cause| StoreError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

fn open_rw(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io(path))
}

impl Log {
    /// Opens (creating if needed) the log in `dir`, recovering from a crash: a torn tail is
    /// cut off, never anything acknowledged.
    pub fn open(dir: &Path) -> Result<Log, StoreError> {
        Log::open_with(dir, true)
    }

    /// Opens the log in `dir` for reading only, beside a writer that may be appending: no
    /// lock, nothing truncated; the log is seen as of the moment of opening (what the index
    /// named then, all of it durable).
    pub fn open_reader(dir: &Path) -> Result<Log, StoreError> {
        Log::open_with(dir, false)
    }

    fn open_with(dir: &Path, writable: bool) -> Result<Log, StoreError> {
        let lock = if writable {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            let lock_path = dir.join("lock");
            let lock = open_rw(&lock_path)?;
            // SAFETY: flock on a file descriptor we own; no memory is involved.
            let rc = unsafe {
                libc::flock(
                    std::os::unix::io::AsRawFd::as_raw_fd(&lock),
                    libc::LOCK_EX | libc::LOCK_NB,
                )
            };
            if rc != 0 {
                return Err(StoreError::Locked(dir.to_path_buf()));
            }
            Some(lock)
        } else {
            None
        };
        let (entries_path, hashes_path, index_path) =
            (dir.join("entries"), dir.join("hashes"), dir.join("index"));
        let open = |p: &Path| {
            if writable {
                open_rw(p)
            } else {
                File::open(p).map_err(io(p))
            }
        };
        let entries = open(&entries_path)?;
        let hashes = open(&hashes_path)?;
        let index = open(&index_path)?;
        // The index first: what it names was written (and synced) before it, so the lengths
        // measured after it cover it even while a writer appends.
        let mut raw = Vec::new();
        (&index).read_to_end(&mut raw).map_err(io(&index_path))?;
        let len = |f: &File, p: &Path| f.metadata().map(|m| m.len()).map_err(io(p));
        let entries_len = len(&entries, &entries_path)?;
        let hashes_len = len(&hashes, &hashes_path)?;

        // The index decides: whole records whose offsets grow and stay within the entries.
        let mut size = 0u64;
        let mut end = 0u64;
        for rec in raw.chunks_exact(8) {
            let next = u64::from_be_bytes(rec.try_into().expect("8 bytes"));
            if next < end || next > entries_len || next - end > MAX_ENTRY_BYTES as u64 {
                break;
            }
            end = next;
            size += 1;
        }
        // The hashes were synced before the index: they cover every indexed entry, unless
        // the files were damaged outside pog.
        if hash_count(size) * 32 > hashes_len {
            return Err(StoreError::Corrupt {
                dir: dir.to_path_buf(),
                why: format!(
                    "the index holds {size} entries but the hash file only {} hashes",
                    hashes_len / 32
                ),
            });
        }
        if writable {
            index.set_len(size * 8).map_err(io(&index_path))?;
            entries.set_len(end).map_err(io(&entries_path))?;
            hashes
                .set_len(hash_count(size) * 32)
                .map_err(io(&hashes_path))?;
            for (f, p) in [
                (&index, &index_path),
                (&entries, &entries_path),
                (&hashes, &hashes_path),
            ] {
                f.sync_all().map_err(io(p))?;
            }
        }
        let mut log = Log {
            dir: dir.to_path_buf(),
            entries,
            hashes,
            index,
            _lock: lock,
            writable,
            state: Mutex::new(State {
                size,
                entries_len: end,
                frontier: Vec::new(),
                poisoned: false,
            }),
        };
        let mut frontier = Vec::new();
        let mut start = 0u64;
        for level in (0..64u32).rev() {
            if size & (1 << level) != 0 {
                frontier.push(log.read_hash(hash_position(level, start >> level))?);
                start += 1 << level;
            }
        }
        log.state.get_mut().expect("fresh lock").frontier = frontier;
        if size > 0 {
            let last = log.entry(size - 1)?;
            if leaf_hash(&last) != log.read_hash(hash_position(0, size - 1))? {
                return Err(StoreError::Corrupt {
                    dir: dir.to_path_buf(),
                    why: format!("entry {} does not match its stored leaf hash", size - 1),
                });
            }
        }
        Ok(log)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn state(&self) -> MutexGuard<'_, State> {
        locked(&self.state)
    }

    /// Number of entries (all durable).
    pub fn size(&self) -> u64 {
        self.state().size
    }

    /// The current root.
    pub fn root(&self) -> Hash {
        let st = self.state();
        fold_frontier(&st.frontier)
    }

    /// Appends entries, durably: returns the index of the first once they and their hashes
    /// are synced to disk.
    pub fn append_batch(&self, batch: &[&[u8]]) -> Result<u64, StoreError> {
        if let Some(big) = batch.iter().find(|e| e.len() > MAX_ENTRY_BYTES) {
            return Err(StoreError::EntryTooLarge(big.len()));
        }
        if !self.writable {
            return Err(StoreError::ReadOnly(self.dir.clone()));
        }
        let mut st = self.state();
        if st.poisoned {
            return Err(StoreError::Poisoned(self.dir.clone()));
        }
        let first = st.size;
        if batch.is_empty() {
            return Ok(first);
        }
        let mut data = Vec::new();
        let mut index = Vec::with_capacity(batch.len() * 8);
        let mut hashes = Vec::with_capacity(batch.len() * 64);
        let mut frontier = st.frontier.clone();
        let mut end = st.entries_len;
        let mut size = st.size;
        for e in batch {
            data.extend_from_slice(e);
            end += e.len() as u64;
            index.extend_from_slice(&end.to_be_bytes());
            let mut h = leaf_hash(e);
            hashes.extend_from_slice(&h);
            size += 1;
            let mut s = size;
            while s & 1 == 0 {
                let left = frontier.pop().expect("a set bit below for every merge");
                h = node_hash(&left, &h);
                hashes.extend_from_slice(&h);
                s >>= 1;
            }
            frontier.push(h);
        }
        if let Err(e) = self.write_batch(&data, st.entries_len, &hashes, first, &index) {
            st.poisoned = true;
            return Err(e);
        }
        st.size = size;
        st.entries_len = end;
        st.frontier = frontier;
        Ok(first)
    }

    /// Writes a batch's entries and hashes, syncs them, then writes and syncs its index
    /// records: the order that makes a crash at any point recoverable.
    fn write_batch(
        &self,
        data: &[u8],
        entries_at: u64,
        hashes: &[u8],
        first: u64,
        index: &[u8],
    ) -> Result<(), StoreError> {
        let (ep, hp, ip) = (
            self.dir.join("entries"),
            self.dir.join("hashes"),
            self.dir.join("index"),
        );
        self.entries
            .write_all_at(data, entries_at)
            .map_err(io(&ep))?;
        self.hashes
            .write_all_at(hashes, hash_count(first) * 32)
            .map_err(io(&hp))?;
        // The entries and hashes are synced together (the file system can commit both in one
        // journal flush); the index only after both.
        let (entries_synced, hashes_synced) = std::thread::scope(|s| {
            let entries = s.spawn(|| self.entries.sync_data());
            let hashes = self.hashes.sync_data();
            (
                entries
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("sync thread panicked"))),
                hashes,
            )
        });
        entries_synced.map_err(io(&ep))?;
        hashes_synced.map_err(io(&hp))?;
        self.index.write_all_at(index, first * 8).map_err(io(&ip))?;
        self.index.sync_data().map_err(io(&ip))?;
        Ok(())
    }

    /// Appends one entry durably; returns its index.
    pub fn append(&self, entry: &[u8]) -> Result<u64, StoreError> {
        self.append_batch(&[entry])
    }

    fn read_hash(&self, position: u64) -> Result<Hash, StoreError> {
        let mut h = [0u8; 32];
        self.hashes
            .read_exact_at(&mut h, position * 32)
            .map_err(io(&self.dir.join("hashes")))?;
        Ok(h)
    }

    /// The hash of the perfect subtree (`level`, `index`) of the current tree.
    pub fn perfect(&self, level: u32, index: u64) -> Result<Hash, StoreError> {
        let size = self.size();
        let end = index
            .checked_add(1)
            .filter(|_| level < 64)
            .and_then(|n| n.checked_mul(1u64 << level))
            .filter(|&e| e <= size);
        if end.is_none() {
            return Err(StoreError::OutOfRange { index, size });
        }
        self.read_hash(hash_position(level, index))
    }

    fn offsets(&self, index: u64) -> Result<(u64, u64), StoreError> {
        let ip = self.dir.join("index");
        let mut buf = [0u8; 16];
        if index == 0 {
            self.index
                .read_exact_at(&mut buf[8..], 0)
                .map_err(io(&ip))?;
        } else {
            self.index
                .read_exact_at(&mut buf, (index - 1) * 8)
                .map_err(io(&ip))?;
        }
        let start = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        let end = u64::from_be_bytes(buf[8..].try_into().expect("8 bytes"));
        Ok((start, end))
    }

    /// Entry `index`'s bytes.
    pub fn entry(&self, index: u64) -> Result<Vec<u8>, StoreError> {
        let size = self.size();
        if index >= size {
            return Err(StoreError::OutOfRange { index, size });
        }
        self.entry_range(index, index + 1).map(|mut v| v.remove(0))
    }

    /// Entries `[start, end)`.
    pub fn entry_range(&self, start: u64, end: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let size = self.size();
        if start >= end || end > size {
            return Err(StoreError::OutOfRange { index: end, size });
        }
        let (from, _) = self.offsets(start)?;
        let mut ends = vec![0u8; ((end - start) * 8) as usize];
        let ip = self.dir.join("index");
        self.index
            .read_exact_at(&mut ends, start * 8)
            .map_err(io(&ip))?;
        let to = u64::from_be_bytes(ends[ends.len() - 8..].try_into().expect("8 bytes"));
        let mut data = vec![0u8; (to - from) as usize];
        self.entries
            .read_exact_at(&mut data, from)
            .map_err(io(&self.dir.join("entries")))?;
        let mut out = Vec::with_capacity((end - start) as usize);
        let mut at = from;
        for rec in ends.chunks_exact(8) {
            let e = u64::from_be_bytes(rec.try_into().expect("8 bytes"));
            out.push(data[(at - from) as usize..(e - from) as usize].to_vec());
            at = e;
        }
        Ok(out)
    }

    /// The root of the first `size` entries.
    pub fn root_at(&self, size: u64) -> Result<Hash, StoreError> {
        let have = self.size();
        if size > have {
            return Err(StoreError::OutOfRange {
                index: size,
                size: have,
            });
        }
        pog_merkle::root_with(size, &mut |l, i| self.read_hash(hash_position(l, i)))
    }

    /// The inclusion proof of entry `index` in the tree of `size` entries.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        let have = self.size();
        if size > have {
            return Err(StoreError::OutOfRange {
                index: size,
                size: have,
            });
        }
        pog_merkle::inclusion_proof_with(index, size, &mut |l, i| {
            self.read_hash(hash_position(l, i))
        })?
        .ok_or(StoreError::OutOfRange { index, size })
    }

    /// The consistency proof from size `old` to size `new`.
    pub fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, StoreError> {
        let have = self.size();
        if new > have {
            return Err(StoreError::OutOfRange {
                index: new,
                size: have,
            });
        }
        pog_merkle::consistency_proof_with(old, new, &mut |l, i| {
            self.read_hash(hash_position(l, i))
        })?
        .ok_or(StoreError::OutOfRange {
            index: old,
            size: new,
        })
    }

    /// The bytes of a tlog-tiles resource of the current tree (hash tile or entry bundle);
    /// `OutOfRange` for a tile the tree does not have at that width.
    pub fn tile(&self, id: &TileId) -> Result<Vec<u8>, StoreError> {
        let mut reader = self.tile_reader(id)?;
        self.read_tile_piece(&mut reader, usize::MAX)
    }

    /// A reader of a tlog-tiles resource of the current tree, which reads nothing yet (see
    /// [`TileReader`]); `OutOfRange` for a tile the tree does not have at that width.
    pub fn tile_reader(&self, id: &TileId) -> Result<TileReader, StoreError> {
        let size = self.size();
        let exists = TileId::in_tree(id.level, id.index, size, id.entries)
            .is_some_and(|t| t.width >= id.width);
        if !exists || (id.entries && id.level != 0) {
            return Err(StoreError::OutOfRange {
                index: id.index,
                size,
            });
        }
        let start = id.index * TILE_WIDTH;
        if !id.entries {
            return Ok(TileReader {
                layout: Layout::Hashes {
                    level: u32::from(id.level) * TILE_HEIGHT,
                    start,
                },
                done: 0,
                total: id.width * 32,
            });
        }
        // The bundle's entries are the file's bytes from the first one's start to the last
        // one's end, each preceded by its 2-byte length.
        let (first, _) = self.offsets(start)?;
        let mut ends = vec![0u8; (id.width * 8) as usize];
        let ip = self.dir.join("index");
        self.index
            .read_exact_at(&mut ends, start * 8)
            .map_err(io(&ip))?;
        let mut bounds = Vec::with_capacity(ends.len() / 8 + 1);
        bounds.push(first);
        bounds.extend(
            ends.chunks_exact(8)
                .map(|rec| u64::from_be_bytes(rec.try_into().expect("8 bytes"))),
        );
        let total = bounds[bounds.len() - 1] - first + 2 * id.width;
        Ok(TileReader {
            layout: Layout::Entries { bounds },
            done: 0,
            total,
        })
    }

    /// The next at most `max` bytes of the resource `reader` reads (at least one byte while any
    /// is left; none once it is all read). `reader` must come from this log's
    /// [`Log::tile_reader`].
    pub fn read_tile_piece(
        &self,
        reader: &mut TileReader,
        max: usize,
    ) -> Result<Vec<u8>, StoreError> {
        let from = reader.done;
        let to = from
            .saturating_add(u64::try_from(max).unwrap_or(u64::MAX))
            .min(reader.total);
        if from == to {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity((to - from) as usize);
        // Each item (a hash, or an entry with its length prefix) spans [at, at + len) of the
        // resource: the part of it inside [from, to) is copied.
        let overlap = |at: u64, len: u64| (at.max(from), (at + len).min(to));
        match &reader.layout {
            Layout::Hashes { level, start } => {
                for i in from / 32..to.div_ceil(32) {
                    let hash = self.read_hash(hash_position(*level, start + i))?;
                    let (a, b) = overlap(i * 32, 32);
                    out.extend_from_slice(&hash[(a - i * 32) as usize..(b - i * 32) as usize]);
                }
            }
            Layout::Entries { bounds } => {
                let ep = self.dir.join("entries");
                let mut at = 0u64;
                for (k, pair) in bounds.windows(2).enumerate() {
                    let len = pair[1] - pair[0];
                    let item = 2 + len;
                    if at + item > from {
                        let prefix = u16::try_from(len).map_err(|_| StoreError::Corrupt {
                            dir: self.dir.clone(),
                            why: format!("an entry of bundle position {k} exceeds the u16 limit"),
                        })?;
                        let (a, b) = overlap(at, 2);
                        if a < b {
                            out.extend_from_slice(
                                &prefix.to_be_bytes()[(a - at) as usize..(b - at) as usize],
                            );
                        }
                        let (a, b) = overlap(at + 2, len);
                        if a < b {
                            let filled = out.len();
                            out.resize(filled + (b - a) as usize, 0);
                            self.entries
                                .read_exact_at(&mut out[filled..], pair[0] + (a - at - 2))
                                .map_err(io(&ep))?;
                        }
                    }
                    at += item;
                    if at >= to {
                        break;
                    }
                }
            }
        }
        reader.done = to;
        Ok(out)
    }

    /// Signs a checkpoint of the current tree with `signer` (its name is the origin), and
    /// stores it as the log's latest (atomically replaced, synced).
    pub fn checkpoint(&self, signer: &NoteSigner) -> Result<SignedCheckpoint, StoreError> {
        let signed = self.sign_checkpoint(signer);
        self.store_checkpoint(&signed.to_text())?;
        Ok(signed)
    }

    /// A checkpoint of the current tree signed by `signer`, not stored: one to be cosigned by
    /// a quorum of witnesses before it is published ([`Log::store_checkpoint`]).
    pub fn sign_checkpoint(&self, signer: &NoteSigner) -> SignedCheckpoint {
        let (size, root) = {
            let st = self.state();
            (st.size, fold_frontier(&st.frontier))
        };
        Checkpoint {
            origin: signer.verifier().name().to_string(),
            size,
            root,
            extensions: vec![],
        }
        .sign(signer)
    }

    /// Replaces the stored latest checkpoint (e.g. with one that gained cosignatures).
    pub fn store_checkpoint(&self, text: &str) -> Result<(), StoreError> {
        if !self.writable {
            return Err(StoreError::ReadOnly(self.dir.clone()));
        }
        let tmp = self.dir.join("checkpoint.tmp");
        let path = self.dir.join("checkpoint");
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(text.as_bytes()).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }

    /// The stored latest checkpoint's text, if any.
    pub fn latest_checkpoint(&self) -> Result<Option<String>, StoreError> {
        let path = self.dir.join("checkpoint");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }
}

fn fold_frontier(frontier: &[Hash]) -> Hash {
    match frontier.split_last() {
        None => pog_merkle::empty_root(),
        Some((last, rest)) => rest.iter().rev().fold(*last, |r, f| node_hash(f, &r)),
    }
}

/// A log serves its own tiles.
impl TileSource for &Log {
    fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
        self.tile(id).map_err(|e| TileError::Source {
            path: id.path(),
            why: e.to_string(),
        })
    }
}

/// The typed ledger: a [`Log`] of [`Entry`]s that keeps each GPU's chain (sequence number and
/// back-link to its previous entry).
pub struct Ledger {
    log: Log,
    /// Per GPU: log index and sequence number of its latest entry.
    gpus: Mutex<HashMap<String, (u64, u64)>>,
}

impl Ledger {
    /// Opens the ledger in `dir` (see [`Log::open`]) and reads every entry's header once to
    /// learn each GPU's latest entry.
    pub fn open(dir: &Path) -> Result<Ledger, StoreError> {
        Ledger::from_log(Log::open(dir)?)
    }

    /// Opens the ledger in `dir` for reading only (see [`Log::open_reader`]): exports, proofs
    /// and mirrors while the validator holds it open for writing.
    pub fn open_reader(dir: &Path) -> Result<Ledger, StoreError> {
        Ledger::from_log(Log::open_reader(dir)?)
    }

    fn from_log(log: Log) -> Result<Ledger, StoreError> {
        let dir = log.dir.clone();
        let dir = dir.as_path();
        let size = log.size();
        let mut gpus = HashMap::new();
        let ep = dir.join("entries");
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&ep).map_err(io(&ep))?);
        let mut prev_end = 0u64;
        let mut buf = Vec::new();
        for i in 0..size {
            let (_, end) = log.offsets(i)?;
            buf.resize((end - prev_end) as usize, 0);
            reader.read_exact(&mut buf).map_err(io(&ep))?;
            prev_end = end;
            let entry = Entry::parse(&buf).map_err(|e| StoreError::Corrupt {
                dir: dir.to_path_buf(),
                why: format!("entry {i} is not a ledger entry: {e}"),
            })?;
            gpus.insert(entry.gpu_uuid, (i, entry.gpu_seq));
        }
        Ok(Ledger {
            log,
            gpus: Mutex::new(gpus),
        })
    }

    /// The underlying log, for reading, proofs, tiles and checkpoints. Append only through
    /// [`Ledger::append`] (or a [`GroupCommit`]): a raw append would skip the GPU chains.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Appends records durably, after checking each one's signature; fills in each one's GPU
    /// sequence number and back-link. Returns their log indexes.
    pub fn append(&self, records: Vec<Entry>) -> Result<Vec<u64>, StoreError> {
        for r in &records {
            r.verify()?;
        }
        self.append_verified(records)
    }

    /// [`Ledger::append`] of records whose signatures were already checked.
    fn append_verified(&self, records: Vec<Entry>) -> Result<Vec<u64>, StoreError> {
        let mut gpus = locked(&self.gpus);
        let first = self.log.size();
        let mut next = HashMap::new();
        let mut encoded = Vec::with_capacity(records.len());
        for (k, mut r) in records.into_iter().enumerate() {
            let index = first + k as u64;
            let (prev, seq) = match next.get(&r.gpu_uuid).or(gpus.get(&r.gpu_uuid)) {
                Some(&(prev, seq)) => (prev, seq + 1),
                None => (NO_PREVIOUS, 0),
            };
            r.prev_index = prev;
            r.gpu_seq = seq;
            encoded.push(r.encode());
            next.insert(r.gpu_uuid, (index, seq));
        }
        let slices: Vec<&[u8]> = encoded.iter().map(|e| e.as_slice()).collect();
        let at = self.log.append_batch(&slices)?;
        debug_assert_eq!(at, first);
        gpus.extend(next);
        Ok((first..first + encoded.len() as u64).collect())
    }

    /// A GPU's entries with their log indexes, oldest first, found by following the
    /// back-links from its latest entry.
    pub fn gpu_entries(&self, uuid: &str) -> Result<Vec<(u64, Entry)>, StoreError> {
        self.gpu_recent(uuid, &RecordKind::ALL, usize::MAX, usize::MAX)
    }

    /// A GPU's latest entries of the kinds `wanted`, at most `limit` of them, oldest first,
    /// found by following the back-links from its latest entry through at most `max_steps`
    /// entries (so a long chain costs no more than that).
    pub fn gpu_recent(
        &self,
        uuid: &str,
        wanted: &[RecordKind],
        limit: usize,
        max_steps: usize,
    ) -> Result<Vec<(u64, Entry)>, StoreError> {
        let mut at = locked(&self.gpus).get(uuid).map(|&(i, _)| i);
        let mut out = Vec::new();
        for _ in 0..max_steps {
            let Some(i) = at.filter(|_| out.len() < limit) else {
                break;
            };
            let entry = self.entry_at(i)?;
            at = (entry.prev_index != NO_PREVIOUS).then_some(entry.prev_index);
            if wanted.contains(&entry.kind) {
                out.push((i, entry));
            }
        }
        out.reverse();
        Ok(out)
    }

    /// A GPU's latest entry of `kind` at a log index below `size` (in the tree of that size),
    /// found by following the back-links from its latest entry through at most `max_steps`
    /// entries; None when there is none within them.
    pub fn gpu_latest_below(
        &self,
        uuid: &str,
        kind: RecordKind,
        size: u64,
        max_steps: usize,
    ) -> Result<Option<(u64, Entry)>, StoreError> {
        let mut at = locked(&self.gpus).get(uuid).map(|&(i, _)| i);
        for _ in 0..max_steps {
            let Some(i) = at else {
                break;
            };
            let entry = self.entry_at(i)?;
            if i < size && entry.kind == kind {
                return Ok(Some((i, entry)));
            }
            at = (entry.prev_index != NO_PREVIOUS).then_some(entry.prev_index);
        }
        Ok(None)
    }

    /// A page of a GPU's entries, oldest first: those at log indices after `after` (all when
    /// `None`) and below `size`, at most `limit`, and whether more such entries follow the
    /// page. Walks the back-links from the GPU's latest entry down to `after`, so a page costs
    /// one read per entry of the GPU newer than `after`.
    pub fn gpu_page(
        &self,
        uuid: &str,
        after: Option<u64>,
        size: u64,
        limit: usize,
    ) -> Result<(Vec<(u64, Entry)>, bool), StoreError> {
        let mut at = locked(&self.gpus).get(uuid).map(|&(i, _)| i);
        let mut newer = Vec::new();
        while let Some(i) = at.filter(|i| after.is_none_or(|a| *i > a)) {
            let entry = self.entry_at(i)?;
            at = (entry.prev_index != NO_PREVIOUS).then_some(entry.prev_index);
            if i < size {
                newer.push(i);
            }
        }
        newer.reverse();
        let more = newer.len() > limit;
        let page = newer
            .into_iter()
            .take(limit)
            .map(|i| Ok((i, self.entry_at(i)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((page, more))
    }

    /// The entry at log index `i`, parsed.
    fn entry_at(&self, i: u64) -> Result<Entry, StoreError> {
        Entry::parse(&self.log.entry(i)?).map_err(|e| StoreError::Corrupt {
            dir: self.log.dir.clone(),
            why: format!("entry {i}: {e}"),
        })
    }

    /// The GPUs the ledger holds records of.
    pub fn gpus(&self) -> Vec<String> {
        let mut v: Vec<String> = locked(&self.gpus).keys().cloned().collect();
        v.sort();
        v
    }
}

/// One caller's records waiting for the group commit, and where to send the outcome.
type Request = (
    Vec<Entry>,
    mpsc::SyncSender<Result<Vec<u64>, Arc<StoreError>>>,
);

/// A writer thread that commits concurrent appends together: every request waiting when a
/// commit starts goes into that one batch (one set of fsyncs), and each caller is answered
/// only once its records are durable.
pub struct GroupCommit {
    sender: Option<mpsc::Sender<Request>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GroupCommit {
    /// The most records committed in one batch.
    pub const MAX_BATCH: usize = 8192;

    /// Starts the writer for `ledger`.
    pub fn start(ledger: Arc<Ledger>) -> GroupCommit {
        let (sender, receiver) = mpsc::channel::<Request>();
        let thread = std::thread::spawn(move || {
            while let Ok(first) = receiver.recv() {
                let mut pending = vec![first];
                let mut count = pending[0].0.len();
                while count < Self::MAX_BATCH {
                    match receiver.try_recv() {
                        Ok(r) => {
                            count += r.0.len();
                            pending.push(r);
                        }
                        Err(_) => break,
                    }
                }
                // Signatures were checked by the callers (in parallel, on their threads).
                let mut batch = Vec::with_capacity(count);
                let mut waiting = Vec::with_capacity(pending.len());
                for (records, reply) in pending {
                    waiting.push((records.len(), reply));
                    batch.extend(records);
                }
                match ledger.append_verified(batch) {
                    Ok(indexes) => {
                        let mut at = 0;
                        for (n, reply) in waiting {
                            let _ = reply.send(Ok(indexes[at..at + n].to_vec()));
                            at += n;
                        }
                    }
                    Err(e) => {
                        // One failure, answered to every caller of the batch.
                        let e = Arc::new(e);
                        for (_, reply) in waiting {
                            let _ = reply.send(Err(e.clone()));
                        }
                    }
                }
            }
        });
        GroupCommit {
            sender: Some(sender),
            thread: Some(thread),
        }
    }

    /// A handle to submit records from any thread.
    pub fn handle(&self) -> CommitHandle {
        CommitHandle {
            sender: self.sender.clone().expect("present until drop"),
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Submits records to a [`GroupCommit`] writer.
#[derive(Clone)]
pub struct CommitHandle {
    sender: mpsc::Sender<Request>,
}

impl CommitHandle {
    /// Appends `records` and waits until they are durable; returns their log indexes. Their
    /// signatures are checked here, on the caller's thread, before they join a batch: a bad
    /// record is refused alone.
    pub fn append(&self, records: Vec<Entry>) -> Result<Vec<u64>, StoreError> {
        for r in &records {
            r.verify()?;
        }
        let (reply, answer) = mpsc::sync_channel(1);
        self.sender
            .send((records, reply))
            .map_err(|_| StoreError::WriterGone)?;
        match answer.recv() {
            Ok(Ok(indexes)) => Ok(indexes),
            Ok(Err(why)) => Err(StoreError::Commit(why)),
            Err(_) => Err(StoreError::WriterGone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiles::TiledTree;
    use ed25519_dalek::SigningKey;
    use pog_merkle::{verify_consistency, verify_inclusion, Tree};
    use pog_signed::RecordKind;

    #[test]
    fn hash_positions_are_post_order() {
        // Post-order of the tree over 4 leaves: l0 l1 n(0,1) l2 l3 n(2,3) n(0..4).
        let order = [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3), (1, 1), (2, 0)];
        for (pos, (level, index)) in order.into_iter().enumerate() {
            assert_eq!(hash_position(level, index), pos as u64);
        }
        assert_eq!(hash_count(4), 7);
        assert_eq!(hash_count(5), 8);
    }

    fn entries(n: u64) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                format!("entry {i}")
                    .repeat(1 + (i % 7) as usize)
                    .into_bytes()
            })
            .collect()
    }

    #[test]
    fn tiles_read_in_pieces_are_the_whole_tiles() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        let all = entries(600);
        let slices: Vec<&[u8]> = all.iter().map(|e| e.as_slice()).collect();
        log.append_batch(&slices).unwrap();
        for path in [
            "tile/entries/000",
            "tile/entries/002.p/88",
            "tile/entries/001.p/3",
            "tile/0/001",
            "tile/0/002.p/88",
            "tile/1/000.p/2",
        ] {
            let id = TileId::parse_path(path).unwrap();
            let whole = log.tile(&id).unwrap();
            if id.entries {
                let start = (id.index * TILE_WIDTH) as usize;
                let expected = crate::tiles::encode_entry_bundle(
                    slices[start..start + id.width as usize].iter().copied(),
                );
                assert_eq!(whole, expected, "{path}");
            }
            for max in [1, 2, 3, 31, 32, 33, 1000, 1 << 20] {
                let mut reader = log.tile_reader(&id).unwrap();
                assert_eq!(reader.total_bytes(), whole.len() as u64);
                let mut joined = Vec::new();
                loop {
                    let piece = log.read_tile_piece(&mut reader, max).unwrap();
                    assert!(piece.len() <= max, "{path}: {} > {max}", piece.len());
                    if piece.is_empty() {
                        break;
                    }
                    joined.extend_from_slice(&piece);
                    assert_eq!(reader.remaining(), (whole.len() - joined.len()) as u64);
                }
                assert_eq!(joined, whole, "{path} in pieces of {max}");
            }
        }
        // A tile the tree does not have is refused before anything is read.
        for path in ["tile/entries/002", "tile/0/002.p/89", "tile/1/000"] {
            let id = TileId::parse_path(path).unwrap();
            assert!(matches!(
                log.tile_reader(&id),
                Err(StoreError::OutOfRange { .. })
            ));
        }
    }

    #[test]
    fn appends_proofs_tiles_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let all = entries(1100);
        let tree = Tree::from_leaf_hashes(all.iter().map(|e| leaf_hash(e)).collect());
        {
            let log = Log::open(dir.path()).unwrap();
            assert!(matches!(Log::open(dir.path()), Err(StoreError::Locked(_))));
            let mut at = 0;
            for chunk in [1usize, 2, 5, 300, 1, 791] {
                let batch: Vec<&[u8]> = all[at..at + chunk].iter().map(|e| e.as_slice()).collect();
                assert_eq!(log.append_batch(&batch).unwrap(), at as u64);
                at += chunk;
                assert_eq!(log.root(), tree.root_at(at as u64).unwrap());
            }
        }
        let log = Log::open(dir.path()).unwrap();
        assert_eq!(log.size(), 1100);
        assert_eq!(log.root(), tree.root());
        assert_eq!(log.entry(1099).unwrap(), all[1099]);
        for (index, size) in [(0, 1), (5, 6), (513, 1100), (1099, 1100), (700, 900)] {
            let proof = log.inclusion_proof(index, size).unwrap();
            let root = log.root_at(size).unwrap();
            assert!(verify_inclusion(
                &leaf_hash(&all[index as usize]),
                index,
                size,
                &proof,
                &root
            ));
        }
        for (old, new) in [(0, 5), (1, 1100), (256, 1100), (1000, 1023), (7, 7)] {
            let proof = log.consistency_proof(old, new).unwrap();
            assert!(verify_consistency(
                old,
                new,
                &log.root_at(old).unwrap(),
                &log.root_at(new).unwrap(),
                &proof
            ));
        }
        // A verifier reading only tiles computes the same root and entries.
        let mut tiled = TiledTree::new(&log, 1100);
        assert_eq!(tiled.root().unwrap(), tree.root());
        assert_eq!(tiled.entry(777).unwrap(), all[777]);
        assert_eq!(
            tiled.inclusion_proof(777).unwrap(),
            tree.inclusion_proof(777).unwrap()
        );
        assert!(log.entry(1100).is_err());
    }

    #[test]
    fn a_torn_tail_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let all = entries(40);
        {
            let log = Log::open(dir.path()).unwrap();
            let batch: Vec<&[u8]> = all.iter().map(|e| e.as_slice()).collect();
            log.append_batch(&batch).unwrap();
        }
        // A crash mid-append: garbage past the end of every file, half an index record.
        for (name, junk) in [("entries", 100usize), ("hashes", 70), ("index", 5)] {
            let mut f = OpenOptions::new()
                .append(true)
                .open(dir.path().join(name))
                .unwrap();
            f.write_all(&vec![0xAB; junk]).unwrap();
        }
        let log = Log::open(dir.path()).unwrap();
        assert_eq!(log.size(), 40);
        let tree = Tree::from_leaf_hashes(all.iter().map(|e| leaf_hash(e)).collect());
        assert_eq!(log.root(), tree.root());
        log.append(b"next").unwrap();
        assert_eq!(log.size(), 41);
        drop(log);
        // An index record pointing past the entries (written before them): cut off too.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("index"))
            .unwrap();
        f.write_all(&u64::MAX.to_be_bytes()).unwrap();
        drop(f);
        assert_eq!(Log::open(dir.path()).unwrap().size(), 41);
        // A changed entry byte is corruption, not a tail to cut.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("entries"))
            .unwrap();
        f.write_all_at(b"X", log_len(dir.path()) - 1).unwrap();
        drop(f);
        assert!(matches!(
            Log::open(dir.path()),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn readers_see_a_consistent_snapshot_beside_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Log::open(dir.path()).unwrap();
        let all = entries(3000);
        let path = dir.path().to_path_buf();
        std::thread::scope(|s| {
            let w = &writer;
            let all = &all;
            s.spawn(move || {
                for chunk in all.chunks(37) {
                    let batch: Vec<&[u8]> = chunk.iter().map(|e| e.as_slice()).collect();
                    w.append_batch(&batch).unwrap();
                }
            });
            let mut seen = 0;
            while seen < 3000 {
                let reader = Log::open_reader(&path).unwrap();
                let size = reader.size();
                assert!(size >= seen, "a reader never sees the log shrink");
                seen = size;
                if size == 0 {
                    continue;
                }
                let tree = Tree::from_leaf_hashes(
                    all[..size as usize].iter().map(|e| leaf_hash(e)).collect(),
                );
                assert_eq!(reader.root(), tree.root(), "size {size}");
                assert_eq!(reader.entry(size - 1).unwrap(), all[size as usize - 1]);
                assert!(matches!(reader.append(b"x"), Err(StoreError::ReadOnly(_))));
            }
        });
    }

    fn log_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("entries")).unwrap().len()
    }

    fn record(key: &SigningKey, gpu: &str, n: u32) -> Entry {
        Entry::sign(
            RecordKind::ProofRound,
            format!(r#"{{"version":2,"gpu_uuid":"{gpu}","n":{n}}}"#),
            key,
        )
        .unwrap()
    }

    #[test]
    fn the_ledger_chains_each_gpus_records_and_group_commits() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[5; 32]);
        {
            let ledger = Arc::new(Ledger::open(dir.path()).unwrap());
            ledger
                .append(vec![record(&key, "GPU-a", 0), record(&key, "GPU-b", 0)])
                .unwrap();
            let writer = GroupCommit::start(ledger.clone());
            let threads: Vec<_> = (0..4)
                .map(|t| {
                    let h = writer.handle();
                    let key = key.clone();
                    std::thread::spawn(move || {
                        for n in 0..25 {
                            let gpu = if t % 2 == 0 { "GPU-a" } else { "GPU-b" };
                            h.append(vec![record(&key, gpu, t * 100 + n)]).unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let mut bad = record(&key, "GPU-a", 9);
            bad.body = bad.body.replace('9', "8");
            assert!(writer.handle().append(vec![bad]).is_err());
        }
        let ledger = Ledger::open(dir.path()).unwrap();
        assert_eq!(ledger.log().size(), 102);
        assert_eq!(ledger.gpus(), ["GPU-a", "GPU-b"]);
        let a = ledger.gpu_entries("GPU-a").unwrap();
        assert_eq!(a.len(), 51);
        for (k, (_, e)) in a.iter().enumerate() {
            assert_eq!(e.gpu_seq, k as u64);
            assert_eq!(e.gpu_uuid, "GPU-a");
        }
        ledger.append(vec![record(&key, "GPU-a", 1)]).unwrap();
        let a = ledger.gpu_entries("GPU-a").unwrap();
        assert_eq!(a.last().unwrap().1.gpu_seq, 51);
        assert_eq!(a.last().unwrap().1.prev_index, a[50].0);

        // Pages of a GPU's entries: after an index, below a size, at most a limit.
        let size = ledger.log().size();
        let (first, more) = ledger.gpu_page("GPU-a", None, size, 20).unwrap();
        assert!(more);
        assert_eq!(first, a[..20].to_vec());
        let (next, more) = ledger
            .gpu_page("GPU-a", Some(first[19].0), size, 20)
            .unwrap();
        assert!(more);
        assert_eq!(next, a[20..40].to_vec());
        let (last, more) = ledger
            .gpu_page("GPU-a", Some(next[19].0), size, 20)
            .unwrap();
        assert!(!more);
        assert_eq!(last, a[40..].to_vec());
        let (below, more) = ledger.gpu_page("GPU-a", None, a[3].0, 20).unwrap();
        assert_eq!(
            (below, more),
            (a[..3].to_vec(), false),
            "a smaller tree's entries only"
        );
        assert_eq!(
            ledger.gpu_page("GPU-none", None, size, 20).unwrap(),
            (vec![], false)
        );

        // The latest entries of some kinds, within a bounded walk back.
        let score = Entry::sign(
            RecordKind::Score,
            r#"{"version":1,"gpu_uuid":"GPU-a"}"#.to_string(),
            &key,
        )
        .unwrap();
        let [score_at] = ledger.append(vec![score]).unwrap()[..] else {
            panic!("one index")
        };
        let proofs = ledger
            .gpu_recent("GPU-a", &[RecordKind::ProofRound], 3, 100)
            .unwrap();
        let indexes: Vec<u64> = proofs.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, [a[49].0, a[50].0, a[51].0]);
        let scores = ledger
            .gpu_recent("GPU-a", &[RecordKind::Score], 10, 100)
            .unwrap();
        assert_eq!(scores.len(), 1);
        assert_eq!(scores[0].0, score_at);
        // Two steps back: the score and one proof; nothing for a GPU the ledger never saw.
        assert_eq!(
            ledger
                .gpu_recent("GPU-a", &[RecordKind::ProofRound], 10, 2)
                .unwrap()
                .len(),
            1
        );
        assert!(ledger
            .gpu_recent("GPU-z", &RecordKind::ALL, 10, 10)
            .unwrap()
            .is_empty());
    }
}
