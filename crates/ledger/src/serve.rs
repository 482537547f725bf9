//! The HTTP side of the log and of a witness, as pure functions from a request to a response,
//! so that any server (the validator's axum router, a test) serves them the same way:
//!
//! - [`log_resource`]: `GET <prefix>/checkpoint` and `GET <prefix>/tile/…` as c2sp.org/tlog-tiles
//!   specifies (content types; the checkpoint cacheable for seconds, tiles and entry bundles
//!   immutable); a tile's bytes are left for the server to read as it sends them;
//! - [`witness_add_checkpoint`]: `POST <prefix>/add-checkpoint` as c2sp.org/tlog-witness
//!   specifies (status codes; a 409 carries the witness's latest size as `text/x.tlog.size`).

use crate::store::{Log, StoreError, TileReader};
use crate::tiles::TileId;
use crate::witness::{AddCheckpoint, Refusal, Witness};

/// An HTTP response to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// `Cache-Control`, when there is one to send.
    pub cache_control: Option<&'static str>,
    /// `Retry-After` in seconds, when there is one to send (a 429).
    pub retry_after: Option<u64>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn text(status: u16, content_type: &'static str, body: String) -> Response {
        Response {
            status,
            content_type,
            cache_control: None,
            retry_after: None,
            body: body.into_bytes(),
        }
    }
}

pub(crate) const TEXT: &str = "text/plain; charset=utf-8";

/// `Content-Type` of hash tiles and entry bundles.
pub const TILE_CONTENT_TYPE: &str = "application/octet-stream";

/// `Cache-Control` of hash tiles and entry bundles: they never change once in the tree.
pub const TILE_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

/// What the log answers to a `GET`.
#[derive(Debug)]
pub enum LogAnswer {
    /// The checkpoint, or a refusal, whole (a few hundred bytes).
    Whole(Response),
    /// 200 with a hash tile or an entry bundle (up to 16 MiB), as a reader that has read
    /// nothing yet: the server reads it with [`Log::read_tile_piece`] as it sends it, with
    /// [`TILE_CONTENT_TYPE`] and [`TILE_CACHE_CONTROL`].
    Tile(TileReader),
}

/// The answer to `GET <prefix>/<path>` of the log (`path` without the prefix and without a
/// leading slash): the latest checkpoint, a hash tile or an entry bundle; 404 for anything
/// else, including a tile the tree does not have at that width.
pub fn log_resource(log: &Log, path: &str) -> LogAnswer {
    if path == "checkpoint" {
        return LogAnswer::Whole(match log.latest_checkpoint() {
            Ok(Some(text)) => Response {
                status: 200,
                content_type: TEXT,
                cache_control: Some("no-cache, max-age=2"),
                retry_after: None,
                body: text.into_bytes(),
            },
            Ok(None) => Response::text(404, TEXT, "no checkpoint yet\n".into()),
            Err(e) => Response::text(500, TEXT, format!("{e}\n")),
        });
    }
    let Ok(id) = TileId::parse_path(path) else {
        return LogAnswer::Whole(Response::text(404, TEXT, "no such resource\n".into()));
    };
    match log.tile_reader(&id) {
        Ok(reader) => LogAnswer::Tile(reader),
        Err(StoreError::OutOfRange { .. }) => LogAnswer::Whole(Response::text(
            404,
            TEXT,
            format!("{path} is not in the tree\n"),
        )),
        Err(e) => LogAnswer::Whole(Response::text(500, TEXT, format!("{e}\n"))),
    }
}

/// The response to `POST <prefix>/add-checkpoint` with `body` at time `now` (POSIX seconds):
/// 200 with the cosignature line, or the refusal's status and reason. On 200 the caller must
/// have persisted `witness.latest(origin)` before sending the response.
pub fn witness_add_checkpoint(witness: &mut Witness, body: &[u8], now: u64) -> Response {
    let result = AddCheckpoint::parse(body).and_then(|r| witness.add_checkpoint(&r, now));
    match result {
        Ok(line) => Response::text(200, TEXT, line.to_line()),
        Err(r) => refusal(r),
    }
}

/// A refused add-checkpoint request's response: a 409 (another old size than the witness's
/// latest, or a smaller tree than it) carries the witness's latest size as `text/x.tlog.size`,
/// so the log can retry from it; any other refusal its status and reason.
pub(crate) fn refusal(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Conflict { latest, .. } | Refusal::Rollback { latest, .. } => {
            Response::text(409, "text/x.tlog.size", format!("{latest}\n"))
        }
        refusal => Response::text(refusal.http_status(), TEXT, format!("{refusal}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::{NoteSigner, ALG_COSIGNATURE_V1, ALG_ED25519};
    use crate::tiles::{decode_tile, TileError, TileSource, TiledTree};

    /// Tiles fetched "over HTTP": through [`log_resource`], in pieces of 1000 bytes, as a
    /// mirror would.
    struct Http<'a>(&'a Log);

    /// The status and whole body of `GET <path>`.
    fn get(log: &Log, path: &str) -> (u16, Vec<u8>) {
        match log_resource(log, path) {
            LogAnswer::Whole(r) => (r.status, r.body),
            LogAnswer::Tile(mut reader) => {
                let mut body = Vec::new();
                while reader.remaining() > 0 {
                    body.extend(log.read_tile_piece(&mut reader, 1000).unwrap());
                }
                (200, body)
            }
        }
    }

    impl TileSource for Http<'_> {
        fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
            match get(self.0, &id.path()) {
                (200, body) => Ok(body),
                (status, _) => Err(TileError::Source {
                    path: id.path(),
                    why: format!("HTTP {status}"),
                }),
            }
        }
    }

    #[test]
    fn the_log_serves_its_checkpoint_and_tiles() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        let signer = NoteSigner::new("pog.test/log", ALG_ED25519, [1; 32]).unwrap();
        assert_eq!(get(&log, "checkpoint").0, 404);
        let entries: Vec<Vec<u8>> = (0..600u32).map(|i| i.to_be_bytes().to_vec()).collect();
        log.append_batch(&entries.iter().map(|e| e.as_slice()).collect::<Vec<_>>())
            .unwrap();
        let cp = log.checkpoint(&signer).unwrap();
        assert_eq!(get(&log, "checkpoint"), (200, cp.to_text().into_bytes()));
        let (status, full) = get(&log, "tile/0/001");
        assert_eq!(status, 200);
        let id = TileId::parse_path("tile/0/001").unwrap();
        assert_eq!(decode_tile(&id, &full).unwrap().len(), 256);
        assert_eq!(get(&log, "tile/0/002.p/88").0, 200);
        assert_eq!(get(&log, "tile/entries/002.p/88").0, 200);
        assert_eq!(get(&log, "tile/1/000.p/2").0, 200);
        for missing in [
            "tile/0/002",
            "tile/0/002.p/89",
            "tile/1/000",
            "tile/0/3",
            "../etc/passwd",
        ] {
            assert_eq!(get(&log, missing).0, 404, "{missing}");
        }
        // A client reading only over "HTTP" gets the checkpoint's root and verifiable entries.
        let mut tiled = TiledTree::new(Http(&log), 600);
        assert_eq!(tiled.root().unwrap(), cp.checkpoint.root);
        assert_eq!(tiled.entry(599).unwrap(), entries[599]);
    }

    #[test]
    fn the_witness_answers_as_tlog_witness_says() {
        let log = NoteSigner::new("pog.test/log", ALG_ED25519, [1; 32]).unwrap();
        let mut w =
            Witness::new(NoteSigner::new("pog.test/w", ALG_COSIGNATURE_V1, [2; 32]).unwrap());
        w.follow(log.verifier().clone(), None);
        let tree = pog_merkle::Tree::from_leaf_hashes(
            (0..5u8).map(|i| pog_merkle::leaf_hash(&[i])).collect(),
        );
        let cp = crate::checkpoint::Checkpoint {
            origin: "pog.test/log".into(),
            size: 5,
            root: tree.root(),
            extensions: vec![],
        }
        .sign(&log);
        let body = |old: u64| {
            let mut b = format!("old {old}\n\n").into_bytes();
            b.extend_from_slice(cp.to_text().as_bytes());
            b
        };
        let ok = witness_add_checkpoint(&mut w, &body(0), 7);
        assert_eq!(ok.status, 200);
        assert!(String::from_utf8(ok.body)
            .unwrap()
            .starts_with("\u{2014} pog.test/w "));
        let conflict = witness_add_checkpoint(&mut w, &body(3), 8);
        assert_eq!(
            (conflict.status, conflict.content_type, conflict.body),
            (409, "text/x.tlog.size", b"5\n".to_vec())
        );
        assert_eq!(witness_add_checkpoint(&mut w, b"nonsense", 9).status, 400);
    }
}

/// What [`write_static`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MirrorStats {
    /// Tree size of the mirrored checkpoint.
    pub size: u64,
    /// Tiles and entry bundles written now.
    pub written: u64,
    /// Full tiles already there (immutable: not written again).
    pub kept: u64,
}

/// Writes the log as static files under `dir`, the tlog-tiles layout a plain web server can
/// serve: `checkpoint` (the latest stored one) and every tile and entry bundle of its tree
/// size. Full tiles already present are kept (they never change); partial ones are written for
/// this size. Each file is written to a temporary name and renamed, the checkpoint last, so a
/// reader never sees a checkpoint whose tiles are missing.
pub fn write_static(log: &Log, dir: &std::path::Path) -> Result<MirrorStats, StoreError> {
    let io = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |cause| StoreError::Io { path, cause }
    };
    let text = log
        .latest_checkpoint()?
        .ok_or_else(|| StoreError::Corrupt {
            dir: log.dir().to_path_buf(),
            why: "the log has no checkpoint to mirror yet".into(),
        })?;
    let checkpoint = crate::checkpoint::SignedCheckpoint::parse(text.as_bytes()).map_err(|e| {
        StoreError::Corrupt {
            dir: log.dir().to_path_buf(),
            why: format!("the stored checkpoint is unreadable: {e}"),
        }
    })?;
    let size = checkpoint.checkpoint.size;
    let mut stats = MirrorStats {
        size,
        ..MirrorStats::default()
    };
    let write = |path: &std::path::Path, bytes: &[u8]| -> Result<(), StoreError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let tmp = path.with_extension("tmp-mirror");
        std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))
    };
    for id in crate::tiles::tiles_of(size) {
        let path = dir.join(id.path());
        if id.width == crate::tiles::TILE_WIDTH && path.is_file() {
            stats.kept += 1;
            continue;
        }
        write(&path, &log.tile(&id)?)?;
        stats.written += 1;
    }
    write(&dir.join("checkpoint"), text.as_bytes())?;
    Ok(stats)
}

/// Tiles read from a directory in the tlog-tiles layout (a static mirror, or a local copy of
/// one), for [`crate::tiles::TiledTree`].
pub struct DirSource(pub std::path::PathBuf);

impl crate::tiles::TileSource for DirSource {
    fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, crate::tiles::TileError> {
        let path = self.0.join(id.path());
        std::fs::read(&path).map_err(|e| crate::tiles::TileError::Source {
            path: id.path(),
            why: e.to_string(),
        })
    }
}

#[cfg(test)]
mod mirror_tests {
    use super::*;
    use crate::checkpoint::SignedCheckpoint;
    use crate::note::{NoteSigner, ALG_ED25519};
    use crate::tiles::TiledTree;
    use pog_merkle::{leaf_hash, verify_inclusion};

    #[test]
    fn a_static_mirror_verifies_from_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(&dir.path().join("log")).unwrap();
        let signer = NoteSigner::new("pog.test/log", ALG_ED25519, [3; 32]).unwrap();
        let mirror = dir.path().join("www");
        let entries: Vec<Vec<u8>> = (0..70_000u32)
            .map(|i| format!("e{i}").into_bytes())
            .collect();
        let slices: Vec<&[u8]> = entries.iter().map(|e| e.as_slice()).collect();
        log.append_batch(&slices[..600]).unwrap();
        log.checkpoint(&signer).unwrap();
        let first = write_static(&log, &mirror).unwrap();
        // Level 0: two full tiles, one of 88, and their entry bundles; level 1: one tile of 2.
        assert_eq!(
            first,
            MirrorStats {
                size: 600,
                written: 7,
                kept: 0
            }
        );
        log.append_batch(&slices[600..]).unwrap();
        log.checkpoint(&signer).unwrap();
        let second = write_static(&log, &mirror).unwrap();
        // The two full level-0 tiles and their bundles of the first mirroring are kept.
        assert_eq!(second.kept, 4);
        // A verifier with only the log's key and the files.
        let text = std::fs::read(mirror.join("checkpoint")).unwrap();
        let cp = SignedCheckpoint::parse_verified(&text, signer.verifier()).unwrap();
        assert_eq!(cp.checkpoint.size, 70_000);
        let mut tiled = TiledTree::new(DirSource(mirror.clone()), cp.checkpoint.size);
        assert_eq!(tiled.root().unwrap(), cp.checkpoint.root);
        for index in [0u64, 599, 600, 65_535, 69_999] {
            let entry = tiled.entry(index).unwrap();
            assert_eq!(entry, entries[index as usize]);
            let proof = tiled.inclusion_proof(index).unwrap();
            assert!(verify_inclusion(
                &leaf_hash(&entry),
                index,
                70_000,
                &proof,
                &cp.checkpoint.root
            ));
        }
        // A tampered file in the mirror is caught.
        let bundle = mirror.join("tile/entries/000");
        let mut bytes = std::fs::read(&bundle).unwrap();
        bytes[5] ^= 1;
        std::fs::write(&bundle, bytes).unwrap();
        let mut tiled = TiledTree::new(DirSource(mirror), 70_000);
        assert!(tiled.entry(3).is_err());
    }
}
