//! The registry's TLS to PostgreSQL (`--database postgres://…?sslmode=…`), against a real
//! server that takes TLS only (`POG_POSTGRES_TLS=1 scripts/postgres.sh start`: a throwaway CA,
//! a certificate for `localhost` alone, `hostssl` only), and against a man in the middle that
//! answers the client's TLS request with "no TLS here".

use pog_validator::registry::Registry;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `scripts/postgres.sh`.
fn postgres_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

/// A TLS-only cluster of the test's own, stopped and removed when dropped.
struct TlsCluster {
    dir: tempfile::TempDir,
    port: String,
}

impl TlsCluster {
    /// Starts one; `None` where PostgreSQL cannot run here and it is not required.
    fn start() -> Option<TlsCluster> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(postgres_script())
            .args(["start", dir.path().to_str().unwrap()])
            .env("POG_POSTGRES_TLS", "1")
            .output()
            .unwrap();
        if !out.status.success() {
            let required = ["POG_REQUIRE_POSTGRES", "CI"]
                .iter()
                .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty()));
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(!required, "PostgreSQL did not start with TLS: {why}");
            eprintln!("skipped: PostgreSQL did not start with TLS here: {why}");
            return None;
        }
        let port = std::fs::read_to_string(dir.path().join("port")).unwrap();
        let port = port.trim().to_owned();
        Some(TlsCluster { dir, port })
    }

    /// Its CA certificate (PEM).
    fn ca(&self) -> String {
        self.dir.path().join("tls/ca.crt").display().to_string()
    }

    /// The URL of its `postgres` database at `host`, with `query`.
    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://pog@{host}:{}/postgres{query}", self.port)
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(postgres_script())
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

/// A CA that signed nothing of the server's, made with openssl in `dir`.
fn another_ca(dir: &Path) -> String {
    let (key, cert) = (dir.join("other.key"), dir.join("other.crt"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=another CA"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl made no CA");
    cert.display().to_string()
}

/// Why connecting to `url` failed (it must fail).
fn refused(url: &str) -> String {
    match Registry::connect(url) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{url} connected"),
    }
}

/// verify-full connects to the right server under the right CA, over TLS (the server turns
/// clients in the clear away); a wrong CA, or a name the certificate does not hold, is
/// refused; verify-ca checks the chain and not the name; `require` checks both, as
/// verify-full.
#[test]
fn verify_full_connects_with_the_right_ca_and_refuses_a_wrong_ca_or_host_name() {
    let Some(cluster) = TlsCluster::start() else {
        return;
    };
    let ca = cluster.ca();
    let full = format!("?sslmode=verify-full&sslrootcert={ca}");
    let registry = Registry::connect(&cluster.url("localhost", &full)).unwrap();
    assert!(registry.is_postgres());
    // A CA file alone asks for verify-full.
    Registry::connect(&cluster.url("localhost", &format!("?sslrootcert={ca}"))).unwrap();
    Registry::connect(&cluster.url("localhost", &format!("?sslmode=require&sslrootcert={ca}")))
        .unwrap();
    // In the clear, this server turns the client away: the connections above were TLS.
    let plain = refused(&cluster.url("127.0.0.1", ""));
    assert!(plain.contains("no encryption"), "{plain}");

    let other = tempfile::tempdir().unwrap();
    let wrong_ca = refused(&cluster.url(
        "localhost",
        &format!(
            "?sslmode=verify-full&sslrootcert={}",
            another_ca(other.path())
        ),
    ));
    assert!(wrong_ca.contains("UnknownIssuer"), "{wrong_ca}");
    // The certificate names localhost, not 127.0.0.1.
    for mode in ["verify-full", "require"] {
        let wrong_name =
            refused(&cluster.url("127.0.0.1", &format!("?sslmode={mode}&sslrootcert={ca}")));
        assert!(
            wrong_name.contains("not valid for name"),
            "{mode}: {wrong_name}"
        );
    }
    Registry::connect(&cluster.url("127.0.0.1", &format!("?sslmode=verify-ca&sslrootcert={ca}")))
        .unwrap();
    let wrong_ca_chain = refused(&cluster.url(
        "127.0.0.1",
        &format!(
            "?sslmode=verify-ca&sslrootcert={}",
            another_ca(other.path())
        ),
    ));
    assert!(wrong_ca_chain.contains("UnknownIssuer"), "{wrong_ca_chain}");
}

/// A man in the middle answering the client's TLS request with "no TLS here" ('N', as a
/// server without ssl does) is refused under sslmode=require, and never sees the client's
/// startup message (its user and database) in the clear.
#[test]
fn require_refuses_a_server_that_says_it_has_no_tls() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let downgrader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut ssl_request = [0u8; 8];
        stream.read_exact(&mut ssl_request).unwrap();
        // Length 8, code 80877103: the client asks for TLS first.
        assert_eq!(ssl_request, [0, 0, 0, 8, 4, 210, 22, 47]);
        stream.write_all(b"N").unwrap();
        // What the client sends next, if anything, within two seconds (then it is cut off).
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut after = vec![0u8; 1024];
        let n = stream.read(&mut after).unwrap_or(0);
        after.truncate(n);
        after
    });
    let url = format!("postgres://pog@localhost:{port}/postgres?sslmode=require");
    let why = refused(&url);
    assert!(why.contains("TLS"), "{why}");
    let sent_in_the_clear = downgrader.join().unwrap();
    assert!(
        sent_in_the_clear.is_empty(),
        "the client went on in the clear: {sent_in_the_clear:?}"
    );
}
