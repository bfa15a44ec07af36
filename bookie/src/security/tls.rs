//! TLS on the bookie port, as a Java bookie does it: a client connects in plaintext, sends a
//! v3 `START_TLS` request (even a v2 client), the bookie answers EOK in plaintext, and the same
//! TCP connection then carries a TLS handshake and, after it, every frame (`conn/mod.rs` does the
//! switch; see ARCHITECTURE.md). TLS is on when `tlsProviderFactoryClass` names Java's
//! `org.apache.bookkeeper.tls.TLSContextFactory`; without it `START_TLS` is refused with
//! EBADREQ, as in Java.
//!
//! [`TlsConfig`] holds the `tls*` keys of bk_server.conf; [`TlsContext`] is the rustls server
//! configuration built from them at start (bad key material stops the start with an error
//! naming the key) and rebuilt for new connections when `tlsCertFilesRefreshDurationSeconds`
//! is positive and one of the files changed (Java's `TLSContextFactory.getSSLContext`; a
//! rebuild that fails keeps the previous configuration and logs why). Client certificates are
//! required when `tlsClientAuthentication` is true and not asked for otherwise (Java:
//! `ClientAuth.REQUIRE` or none).
//!
//! [`ReadHalf`] / [`WriteHalf`] are the two halves of a connection's byte stream, plain or TLS,
//! so that the connection code is the same for both.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::security::auth::{AuthConfig, AuthPolicy};
use crate::security::keystore::{self, IdentitySource, KeyError, StoreType, TrustSource};

/// The one security handler factory there is: Java's.
pub const TLS_CONTEXT_FACTORY: &str = "org.apache.bookkeeper.tls.TLSContextFactory";

/// How long a client may take over its handshake (Netty's SslHandler default).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The `tls*` keys of bk_server.conf (server side), with Java's defaults.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// `tlsProviderFactoryClass`: TLS is on when set.
    pub provider_factory_class: Option<String>,
    /// `tlsProvider` (Java: `OpenSSL`, falling back to `JDK`): which engine Java uses. Ours is
    /// always rustls; the value is accepted and logged.
    pub provider: String,
    /// `tlsClientAuthentication` (false): require a client certificate signed by the trust store.
    pub client_authentication: bool,
    /// `tlsKeyStoreType` (JKS).
    pub key_store_type: StoreType,
    /// `tlsKeyStore`: the PKCS12 store, or the PEM private key.
    pub key_store: Option<PathBuf>,
    /// `tlsKeyStorePasswordPath`: a file holding the password.
    pub key_store_password_path: Option<PathBuf>,
    /// `tlsTrustStoreType` (JKS).
    pub trust_store_type: StoreType,
    /// `tlsTrustStore`: the PKCS12 store, or PEM CA certificates.
    pub trust_store: Option<PathBuf>,
    /// `tlsTrustStorePasswordPath`.
    pub trust_store_password_path: Option<PathBuf>,
    /// `tlsCertificatePath`: the PEM certificate chain (PEM key stores).
    pub certificate_path: Option<PathBuf>,
    /// `tlsCertFilesRefreshDurationSeconds` (0: never): how often new connections look for
    /// renewed files.
    pub cert_refresh: Duration,
    /// `tlsEnabledCipherSuites`: IANA names, as Java takes them (empty: rustls's defaults).
    pub enabled_cipher_suites: Vec<String>,
    /// `tlsEnabledProtocols`: `TLSv1.2`, `TLSv1.3` (empty: both).
    pub enabled_protocols: Vec<String>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            provider_factory_class: None,
            provider: "OpenSSL".into(),
            client_authentication: false,
            key_store_type: StoreType::Jks,
            key_store: None,
            key_store_password_path: None,
            trust_store_type: StoreType::Jks,
            trust_store: None,
            trust_store_password_path: None,
            certificate_path: None,
            cert_refresh: Duration::ZERO,
            enabled_cipher_suites: Vec::new(),
            enabled_protocols: Vec::new(),
        }
    }
}

/// The bk_server.conf keys read into [`TlsConfig`].
/// The keys this module sets (the registry, `config/keys_table.rs`, routes them here).
#[cfg(test)]
pub const CONF_KEYS: &[&str] = &[
    "tlsProviderFactoryClass",
    "tlsProvider",
    "tlsClientAuthentication",
    "tlsKeyStoreType",
    "tlsKeyStore",
    "tlsKeyStorePasswordPath",
    "tlsTrustStoreType",
    "tlsTrustStore",
    "tlsTrustStorePasswordPath",
    "tlsCertificatePath",
    "tlsCertFilesRefreshDurationSeconds",
    "tlsEnabledCipherSuites",
    "tlsEnabledProtocols",
];

fn optional_path(value: &str) -> Option<PathBuf> {
    Some(value.trim())
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

impl TlsConfig {
    /// Whether TLS is on.
    pub fn enabled(&self) -> bool {
        self.provider_factory_class.is_some()
    }

    /// Sets one of its keys from its text; the error says what is wrong with the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        match key {
            "tlsProviderFactoryClass" => {
                self.provider_factory_class = match v {
                    "" => None,
                    TLS_CONTEXT_FACTORY => Some(v.to_string()),
                    _ => {
                        return Err(format!(
                            "unknown security handler factory; this bookie implements \
                             {TLS_CONTEXT_FACTORY} only"
                        ))
                    }
                }
            }
            "tlsProvider" => self.provider = v.to_string(),
            "tlsClientAuthentication" => self.client_authentication = parse_bool(v)?,
            "tlsKeyStoreType" => self.key_store_type = StoreType::parse(v)?,
            "tlsKeyStore" => self.key_store = optional_path(v),
            "tlsKeyStorePasswordPath" => self.key_store_password_path = optional_path(v),
            "tlsTrustStoreType" => self.trust_store_type = StoreType::parse(v)?,
            "tlsTrustStore" => self.trust_store = optional_path(v),
            "tlsTrustStorePasswordPath" => self.trust_store_password_path = optional_path(v),
            "tlsCertificatePath" => self.certificate_path = optional_path(v),
            "tlsCertFilesRefreshDurationSeconds" => {
                let secs: i64 = v.parse().map_err(|_| "not a whole number of seconds")?;
                self.cert_refresh = Duration::from_secs(secs.clamp(0, 1 << 40) as u64);
            }
            "tlsEnabledCipherSuites" => self.enabled_cipher_suites = list(v),
            "tlsEnabledProtocols" => self.enabled_protocols = list(v),
            _ => return Err("not a TLS key".into()),
        }
        Ok(())
    }

    fn identity(&self) -> IdentitySource<'_> {
        IdentitySource {
            store_type: self.key_store_type,
            key_store: self.key_store.as_deref(),
            password_path: self.key_store_password_path.as_deref(),
            certificate_path: self.certificate_path.as_deref(),
        }
    }

    fn trust(&self) -> Option<TrustSource<'_>> {
        self.client_authentication.then_some(TrustSource {
            store_type: self.trust_store_type,
            trust_store: self.trust_store.as_deref(),
            password_path: self.trust_store_password_path.as_deref(),
        })
    }
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// The rustls side of a [`TlsConfig`]: the crypto provider narrowed to the enabled suites,
/// and the protocol versions.
fn provider_and_versions(
    config: &TlsConfig,
) -> Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>), KeyError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !config.enabled_cipher_suites.is_empty() {
        let wanted: Vec<String> = config
            .enabled_cipher_suites
            .iter()
            .map(|s| suite_name(s))
            .collect();
        let (kept, _): (Vec<_>, Vec<_>) = provider.cipher_suites.into_iter().partition(|s| {
            let name = format!("{:?}", s.suite());
            wanted.contains(&name)
        });
        let known: Vec<String> = kept.iter().map(|s| format!("{:?}", s.suite())).collect();
        let unknown: Vec<&String> = config
            .enabled_cipher_suites
            .iter()
            .filter(|s| !known.contains(&suite_name(s)))
            .collect();
        if kept.is_empty() {
            return Err(KeyError {
                key: "tlsEnabledCipherSuites",
                message: format!(
                    "none of the suites is one this bookie offers (rustls: TLS 1.3 AES-GCM and \
                     ChaCha20, TLS 1.2 ECDHE with AES-GCM or ChaCha20); unknown: {unknown:?}"
                ),
            });
        }
        if !unknown.is_empty() {
            log::warn!("tlsEnabledCipherSuites: not offered by this bookie, ignored: {unknown:?}");
        }
        provider.cipher_suites = kept;
    }
    let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
    if config.enabled_protocols.is_empty() {
        versions.extend([&rustls::version::TLS13, &rustls::version::TLS12]);
    } else {
        let mut ignored = Vec::new();
        for p in &config.enabled_protocols {
            match p.as_str() {
                "TLSv1.3" => versions.push(&rustls::version::TLS13),
                "TLSv1.2" => versions.push(&rustls::version::TLS12),
                other => ignored.push(other.to_string()),
            }
        }
        if versions.is_empty() {
            return Err(KeyError {
                key: "tlsEnabledProtocols",
                message: format!(
                    "this bookie speaks TLSv1.2 and TLSv1.3 only; none of {:?} is one",
                    config.enabled_protocols
                ),
            });
        }
        if !ignored.is_empty() {
            log::warn!(
                "tlsEnabledProtocols: not supported (older than TLSv1.2), ignored: {ignored:?}"
            );
        }
    }
    Ok((Arc::new(provider), versions))
}

/// Java (and IANA) name TLS 1.3 suites `TLS_AES_…`; rustls calls them `TLS13_AES_…`.
fn suite_name(java: &str) -> String {
    match java.strip_prefix("TLS_") {
        Some(rest) if !rest.contains("_WITH_") => format!("TLS13_{rest}"),
        _ => java.to_string(),
    }
}

/// Builds the rustls server configuration from the files the keys name.
pub fn server_config(config: &TlsConfig) -> Result<Arc<ServerConfig>, KeyError> {
    let (provider, versions) = provider_and_versions(config)?;
    let identity = keystore::load_identity(&config.identity())?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| KeyError {
            key: "tlsEnabledProtocols",
            message: format!("no usable protocol and cipher suite combination: {e}"),
        })?;
    let builder = match config.trust() {
        Some(trust) => {
            if trust.trust_store.is_none() {
                return Err(KeyError {
                    key: "tlsTrustStore",
                    message: "not set: tlsClientAuthentication=true needs the CA certificates \
                              that sign client certificates"
                        .into(),
                });
            }
            let mut roots = RootCertStore::empty();
            for cert in keystore::load_trust(&trust)? {
                roots.add(cert).map_err(|e| KeyError {
                    key: "tlsTrustStore",
                    message: format!("a certificate is not usable as a trust anchor: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| KeyError {
                    key: "tlsTrustStore",
                    message: format!("cannot verify clients with it: {e}"),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| KeyError {
            key: "tlsKeyStore",
            message: format!("the key does not go with the certificate, or is unsupported: {e}"),
        })?;
    Ok(Arc::new(server))
}

/// The modification times of the watched files (None: unreadable).
fn mtimes(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect()
}

struct Current {
    server: Arc<ServerConfig>,
    stamps: Vec<Option<SystemTime>>,
    checked: Instant,
}

/// The TLS configuration new connections use, reloaded when the files are renewed. Shared by
/// every shard.
pub struct TlsContext {
    config: TlsConfig,
    files: Vec<PathBuf>,
    current: Mutex<Current>,
}

impl TlsContext {
    /// Loads the key material; an error names the key at fault.
    pub fn new(config: &TlsConfig) -> Result<TlsContext, KeyError> {
        let server = server_config(config)?;
        let files = keystore::watched_files(&config.identity(), config.trust().as_ref());
        let stamps = mtimes(&files);
        if !config.provider.eq_ignore_ascii_case("JDK")
            && !config.provider.eq_ignore_ascii_case("OpenSSL")
        {
            log::warn!(
                "tlsProvider={}: unknown (Java falls back to JDK); this bookie uses rustls",
                config.provider
            );
        }
        Ok(TlsContext {
            config: config.clone(),
            files,
            current: Mutex::new(Current {
                server,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// Whether client certificates are required.
    pub fn client_authentication(&self) -> bool {
        self.config.client_authentication
    }

    /// The configuration for a new handshake: the files are checked for renewal at most once
    /// per refresh period.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let period = self.config.cert_refresh;
        if !period.is_zero() && cur.checked.elapsed() >= period {
            cur.checked = Instant::now();
            let stamps = mtimes(&self.files);
            if stamps != cur.stamps {
                // As Java: a changed file is noted even when the reload fails, so a broken
                // renewal is retried only once the files change again.
                cur.stamps = stamps;
                match server_config(&self.config) {
                    Ok(server) => {
                        log::info!("TLS: reloaded renewed certificate files {:?}", self.files);
                        cur.server = server;
                    }
                    Err(e) => log::warn!(
                        "TLS: cannot reload renewed files, keeping the previous ones: {e}"
                    ),
                }
            }
        }
        TlsAcceptor::from(cur.server.clone())
    }
}

/// What every connection of the bookie is checked against: TLS (when configured) and the
/// auth provider. Built once at start; an error stops the start.
pub struct Security {
    pub tls: Option<TlsContext>,
    pub auth: AuthPolicy,
}

impl Security {
    /// From the `tls*` and auth keys, loading the key material.
    pub fn from_config(tls: &TlsConfig, auth: &AuthConfig) -> Result<Security, String> {
        let auth = auth.policy()?;
        let tls =
            if tls.enabled() {
                let context =
                    TlsContext::new(tls).map_err(|e| format!("TLS configuration: {e}"))?;
                log::info!(
                "TLS: START_TLS served (client certificates {}; tlsProvider={} asked, rustls used)",
                if tls.client_authentication { "required" } else { "not asked for" },
                tls.provider
            );
                Some(context)
            } else {
                None
            };
        if let AuthPolicy::CertificateRoles { roles } = &auth {
            if tls.is_none() || !tls.as_ref().is_some_and(|t| t.client_authentication()) {
                log::warn!(
                    "bookieAuthProviderFactoryClass=BookieAuthZFactory needs TLS with \
                     tlsClientAuthentication=true: no client can authenticate as it is"
                );
            }
            log::info!("auth: TLS client certificate roles, authorizedRoles={roles:?}");
        }
        Ok(Security { tls, auth })
    }
}

/// The reading half of a connection: plain TCP, or TLS after `START_TLS`.
pub enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<TlsStream<TcpStream>>),
}

/// The writing half of a connection.
pub enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<TlsStream<TcpStream>>),
}

/// Splits a plain connection.
pub fn split_plain(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let (r, w) = stream.into_split();
    (ReadHalf::Plain(r), WriteHalf::Plain(w))
}

/// Splits a connection after its handshake.
pub fn split_tls(stream: TlsStream<TcpStream>) -> (ReadHalf, WriteHalf) {
    let (r, w) = tokio::io::split(stream);
    (ReadHalf::Tls(r), WriteHalf::Tls(w))
}

/// Puts a plain connection back together for its handshake.
pub fn reunite(read: ReadHalf, write: WriteHalf) -> io::Result<TcpStream> {
    match (read, write) {
        (ReadHalf::Plain(r), WriteHalf::Plain(w)) => r
            .reunite(w)
            .map_err(|_| io::Error::other("halves of different connections")),
        _ => Err(io::Error::other("the connection is already TLS")),
    }
}

/// Runs the server side of the handshake on a connection that has answered `START_TLS`.
pub async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
) -> io::Result<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "TLS handshake timed out",
        )),
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_suite_names_map_to_rustls_names() {
        assert_eq!(
            suite_name("TLS_AES_128_GCM_SHA256"),
            "TLS13_AES_128_GCM_SHA256"
        );
        assert_eq!(
            suite_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
    }

    #[test]
    fn keys_parse_and_refuse_bad_values() {
        let mut c = TlsConfig::default();
        assert!(!c.enabled());
        c.set("tlsProviderFactoryClass", TLS_CONTEXT_FACTORY)
            .unwrap();
        assert!(c.enabled());
        assert!(c
            .set("tlsProviderFactoryClass", "com.example.Other")
            .is_err());
        assert!(c.set("tlsKeyStoreType", "PKCS11").is_err());
        c.set("tlsKeyStoreType", "PEM").unwrap();
        assert_eq!(c.key_store_type, StoreType::Pem);
        assert!(c.set("tlsClientAuthentication", "maybe").is_err());
        c.set("tlsCertFilesRefreshDurationSeconds", "30").unwrap();
        assert_eq!(c.cert_refresh, Duration::from_secs(30));
        assert!(c.set("tlsCertFilesRefreshDurationSeconds", "soon").is_err());
        c.set("tlsEnabledProtocols", "TLSv1.2, TLSv1.3").unwrap();
        assert_eq!(c.enabled_protocols, vec!["TLSv1.2", "TLSv1.3"]);
    }

    #[test]
    fn only_old_protocols_is_an_error_naming_the_key() {
        let c = TlsConfig {
            enabled_protocols: vec!["TLSv1".into(), "TLSv1.1".into()],
            ..TlsConfig::default()
        };
        let err = provider_and_versions(&c).err().unwrap();
        assert_eq!(err.key, "tlsEnabledProtocols");
        let c = TlsConfig {
            enabled_cipher_suites: vec!["TLS_RSA_WITH_RC4_128_MD5".into()],
            ..TlsConfig::default()
        };
        assert_eq!(
            provider_and_versions(&c).err().unwrap().key,
            "tlsEnabledCipherSuites"
        );
    }
}
