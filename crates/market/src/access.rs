//! How a renter reaches a leased GPU ([`Access`]): carried by its bid into each lease, checked
//! wherever it is made or read, because the provider's lease hook writes it where a shell or
//! `authorized_keys` reads it.

use serde::{Deserialize, Serialize};

/// The longest access a bid may carry, in bytes (an RSA-8192 OpenSSH public key is about
/// 1.4 KB; a container reference is far shorter).
pub const MAX_ACCESS_LEN: usize = 4096;

/// How the renter reaches a leased GPU, carried by its bid into each lease it becomes and handed
/// to the provider's lease hook (`pog agent --lease-hook`), which grants it at the lease's start
/// and revokes it at its end. Public by nature (it is listed with the lease): an SSH public key,
/// or the container image to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "snake_case",
    try_from = "AccessFields",
    into = "AccessFields"
)]
pub enum Access {
    /// An OpenSSH public key line (`ssh-ed25519 AAAA… comment`) to authorize.
    Ssh(String),
    /// A container image reference (`registry/name:tag` or `…@sha256:…`) to start.
    Container(String),
}

/// Why a renter's access is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// Longer than [`MAX_ACCESS_LEN`].
    #[error("the access is {0} bytes long; at most 4096 are allowed")]
    TooLong(usize),
    /// Not an OpenSSH public key line of a known type with base64 key data.
    #[error("not an OpenSSH public key (`ssh-ed25519 AAAA… [comment]`, one line, of type ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521 or sk-ssh-ed25519@openssh.com)")]
    BadSshKey,
    /// Not a container image reference.
    #[error("not a container image reference (lowercase letters, digits and . _ - / : @, e.g. ghcr.io/org/image:tag)")]
    BadImage,
}

/// The key types an SSH access may name.
const SSH_KEY_TYPES: [&str; 6] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
];

impl Access {
    /// An SSH public key line, checked: one line of a known key type, base64 key data whose
    /// own type names the same, an optional printable comment.
    pub fn ssh(line: &str) -> Result<Access, AccessError> {
        use base64::Engine;
        let line = line.trim();
        if line.len() > MAX_ACCESS_LEN {
            return Err(AccessError::TooLong(line.len()));
        }
        if line.chars().any(|c| c.is_control()) {
            return Err(AccessError::BadSshKey);
        }
        let mut parts = line.splitn(3, ' ');
        let (Some(kind), Some(data)) = (parts.next(), parts.next()) else {
            return Err(AccessError::BadSshKey);
        };
        if !SSH_KEY_TYPES.contains(&kind) {
            return Err(AccessError::BadSshKey);
        }
        // The key blob starts with its own type as an SSH string (u32 length, bytes).
        let blob = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| AccessError::BadSshKey)?;
        let named = blob
            .get(..4)
            .map(|n| u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
            .and_then(|n| blob.get(4..4 + n));
        if named != Some(kind.as_bytes()) {
            return Err(AccessError::BadSshKey);
        }
        Ok(Access::Ssh(line.to_string()))
    }

    /// A container image reference, checked: 1 to 255 of lowercase letters, digits and
    /// `. _ - / : @`, not starting with `-` (so that no hook takes it for an option).
    pub fn container(image: &str) -> Result<Access, AccessError> {
        let ok = !image.is_empty()
            && image.len() <= 255
            && !image.starts_with('-')
            && image
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/:@".contains(&b));
        if !ok {
            return Err(AccessError::BadImage);
        }
        Ok(Access::Container(image.to_string()))
    }
}

/// An access as it travels, before it is checked.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum AccessFields {
    Ssh(String),
    Container(String),
}

impl TryFrom<AccessFields> for Access {
    type Error = AccessError;
    fn try_from(f: AccessFields) -> Result<Access, AccessError> {
        match f {
            AccessFields::Ssh(line) => Access::ssh(&line),
            AccessFields::Container(image) => Access::container(&image),
        }
    }
}

impl From<Access> for AccessFields {
    fn from(a: Access) -> AccessFields {
        match a {
            Access::Ssh(line) => AccessFields::Ssh(line),
            Access::Container(image) => AccessFields::Container(image),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OpenSSH public key line of `kind` over `key` bytes, with a comment.
    fn ssh_line(kind: &str, named: &str, key: &[u8]) -> String {
        use base64::Engine;
        let mut blob = (named.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(named.as_bytes());
        blob.extend_from_slice(&(key.len() as u32).to_be_bytes());
        blob.extend_from_slice(key);
        let data = base64::engine::general_purpose::STANDARD.encode(blob);
        format!("{kind} {data} renter@laptop")
    }

    #[test]
    fn a_renters_access_is_an_ssh_key_or_an_image_checked_for_what_a_hook_will_do_with_it() {
        let good = ssh_line("ssh-ed25519", "ssh-ed25519", &[7; 32]);
        assert_eq!(Access::ssh(&good), Ok(Access::Ssh(good.clone())));
        // It travels as {"ssh": LINE} and is checked again when read.
        let json = serde_json::to_string(&Access::ssh(&good).unwrap()).unwrap();
        assert_eq!(json, format!("{{\"ssh\":\"{good}\"}}"));
        assert!(serde_json::from_str::<Access>(&json).is_ok());
        for bad in [
            String::new(),
            "ssh-ed25519".to_string(),
            ssh_line("ssh-dss", "ssh-dss", &[7; 32]),
            // The blob names another type than the line.
            ssh_line("ssh-ed25519", "ssh-rsa", &[7; 32]),
            "ssh-ed25519 not*base64".to_string(),
            // A second line smuggled in for an authorized_keys file.
            format!("{good}\nssh-ed25519 AAAA attacker"),
            format!("{good} {}", "x".repeat(MAX_ACCESS_LEN)),
        ] {
            assert!(Access::ssh(&bad).is_err(), "{bad:?}");
            let json = serde_json::json!({ "ssh": bad }).to_string();
            assert!(serde_json::from_str::<Access>(&json).is_err(), "{json}");
        }
        assert!(Access::container("ghcr.io/org/trainer:1.2@sha256:abc").is_ok());
        for bad in [
            "",
            "Ubuntu",
            "a b",
            "-privileged",
            "x;rm -rf /",
            &"a".repeat(256),
        ] {
            assert_eq!(
                Access::container(bad),
                Err(AccessError::BadImage),
                "{bad:?}"
            );
        }
        assert!(serde_json::from_str::<Access>(r#"{"shell":"x"}"#).is_err());
    }
}
