//! End to end, TLS and authentication: a real `bookie serve --conf` with the `tls*` keys and
//! `bookieAuthProviderFactoryClass`, and a client that does what Java's PerChannelBookieClient
//! does (a v3 START_TLS in plaintext, then a TLS handshake on the same socket, then v3 or v2
//! frames over TLS). Certificates are made at test time with rcgen (a CA, the bookie's, clients'
//! with roles in their OU), written as PEM and as PKCS12 into the test's temp dir.
//!
//! Covered: the handshake and traffic over TLS on both protocols, PEM and PKCS12 key stores,
//! client certificates required, Java's answers to unauthenticated requests (EUA, close), a
//! wrong role (EIO on START_TLS, then EUA), no certificate and a foreign CA (handshake
//! refused), renewed certificate files picked up by new connections, and bad key material
//! stopping the start with an error naming the key.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::{codec, Request, RequestFrame, RequestHeader, Response, ResponseFrame, StatusCode};

const KEY: [u8; 20] = [3; 20];

/// A certificate authority made for one test.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(params, key),
            cert: cert.der().clone(),
            pem: cert.pem(),
        }
    }

    /// A leaf certificate for `cn` (and `ou`, if any), valid for localhost and 127.0.0.1.
    fn issue(&self, cn: &str, ou: Option<&str>) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(ou) = ou {
            params
                .distinguished_name
                .push(DnType::OrganizationalUnitName, ou);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.der().clone(),
            pem: cert.pem(),
            key,
        }
    }
}

struct Leaf {
    cert: CertificateDer<'static>,
    pem: String,
    key: KeyPair,
}

impl Leaf {
    fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }

    /// A PKCS12 store holding this key and certificate, as keytool or openssl would write it.
    fn pkcs12(&self, ca: &Ca, password: &str) -> Vec<u8> {
        let chain = p12_keystore::PrivateKeyChain::new(
            b"bookie-key".to_vec(),
            p12_keystore::PrivateKey::from_der(&self.key.serialize_der()).unwrap(),
            vec![
                p12_keystore::Certificate::from_der(&self.cert).unwrap(),
                p12_keystore::Certificate::from_der(&ca.cert).unwrap(),
            ],
        );
        let mut store = p12_keystore::KeyStore::new();
        store.add_entry(
            "bookie",
            p12_keystore::KeyStoreEntry::PrivateKeyChain(chain),
        );
        store.writer(password).write().unwrap()
    }
}

/// A temp dir with the files of a TLS bookie.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: common::tempdir("bookie-tls-"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// A conf file: the bookie port, directories here, and `keys`.
    fn conf(&self, port: u16, keys: &[(&str, String)]) -> PathBuf {
        let mut text = format!(
            "bookiePort={port}\nlisteningInterface=lo\njournalDirectories={}\nledgerDirectories={}\n",
            self.path("journal").display(),
            self.path("ledgers").display()
        );
        for (k, v) in keys {
            text.push_str(&format!("{k}={v}\n"));
        }
        self.write("bk_server.conf", text)
    }
}

fn start(files: &Files, keys: &[(&str, String)]) -> BookieProcess {
    let port = free_port();
    let conf = files.conf(port, keys);
    BookieBuilder::serve_conf(&conf, port)
        .args(["--shards", "1", "--no-pin", "--write-cache-mb", "16"])
        .log_to(&files.path("bookie.log"))
        .start()
}

/// The bookie's key as PEM files and the TLS keys naming them.
fn pem_keys(files: &Files, ca: &Ca, leaf: &Leaf) -> Vec<(&'static str, String)> {
    let cert = files.write("bookie.crt", leaf_pem(leaf, ca));
    let key = files.write("bookie.key", leaf.key.serialize_pem());
    vec![
        (
            "tlsProviderFactoryClass",
            "org.apache.bookkeeper.tls.TLSContextFactory".into(),
        ),
        ("tlsProvider", "JDK".into()),
        ("tlsKeyStoreType", "PEM".into()),
        ("tlsKeyStore", key.display().to_string()),
        ("tlsCertificatePath", cert.display().to_string()),
    ]
}

/// The bookie's chain as a PEM file holds it: its certificate, then the CA's.
fn leaf_pem(leaf: &Leaf, ca: &Ca) -> String {
    format!("{}{}", leaf.pem, ca.pem)
}

/// One connection speaking frames, plain or TLS.
struct Wire<S: Read + Write> {
    s: S,
}

impl<S: Read + Write> Wire<S> {
    fn send(&mut self, header: RequestHeader, request: Request) -> io::Result<()> {
        let mut out = BytesMut::new();
        codec::encode_request(&RequestFrame { header, request }, &mut out)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        self.s.write_all(&out)?;
        self.s.flush()
    }

    fn recv(&mut self) -> io::Result<ResponseFrame> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len)?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.s.read_exact(&mut body)?;
        codec::decode_response(&Bytes::from(body)).map_err(|e| io::Error::other(format!("{e:?}")))
    }

    fn call(&mut self, header: RequestHeader, request: Request) -> io::Result<Response> {
        self.send(header, request)?;
        Ok(self.recv()?.response)
    }
}

fn plain(port: u16) -> Wire<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Wire { s }
}

type TlsWire = Wire<StreamOwned<ClientConnection, TcpStream>>;

/// What a client's TLS side trusts and presents.
fn client_config(ca: &Ca, identity: Option<&Leaf>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert.clone()).unwrap();
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let config = match identity {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.cert.clone()], leaf.key_der())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Java's client: START_TLS (v3, even for a v2 client), its reply in plaintext, then the
/// handshake on the same socket. Err: the reply was not EOK, or the handshake failed.
fn start_tls(port: u16, config: Arc<ClientConfig>) -> io::Result<TlsWire> {
    let mut w = plain(port);
    match w.call(RequestHeader::v3(1), Request::StartTls)? {
        Response::StartTls {
            status: StatusCode::EOK,
        } => {}
        other => return Err(io::Error::other(format!("START_TLS answered {other:?}"))),
    }
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut sock = w.s;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    // TLS 1.3: the server's verdict on the client's certificate arrives after the client's
    // last flight; a read (with a short timeout) surfaces a refusal here.
    Ok(Wire {
        s: StreamOwned::new(conn, sock),
    })
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from_static(&KEY),
        body: entry(ledger, e, e - 1, b"over tls"),
        recovery: false,
        write_flags: None,
    }
}

/// Adds and reads entry 0 of `ledger` on v3 and entry 1 on v2: all EOK, the body back.
fn add_and_read<S: Read + Write>(w: &mut Wire<S>, ledger: i64) {
    assert_eq!(
        w.call(RequestHeader::v3(2), add(ledger, 0))
            .unwrap()
            .status(),
        StatusCode::EOK
    );
    match w.call(RequestHeader::v3(3), read(ledger, 0)).unwrap() {
        Response::ReadEntry { status, body, .. } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(body.unwrap(), entry(ledger, 0, -1, b"over tls"));
        }
        other => panic!("read answered {other:?}"),
    }
    assert_eq!(
        w.call(RequestHeader::v2(), add(ledger, 1))
            .unwrap()
            .status(),
        StatusCode::EOK
    );
    assert_eq!(
        w.call(RequestHeader::v2(), read(ledger, 1))
            .unwrap()
            .status(),
        StatusCode::EOK
    );
}

fn assert_closed<S: Read + Write>(w: &mut Wire<S>) {
    match w.recv() {
        Err(e) => assert!(
            e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::TimedOut,
            "expected the connection closed, got a timeout: {e}"
        ),
        Ok(frame) => panic!("expected the connection closed, got {frame:?}"),
    }
}

fn no_panic(b: &BookieProcess) {
    let log = b.log_text();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn start_tls_upgrades_the_connection_for_v3_and_v2() {
    let files = Files::new();
    let ca = Ca::new("test-ca");
    let leaf = ca.issue("bookie", None);
    let mut b = start(&files, &pem_keys(&files, &ca, &leaf));
    let config = client_config(&ca, None);
    let mut w = start_tls(b.port(), config.clone()).unwrap();
    add_and_read(&mut w, 11);
    // A second connection, and the first one still works.
    let mut w2 = start_tls(b.port(), config).unwrap();
    add_and_read(&mut w2, 12);
    assert_eq!(
        w.call(RequestHeader::v3(9), read(12, 0)).unwrap().status(),
        StatusCode::EOK
    );
    // Plaintext still works without an auth provider (Java's bookie too).
    let mut p = plain(b.port());
    assert_eq!(
        p.call(RequestHeader::v3(1), read(11, 0)).unwrap().status(),
        StatusCode::EOK
    );
    no_panic(&b);
    b.stop();
}

#[test]
fn start_tls_without_tls_configured_is_ebadreq() {
    let files = Files::new();
    let mut b = start(&files, &[]);
    let mut p = plain(b.port());
    match p.call(RequestHeader::v3(1), Request::StartTls).unwrap() {
        Response::Error { status, .. } => assert_eq!(status, StatusCode::EBADREQ),
        other => panic!("START_TLS answered {other:?}"),
    }
    b.stop();
}

/// A PKCS12 key store, client certificates required, roles checked.
fn roles_bookie(files: &Files, ca: &Ca) -> BookieProcess {
    let leaf = ca.issue("bookie", None);
    let store = files.write("bookie.p12", leaf.pkcs12(ca, "s3cret"));
    let password = files.write("bookie.pass", "s3cret\n");
    let trust = files.write("ca.crt", &ca.pem);
    start(
        files,
        &[
            (
                "tlsProviderFactoryClass",
                "org.apache.bookkeeper.tls.TLSContextFactory".into(),
            ),
            ("tlsKeyStoreType", "PKCS12".into()),
            ("tlsKeyStore", store.display().to_string()),
            ("tlsKeyStorePasswordPath", password.display().to_string()),
            ("tlsTrustStoreType", "PEM".into()),
            ("tlsTrustStore", trust.display().to_string()),
            ("tlsClientAuthentication", "true".into()),
            (
                "bookieAuthProviderFactoryClass",
                "org.apache.bookkeeper.tls.BookieAuthZFactory".into(),
            ),
            ("authorizedRoles", "admin, writer".into()),
        ],
    )
}

#[test]
fn client_certificate_roles_are_checked_as_java_checks_them() {
    let files = Files::new();
    let ca = Ca::new("test-ca");
    let mut b = roles_bookie(&files, &ca);

    // An allowed first role: served on both protocols.
    let admin = ca.issue("client-admin", Some("0:writer,guest;1:cluster-a"));
    let mut w = start_tls(b.port(), client_config(&ca, Some(&admin))).unwrap();
    add_and_read(&mut w, 21);

    // A role not allowed (only the first one counts): START_TLS then EIO, then EUA for
    // everything, nothing served.
    let guest = ca.issue("client-guest", Some("0:guest,admin"));
    let mut w = start_tls(b.port(), client_config(&ca, Some(&guest))).unwrap();
    match w.recv().unwrap().response {
        Response::Error { status, .. } => assert_eq!(status, StatusCode::EIO),
        other => panic!("expected EIO for START_TLS, got {other:?}"),
    }
    assert_eq!(
        w.call(RequestHeader::v3(5), add(22, 0)).unwrap().status(),
        StatusCode::EUA
    );
    assert_eq!(
        w.call(RequestHeader::v3(6), read(21, 0)).unwrap().status(),
        StatusCode::EUA
    );
    assert_eq!(
        w.call(RequestHeader::v2(), add(22, 0)).unwrap().status(),
        StatusCode::EUA
    );

    // No role at all in the certificate: refused the same way.
    let nobody = ca.issue("client-nobody", None);
    let mut w = start_tls(b.port(), client_config(&ca, Some(&nobody))).unwrap();
    assert_eq!(w.recv().unwrap().response.status(), StatusCode::EIO);
    assert_eq!(
        w.call(RequestHeader::v2(), read(21, 0)).unwrap().status(),
        StatusCode::EUA
    );

    // No certificate, or one from another CA: the handshake is refused and the connection
    // closed (the client sees it on its first read at the latest).
    for config in [
        client_config(&ca, None),
        client_config(
            &ca,
            Some(&Ca::new("other-ca").issue("intruder", Some("0:admin"))),
        ),
    ] {
        match start_tls(b.port(), config) {
            Err(_) => {}
            Ok(mut w) => {
                let _ = w.send(RequestHeader::v3(7), read(21, 0));
                assert_closed(&mut w);
            }
        }
    }

    // Plaintext, no START_TLS: v3 gets EUA (AUTH of another plugin too), v2 reads get EUA,
    // other v2 requests close the connection.
    let mut p = plain(b.port());
    assert_eq!(
        p.call(RequestHeader::v3(1), add(23, 0)).unwrap().status(),
        StatusCode::EUA
    );
    let auth = Request::Auth(net::AuthMessage::auth_disabled());
    assert_eq!(
        p.call(RequestHeader::v3(2), auth.clone()).unwrap().status(),
        StatusCode::EUA
    );
    assert_eq!(
        p.call(RequestHeader::v2(), read(21, 0)).unwrap().status(),
        StatusCode::EUA
    );
    p.send(RequestHeader::v2(), auth).unwrap();
    assert_closed(&mut p);

    // Nothing the refused clients sent was stored.
    let mut w = start_tls(b.port(), client_config(&ca, Some(&admin))).unwrap();
    for ledger in [22, 23] {
        assert_eq!(
            w.call(RequestHeader::v3(8), read(ledger, 0))
                .unwrap()
                .status(),
            StatusCode::ENOLEDGER
        );
    }
    no_panic(&b);
    b.stop();
}

#[test]
fn renewed_certificate_files_are_used_by_new_connections() {
    let files = Files::new();
    let ca = Ca::new("test-ca");
    let first = ca.issue("bookie-first", None);
    let mut keys = pem_keys(&files, &ca, &first);
    keys.push(("tlsCertFilesRefreshDurationSeconds", "1".into()));
    let mut b = start(&files, &keys);
    let config = client_config(&ca, None);
    let served_cert = |w: &TlsWire| w.s.conn.peer_certificates().unwrap()[0].clone();
    let mut old = start_tls(b.port(), config.clone()).unwrap();
    assert_eq!(
        old.call(RequestHeader::v3(1), add(31, 0)).unwrap().status(),
        StatusCode::EOK
    );
    assert_eq!(served_cert(&old), first.cert);

    // Renew: new files in place (written aside and renamed, as a cert manager does).
    let second = ca.issue("bookie-second", None);
    std::fs::write(files.path("new.crt"), leaf_pem(&second, &ca)).unwrap();
    std::fs::write(files.path("new.key"), second.key.serialize_pem()).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::rename(files.path("new.key"), files.path("bookie.key")).unwrap();
    std::fs::rename(files.path("new.crt"), files.path("bookie.crt")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut w = start_tls(b.port(), config.clone()).unwrap();
        if served_cert(&w) == second.cert {
            assert_eq!(
                w.call(RequestHeader::v3(2), read(31, 0)).unwrap().status(),
                StatusCode::EOK
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was never served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The connection made before the renewal goes on.
    assert_eq!(
        old.call(RequestHeader::v3(3), read(31, 0))
            .unwrap()
            .status(),
        StatusCode::EOK
    );
    // A broken renewal keeps the previous files in use.
    std::fs::write(files.path("bookie.key"), "not a key").unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let mut w = start_tls(b.port(), config).unwrap();
    assert_eq!(served_cert(&w), second.cert);
    assert_eq!(
        w.call(RequestHeader::v3(4), read(31, 0)).unwrap().status(),
        StatusCode::EOK
    );
    no_panic(&b);
    b.stop();
}

/// Starts a bookie that must refuse to start; returns its log.
fn refused(files: &Files, keys: &[(&str, String)]) -> String {
    let port = free_port();
    let conf = files.conf(port, keys);
    let log = files.path("refused.log");
    let mut b = BookieBuilder::serve_conf(&conf, port)
        .args(["--shards", "1", "--no-pin"])
        .log_to(&log)
        .spawn();
    let status = b.exit_within(Duration::from_secs(20));
    assert!(!status.success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("panicked"), "{text}");
    text
}

#[test]
fn bad_key_material_stops_the_start_with_the_key_named() {
    let files = Files::new();
    let ca = Ca::new("test-ca");
    let leaf = ca.issue("bookie", None);
    let base = pem_keys(&files, &ca, &leaf);
    let with = |key: &'static str, value: &str| {
        let mut k: Vec<(&str, String)> = base.iter().filter(|(n, _)| *n != key).cloned().collect();
        k.push((key, value.to_string()));
        k
    };
    let log = refused(&files, &with("tlsKeyStoreType", "PKCS11"));
    assert!(
        log.contains("tlsKeyStoreType") && log.contains("PEM, PKCS12 or JKS"),
        "{log}"
    );
    let log = refused(
        &files,
        &with("tlsCertificatePath", "/nonexistent/bookie.crt"),
    );
    assert!(
        log.contains("tlsCertificatePath") && log.contains("cannot read"),
        "{log}"
    );
    let garbage = files.write("garbage.key", "-----BEGIN NOTHING-----\n");
    let log = refused(&files, &with("tlsKeyStore", &garbage.display().to_string()));
    assert!(log.contains("tlsKeyStore"), "{log}");

    let store = files.write("bookie.p12", leaf.pkcs12(&ca, "right"));
    let wrong = files.write("wrong.pass", "wrong");
    let p12 = |extra: Vec<(&'static str, String)>| {
        let mut k = vec![
            (
                "tlsProviderFactoryClass",
                "org.apache.bookkeeper.tls.TLSContextFactory".to_string(),
            ),
            ("tlsKeyStoreType", "PKCS12".to_string()),
            ("tlsKeyStore", store.display().to_string()),
        ];
        k.extend(extra);
        k
    };
    let log = refused(
        &files,
        &p12(vec![(
            "tlsKeyStorePasswordPath",
            wrong.display().to_string(),
        )]),
    );
    assert!(
        log.contains("tlsKeyStore") && log.contains("password"),
        "{log}"
    );
    let jks = files.write("bookie.jks", [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]);
    let log = refused(
        &files,
        &[
            (
                "tlsProviderFactoryClass",
                "org.apache.bookkeeper.tls.TLSContextFactory".to_string(),
            ),
            ("tlsKeyStore", jks.display().to_string()),
        ],
    );
    assert!(log.contains("keytool -importkeystore"), "{log}");
    let right = files.write("right.pass", "right\n");
    let log = refused(
        &files,
        &p12(vec![
            ("tlsKeyStorePasswordPath", right.display().to_string()),
            ("tlsClientAuthentication", "true".into()),
        ]),
    );
    assert!(log.contains("tlsTrustStore"), "{log}");
    let log = refused(
        &files,
        &[(
            "bookieAuthProviderFactoryClass",
            "org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory".to_string(),
        )],
    );
    assert!(
        log.contains("SASL") && log.contains("not supported"),
        "{log}"
    );
    let log = refused(
        &files,
        &[(
            "bookieAuthProviderFactoryClass",
            "org.apache.bookkeeper.tls.BookieAuthZFactory".to_string(),
        )],
    );
    assert!(log.contains("authorizedRoles"), "{log}");
}

/// An encrypted PKCS#8 key (what `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes, and Netty
/// reads with `tlsKeyStorePasswordPath`) is decrypted with the password file; a wrong password
/// stops the start naming the key.
#[test]
fn an_encrypted_pem_key_is_read_with_its_password() {
    let files = Files::new();
    let ca = Ca::new("test-ca");
    let leaf = ca.issue("bookie", None);
    let mut keys = pem_keys(&files, &ca, &leaf);
    let pass = files.write("key.pass", "k3y-pass\n");
    let encrypted = files.path("bookie.enc.key");
    let out = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in"])
        .arg(files.path("bookie.key"))
        .arg("-out")
        .arg(&encrypted)
        .arg("-passout")
        .arg(format!("file:{}", pass.display()))
        .output()
        .expect("openssl (test-time key encryption)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    keys.retain(|(k, _)| *k != "tlsKeyStore");
    keys.push(("tlsKeyStore", encrypted.display().to_string()));
    let mut with_password = keys.clone();
    with_password.push(("tlsKeyStorePasswordPath", pass.display().to_string()));
    let mut b = start(&files, &with_password);
    let mut w = start_tls(b.port(), client_config(&ca, None)).unwrap();
    add_and_read(&mut w, 41);
    b.stop();
    let wrong = files.write("wrong.pass", "nope");
    keys.push(("tlsKeyStorePasswordPath", wrong.display().to_string()));
    let log = refused(&files, &keys);
    assert!(
        log.contains("tlsKeyStore") && log.contains("wrong password"),
        "{log}"
    );
}

/// A PKCS12 trust store holding `ca`'s certificate (what `keytool -importcert` writes).
fn trust_pkcs12(ca: &Ca, password: &str) -> Vec<u8> {
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "ca",
        p12_keystore::KeyStoreEntry::Certificate(
            p12_keystore::Certificate::from_der(&ca.cert).unwrap(),
        ),
    );
    store.writer(password).write().unwrap()
}

/// The HTTPS admin server's keys, as Java's bk_server.conf names them, on `http_port`.
fn https_keys(files: &Files, ca: &Ca, http_port: u16) -> Vec<(&'static str, String)> {
    let server = ca.issue("bookie-admin", None);
    let key_store = files.write("admin.p12", server.pkcs12(ca, "admin-pw"));
    let trust_store = files.write("admin-trust.p12", trust_pkcs12(ca, "trust-pw"));
    vec![
        ("httpServerEnabled", "true".into()),
        ("httpServerHost", "127.0.0.1".into()),
        ("httpServerPort", http_port.to_string()),
        ("httpServerTlsEnable", "true".into()),
        ("httpServerKeyStorePath", key_store.display().to_string()),
        ("httpServerKeyStorePassword", "admin-pw".into()),
        (
            "httpServerTrustStorePath",
            trust_store.display().to_string(),
        ),
        ("httpServerTrustStorePassword", "trust-pw".into()),
    ]
}

/// GET `path` over HTTPS with this client configuration: the whole answer, or why none came.
fn https_get(port: u16, config: Arc<ClientConfig>, path: &str) -> io::Result<String> {
    let sock = TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, sock);
    tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // Connection: close without a close_notify still delivered what was sent.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `httpServerTlsEnable`: the admin server speaks HTTPS only and requires a client certificate
/// signed by its trust store, as Java's (Vert.x) does. A request with one is answered; none, a
/// foreign CA's, or plaintext HTTP get nothing.
#[test]
fn https_admin_server_requires_a_trusted_client_certificate() {
    let files = Files::new();
    let ca = Ca::new("admin-ca");
    let http_port = free_port();
    let mut b = start(&files, &https_keys(&files, &ca, http_port));
    let admin = ca.issue("operator", None);
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        match https_get(http_port, client_config(&ca, Some(&admin)), "/heartbeat") {
            Ok(a) => break a,
            Err(e) => assert!(Instant::now() < deadline, "no HTTPS answer: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let state = https_get(
        http_port,
        client_config(&ca, Some(&admin)),
        "/api/v1/bookie/state",
    )
    .unwrap();
    assert!(state.contains("\"running\""), "{state}");

    // No client certificate, and one from another CA: no answer.
    for (what, config) in [
        ("no client certificate", client_config(&ca, None)),
        (
            "a foreign CA's certificate",
            client_config(&ca, Some(&Ca::new("rogue-ca").issue("operator", None))),
        ),
    ] {
        // Refused in the handshake (an error), or at the latest before any answer.
        if let Ok(a) = https_get(http_port, config, "/heartbeat") {
            assert!(!a.contains("HTTP/1.1"), "{what} was answered: {a}");
        }
    }
    // Plaintext HTTP: not served.
    let mut plain = TcpStream::connect(("127.0.0.1", http_port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET /heartbeat HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = plain.read_to_end(&mut out);
    assert!(
        !String::from_utf8_lossy(&out).contains("HTTP/1.1 200"),
        "plaintext answered"
    );
    no_panic(&b);
    b.stop();
}

/// HTTPS asked for with key material that cannot be used stops the start, naming the key;
/// never a plaintext admin server in its place.
#[test]
fn https_admin_server_with_bad_key_material_stops_the_start() {
    let files = Files::new();
    let ca = Ca::new("admin-ca");
    let keys = https_keys(&files, &ca, free_port());
    let without = |key: &str| -> Vec<(&str, String)> {
        keys.iter().filter(|(k, _)| *k != key).cloned().collect()
    };
    let log = refused(&files, &without("httpServerTrustStorePath"));
    assert!(
        log.contains("httpServerTrustStorePath") && log.contains("client certificates"),
        "{log}"
    );
    let mut wrong = without("httpServerKeyStorePassword");
    wrong.push(("httpServerKeyStorePassword", "not-the-password".into()));
    let log = refused(&files, &wrong);
    assert!(
        log.contains("httpServerKeyStorePath") && log.contains("wrong password"),
        "{log}"
    );
}
