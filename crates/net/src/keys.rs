//! Identity keys on disk: created on first start in the data dir, readable by the owner only.

use pog_signed::Identity;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Why a key could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file exists but does not hold a key (its path is given).
    #[error("{0} is not a pog key (64 hex digits): restore it from a backup, or move it away to make a new identity")]
    NotAKey(String),
    /// The key file may be read by others than its owner, so the key may have leaked.
    #[error("{path} is readable by others (mode {mode:o}): chmod 600 it")]
    Exposed {
        /// The key file.
        path: String,
        /// Its Unix permission bits.
        mode: u32,
    },
    /// A file operation on the key failed.
    #[error("{step} {path}: {source}")]
    Io {
        /// What was being done ("reading", "creating", …).
        step: &'static str,
        /// The file it was done to.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A new key could not be generated or encoded.
    #[error(transparent)]
    Generate(#[from] pog_signed::WireError),
}

/// Loads the identity at `path`, or creates one there (mode 0600) if there is none.
pub fn load_or_create(path: &Path) -> Result<Identity, KeyError> {
    let name = || path.display().to_string();
    let io = |step, p: &Path| {
        let path = p.display().to_string();
        move |source| KeyError::Io { step, path, source }
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let seed: [u8; 32] = hex::decode(text.trim())
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| KeyError::NotAKey(name()))?;
            let mode = std::fs::metadata(path)
                .map_err(io("reading", path))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(KeyError::Exposed {
                    path: name(),
                    mode: mode & 0o777,
                });
            }
            Ok(Identity::from_seed(seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
            }
            let identity = Identity::generate()?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io("creating", path))?;
            writeln!(file, "{}", hex::encode(identity.seed())).map_err(io("writing", path))?;
            Ok(identity)
        }
        Err(e) => Err(io("reading", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/agent.key");
        let first = load_or_create(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            load_or_create(&path).unwrap().public_key(),
            first.public_key()
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            load_or_create(&path).unwrap_err(),
            KeyError::Exposed { mode: 0o644, .. }
        ));
        std::fs::write(dir.path().join("bad.key"), "nope").unwrap();
        std::fs::set_permissions(
            dir.path().join("bad.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert!(matches!(
            load_or_create(&dir.path().join("bad.key")).unwrap_err(),
            KeyError::NotAKey(_)
        ));
    }
}
