//! How the registry reaches its PostgreSQL server: in the clear, or over TLS, as the
//! `--database` URL's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` say (libpq's names,
//! read here because the driver knows only `disable`, `prefer` and `require`, verifies
//! nothing itself and presents no client certificate).
//!
//! - `sslmode=verify-full` (and `require`, which libpq lets through unverified with no CA
//!   file: here it is `verify-full`): TLS, the server's chain checked against the CA, and its
//!   certificate naming the host the URL names.
//! - `sslmode=verify-ca`: TLS, the chain checked, the name not.
//! - `sslrootcert=FILE`: the CAs (PEM) to check against; without it (or `system`), the public
//!   CAs pog is built with (webpki-roots). A `sslrootcert` with no `sslmode` asks for
//!   `verify-full`.
//! - `sslmode=disable`: in the clear. With no `sslmode` at all, in the clear only to a server
//!   on this machine (a loopback address, `localhost`, a Unix socket); another host is
//!   refused, saying to name a mode: the records and the registry would cross a network
//!   anyone on the path could read and rewrite.
//! - `sslmode=prefer` and `allow` are refused: they fall back to the clear when the server (or
//!   whoever sits between) says it has no TLS.
//! - `sslcert=FILE` and `sslkey=FILE`: a client certificate (PEM, any intermediates after it)
//!   and its private key (PEM: PKCS#8, PKCS#1 or SEC1, unencrypted), presented to a server
//!   that asks for one (`hostssl … cert`, or `clientcert=verify-full`). Both or neither; with
//!   no `sslmode` they ask for `verify-full`, under `sslmode=disable` they are refused. A key
//!   file that others may read is refused as libpq refuses it: owned by root, mode 0640 or
//!   less; owned by anyone else, 0600 or less. Refused rather than warned about: the key is
//!   the fleet's credential to its database, and a warning at a validator's start is read by
//!   nobody ([`client_key`]).

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::registry_model::RegistryError;

/// How a connection is made: in the clear, or over TLS with this connector.
#[derive(Clone)]
pub(crate) enum Transport {
    /// In the clear (`sslmode=disable`, or a server on this machine with no `sslmode`).
    Plain,
    /// Over TLS, the server's certificate checked as the URL asked.
    Tls(MakeRustlsConnect),
}

/// What a URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No `sslmode` and no `sslrootcert`.
    Unsaid,
    /// `sslmode=disable`.
    Disable,
    /// `sslmode=verify-ca`.
    VerifyCa,
    /// `sslmode=verify-full` or `require`, or a `sslrootcert` or `sslcert`/`sslkey` alone.
    VerifyFull,
}

/// The TLS words of a URL (libpq's names), taken out of it: the driver does not know them.
#[derive(Debug, Default, PartialEq)]
struct TlsOptions {
    /// `sslmode`.
    sslmode: Option<String>,
    /// `sslrootcert`: the CAs to check the server against.
    rootcert: Option<String>,
    /// `sslcert`: the client's certificate, to present to the server.
    cert: Option<String>,
    /// `sslkey`: the private key of the client's certificate.
    key: Option<String>,
}

impl TlsOptions {
    /// Whether any of them asks for TLS by itself (with no `sslmode`: `verify-full`).
    fn asks_for_tls(&self) -> bool {
        self.rootcert.is_some() || self.cert.is_some() || self.key.is_some()
    }
}

/// The certificate chain and key the client presents to the server (`sslcert`, `sslkey`).
struct ClientIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The URL's words for the two files, to say which do not belong together.
    files: String,
}

/// The driver's settings for `url` and how to reach its server, or why the URL is refused.
pub(crate) fn parse(url: &str) -> Result<(tokio_postgres::Config, Transport), RegistryError> {
    let (rest, options) = split_tls_options(url);
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| {
        RegistryError::DatabaseUrl(format!(
            "it is not a PostgreSQL URL ({e}); write it as postgres://user:password@host:port/database"
        ))
    })?;
    let mode = match options.sslmode.as_deref() {
        None if options.asks_for_tls() => Mode::VerifyFull,
        None => Mode::Unsaid,
        Some("require" | "verify-full") => Mode::VerifyFull,
        Some("verify-ca") => Mode::VerifyCa,
        Some("disable") if options.cert.is_some() || options.key.is_some() => {
            return Err(RegistryError::DatabaseUrl(
                "sslmode=disable sends no client certificate: drop sslcert and sslkey, or ask \
                 for TLS (sslmode=verify-full)"
                    .into(),
            ))
        }
        Some("disable") => Mode::Disable,
        Some(weak @ ("prefer" | "allow")) => {
            return Err(RegistryError::DatabaseUrl(format!(
                "sslmode={weak} falls back to the clear when the server, or anyone on the path, \
                 says it has no TLS; write sslmode=verify-full (with sslrootcert=CA-FILE for a \
                 private CA), or sslmode=disable on a network you trust"
            )))
        }
        Some(other) => {
            return Err(RegistryError::DatabaseUrl(format!(
                "sslmode={other} is not one of disable, require, verify-ca, verify-full"
            )))
        }
    };
    let transport = match mode {
        Mode::Disable => Transport::Plain,
        Mode::Unsaid => match remote_host(&config) {
            None => Transport::Plain,
            Some(host) => {
                return Err(RegistryError::DatabaseUrl(format!(
                    "it names a server on another machine ({host}) and no sslmode: the registry \
                     would cross the network in the clear; add sslmode=verify-full (with \
                     sslrootcert=CA-FILE for a private CA), or sslmode=disable to send it in \
                     the clear on a network you trust"
                )))
            }
        },
        Mode::VerifyCa | Mode::VerifyFull => {
            let roots = roots(options.rootcert.as_deref())?;
            let identity = client_identity(options.cert.as_deref(), options.key.as_deref())?;
            Transport::Tls(MakeRustlsConnect::new(client_config(
                roots,
                mode == Mode::VerifyFull,
                identity,
            )?))
        }
    };
    config.ssl_mode(match transport {
        Transport::Plain => SslMode::Disable,
        Transport::Tls(_) => SslMode::Require,
    });
    Ok((config, transport))
}

/// `url` without its TLS words ([`TlsOptions`]), and their values (percent-decoded in a URL),
/// in either of the driver's forms: `postgres://…?key=value&…` or `key=value key=value`.
fn split_tls_options(url: &str) -> (String, TlsOptions) {
    let mut options = TlsOptions::default();
    let mut take = |pair: &str, decode: bool| -> bool {
        let Some((key, value)) = pair.split_once('=') else {
            return false;
        };
        let value = if decode {
            percent_decoded(value)
        } else {
            value.trim_matches('\'').to_owned()
        };
        let slot = match key {
            "sslmode" => &mut options.sslmode,
            "sslrootcert" => &mut options.rootcert,
            "sslcert" => &mut options.cert,
            "sslkey" => &mut options.key,
            _ => return false,
        };
        *slot = Some(value);
        true
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            Some((base, query)) => {
                let kept: Vec<&str> = query.split('&').filter(|p| !take(p, true)).collect();
                match kept.is_empty() {
                    true => base.to_owned(),
                    false => format!("{base}?{}", kept.join("&")),
                }
            }
            None => url.to_owned(),
        }
    } else {
        let kept: Vec<&str> = url.split(' ').filter(|p| !take(p, false)).collect();
        kept.join(" ")
    };
    (rest, options)
}

/// `text` with its `%XX` escapes decoded (an escape that is not one is kept as written).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first host `config` names that is not on this machine (a loopback address,
/// `localhost`, a Unix socket); `None` when all are. A `hostaddr` decides where a host is.
fn remote_host(config: &tokio_postgres::Config) -> Option<String> {
    let addrs = config.get_hostaddrs();
    if !addrs.is_empty() {
        return addrs
            .iter()
            .find(|a| !a.is_loopback())
            .map(ToString::to_string);
    }
    config.get_hosts().iter().find_map(|host| match host {
        Host::Tcp(name) => {
            let local = name.eq_ignore_ascii_case("localhost")
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            (!local).then(|| name.clone())
        }
        Host::Unix(_) => None,
    })
}

/// The CAs to check the server against: those of the PEM file `rootcert`, or the public ones
/// pog is built with (none given, or `system`).
fn roots(rootcert: Option<&str>) -> Result<Arc<RootCertStore>, RegistryError> {
    let mut roots = RootCertStore::empty();
    match rootcert {
        None | Some("system") => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(file) => {
            let bad = |why: String| {
                RegistryError::DatabaseUrl(format!(
                    "sslrootcert={file}: {why}; give a PEM file of the CA certificates that \
                     signed the server's"
                ))
            };
            let certs = CertificateDer::pem_file_iter(file)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("it holds no certificate".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
    }
    Ok(Arc::new(roots))
}

/// The client certificate and key of `sslcert` and `sslkey` (`None` where neither is given),
/// or why they cannot be used: one without the other, a file missing or unreadable, a key
/// file others may read ([`client_key`]), or no certificate or key in it.
fn client_identity(
    cert: Option<&str>,
    key: Option<&str>,
) -> Result<Option<ClientIdentity>, RegistryError> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(cert), None) => {
            return Err(RegistryError::DatabaseUrl(format!(
                "sslcert={cert} without sslkey: give the certificate's private key too \
                 (sslkey=FILE)"
            )))
        }
        (None, Some(key)) => {
            return Err(RegistryError::DatabaseUrl(format!(
                "sslkey={key} without sslcert: give the client certificate too (sslcert=FILE)"
            )))
        }
    };
    let bad_cert = |why: String| {
        RegistryError::DatabaseUrl(format!(
            "sslcert={cert}: {why}; give a PEM file of the client certificate (then any \
             intermediate CA certificates)"
        ))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad_cert(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_cert(e.to_string()))?;
    if chain.is_empty() {
        return Err(bad_cert("it holds no certificate".into()));
    }
    Ok(Some(ClientIdentity {
        chain,
        key: client_key(key)?,
        files: format!("sslcert={cert} and sslkey={key}"),
    }))
}

/// The private key in the PEM file `file`, refused as libpq refuses it where others than its
/// owner may read it: a file of root's may be readable by its group (mode 0640 or less, so
/// that a key shared with a group, as Kubernetes mounts a Secret under `fsGroup`, can be
/// used), anyone else's by its owner only (0600 or less). Refused, not warned about: whoever
/// can read the key can log in as the fleet wherever the database takes the certificate.
fn client_key(file: &str) -> Result<PrivateKeyDer<'static>, RegistryError> {
    let bad = |why: String| RegistryError::DatabaseUrl(format!("sslkey={file}: {why}"));
    let metadata = std::fs::metadata(file).map_err(|e| bad(format!("{e}")))?;
    if !metadata.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (owner, mode) = (metadata.uid(), metadata.mode() & 0o777);
        let too_open = match owner {
            0 => mode & 0o037 != 0,
            _ => mode & 0o077 != 0,
        };
        if too_open {
            return Err(bad(format!(
                "others than its owner may read or change it (mode {mode:04o}): the key may \
                 have leaked; make it 0600 (chmod 0600 {file}), or 0640 where root owns it"
            )));
        }
    }
    PrivateKeyDer::from_pem_file(file).map_err(|e| {
        bad(format!(
            "{e}; give a PEM file of the client certificate's private key (PKCS#8, PKCS#1 or \
             SEC1, not encrypted)"
        ))
    })
}

/// rustls with ring, checking the server's chain against `roots`, and its name too where
/// `check_name`; presenting `identity` to a server that asks for a client certificate.
fn client_config(
    roots: Arc<RootCertStore>,
    check_name: bool,
    identity: Option<ClientIdentity>,
) -> Result<ClientConfig, RegistryError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let failed = |e: rustls::Error| RegistryError::DatabaseUrl(format!("setting up TLS: {e}"));
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(failed)?;
    let builder = match check_name {
        true => builder.with_root_certificates(roots),
        false => {
            let chain = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| RegistryError::DatabaseUrl(format!("setting up TLS: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(chain)))
        }
    };
    let Some(identity) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    builder
        .with_client_auth_cert(identity.chain, identity.key)
        .map_err(|e| {
            let why = match e {
                rustls::Error::InconsistentKeys(_) => {
                    "the key is not the certificate's (give the key the certificate was made \
                     for)"
                        .to_string()
                }
                other => other.to_string(),
            };
            RegistryError::DatabaseUrl(format!("{}: {why}", identity.files))
        })
}

/// What to do about a connection the server refused for its client certificate: none where
/// it requires one (its own words, SQLSTATE 28000, name a certificate), or one it did not take
/// (its TLS alert: another CA's, expired, revoked); `None` where `e` is not that.
pub(crate) fn client_certificate_refused(e: &tokio_postgres::Error) -> Option<&'static str> {
    if let Some(db) = e.as_db_error() {
        let wants_one = *db.code()
            == tokio_postgres::error::SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            && db.message().contains("certificate");
        return wants_one.then_some(
            "the server takes only clients with a certificate its CA signed for the user: \
             give the --database URL sslcert=FILE and sslkey=FILE",
        );
    }
    let mut cause = std::error::Error::source(e);
    while let Some(error) = cause {
        let tls = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .or_else(|| error.downcast_ref::<rustls::Error>());
        if let Some(rustls::Error::AlertReceived(alert)) = tls {
            use rustls::AlertDescription as Alert;
            let about_ours = matches!(
                alert,
                Alert::UnknownCA
                    | Alert::BadCertificate
                    | Alert::CertificateRequired
                    | Alert::CertificateUnknown
                    | Alert::CertificateExpired
                    | Alert::CertificateRevoked
                    | Alert::UnsupportedCertificate
                    | Alert::AccessDenied
            );
            return about_ours.then_some(
                "the server refused the client certificate (sslcert): give one its CA \
                 (ssl_ca_file) signed, in date, for the user",
            );
        }
        cause = error.source();
    }
    None
}

/// `sslmode=verify-ca`: the chain checked by WebPKI as for `verify-full`, and a certificate
/// that is valid but for another name taken.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> String {
        match parse(url) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{url} was taken"),
        }
    }

    fn plain(url: &str) -> bool {
        matches!(parse(url).unwrap().1, Transport::Plain)
    }

    #[test]
    fn a_remote_server_with_no_sslmode_is_refused_and_a_local_one_is_not() {
        for url in [
            "postgres://pog@db.example.net:5432/pog",
            "postgres://pog@10.0.0.5/pog",
            "host=db.example.net user=pog",
            "postgres://pog@localhost,db.example.net/pog",
        ] {
            assert!(refused(url).contains("sslmode=verify-full"), "{url}");
        }
        for url in [
            "postgres://pog@127.0.0.1:5432/postgres",
            "postgres://pog@localhost/pog",
            "postgres://pog@[::1]:5432/pog",
            "host=/run/postgresql user=pog",
            "postgres://pog@db.example.net/pog?sslmode=disable",
        ] {
            assert!(plain(url), "{url}");
        }
    }

    #[test]
    fn modes_that_fall_back_to_the_clear_or_are_unknown_are_refused() {
        assert!(refused("postgres://pog@127.0.0.1/pog?sslmode=prefer").contains("falls back"));
        assert!(refused("host=127.0.0.1 sslmode=allow").contains("falls back"));
        assert!(refused("postgres://pog@127.0.0.1/pog?sslmode=on").contains("not one of"));
    }

    #[test]
    fn tls_options_are_taken_out_of_both_forms_and_decoded() {
        assert_eq!(
            split_tls_options(
                "postgres://u:p@h/db?sslmode=verify-ca&connect_timeout=5&sslrootcert=%2Ftmp%2Fa%20b.pem&sslcert=%2Ftmp%2Fc.pem&sslkey=%2Ftmp%2Fc.key"
            ),
            (
                "postgres://u:p@h/db?connect_timeout=5".to_owned(),
                TlsOptions {
                    sslmode: Some("verify-ca".to_owned()),
                    rootcert: Some("/tmp/a b.pem".to_owned()),
                    cert: Some("/tmp/c.pem".to_owned()),
                    key: Some("/tmp/c.key".to_owned()),
                }
            )
        );
        assert_eq!(
            split_tls_options("host=h sslrootcert='/tmp/ca.pem' user=u sslkey=/tmp/k"),
            (
                "host=h user=u".to_owned(),
                TlsOptions {
                    rootcert: Some("/tmp/ca.pem".to_owned()),
                    key: Some("/tmp/k".to_owned()),
                    ..TlsOptions::default()
                }
            )
        );
        assert_eq!(percent_decoded("100%"), "100%");
        // TLS with the public CAs, the name checked; a CA file that is not there is refused.
        assert!(matches!(
            parse("postgres://pog@db.example.net/pog?sslmode=require")
                .unwrap()
                .1,
            Transport::Tls(_)
        ));
        assert!(
            refused("postgres://pog@db.example.net/pog?sslrootcert=/nonexistent/ca.pem")
                .contains("sslrootcert=/nonexistent/ca.pem")
        );
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_tls() {
        let local = "postgres://pog@127.0.0.1/pog";
        assert!(refused(&format!("{local}?sslcert=/tmp/c.pem")).contains("without sslkey"));
        assert!(refused(&format!("{local}?sslkey=/tmp/c.key")).contains("without sslcert"));
        let disabled = refused(&format!(
            "{local}?sslmode=disable&sslcert=/tmp/c.pem&sslkey=/tmp/c.key"
        ));
        assert!(
            disabled.contains("sends no client certificate"),
            "{disabled}"
        );
        // With no sslmode, a client certificate asks for TLS (verify-full) even to this
        // machine: its files are read, and these are not there.
        let missing = refused(&format!(
            "{local}?sslcert=/nonexistent/c.pem&sslkey=/nonexistent/c.key"
        ));
        assert!(missing.contains("sslcert=/nonexistent/c.pem"), "{missing}");
    }
}
