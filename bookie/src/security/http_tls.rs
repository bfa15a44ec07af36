//! HTTPS on the HTTP admin server, as a Java bookie's does it (`httpServerTlsEnable`).
//!
//! Java's admin server (Vert.x, `VertxHttpServer`) then speaks TLS only and **requires** a
//! client certificate signed by a certificate of its trust store: the admin routes (read-only
//! switch, GC, ledger list) and `/metrics` are open to holders of such a certificate alone. A
//! bookie swapped in for it must not fall back to plaintext and open them to anyone, so the keys
//! are honoured, and key material that cannot be used stops the start with the key named.
//!
//! The stores are Java key stores (`JksOptions`): its key store and trust store, each with its
//! password written in the conf (not in a file, unlike the bookie port's `tls*` keys). A PKCS12
//! file is read, as the JDK's JKS loader reads one (keytool writes PKCS12 since JDK 9); a true
//! JKS file is refused with the keytool command that converts it (`keystore.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::security::keystore::{self, KeyError, StoreType};

/// The `httpServerTls*` / `httpServer*Store*` keys of bk_server.conf.
#[derive(Clone, Debug, Default)]
pub struct HttpTlsConfig {
    /// `httpServerTlsEnable` (false).
    pub enabled: bool,
    /// `httpServerKeyStorePath`: the server's key and certificate chain.
    pub key_store: Option<PathBuf>,
    /// `httpServerKeyStorePassword`.
    pub key_store_password: String,
    /// `httpServerTrustStorePath`: the certificates that sign admin clients' certificates.
    pub trust_store: Option<PathBuf>,
    /// `httpServerTrustStorePassword`.
    pub trust_store_password: String,
}

/// The bk_server.conf keys read into [`HttpTlsConfig`].
/// The keys this module sets (the registry, `config/keys_table.rs`, routes them here).
#[cfg(test)]
pub const CONF_KEYS: &[&str] = &[
    "httpServerTlsEnable",
    "httpServerKeyStorePath",
    "httpServerKeyStorePassword",
    "httpServerTrustStorePath",
    "httpServerTrustStorePassword",
];

impl HttpTlsConfig {
    /// Sets one of its keys from its text; the error says what is wrong with the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        let path = || Some(v).filter(|v| !v.is_empty()).map(PathBuf::from);
        match key {
            "httpServerTlsEnable" => {
                self.enabled = match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" | "" => false,
                    _ => return Err("expected true or false".into()),
                }
            }
            "httpServerKeyStorePath" => self.key_store = path(),
            // A password is used as written (Java takes the property's value).
            "httpServerKeyStorePassword" => self.key_store_password = value.to_string(),
            "httpServerTrustStorePath" => self.trust_store = path(),
            "httpServerTrustStorePassword" => self.trust_store_password = value.to_string(),
            _ => return Err(format!("not an HTTP TLS key: {key}")),
        }
        Ok(())
    }

    /// The rustls configuration of the admin server: its identity from the key store, and
    /// client certificates required and checked against the trust store.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, KeyError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key_store = self.key_store.as_deref().ok_or_else(|| KeyError {
            key: "httpServerKeyStorePath",
            message: "not set: httpServerTlsEnable=true needs the server's key store".into(),
        })?;
        let trust_store = self.trust_store.as_deref().ok_or_else(|| KeyError {
            key: "httpServerTrustStorePath",
            message: "not set: httpServerTlsEnable=true requires client certificates (as \
                      Java's admin server does) and needs the certificates that sign them"
                .into(),
        })?;
        let identity = keystore::identity_from_store(
            "httpServerKeyStorePath",
            key_store,
            StoreType::Jks,
            &self.key_store_password,
        )?;
        let mut roots = RootCertStore::empty();
        for cert in keystore::trust_from_store(
            "httpServerTrustStorePath",
            trust_store,
            StoreType::Jks,
            &self.trust_store_password,
        )? {
            roots.add(cert).map_err(|e| KeyError {
                key: "httpServerTrustStorePath",
                message: format!("a certificate is not usable as a trust anchor: {e}"),
            })?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| KeyError {
                    key: "httpServerTrustStorePath",
                    message: format!("cannot verify clients with it: {e}"),
                })?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| KeyError {
                key: "httpServerTlsEnable",
                message: format!("no usable protocol: {e}"),
            })?
            .with_client_cert_verifier(verifier)
            .with_single_cert(identity.chain, identity.key)
            .map_err(|e| KeyError {
                key: "httpServerKeyStorePath",
                message: format!(
                    "the key does not go with the certificate, or is unsupported: {e}"
                ),
            })?;
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_javas_and_a_bad_flag_is_an_error() {
        let mut c = HttpTlsConfig::default();
        for key in CONF_KEYS {
            let value = if *key == "httpServerTlsEnable" {
                "true"
            } else {
                "/etc/bk/admin.p12"
            };
            c.set(key, value).unwrap();
        }
        assert!(c.enabled);
        assert_eq!(c.key_store.as_deref(), Some("/etc/bk/admin.p12".as_ref()));
        assert_eq!(c.trust_store_password, "/etc/bk/admin.p12");
        assert!(c.set("httpServerTlsEnable", "yes").is_err());
        c.set("httpServerTlsEnable", "FALSE").unwrap();
        assert!(!c.enabled);
    }

    #[test]
    fn missing_stores_name_their_key() {
        let mut c = HttpTlsConfig {
            enabled: true,
            ..HttpTlsConfig::default()
        };
        assert_eq!(
            c.server_config().err().unwrap().key,
            "httpServerKeyStorePath"
        );
        c.key_store = Some("/nonexistent/admin.p12".into());
        assert_eq!(
            c.server_config().err().unwrap().key,
            "httpServerTrustStorePath"
        );
        c.trust_store = Some("/nonexistent/trust.p12".into());
        let err = c.server_config().err().unwrap();
        assert_eq!(err.key, "httpServerKeyStorePath");
        assert!(err.message.contains("cannot read"), "{err}");
    }

    #[test]
    fn a_pem_file_is_refused_with_the_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("admin.pem");
        std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let c = HttpTlsConfig {
            enabled: true,
            key_store: Some(pem.clone()),
            trust_store: Some(pem),
            ..HttpTlsConfig::default()
        };
        let err = c.server_config().err().unwrap();
        assert_eq!(err.key, "httpServerKeyStorePath");
        assert!(err.message.contains("openssl pkcs12 -export"), "{err}");
    }
}
