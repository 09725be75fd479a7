//! TLS: certificates made at run time (rcgen); redis-cli --tls and a rustls client against the
//! TLS port; wrong CA, plain text on the TLS port, mutual TLS (tls-auth-clients yes/optional/no).

use crate::common;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName},
    ClientConfig, RootCertStore,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

struct Pki {
    dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1/localhost and a client certificate signed by
    /// it; a second, unrelated CA with its own client certificate.
    fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("deadbolt-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, data: String| std::fs::write(dir.join(name), data).unwrap();
        for (prefix, cn) in [("", "deadbolt test CA"), ("wrong-", "some other CA")] {
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, cn);
            let ca_key = KeyPair::generate().unwrap();
            let ca_cert = ca.self_signed(&ca_key).unwrap();
            write(&format!("{prefix}ca.pem"), ca_cert.pem());
            let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, file: &str| {
                let mut p = CertificateParams::new(names).unwrap();
                p.extended_key_usages = vec![usage];
                p.distinguished_name.push(DnType::CommonName, file);
                let key = KeyPair::generate().unwrap();
                let cert = p.signed_by(&key, &ca_cert, &ca_key).unwrap();
                write(&format!("{prefix}{file}.pem"), cert.pem());
                write(&format!("{prefix}{file}.key"), key.serialize_pem());
            };
            leaf(
                vec!["localhost".into(), "127.0.0.1".into()],
                ExtendedKeyUsagePurpose::ServerAuth,
                "server",
            );
            leaf(
                vec!["client".into()],
                ExtendedKeyUsagePurpose::ClientAuth,
                "client",
            );
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// deadbolt with TLS on a free port; returns (server, tls port).
    fn server(&self, auth_clients: &str, extra: &[&str]) -> (common::Server, u16) {
        let port = common::free_port();
        let (p, cert, key, ca) = (
            port.to_string(),
            self.path("server.pem"),
            self.path("server.key"),
            self.path("ca.pem"),
        );
        let mut args = vec![
            "--tls-port",
            &p,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            auth_clients,
        ];
        args.extend_from_slice(extra);
        let s = common::deadbolt(&args);
        s.wait_log(
            &format!("Listening for TLS on 127.0.0.1:{port}"),
            Duration::from_secs(5),
        );
        (s, port)
    }
}

fn redis_cli(port: u16, tls_args: &[String], cmd: &[&str]) -> (bool, String, String) {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--tls"])
        .args(tls_args)
        .args(cmd)
        .output()
        .expect("redis-cli");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn client_config(ca: &Path, client: Option<(&Path, &Path)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match client {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap())
                .unwrap()
        }
    })
}

/// A rustls session to the TLS port that sends PING; the reply, or the error that ended it.
fn rustls_ping(port: u16, cfg: Arc<ClientConfig>) -> Result<Vec<u8>, String> {
    let conn = rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap())
        .map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(b"*1\r\n$4\r\nPING\r\n")
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(b"\r\n") {
        match tls.read(&mut buf) {
            Ok(0) => return Err(format!("closed after {got:?}")),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(got)
}

#[test]
fn redis_cli_over_tls_with_a_password() {
    let pki = Pki::new("cli");
    let (s, port) = pki.server("no", &["--requirepass", "s3cret"]);
    let ca = vec!["--cacert".to_string(), pki.path("ca.pem")];
    let (ok, out, err) = redis_cli(port, &ca, &["--no-auth-warning", "-a", "s3cret", "PING"]);
    assert!(ok, "{err}");
    assert_eq!(out, "PONG\n");
    let (_, out, _) = redis_cli(
        port,
        &ca,
        &[
            "--no-auth-warning",
            "-a",
            "s3cret",
            "SET",
            "lock",
            "owner",
            "NX",
            "PX",
            "5000",
        ],
    );
    assert_eq!(out, "OK\n");
    let (_, out, _) = redis_cli(port, &ca, &["PING"]);
    assert_eq!(out.trim_end(), "NOAUTH Authentication required.");
    // The same data on the plain port: one server behind both.
    let mut c = s.conn();
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "lock"]), b"$5\r\nowner\r\n");
    // And a rustls client, with exact reply bytes.
    let cfg = client_config(&pki.dir.join("ca.pem"), None);
    assert_eq!(
        rustls_ping(port, cfg).unwrap(),
        b"-NOAUTH Authentication required.\r\n"
    );
}

#[test]
fn a_client_trusting_another_ca_fails_the_handshake() {
    let pki = Pki::new("wrongca");
    let (s, port) = pki.server("no", &[]);
    let (ok, out, err) = redis_cli(
        port,
        &["--cacert".into(), pki.path("wrong-ca.pem")],
        &["PING"],
    );
    assert!(!out.contains("PONG"), "{out}");
    assert!(
        !ok || err.contains("certificate verify failed")
            || out.contains("certificate verify failed"),
        "ok={ok} out={out} err={err}"
    );
    let e = rustls_ping(port, client_config(&pki.dir.join("wrong-ca.pem"), None)).unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    // The server is unharmed.
    assert_eq!(
        rustls_ping(port, client_config(&pki.dir.join("ca.pem"), None)).unwrap(),
        b"+PONG\r\n"
    );
    assert_eq!(s.conn().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn plain_text_on_the_tls_port_is_refused() {
    let pki = Pki::new("plain");
    let (s, port) = pki.server("no", &[]);
    for attempt in [
        &b"*1\r\n$4\r\nPING\r\n"[..],
        b"PING\r\n",
        b"\x16\x03\x01\xff\xff garbage that claims to be a huge TLS record",
    ] {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        sock.write_all(attempt).unwrap();
        let mut got = Vec::new();
        // The server ends the connection (possibly after a TLS alert); never a RESP reply.
        let _ = sock.read_to_end(&mut got);
        assert!(
            !got.windows(5).any(|w| w == b"+PONG") && !got.starts_with(b"-"),
            "{got:?}"
        );
    }
    // A client that connects and says nothing does not block others.
    let _idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        rustls_ping(port, client_config(&pki.dir.join("ca.pem"), None)).unwrap(),
        b"+PONG\r\n"
    );
    assert_eq!(s.conn().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn mutual_tls() {
    let pki = Pki::new("mtls");
    let ca = pki.dir.join("ca.pem");
    let (cert, key) = (pki.dir.join("client.pem"), pki.dir.join("client.key"));
    let (wcert, wkey) = (
        pki.dir.join("wrong-client.pem"),
        pki.dir.join("wrong-client.key"),
    );

    let (_s, port) = pki.server("yes", &[]);
    assert_eq!(
        rustls_ping(port, client_config(&ca, Some((&cert, &key)))).unwrap(),
        b"+PONG\r\n"
    );
    let e = rustls_ping(port, client_config(&ca, None)).unwrap_err();
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    let e = rustls_ping(port, client_config(&ca, Some((&wcert, &wkey)))).unwrap_err();
    assert!(e.contains("UnknownCA"), "{e}");
    let with_cert = [
        "--cacert".to_string(),
        pki.path("ca.pem"),
        "--cert".into(),
        pki.path("client.pem"),
        "--key".into(),
        pki.path("client.key"),
    ];
    let (ok, out, err) = redis_cli(port, &with_cert, &["PING"]);
    assert!(ok && out == "PONG\n", "out={out} err={err}");
    let (_, out, _) = redis_cli(port, &with_cert[..2], &["PING"]);
    assert!(!out.contains("PONG"), "{out}");

    // optional: no certificate is fine, a bad one is not.
    let (_s, port) = pki.server("optional", &[]);
    assert_eq!(
        rustls_ping(port, client_config(&ca, None)).unwrap(),
        b"+PONG\r\n"
    );
    assert_eq!(
        rustls_ping(port, client_config(&ca, Some((&cert, &key)))).unwrap(),
        b"+PONG\r\n"
    );
    assert!(rustls_ping(port, client_config(&ca, Some((&wcert, &wkey)))).is_err());
}

#[test]
fn bad_tls_settings_stop_the_start_with_a_reason() {
    let pki = Pki::new("bad");
    let run = |args: &[&str]| {
        let out = Command::new(common::deadbolt_bin())
            .args([
                "--port",
                "0",
                "--tls-port",
                &common::free_port().to_string(),
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        // Said once, in the log (standard output here), as Redis does.
        common::all_output(&out)
    };
    let err = run(&[]);
    assert!(
        err.contains("tls-port needs tls-cert-file and tls-key-file"),
        "{err}"
    );
    let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
    let err = run(&["--tls-cert-file", &cert, "--tls-key-file", &key]);
    assert!(
        err.contains("tls-auth-clients yes needs tls-ca-cert-file"),
        "{err}"
    );
    let err = run(&[
        "--tls-cert-file",
        &key,
        "--tls-key-file",
        &key,
        "--tls-auth-clients",
        "no",
    ]);
    assert!(err.contains("Failed to load certificate"), "{err}");
    let err = run(&["--tls-auth-clients", "maybe"]);
    assert!(
        err.contains("argument(s) must be one of the following: no, yes, optional"),
        "{err}"
    );
}

/// redis-py with `ssl=True` and a password. Runs the Python named by `DEADBOLT_TEST_PYTHON`
/// (default `python3`), which must import `redis` (Debian's python3-redis; scripts/test installs
/// it): a machine without it fails here rather than passing untested.
#[test]
fn redis_py_over_tls_with_a_password() {
    let python = std::env::var("DEADBOLT_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python).args(["-c", "import redis"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "{python} cannot import redis (apt-get install python3-redis, or point \
         DEADBOLT_TEST_PYTHON at a python that has it): {probe:?}"
    );
    let pki = Pki::new("py");
    let (_s, port) = pki.server("optional", &["--requirepass", "s3cret"]);
    let script = format!(
        r#"
import redis
r = redis.Redis(host="127.0.0.1", port={port}, password="s3cret", ssl=True,
                ssl_ca_certs="{ca}", ssl_certfile="{cert}", ssl_keyfile="{key}")
assert r.ping() is True
assert r.set("lock", "token", nx=True, px=10000) is True
assert r.set("lock", "other", nx=True, px=10000) is None
assert r.get("lock") == b"token"
print("ok")
"#,
        ca = pki.path("ca.pem"),
        cert = pki.path("client.pem"),
        key = pki.path("client.key"),
    );
    let out = Command::new(&python)
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout == b"ok\n",
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Large replies through TLS: 1 MiB values and small replies pipelined before a byte is read
/// arrive whole and in order (the session takes the output chain piece by piece).
#[test]
fn large_pipelined_replies_over_tls() {
    let pki = Pki::new("large");
    let (_s, port) = pki.server("no", &[]);
    let cfg = client_config(Path::new(&pki.path("ca.pem")), None);
    let mut c = common::Conn::connect_tls(port, cfg);
    let value: Vec<u8> = (0..(1usize << 20) + 5)
        .map(|i| b'a' + (i / 11 % 26) as u8)
        .collect();
    assert_eq!(c.cmd(&[b"SET".as_slice(), b"big", &value]), b"+OK\r\n");
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..8 {
        req.extend_from_slice(&common::resp_cmd(&["GET", "big"]));
        want.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
        want.extend_from_slice(&value);
        want.extend_from_slice(b"\r\n");
        let small = i.to_string().repeat(i * 300);
        req.extend_from_slice(&common::resp_cmd(&["ECHO", &small]));
        want.extend_from_slice(format!("${}\r\n{small}\r\n", small.len()).as_bytes());
    }
    c.send_raw(&req);
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend_from_slice(&c.read_reply());
    }
    assert!(got == want, "replies out of order or damaged");
}
