//! How the registry reaches its PostgreSQL server: in the clear, or over TLS, as the
//! `--database` URL's `sslmode` and `sslrootcert` say (libpq's names, read here because the
//! driver knows only `disable`, `prefer` and `require`, and verifies nothing itself).
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

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
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
    /// `sslmode=verify-full` or `require`, or a `sslrootcert` alone.
    VerifyFull,
}

/// The driver's settings for `url` and how to reach its server, or why the URL is refused.
pub(crate) fn parse(url: &str) -> Result<(tokio_postgres::Config, Transport), RegistryError> {
    let (rest, sslmode, rootcert) = split_tls_options(url);
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| {
        RegistryError::DatabaseUrl(format!(
            "it is not a PostgreSQL URL ({e}); write it as postgres://user:password@host:port/database"
        ))
    })?;
    let mode = match (sslmode.as_deref(), &rootcert) {
        (None, None) => Mode::Unsaid,
        (None, Some(_)) | (Some("require" | "verify-full"), _) => Mode::VerifyFull,
        (Some("verify-ca"), _) => Mode::VerifyCa,
        (Some("disable"), _) => Mode::Disable,
        (Some(weak @ ("prefer" | "allow")), _) => {
            return Err(RegistryError::DatabaseUrl(format!(
                "sslmode={weak} falls back to the clear when the server, or anyone on the path, \
                 says it has no TLS; write sslmode=verify-full (with sslrootcert=CA-FILE for a \
                 private CA), or sslmode=disable on a network you trust"
            )))
        }
        (Some(other), _) => {
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
            let roots = roots(rootcert.as_deref())?;
            Transport::Tls(MakeRustlsConnect::new(client_config(
                roots,
                mode == Mode::VerifyFull,
            )?))
        }
    };
    config.ssl_mode(match transport {
        Transport::Plain => SslMode::Disable,
        Transport::Tls(_) => SslMode::Require,
    });
    Ok((config, transport))
}

/// `url` without its `sslmode` and `sslrootcert`, and their values (percent-decoded in a URL),
/// in either of the driver's forms: `postgres://…?key=value&…` or `key=value key=value`.
fn split_tls_options(url: &str) -> (String, Option<String>, Option<String>) {
    let (mut sslmode, mut rootcert) = (None, None);
    let mut take = |pair: &str, decode: bool| -> bool {
        let Some((key, value)) = pair.split_once('=') else {
            return false;
        };
        let value = if decode {
            percent_decoded(value)
        } else {
            value.trim_matches('\'').to_owned()
        };
        match key {
            "sslmode" => sslmode = Some(value),
            "sslrootcert" => rootcert = Some(value),
            _ => return false,
        }
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
    (rest, sslmode, rootcert)
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

/// rustls with ring, checking the server's chain against `roots`, and its name too where
/// `check_name`.
fn client_config(
    roots: Arc<RootCertStore>,
    check_name: bool,
) -> Result<ClientConfig, RegistryError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let failed = |e: rustls::Error| RegistryError::DatabaseUrl(format!("setting up TLS: {e}"));
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(failed)?;
    Ok(match check_name {
        true => builder.with_root_certificates(roots),
        false => {
            let chain = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| RegistryError::DatabaseUrl(format!("setting up TLS: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(chain)))
        }
    }
    .with_no_client_auth())
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
                "postgres://u:p@h/db?sslmode=verify-ca&connect_timeout=5&sslrootcert=%2Ftmp%2Fa%20b.pem"
            ),
            (
                "postgres://u:p@h/db?connect_timeout=5".to_owned(),
                Some("verify-ca".to_owned()),
                Some("/tmp/a b.pem".to_owned())
            )
        );
        assert_eq!(
            split_tls_options("host=h sslrootcert='/tmp/ca.pem' user=u"),
            (
                "host=h user=u".to_owned(),
                None,
                Some("/tmp/ca.pem".to_owned())
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
}
