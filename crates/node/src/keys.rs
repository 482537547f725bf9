//! Identity keys on disk: created on first start in the data dir, readable by the owner only.

use pog_proof::wire::Identity;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Loads the identity at `path`, or creates one there (mode 0600) if there is none.
pub fn load_or_create(path: &Path) -> Result<Identity, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let seed: [u8; 32] = hex::decode(text.trim())
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| format!("{} is not a pog key (64 hex digits)", path.display()))?;
            let mode = std::fs::metadata(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(format!(
                    "{} is readable by others (mode {:o}): chmod 600 it",
                    path.display(),
                    mode & 0o777
                ));
            }
            Ok(Identity::from_seed(seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            }
            let identity = Identity::generate().map_err(|e| e.to_string())?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| format!("creating {}: {e}", path.display()))?;
            writeln!(file, "{}", hex::encode(identity.seed()))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok(identity)
        }
        Err(e) => Err(format!("reading {}: {e}", path.display())),
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
            load_or_create(&path).unwrap().public_hex(),
            first.public_hex()
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load_or_create(&path)
            .unwrap_err()
            .contains("readable by others"));
        std::fs::write(dir.path().join("bad.key"), "nope").unwrap();
        std::fs::set_permissions(
            dir.path().join("bad.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert!(load_or_create(&dir.path().join("bad.key"))
            .unwrap_err()
            .contains("not a pog key"));
    }
}
