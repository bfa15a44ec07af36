//! Authentication of connections, as Java's `AuthHandler.ServerSideHandler` does it with the
//! bookie auth provider `bookieAuthProviderFactoryClass` names.
//!
//! Providers:
//! - none (the key unset): every connection is authenticated from the start; an AUTH request is
//!   answered EOK with plugin `AuthDisabledPlugin` (by the shard, as Java's request processor).
//! - `org.apache.bookkeeper.tls.BookieAuthZFactory` (Java's TLS certificate role provider): a
//!   connection is authenticated when its TLS handshake ends with a client certificate whose
//!   subject's first OU carries, under code `0`, a first role listed in `authorizedRoles`
//!   (Java's `CertUtils.getRolesFromOU`: OU `0:role1,role2;1:cluster`). A plaintext
//!   connection is never authenticated, which is how a Java bookie with this provider requires
//!   TLS.
//! - SASL (`org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory`, DIGEST-MD5 or Kerberos):
//!   refused at start; no maintained Rust crate implements DIGEST-MD5 without its own
//!   hand-written cryptography (README, ARCHITECTURE.md).
//!
//! Until a connection is authenticated its requests get what Java gives them ([`Gate::admit`]):
//! v3 requests EUA with no sub-message (AUTH of another plugin too), START_TLS goes through,
//! v2 adds and reads EUA, any other v2 request (or a v2 AUTH of another plugin) closes the
//! connection, and an AUTH of the configured plugin gets no answer (Java's provider never
//! answers one). Nothing is served.

use net::{Request, RequestHeader, Response, StatusCode};
use rustls::pki_types::CertificateDer;

/// Java's certificate role provider.
pub const BOOKIE_AUTHZ_FACTORY: &str = "org.apache.bookkeeper.tls.BookieAuthZFactory";
/// Its plugin name on the wire.
pub const BOOKIE_AUTHZ_PLUGIN: &str = "BookieAuthZFactory";
/// Java's SASL provider (refused: see the module docs).
pub const SASL_FACTORY: &str = "org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory";

/// The bk_server.conf keys read into [`AuthConfig`].
/// The keys this module sets (the registry, `config/keys_table.rs`, routes them here).
#[cfg(test)]
pub const CONF_KEYS: &[&str] = &["bookieAuthProviderFactoryClass", "authorizedRoles"];

/// `bookieAuthProviderFactoryClass` and `authorizedRoles`, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthConfig {
    pub provider_factory_class: Option<String>,
    /// `authorizedRoles`, comma-separated, each trimmed (an empty one is kept, to be refused).
    pub authorized_roles: Vec<String>,
}

impl AuthConfig {
    /// Sets one of its keys.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        match key {
            "bookieAuthProviderFactoryClass" => {
                self.provider_factory_class = Some(v.to_string()).filter(|v| !v.is_empty())
            }
            "authorizedRoles" => {
                self.authorized_roles = if v.is_empty() {
                    Vec::new()
                } else {
                    v.split(',').map(|r| r.trim().to_string()).collect()
                }
            }
            _ => return Err("not an auth key".into()),
        }
        Ok(())
    }

    /// The provider, or why the start must stop.
    pub fn policy(&self) -> Result<AuthPolicy, String> {
        match self.provider_factory_class.as_deref() {
            None => Ok(AuthPolicy::Disabled),
            Some(BOOKIE_AUTHZ_FACTORY) => {
                if self.authorized_roles.is_empty()
                    || self.authorized_roles.iter().any(|r| r.is_empty())
                {
                    return Err(format!(
                        "bookieAuthProviderFactoryClass is {BOOKIE_AUTHZ_FACTORY} but \
                         authorizedRoles sets no role (or an empty one): list the roles \
                         allowed, comma-separated"
                    ));
                }
                Ok(AuthPolicy::CertificateRoles {
                    roles: self.authorized_roles.clone(),
                })
            }
            Some(SASL_FACTORY) => Err(format!(
                "bookieAuthProviderFactoryClass={SASL_FACTORY}: SASL (DIGEST-MD5, Kerberos) is \
                 not supported by this bookie (no maintained Rust implementation of DIGEST-MD5 \
                 without hand-written cryptography); use TLS client certificates with \
                 {BOOKIE_AUTHZ_FACTORY}"
            )),
            Some(other) => Err(format!(
                "bookieAuthProviderFactoryClass={other}: unknown provider; this bookie \
                 implements {BOOKIE_AUTHZ_FACTORY} (TLS certificate roles, with \
                 authorizedRoles) or none"
            )),
        }
    }
}

/// The provider connections are checked with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthPolicy {
    Disabled,
    /// `BookieAuthZFactory` with `authorizedRoles`.
    CertificateRoles {
        roles: Vec<String>,
    },
}

impl AuthPolicy {
    fn plugin_name(&self) -> &'static str {
        match self {
            AuthPolicy::Disabled => net::AuthMessage::AUTH_DISABLED_PLUGIN_NAME,
            AuthPolicy::CertificateRoles { .. } => BOOKIE_AUTHZ_PLUGIN,
        }
    }
}

/// What the connection does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// To the shard.
    Serve,
    /// Answer this instead (EUA).
    Reply(Response),
    /// Answer nothing (an AUTH token the provider does not answer).
    Ignore,
    /// Close the connection.
    Close,
    /// Switch the connection to TLS (TLS is configured).
    StartTls,
}

/// One connection's authentication state.
pub struct Gate {
    plugin: &'static str,
    authenticated: bool,
    tls_on: bool,
}

impl Gate {
    /// A new connection under `policy`; `tls_on` when START_TLS is served.
    pub fn new(policy: &AuthPolicy, tls_on: bool) -> Gate {
        Gate {
            plugin: policy.plugin_name(),
            authenticated: *policy == AuthPolicy::Disabled,
            tls_on,
        }
    }

    #[cfg(test)]
    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// Decides what happens to a request on this connection.
    pub fn admit(&self, header: &RequestHeader, request: &Request) -> Admit {
        let v3 = !header.is_v2();
        if v3 && *request == Request::StartTls && self.tls_on {
            return Admit::StartTls;
        }
        if self.authenticated {
            return Admit::Serve;
        }
        match (v3, request) {
            (_, Request::Auth(message)) if message.plugin_name() == Some(self.plugin) => {
                Admit::Ignore
            }
            (true, Request::StartTls) => Admit::Serve,
            (true, _) => Admit::Reply(Response::Error {
                operation: request.operation(),
                status: StatusCode::EUA,
            }),
            (false, Request::AddEntry { .. } | Request::ReadEntry { .. }) => {
                Admit::Reply(request.error_response(StatusCode::EUA))
            }
            (false, _) => Admit::Close,
        }
    }

    /// After a TLS handshake (Java's `onProtocolUpgrade`): checks the client's certificate
    /// under `policy`. `Err` says why the connection stays unauthenticated.
    pub fn on_handshake(
        &mut self,
        policy: &AuthPolicy,
        peer: Option<&[CertificateDer<'_>]>,
    ) -> Result<(), String> {
        let AuthPolicy::CertificateRoles { roles } = policy else {
            return Ok(());
        };
        let leaf = peer
            .and_then(|chain| chain.first())
            .ok_or("no client certificate (is tlsClientAuthentication=true?)")?;
        let role = first_role(leaf.as_ref())?
            .ok_or("no role in the certificate (subject OU must carry 0:<role>)")?;
        if roles.contains(&role) {
            self.authenticated = true;
            Ok(())
        } else {
            Err(format!(
                "role {role:?} is not one of authorizedRoles {roles:?}"
            ))
        }
    }
}

/// The first role of a certificate, as Java reads it: the first OU of the subject (in the
/// certificate's order), split into `code:value` parts at `;`, the value of code `0` (the last
/// one if repeated), split at `,`, the first part trimmed. `Ok(None)`: no role there.
pub fn first_role(der: &[u8]) -> Result<Option<String>, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    let ou = cert
        .subject()
        .iter()
        .flat_map(|rdn| rdn.iter())
        .find(|attr| *attr.attr_type() == x509_parser::oid_registry::OID_X509_ORGANIZATIONAL_UNIT);
    let Some(ou) = ou else {
        return Ok(None);
    };
    let text = ou
        .as_str()
        .map_err(|e| format!("the certificate's OU is not a string: {e}"))?;
    Ok(role_from_ou(text))
}

/// The first role in an OU string (`CertUtils.getOUMapFromOUString` + `getRolesFromOUMap`).
pub fn role_from_ou(ou: &str) -> Option<String> {
    let mut roles = None;
    for part in ou.split(';') {
        let Some((code, value)) = part.split_once(':') else {
            continue;
        };
        if !code.is_empty() && code.bytes().all(|b| b.is_ascii_digit()) && code.trim() == "0" {
            roles = Some(value.trim());
        }
    }
    let first = roles?.split(',').next()?.trim();
    Some(first.to_string()).filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use net::OperationType;

    fn v3() -> RequestHeader {
        RequestHeader::v3(7)
    }

    fn v2() -> RequestHeader {
        RequestHeader::v2()
    }

    fn roles(list: &[&str]) -> AuthPolicy {
        AuthPolicy::CertificateRoles {
            roles: list.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn ou_roles_as_java_reads_them() {
        assert_eq!(role_from_ou("0:admin"), Some("admin".into()));
        assert_eq!(
            role_from_ou("0: client , admin;1:cluster"),
            Some("client".into())
        );
        assert_eq!(role_from_ou("1:cluster;0:writer"), Some("writer".into()));
        assert_eq!(role_from_ou("0:a;0:b"), Some("b".into()));
        assert_eq!(role_from_ou("1:cluster"), None);
        assert_eq!(role_from_ou("admin"), None);
        assert_eq!(role_from_ou("0:"), None);
        assert_eq!(role_from_ou("0:,admin"), None);
        assert_eq!(role_from_ou("x0:admin"), None);
    }

    #[test]
    fn config_refuses_sasl_unknown_and_missing_roles() {
        let mut c = AuthConfig::default();
        assert_eq!(c.policy(), Ok(AuthPolicy::Disabled));
        c.set("bookieAuthProviderFactoryClass", SASL_FACTORY)
            .unwrap();
        assert!(c.policy().unwrap_err().contains("SASL"));
        c.set("bookieAuthProviderFactoryClass", "com.example.Auth")
            .unwrap();
        assert!(c.policy().unwrap_err().contains("unknown provider"));
        c.set("bookieAuthProviderFactoryClass", BOOKIE_AUTHZ_FACTORY)
            .unwrap();
        assert!(c.policy().unwrap_err().contains("authorizedRoles"));
        c.set("authorizedRoles", "admin,,client").unwrap();
        assert!(c.policy().is_err());
        c.set("authorizedRoles", " admin , client ").unwrap();
        assert_eq!(c.policy(), Ok(roles(&["admin", "client"])));
    }

    #[test]
    fn unauthenticated_requests_get_javas_answers() {
        let policy = roles(&["admin"]);
        let gate = Gate::new(&policy, true);
        assert!(!gate.is_authenticated());
        let add = Request::AddEntry {
            ledger_id: 1,
            entry_id: 2,
            master_key: Bytes::from_static(&[0; 20]),
            body: Bytes::new(),
            recovery: false,
            write_flags: None,
        };
        assert_eq!(
            gate.admit(&v3(), &add),
            Admit::Reply(Response::Error {
                operation: OperationType::AddEntry,
                status: StatusCode::EUA
            })
        );
        assert_eq!(
            gate.admit(&v2(), &add),
            Admit::Reply(add.error_response(StatusCode::EUA))
        );
        assert_eq!(gate.admit(&v3(), &Request::StartTls), Admit::StartTls);
        let ours = Request::Auth(net::AuthMessage {
            auth_plugin_name: Bytes::from_static(BOOKIE_AUTHZ_PLUGIN.as_bytes()),
            payload: Bytes::new(),
        });
        let other = Request::Auth(net::AuthMessage::auth_disabled());
        assert_eq!(gate.admit(&v3(), &ours), Admit::Ignore);
        assert_eq!(gate.admit(&v2(), &ours), Admit::Ignore);
        assert!(matches!(gate.admit(&v3(), &other), Admit::Reply(_)));
        assert_eq!(gate.admit(&v2(), &other), Admit::Close);
        let lac = Request::ReadLac { ledger_id: 1 };
        assert_eq!(gate.admit(&v2(), &lac), Admit::Close);
        // Without TLS configured START_TLS goes to the shard (EBADREQ there).
        assert_eq!(
            Gate::new(&policy, false).admit(&v3(), &Request::StartTls),
            Admit::Serve
        );
        // Auth disabled: everything is served.
        let open = Gate::new(&AuthPolicy::Disabled, false);
        assert_eq!(open.admit(&v2(), &add), Admit::Serve);
        assert_eq!(open.admit(&v3(), &other), Admit::Serve);
    }

    #[test]
    fn a_handshake_without_a_certificate_does_not_authenticate() {
        let policy = roles(&["admin"]);
        let mut gate = Gate::new(&policy, true);
        assert!(gate.on_handshake(&policy, None).is_err());
        assert!(gate.on_handshake(&policy, Some(&[])).is_err());
        assert!(!gate.is_authenticated());
        let mut open = Gate::new(&AuthPolicy::Disabled, true);
        assert!(open.on_handshake(&AuthPolicy::Disabled, None).is_ok());
    }
}
