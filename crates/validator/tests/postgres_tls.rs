//! The registry's TLS to PostgreSQL (`--database postgres://…?sslmode=…`), against a real
//! server that takes TLS only (`POG_POSTGRES_TLS=1 scripts/postgres.sh start`: a throwaway CA,
//! a certificate for `localhost` alone, `hostssl` only), against one that also requires a
//! client certificate its CA signed (`POG_POSTGRES_CLIENT_CERT=1`: `hostssl … cert`), and
//! against a man in the middle that answers the client's TLS request with "no TLS here".

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
        TlsCluster::start_with("POG_POSTGRES_TLS")
    }

    /// Starts one that takes only clients presenting a certificate its CA signed for their
    /// user ([`TlsCluster::client_certificate`] is one, for `pog`).
    fn start_requiring_client_certificates() -> Option<TlsCluster> {
        TlsCluster::start_with("POG_POSTGRES_CLIENT_CERT")
    }

    /// Starts one with `scripts/postgres.sh`'s switch `switch` on.
    fn start_with(switch: &str) -> Option<TlsCluster> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(postgres_script())
            .args(["start", dir.path().to_str().unwrap()])
            .env(switch, "1")
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

    /// The client certificate and key the script made for the user `pog` (PEM files).
    fn client_certificate(&self) -> (String, String) {
        let file = |name: &str| self.dir.path().join("tls").join(name).display().to_string();
        (file("client.crt"), file("client.key"))
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

/// Runs openssl with `args`, which must succeed.
fn openssl(args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl {args:?}");
}

/// A CA that signed nothing of the server's, made with openssl in `dir` (its key beside it,
/// `other.key`).
fn another_ca(dir: &Path) -> String {
    let (key, cert) = (dir.join("other.key"), dir.join("other.crt"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=another CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
    ]);
    cert.display().to_string()
}

/// A client certificate for the user `pog` signed by [`another_ca`] in `dir`, and its key
/// (mode 0600): the right name, the wrong CA.
fn client_of_another_ca(dir: &Path) -> (String, String) {
    let ca = another_ca(dir);
    let file = |name: &str| dir.join(name).display().to_string();
    let (key, csr, cert, ext) = (
        file("client.key"),
        file("client.csr"),
        file("client.crt"),
        file("client.ext"),
    );
    std::fs::write(
        &ext,
        "basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=pog",
        "-keyout",
        &key,
        "-out",
        &csr,
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca,
        "-CAkey",
        &file("other.key"),
        "-set_serial",
        "7",
        "-days",
        "2",
        "-extfile",
        &ext,
        "-out",
        &cert,
    ]);
    set_mode(&key, 0o600);
    (cert, key)
}

/// Sets `file`'s permission bits to `mode`.
fn set_mode(file: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).unwrap();
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

/// A server that requires a client certificate its CA signed (`hostssl … cert`) takes the
/// registry's connection with the one `sslcert` and `sslkey` name, and refuses it without one
/// (its own words, and what to add) and with one another CA signed for the same user (the
/// server's TLS alert, said as the client certificate refused).
#[test]
fn a_server_requiring_client_certificates_takes_its_cas_and_refuses_none_or_another_cas() {
    let Some(cluster) = TlsCluster::start_requiring_client_certificates() else {
        return;
    };
    let ca = cluster.ca();
    let with = |(cert, key): &(String, String)| {
        cluster.url(
            "localhost",
            &format!("?sslmode=verify-full&sslrootcert={ca}&sslcert={cert}&sslkey={key}"),
        )
    };
    let registry = Registry::connect(&with(&cluster.client_certificate())).unwrap();
    assert!(registry.is_postgres());

    let none = refused(&cluster.url(
        "localhost",
        &format!("?sslmode=verify-full&sslrootcert={ca}"),
    ));
    assert!(
        none.contains("connection requires a valid client certificate") && none.contains("sslcert"),
        "{none}"
    );

    let other = tempfile::tempdir().unwrap();
    let foreign = refused(&with(&client_of_another_ca(other.path())));
    eprintln!("without a client certificate: {none}\nwith another CA's: {foreign}");
    assert!(
        foreign.contains("UnknownCA") && foreign.contains("refused the client certificate"),
        "{foreign}"
    );
}

/// `sslcert` and `sslkey` are read before any connection: a key file that is missing, not a
/// key, open to others than its owner (as libpq judges it), or not the certificate's, is
/// refused with the file named and what to do.
#[test]
fn a_client_key_missing_unreadable_open_to_others_or_not_the_certificates_is_refused() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (cert, key) = client_of_another_ca(one.path());
    let (_, other_key) = client_of_another_ca(two.path());
    // Nothing listens on port 1: a URL that gets past its files fails to connect instead.
    let url = |cert: &str, key: &str| {
        format!(
            "postgres://pog@localhost:1/postgres?sslmode=verify-full&sslcert={cert}&sslkey={key}"
        )
    };
    let missing = refused(&url(&cert, "/nonexistent/client.key"));
    assert!(
        missing.contains("sslkey=/nonexistent/client.key") && missing.contains("No such file"),
        "{missing}"
    );
    let cert_as_key = one.path().join("cert-as-key.pem").display().to_string();
    std::fs::copy(&cert, &cert_as_key).unwrap();
    set_mode(&cert_as_key, 0o600);
    let not_a_key = refused(&url(&cert, &cert_as_key));
    assert!(
        not_a_key.contains(&format!("sslkey={cert_as_key}")) && not_a_key.contains("private key"),
        "{not_a_key}"
    );
    let not_a_cert = refused(&url(&key, &key));
    assert!(
        not_a_cert.contains(&format!("sslcert={key}"))
            && not_a_cert.contains("holds no certificate"),
        "{not_a_cert}"
    );
    let mismatched = refused(&url(&cert, &other_key));
    assert!(
        mismatched.contains("the key is not the certificate's"),
        "{mismatched}"
    );
    set_mode(&key, 0o644);
    let open = refused(&url(&cert, &key));
    assert!(
        open.contains("others than its owner may read") && open.contains("chmod 0600"),
        "{open}"
    );
    // Group-readable: refused unless root owns it (libpq's rule, for keys shared with a
    // group, as a Kubernetes Secret mounted under fsGroup).
    set_mode(&key, 0o640);
    let group = refused(&url(&cert, &key));
    let root_owns = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&key).unwrap()) == 0;
    assert_eq!(
        group.contains("others than its owner may read"),
        !root_owns,
        "{group}"
    );
    set_mode(&key, 0o600);
    let taken = refused(&url(&cert, &key));
    assert!(
        !taken.contains("sslkey") && !taken.contains("sslcert"),
        "{taken}"
    );
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
