//! Reading the bookie's TLS key material the way Java's `TLSContextFactory` names it:
//! `tlsKeyStoreType` PEM (a certificate chain in `tlsCertificatePath`, a PKCS#8 key in
//! `tlsKeyStore`, encrypted or not) or PKCS12 (`tlsKeyStore` with its password in
//! `tlsKeyStorePasswordPath`), and the trust store the same way (`tlsTrustStore*`).
//!
//! JKS, Java's default type, is a proprietary format whose key protection is a hand-rolled
//! SHA-1 construction; no maintained Rust crate reads it without carrying its own copy of that
//! cryptography, so we do not either. A file declared JKS that is really PKCS12 (what keytool
//! writes since JDK 9, and what Java's JKS loader accepts too) is read as PKCS12; a true JKS
//! file (magic `FEEDFEED`) is refused with the keytool command that converts it.
//!
//! Every failure is a [`KeyError`] naming the configuration key of the file at fault, so a
//! start with bad key material stops with one clear line and never panics.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// `tlsKeyStoreType` / `tlsTrustStoreType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
    /// Java's default when the key is not set.
    Jks,
}

impl StoreType {
    /// Java's names (Java itself takes them in capitals only; any case is accepted here).
    pub fn parse(text: &str) -> Result<StoreType, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PEM" => Ok(StoreType::Pem),
            "PKCS12" => Ok(StoreType::Pkcs12),
            "JKS" => Ok(StoreType::Jks),
            _ => Err("unknown keystore type: expected PEM, PKCS12 or JKS".into()),
        }
    }
}

/// Why key material could not be loaded: the configuration key at fault and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub key: &'static str,
    pub message: String,
}

impl KeyError {
    fn new(key: &'static str, message: impl Into<String>) -> KeyError {
        KeyError {
            key,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The bookie's own certificate chain (leaf first) and private key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Where the identity comes from (the `tlsKeyStore*` and `tlsCertificatePath` keys).
pub struct IdentitySource<'a> {
    pub store_type: StoreType,
    pub key_store: Option<&'a Path>,
    pub password_path: Option<&'a Path>,
    pub certificate_path: Option<&'a Path>,
}

/// Where the trusted certificates come from (the `tlsTrustStore*` keys).
pub struct TrustSource<'a> {
    pub store_type: StoreType,
    pub trust_store: Option<&'a Path>,
    pub password_path: Option<&'a Path>,
}

fn read_file(key: &'static str, path: &Path) -> Result<Vec<u8>, KeyError> {
    std::fs::read(path)
        .map_err(|e| KeyError::new(key, format!("cannot read {}: {e}", path.display())))
}

/// A password file: its whole content (Java trims it for key stores; a PEM key's password is
/// used as written, but a trailing newline is always dropped here, as an editor adds one).
fn read_password(key: &'static str, path: Option<&Path>, trim: bool) -> Result<String, KeyError> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    let bytes = read_file(key, path)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| KeyError::new(key, format!("{} is not UTF-8 text", path.display())))?;
    Ok(if trim {
        text.trim().to_string()
    } else {
        text.trim_end_matches(['\n', '\r']).to_string()
    })
}

fn required<'a>(
    key: &'static str,
    path: Option<&'a Path>,
    what: &str,
) -> Result<&'a Path, KeyError> {
    path.ok_or_else(|| KeyError::new(key, format!("not set: {what} is required")))
}

/// How to turn a JKS store into one we read.
fn jks_refusal(key: &'static str, path: &Path) -> KeyError {
    KeyError::new(
        key,
        format!(
            "{} is a JKS key store, which this bookie does not read; convert it with \
             `keytool -importkeystore -srckeystore {} -srcstoretype JKS -destkeystore {}.p12 \
             -deststoretype PKCS12` and set the type key to PKCS12 (or use PEM files)",
            path.display(),
            path.display(),
            path.display()
        ),
    )
}

const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];

/// The bytes of a PKCS12 store, for a type of PKCS12 or JKS (a JKS-typed file that is really
/// PKCS12 is read, as Java's JKS loader does).
fn pkcs12_bytes(key: &'static str, path: &Path, declared: StoreType) -> Result<Vec<u8>, KeyError> {
    let bytes = read_file(key, path)?;
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(jks_refusal(key, path));
    }
    if bytes.starts_with(b"-----BEGIN") {
        let message = match key {
            "tlsKeyStore" | "tlsTrustStore" => {
                let type_key = if key == "tlsKeyStore" {
                    "tlsKeyStoreType"
                } else {
                    "tlsTrustStoreType"
                };
                format!(
                    "{} is a PEM file but {type_key} is {declared:?} (Java's default is JKS): \
                     set {type_key}=PEM",
                    path.display()
                )
            }
            // The HTTP admin server's keys have no type key: Java's server reads a JKS store.
            _ => format!(
                "{} is a PEM file; this key takes a key store (PKCS12, or JKS as Java's \
                 keytool writes it since JDK 9): convert it with `openssl pkcs12 -export`",
                path.display()
            ),
        };
        return Err(KeyError::new(key, message));
    }
    if declared == StoreType::Jks && bytes.first() != Some(&0x30) {
        return Err(KeyError::new(
            key,
            format!("{} is neither a JKS nor a PKCS12 key store", path.display()),
        ));
    }
    Ok(bytes)
}

/// The file of a store declared PKCS12 or JKS, opened with its password.
fn read_pkcs12(
    key: &'static str,
    path: &Path,
    declared: StoreType,
    password: &str,
    policy: p12_keystore::Pkcs12ImportPolicy,
) -> Result<p12_keystore::KeyStore, KeyError> {
    let bytes = pkcs12_bytes(key, path, declared)?;
    open_pkcs12(key, path, &bytes, password, policy)
}

fn open_pkcs12(
    key: &'static str,
    path: &Path,
    bytes: &[u8],
    password: &str,
    policy: p12_keystore::Pkcs12ImportPolicy,
) -> Result<p12_keystore::KeyStore, KeyError> {
    p12_keystore::KeyStore::from_pkcs12(bytes, password, policy).map_err(|e| {
        let why = match e {
            p12_keystore::error::Error::MacError(_) => {
                "wrong password (the store's MAC does not match)".to_string()
            }
            other => format!("not a readable PKCS12 store ({other}); wrong password?"),
        };
        KeyError::new(key, format!("{}: {why}", path.display()))
    })
}

/// Loads the bookie's certificate chain and key.
pub fn load_identity(src: &IdentitySource<'_>) -> Result<Identity, KeyError> {
    match src.store_type {
        StoreType::Pem => {
            let key_path = required("tlsKeyStore", src.key_store, "the PEM private key")?;
            let cert_path = required(
                "tlsCertificatePath",
                src.certificate_path,
                "the PEM certificate chain",
            )?;
            let chain = pem_certificates("tlsCertificatePath", cert_path)?;
            let password = read_password("tlsKeyStorePasswordPath", src.password_path, false)?;
            let key = pem_private_key(key_path, &password)?;
            Ok(Identity { chain, key })
        }
        StoreType::Pkcs12 | StoreType::Jks => {
            let path = required("tlsKeyStore", src.key_store, "the key store")?;
            let password = read_password("tlsKeyStorePasswordPath", src.password_path, true)?;
            identity_from_store("tlsKeyStore", path, src.store_type, &password)
        }
    }
}

/// The certificate chain and key of a PKCS12 store (or a JKS-typed one that is PKCS12), with
/// its password; `key` is the configuration key that names the file, for errors.
pub fn identity_from_store(
    key: &'static str,
    path: &Path,
    declared: StoreType,
    password: &str,
) -> Result<Identity, KeyError> {
    let store = read_pkcs12(
        key,
        path,
        declared,
        password,
        p12_keystore::Pkcs12ImportPolicy::Strict,
    )?;
    let (_, chain) = store.private_key_chain().ok_or_else(|| {
        KeyError::new(
            key,
            format!(
                "{} holds no private key with its certificate",
                path.display()
            ),
        )
    })?;
    let certs: Vec<CertificateDer<'static>> = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    if certs.is_empty() {
        return Err(KeyError::new(
            key,
            format!("{}: the private key has no certificate", path.display()),
        ));
    }
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
    Ok(Identity {
        chain: certs,
        key: private,
    })
}

/// Loads the certificates trusted to sign clients' certificates.
pub fn load_trust(src: &TrustSource<'_>) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let path = required("tlsTrustStore", src.trust_store, "the trust store")?;
    let certs = match src.store_type {
        StoreType::Pem => pem_certificates("tlsTrustStore", path)?,
        StoreType::Pkcs12 | StoreType::Jks => {
            let password = read_password("tlsTrustStorePasswordPath", src.password_path, true)?;
            return trust_from_store("tlsTrustStore", path, src.store_type, &password);
        }
    };
    if certs.is_empty() {
        return Err(KeyError::new(
            "tlsTrustStore",
            format!("{} holds no certificate", path.display()),
        ));
    }
    Ok(certs)
}

/// The certificates of a PKCS12 trust store (or a JKS-typed one that is PKCS12), with its
/// password; `key` names the file's configuration key, for errors.
pub fn trust_from_store(
    key: &'static str,
    path: &Path,
    declared: StoreType,
    password: &str,
) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    // Every certificate counts, whether or not the tool that wrote the store marked it
    // trusted (openssl does not; keytool does).
    let store = read_pkcs12(
        key,
        path,
        declared,
        password,
        p12_keystore::Pkcs12ImportPolicy::Raw,
    )?;
    let certs: Vec<CertificateDer<'static>> = store
        .entries()
        .filter_map(|(_, entry)| match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => {
                Some(CertificateDer::from(c.as_der().to_vec()))
            }
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(KeyError::new(
            key,
            format!("{} holds no certificate", path.display()),
        ));
    }
    Ok(certs)
}

fn pem_certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let bytes = read_file(key, path)?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&bytes).collect();
    let certs =
        certs.map_err(|e| KeyError::new(key, format!("{}: bad PEM: {e:?}", path.display())))?;
    if certs.is_empty() {
        return Err(KeyError::new(
            key,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(certs)
}

fn pem_private_key(path: &Path, password: &str) -> Result<PrivateKeyDer<'static>, KeyError> {
    const KEY: &str = "tlsKeyStore";
    let bytes = read_file(KEY, path)?;
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        use pkcs8::der::Decode;
        let block = pem_block(&text, "ENCRYPTED PRIVATE KEY").unwrap_or_default();
        let bad =
            |e: String| KeyError::new(KEY, format!("{}: bad encrypted key: {e}", path.display()));
        let (_, der) =
            pkcs8::der::pem::decode_vec(block.as_bytes()).map_err(|e| bad(e.to_string()))?;
        let info =
            pkcs8::EncryptedPrivateKeyInfoRef::from_der(&der).map_err(|e| bad(e.to_string()))?;
        if password.is_empty() {
            return Err(KeyError::new(
                "tlsKeyStorePasswordPath",
                format!(
                    "{} is encrypted and no password file is set",
                    path.display()
                ),
            ));
        }
        let plain = info.decrypt(password.as_bytes()).map_err(|e| {
            KeyError::new(
                KEY,
                format!(
                    "{}: cannot decrypt the key (wrong password?): {e}",
                    path.display()
                ),
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(KeyError::new(
            KEY,
            format!(
                "{} is encrypted in the legacy OpenSSL form; convert it with \
                 `openssl pkcs8 -topk8 -in {} -out key.pk8.pem` (PKCS#8, encrypted or not)",
                path.display(),
                path.display()
            ),
        ));
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        KeyError::new(
            KEY,
            format!("{}: no PEM private key ({e:?})", path.display()),
        )
    })
}

/// The text of the first PEM block with this label, armour included.
fn pem_block(text: &str, label: &str) -> Option<String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(text[start..stop].to_string())
}

/// The files the key material is read from, for the reload check.
pub fn watched_files(
    identity: &IdentitySource<'_>,
    trust: Option<&TrustSource<'_>>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        identity.certificate_path,
        identity.key_store,
        identity.password_path,
    ]
    .into_iter()
    .flatten()
    .map(Path::to_path_buf)
    .collect();
    if let Some(t) = trust {
        out.extend(
            [t.trust_store, t.password_path]
                .into_iter()
                .flatten()
                .map(Path::to_path_buf),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_types_are_javas_names() {
        assert_eq!(StoreType::parse("PEM"), Ok(StoreType::Pem));
        assert_eq!(StoreType::parse("pkcs12"), Ok(StoreType::Pkcs12));
        assert_eq!(StoreType::parse(" JKS "), Ok(StoreType::Jks));
        assert!(StoreType::parse("PKCS11").is_err());
    }

    #[test]
    fn a_true_jks_file_is_refused_with_the_conversion_command() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bookie.jks");
        std::fs::write(&path, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let src = IdentitySource {
            store_type: StoreType::Jks,
            key_store: Some(&path),
            password_path: None,
            certificate_path: None,
        };
        let err = load_identity(&src).err().unwrap();
        assert_eq!(err.key, "tlsKeyStore");
        assert!(err.message.contains("keytool -importkeystore"), "{err}");
    }

    #[test]
    fn a_pem_file_under_a_store_type_says_to_set_pem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let trust = TrustSource {
            store_type: StoreType::Jks,
            trust_store: Some(&path),
            password_path: None,
        };
        let err = load_trust(&trust).err().unwrap();
        assert_eq!(err.key, "tlsTrustStore");
        assert!(err.message.contains("set tlsTrustStoreType=PEM"), "{err}");
    }

    #[test]
    fn missing_files_name_their_key() {
        let missing = Path::new("/nonexistent/bookie.pem");
        let src = IdentitySource {
            store_type: StoreType::Pem,
            key_store: Some(missing),
            password_path: None,
            certificate_path: Some(missing),
        };
        let err = load_identity(&src).err().unwrap();
        assert_eq!(err.key, "tlsCertificatePath");
        assert!(err.message.contains("cannot read"), "{err}");
        let src = IdentitySource {
            store_type: StoreType::Pem,
            key_store: None,
            password_path: None,
            certificate_path: Some(missing),
        };
        assert_eq!(load_identity(&src).err().unwrap().key, "tlsKeyStore");
        let trust = TrustSource {
            store_type: StoreType::Pkcs12,
            trust_store: Some(missing),
            password_path: None,
        };
        assert_eq!(load_trust(&trust).err().unwrap().key, "tlsTrustStore");
    }
}
