//! Metadata configuration: where ZooKeeper is, which ledgers root and layout, the session
//! timeout, and the bookie id. Parsed from the `bk_server.conf` keys a Java bookie reads
//! (`metadataServiceUri`, `zkServers`, `zkLedgersRootPath`, `zkTimeout`, `bookieId`,
//! `advertisedAddress`, `useHostNameAsBookieID`, `useShortHostName`, `listeningInterface`,
//! `bookiePort`, `allowLoopback`), with the same precedence and defaults as Java
//! (`AbstractConfiguration.getMetadataServiceUri`, `ZKMetadataDriverBase`, `BookieImpl.getBookieId`).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::error::{MetaError, Result};
use crate::service_info::BookieServiceInfo;

/// Default ledgers root (`zkLedgersRootPath`).
pub const DEFAULT_LEDGERS_ROOT: &str = "/ledgers";
/// Default `zkTimeout` in ms.
pub const DEFAULT_ZK_TIMEOUT_MS: u64 = 10_000;

/// The ledger-manager layout named in the metadata URI (`zk+<layout>://`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriLayout {
    /// `zk://` or `zk+null://`: whatever `<root>/LAYOUT` says (hierarchical if absent).
    FromZk,
    /// `zk+hierarchical://`
    Hierarchical,
    /// `zk+longhierarchical://`
    LongHierarchical,
    /// `zk+flat://` (legacy)
    Flat,
}

impl UriLayout {
    /// The scheme's layout part, as Java prints a URI (`zk+null://` for "from ZooKeeper").
    pub fn scheme_name(self) -> &'static str {
        match self {
            UriLayout::FromZk => "null",
            UriLayout::Hierarchical => "hierarchical",
            UriLayout::LongHierarchical => "longhierarchical",
            UriLayout::Flat => "flat",
        }
    }
}

/// Where the cluster metadata lives and who we are in it.
#[derive(Clone, Debug)]
pub struct MetadataConfig {
    /// ZooKeeper connect string, comma separated (`h1:2181,h2:2181`).
    pub zk_servers: String,
    /// Absolute ledgers root path (`/ledgers`).
    pub ledgers_root: String,
    /// Layout requested by the URI.
    pub layout: UriLayout,
    /// ZooKeeper session timeout (`zkTimeout`).
    pub session_timeout: Duration,
    /// The bookie id (`host:port` or a custom `bookieId`).
    pub bookie_id: String,
    /// What is published in the registration znode.
    pub service_info: BookieServiceInfo,
}

/// A parsed `metadataServiceUri`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataUri {
    pub zk_servers: String,
    pub ledgers_root: String,
    pub layout: UriLayout,
}

/// Parses `zk[+layout]://h1:p1;h2:p2/ledgers` as `ZKMetadataDriverBase` does: scheme split on
/// `+`, first part `zk`; `;` in the authority becomes `,`; the path is the ledgers root.
/// Also accepts Pulsar's `metadata-store:zk:h1:p1,h2:p2[/chroot]` (ledgers root `/ledgers`
/// inside the chroot, which is appended to the connect string as a ZooKeeper chroot).
pub fn parse_metadata_uri(uri: &str) -> Result<MetadataUri> {
    let uri = uri.trim();
    if let Some(rest) = uri.strip_prefix("metadata-store:") {
        let Some(zk) = rest.strip_prefix("zk:") else {
            return Err(MetaError::Config(format!(
                "unsupported metadata store in {uri:?} (only zk)"
            )));
        };
        let zk = zk.strip_prefix("//").unwrap_or(zk);
        if zk.is_empty() {
            return Err(MetaError::Config(format!(
                "no ZooKeeper servers in {uri:?}"
            )));
        }
        return Ok(MetadataUri {
            zk_servers: zk.to_string(),
            ledgers_root: DEFAULT_LEDGERS_ROOT.to_string(),
            layout: UriLayout::FromZk,
        });
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(MetaError::Config(format!(
            "metadataServiceUri {uri:?} is not a URI"
        )));
    };
    let scheme = scheme.to_ascii_lowercase();
    let mut parts = scheme.splitn(2, '+');
    if parts.next() != Some("zk") {
        return Err(MetaError::Config(format!(
            "metadataServiceUri {uri:?}: scheme must be zk or zk+<layout>"
        )));
    }
    let layout = match parts.next() {
        None | Some("null") => UriLayout::FromZk,
        Some("hierarchical") => UriLayout::Hierarchical,
        Some("longhierarchical") => UriLayout::LongHierarchical,
        Some("flat") => UriLayout::Flat,
        Some(other) => {
            return Err(MetaError::Config(format!(
                "metadataServiceUri {uri:?}: unknown ledger layout {other:?}"
            )))
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(MetaError::Config(format!(
            "metadataServiceUri {uri:?} has no ZooKeeper servers"
        )));
    }
    let root = path.trim_end_matches('/');
    let root = if root.is_empty() {
        DEFAULT_LEDGERS_ROOT
    } else {
        root
    };
    validate_root(root)?;
    Ok(MetadataUri {
        zk_servers: authority.replace(';', ","),
        ledgers_root: root.to_string(),
        layout,
    })
}

fn validate_root(root: &str) -> Result<()> {
    if !root.starts_with('/') || root.contains("//") || root.len() < 2 {
        return Err(MetaError::Config(format!(
            "ledgers root {root:?} must be an absolute ZooKeeper path"
        )));
    }
    Ok(())
}

/// The keys that decide the bookie id and the published address (§1.4 of the semantics spec).
#[derive(Clone, Debug, Default)]
pub struct BookieIdConfig {
    /// `bookieId`: used verbatim when set.
    pub bookie_id: Option<String>,
    /// `advertisedAddress`: host part when set (trimmed, non-empty).
    pub advertised_address: Option<String>,
    /// `useHostNameAsBookieID` (default false).
    pub use_host_name_as_bookie_id: bool,
    /// `useShortHostName` (default false).
    pub use_short_host_name: bool,
    /// `listeningInterface` (e.g. `eth0`); unset = Java's default host (the host name's
    /// canonical name, resolved).
    pub listening_interface: Option<String>,
    /// `bookiePort` (default 3181).
    pub bookie_port: u16,
    /// `allowLoopback` (default false).
    pub allow_loopback: bool,
    /// `allowEphemeralPorts` (default false).
    pub allow_ephemeral_ports: bool,
}

/// The bookie's id and the address published in the `bookie-rpc` endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookieAddress {
    pub id: String,
    pub host: String,
    pub port: u16,
}

/// Java's bookie id check (`BookieId.validateBookieId`): the regex `[a-zA-Z0-9:-_.\-]+` (where
/// `:-_` is a range, so `;<=>?@[\]^` pass too) and not `readonly` in any case.
pub fn validate_bookie_id(id: &str) -> Result<()> {
    let ok_char =
        |c: char| c.is_ascii_alphanumeric() || (':'..='_').contains(&c) || c == '.' || c == '-';
    if id.is_empty() || !id.chars().all(ok_char) {
        return Err(MetaError::Config(format!(
            "bookie id {id:?} is not valid (allowed: [a-zA-Z0-9:-_.-])"
        )));
    }
    if id.eq_ignore_ascii_case("readonly") {
        return Err(MetaError::Config(
            "bookie id must not be \"readonly\"".into(),
        ));
    }
    Ok(())
}

/// Derives the bookie id and published host like `BookieImpl.getBookieId`/`getBookieAddress`.
pub fn derive_bookie_address(c: &BookieIdConfig) -> Result<BookieAddress> {
    if c.bookie_port == 0 && !c.allow_ephemeral_ports {
        return Err(MetaError::Config(
            "bookiePort 0 requires allowEphemeralPorts=true".into(),
        ));
    }
    let advertised = c
        .advertised_address
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let host = if let Some(a) = advertised {
        a.to_string()
    } else {
        let ip = interface_ip(c.listening_interface.as_deref())?;
        if c.use_host_name_as_bookie_id {
            let mut name = canonical_host_name(ip)?;
            if c.use_short_host_name {
                if let Some(i) = name.find('.') {
                    name.truncate(i);
                }
            }
            name
        } else {
            ip.to_string()
        }
    };
    if !c.allow_loopback && is_loopback_host(&host) {
        return Err(MetaError::Config(format!(
            "bookie address {host} is a loopback address; set allowLoopback=true to use it"
        )));
    }
    let id = match c
        .bookie_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        Some(id) => id.to_string(),
        None => format!("{host}:{}", c.bookie_port),
    };
    validate_bookie_id(&id)?;
    Ok(BookieAddress {
        id,
        host,
        port: c.bookie_port,
    })
}

fn is_loopback_host(host: &str) -> bool {
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host == "localhost",
    }
}

/// The address `listeningInterface` names: an address as written (the bookie listens on it,
/// so it is what clients reach), an interface's IPv4 address, or, unset or `0.0.0.0` (every
/// address), the address Java takes by default ([`java_default_host_ip`]).
fn interface_ip(name: Option<&str>) -> Result<IpAddr> {
    let mut name = name;
    if let Some(ip) = name.and_then(|n| n.trim().parse::<IpAddr>().ok()) {
        if !ip.is_unspecified() {
            return Ok(ip);
        }
        name = None;
    }
    match name {
        Some(n) => interface_ipv4(n).map(IpAddr::V4).ok_or_else(|| {
            MetaError::Config(format!("listeningInterface {n:?} has no IPv4 address"))
        }),
        None => java_default_host_ip(),
    }
}

/// The address a Java bookie takes with no `listeningInterface` (`"default"`):
/// `DNS.getDefaultHost` is `InetAddress.getLocalHost().getCanonicalHostName()` — the host
/// name resolved, then reverse-resolved (kept only if it resolves back to that address) — and
/// `BookieImpl.getBookieAddress` resolves that name again. IPv4 first, as the bookie's scripts
/// run Java with `preferIPv4Stack`. A host name that does not resolve is `localhost`, as Java
/// falls back to.
fn java_default_host_ip() -> Result<IpAddr> {
    let (host, canonical) = java_local_names();
    resolve_first(&canonical).ok_or_else(|| {
        MetaError::Config(format!(
            "unable to resolve the default host name {canonical} (of host {host}); set \
             advertisedAddress or listeningInterface"
        ))
    })
}

/// This host's name and its canonical name as Java's `InetAddress.getLocalHost()` and
/// `getCanonicalHostName()` give them (the canonical name is the address itself when its
/// reverse lookup does not lead back to it).
fn java_local_names() -> (String, String) {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    let local = resolve_first(&host)
        .or_else(|| resolve_first("localhost"))
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let canonical = match canonical_host_name(local) {
        Ok(name) if resolve_all(&name).contains(&local) => name,
        _ => local.to_string(),
    };
    (host, canonical)
}

/// Java's `DNS.getDefaultHost("default")`: the local host's canonical name (what a Java
/// replication worker writes into the locks it takes).
pub fn java_canonical_host_name() -> String {
    java_local_names().1
}

/// Every address `name` resolves to (the C library's resolver: /etc/hosts, DNS), IPv4 first.
fn resolve_all(name: &str) -> Vec<IpAddr> {
    use std::net::ToSocketAddrs;
    let mut all: Vec<IpAddr> = (name, 0)
        .to_socket_addrs()
        .map(|it| it.map(|a| a.ip()).collect())
        .unwrap_or_default();
    all.sort_by_key(|ip| !ip.is_ipv4()); // stable: resolver order within each family
    all
}

fn resolve_first(name: &str) -> Option<IpAddr> {
    resolve_all(name).into_iter().next()
}

fn interface_ipv4(name: &str) -> Option<Ipv4Addr> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|ifa| ifa.interface_name == name)
        .find_map(|ifa| Some(ifa.address?.as_sockaddr_in()?.ip()))
}

/// Reverse-resolves `ip` (getnameinfo with NI_NAMEREQD); fails like Java when the lookup only
/// gives back the address.
///
/// The crate's one `unsafe`: getnameinfo is the C library's resolver (NSS: /etc/hosts, DNS),
/// not a system call, and neither nix nor rustix wraps it.
#[allow(unsafe_code)]
fn canonical_host_name(ip: IpAddr) -> Result<String> {
    use nix::sys::socket::{SockaddrIn, SockaddrLike};
    let sin = match ip {
        IpAddr::V4(v4) => SockaddrIn::from(std::net::SocketAddrV4::new(v4, 0)),
        IpAddr::V6(_) => {
            return Err(MetaError::Config(
                "useHostNameAsBookieID with an IPv6 address is not supported".into(),
            ))
        }
    };
    let mut host = [0u8; 1025];
    // SAFETY: `sin` is a valid sockaddr_in of `sin.len()` bytes and `host` a writable buffer of
    // its length, both alive for the call; no service is asked for (null, 0).
    let rc = unsafe {
        libc::getnameinfo(
            sin.as_ptr(),
            sin.len(),
            host.as_mut_ptr().cast(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return Err(MetaError::Config(format!(
            "useHostNameAsBookieID=true but {ip} has no reverse DNS name"
        )));
    }
    // getnameinfo NUL-terminates `host` on success.
    let name = std::ffi::CStr::from_bytes_until_nul(&host)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == ip.to_string() {
        return Err(MetaError::Config(format!(
            "reverse lookup of {ip} returned the address itself"
        )));
    }
    Ok(name)
}

impl MetadataConfig {
    /// Builds the configuration from `bk_server.conf` keys; `get(key)` returns the raw value.
    /// `metadataServiceUri` wins over `zkServers` + `zkLedgersRootPath`. The bookie id and
    /// service info come from the caller (see [`derive_bookie_address`] and
    /// [`BookieServiceInfo::for_bookie`]).
    pub fn from_keys(
        get: impl Fn(&str) -> Option<String>,
        bookie_id: String,
        service_info: BookieServiceInfo,
    ) -> Result<Self> {
        let nonblank = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let uri = if let Some(u) = nonblank("metadataServiceUri") {
            parse_metadata_uri(&u)?
        } else if let Some(servers) = nonblank("zkServers") {
            let root = nonblank("zkLedgersRootPath").unwrap_or_else(|| DEFAULT_LEDGERS_ROOT.into());
            let root = root.trim_end_matches('/').to_string();
            validate_root(&root)?;
            let layout = match nonblank("ledgerManagerType").as_deref() {
                None => UriLayout::FromZk,
                Some("hierarchical") => UriLayout::Hierarchical,
                Some("longhierarchical") => UriLayout::LongHierarchical,
                Some("flat") => UriLayout::Flat,
                Some(o) => {
                    return Err(MetaError::Config(format!(
                        "unknown ledgerManagerType {o:?}"
                    )))
                }
            };
            MetadataUri {
                zk_servers: servers.replace(' ', ""),
                ledgers_root: root,
                layout,
            }
        } else {
            return Err(MetaError::Config(
                "neither metadataServiceUri nor zkServers is set".into(),
            ));
        };
        let timeout_ms = match nonblank("zkTimeout") {
            None => DEFAULT_ZK_TIMEOUT_MS,
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| MetaError::Config(format!("zkTimeout {v:?} is not a number")))?,
        };
        validate_bookie_id(&bookie_id)?;
        Ok(MetadataConfig {
            zk_servers: uri.zk_servers,
            ledgers_root: uri.ledgers_root,
            layout: uri.layout,
            session_timeout: Duration::from_millis(timeout_ms),
            bookie_id,
            service_info,
        })
    }

    /// A config for tools and tests: servers, root, no bookie identity needed.
    pub fn for_cluster(zk_servers: &str, ledgers_root: &str) -> Self {
        MetadataConfig {
            zk_servers: zk_servers.to_string(),
            ledgers_root: ledgers_root.trim_end_matches('/').to_string(),
            layout: UriLayout::FromZk,
            session_timeout: Duration::from_millis(DEFAULT_ZK_TIMEOUT_MS),
            bookie_id: String::new(),
            service_info: BookieServiceInfo::default(),
        }
    }

    pub(crate) fn path(&self, child: &str) -> String {
        format!("{}/{}", self.ledgers_root, child)
    }
    /// `<root>/available`
    pub fn available_path(&self) -> String {
        self.path("available")
    }
    /// `<root>/available/readonly`
    pub fn readonly_path(&self) -> String {
        self.path("available/readonly")
    }
    /// `<root>/cookies`
    pub fn cookies_path(&self) -> String {
        self.path("cookies")
    }
    /// `<root>/available/<id>` or `<root>/available/readonly/<id>`.
    pub fn registration_path(&self, read_only: bool) -> String {
        if read_only {
            format!("{}/{}", self.readonly_path(), self.bookie_id)
        } else {
            format!("{}/{}", self.available_path(), self.bookie_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `listeningInterface` by name: the loopback's IPv4 address; an unknown name has none.
    #[test]
    fn an_interfaces_ipv4_address() {
        assert_eq!(interface_ipv4("lo"), Some(Ipv4Addr::LOCALHOST));
        assert_eq!(interface_ipv4("no-such-if0"), None);
    }

    #[test]
    fn uri_forms() {
        let u = parse_metadata_uri("zk+hierarchical://zk1:2181;zk2:2181/ledgers").unwrap();
        assert_eq!(u.zk_servers, "zk1:2181,zk2:2181");
        assert_eq!(u.ledgers_root, "/ledgers");
        assert_eq!(u.layout, UriLayout::Hierarchical);
        let u = parse_metadata_uri("zk://h:1/a/b/").unwrap();
        assert_eq!(
            (u.ledgers_root.as_str(), u.layout),
            ("/a/b", UriLayout::FromZk)
        );
        assert_eq!(
            parse_metadata_uri("zk+null://h:1/x").unwrap().layout,
            UriLayout::FromZk
        );
        assert_eq!(
            parse_metadata_uri("zk+longhierarchical://h:1/x")
                .unwrap()
                .layout,
            UriLayout::LongHierarchical
        );
        assert!(parse_metadata_uri("zk+null:///ledgers").is_err());
        assert!(parse_metadata_uri("ledgers").is_err());
        assert!(parse_metadata_uri("etcd://h/ledgers").is_err());
        assert!(parse_metadata_uri("zk+weird://h:1/l").is_err());
        let p = parse_metadata_uri("metadata-store:zk:a:2181,b:2181/chroot").unwrap();
        assert_eq!(p.zk_servers, "a:2181,b:2181/chroot");
        assert_eq!(p.ledgers_root, "/ledgers");
    }

    #[test]
    fn keys_precedence() {
        let keys = |k: &str| match k {
            "metadataServiceUri" => Some("zk+hierarchical://h:2/l".to_string()),
            "zkServers" => Some("other:1".to_string()),
            "zkTimeout" => Some("6000".to_string()),
            _ => None,
        };
        let c =
            MetadataConfig::from_keys(keys, "h:3181".into(), BookieServiceInfo::default()).unwrap();
        assert_eq!(
            (c.zk_servers.as_str(), c.ledgers_root.as_str()),
            ("h:2", "/l")
        );
        assert_eq!(c.session_timeout, Duration::from_millis(6000));
        let legacy = |k: &str| match k {
            "zkServers" => Some("a:1,b:2".to_string()),
            _ => None,
        };
        let c = MetadataConfig::from_keys(legacy, "h:3181".into(), BookieServiceInfo::default())
            .unwrap();
        assert_eq!(
            (c.zk_servers.as_str(), c.ledgers_root.as_str()),
            ("a:1,b:2", "/ledgers")
        );
        assert!(
            MetadataConfig::from_keys(|_| None, "h:1".into(), BookieServiceInfo::default())
                .is_err()
        );
    }

    #[test]
    fn bookie_ids() {
        assert!(validate_bookie_id("10.0.0.1:3181").is_ok());
        assert!(validate_bookie_id("my-bookie_1.x").is_ok());
        assert!(validate_bookie_id("a@b").is_ok()); // inside Java's `:-_` range
        assert!(validate_bookie_id("ReadOnly").is_err());
        assert!(validate_bookie_id("a/b").is_err());
        assert!(validate_bookie_id("").is_err());
        let mut c = BookieIdConfig {
            advertised_address: Some(" 10.1.2.3 ".into()),
            bookie_port: 3181,
            ..Default::default()
        };
        let a = derive_bookie_address(&c).unwrap();
        assert_eq!(
            (a.id.as_str(), a.host.as_str(), a.port),
            ("10.1.2.3:3181", "10.1.2.3", 3181)
        );
        c.bookie_id = Some("bk-1".into());
        assert_eq!(derive_bookie_address(&c).unwrap().id, "bk-1");
        assert_eq!(derive_bookie_address(&c).unwrap().host, "10.1.2.3");
        c.advertised_address = Some("127.0.0.1".into());
        assert!(derive_bookie_address(&c).is_err());
        c.allow_loopback = true;
        assert!(derive_bookie_address(&c).is_ok());
        c.bookie_port = 0;
        assert!(derive_bookie_address(&c).is_err());
        let lo = BookieIdConfig {
            listening_interface: Some("lo".into()),
            bookie_port: 1,
            allow_loopback: true,
            ..Default::default()
        };
        assert_eq!(derive_bookie_address(&lo).unwrap().host, "127.0.0.1");
    }

    /// `listeningInterface` may be an address, as the bookie's own listener takes it: the id is
    /// built on that address (it used to be refused as an interface without an IPv4 address).
    #[test]
    fn listening_interface_may_be_an_address() {
        let c = BookieIdConfig {
            listening_interface: Some("127.0.0.1".into()),
            bookie_port: 3181,
            allow_loopback: true,
            ..Default::default()
        };
        let a = derive_bookie_address(&c).unwrap();
        assert_eq!(
            (a.id.as_str(), a.host.as_str()),
            ("127.0.0.1:3181", "127.0.0.1")
        );
        let c = BookieIdConfig {
            listening_interface: Some("10.9.8.7".into()),
            ..c
        };
        assert_eq!(derive_bookie_address(&c).unwrap().id, "10.9.8.7:3181");
        let c = BookieIdConfig {
            listening_interface: Some("0.0.0.0".into()),
            ..c
        };
        let all = derive_bookie_address(&c).unwrap();
        assert_ne!(all.host, "0.0.0.0", "the id names a reachable address");
        let c = BookieIdConfig {
            listening_interface: Some("nosuchif0".into()),
            ..c
        };
        let err = derive_bookie_address(&c).unwrap_err().to_string();
        assert!(err.contains("nosuchif0"), "{err}");
    }
}
