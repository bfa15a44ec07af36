//! The crate's error type: one enum for configuration, ZooKeeper, cookie and layout failures,
//! so that the bookie can map each to an exit code and print a message that says what is wrong.

use std::fmt;

/// Exit code the Java bookie uses when registration in ZooKeeper fails (`ExitCode.ZK_REG_FAIL`).
pub const EXIT_ZK_REG_FAIL: i32 = 4;
/// Exit code the Java bookie uses for an invalid configuration (`ExitCode.INVALID_CONF`),
/// which is also what a cookie mismatch ends in (`BookieException.InvalidCookieException`
/// thrown from the bookie's constructor → `ExitCode.INVALID_CONF`).
pub const EXIT_INVALID_CONF: i32 = 1;

/// Everything that can go wrong in this crate.
#[derive(Debug)]
pub enum MetaError {
    /// A configuration value is missing or malformed.
    Config(String),
    /// A ZooKeeper operation failed; `op` says what we were doing.
    Zk {
        op: String,
        err: zookeeper_client::Error,
    },
    /// `<root>` does not exist: the cluster was never initialised (`metaformat`/`initnewcluster`).
    ClusterNotInitialized(String),
    /// `initnewcluster` found `<root>` already there.
    ClusterExists(String),
    /// A registration node is still owned by another (live) session after waiting.
    StaleRegistration {
        path: String,
        owner: i64,
        waited_ms: u64,
    },
    /// A cookie does not match, is missing where it must exist, or cannot be parsed.
    InvalidCookie(String),
    /// Local file system error (cookie files).
    Io { path: String, err: std::io::Error },
    /// `<root>/LAYOUT` is missing, unknown or not parseable: refuse to list ledgers.
    Layout(String),
    /// A znode held data we cannot interpret (never panics, always this).
    BadData(String),
    /// The GC safety rule refused to produce a deletion set.
    GcRefused(String),
    /// The registration handle's task is gone.
    Closed,
}

impl MetaError {
    pub(crate) fn zk(op: impl Into<String>, err: zookeeper_client::Error) -> Self {
        MetaError::Zk { op: op.into(), err }
    }
    pub(crate) fn io(path: impl AsRef<std::path::Path>, err: std::io::Error) -> Self {
        MetaError::Io {
            path: path.as_ref().display().to_string(),
            err,
        }
    }

    /// The process exit code the Java bookie would use for this failure at startup.
    pub fn exit_code(&self) -> i32 {
        match self {
            MetaError::Config(_) | MetaError::InvalidCookie(_) => EXIT_INVALID_CONF,
            _ => EXIT_ZK_REG_FAIL,
        }
    }
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaError::Config(m) => write!(f, "metadata configuration: {m}"),
            MetaError::Zk { op, err } => write!(f, "ZooKeeper: {op}: {err}"),
            MetaError::ClusterNotInitialized(root) => write!(
                f,
                "BookKeeper metadata doesn't exist in ZooKeeper ({root} is missing); has the cluster \
                 been initialized? Run `bookie initnewcluster` or `bookkeeper shell metaformat`"
            ),
            MetaError::ClusterExists(root) => {
                write!(f, "{root} already exists in ZooKeeper; refusing to initialise a new cluster")
            }
            MetaError::StaleRegistration {
                path,
                owner,
                waited_ms,
            } => write!(
                f,
                "registration node {path} still belongs to ZooKeeper session {owner:#x} after \
                 waiting {waited_ms} ms, longer than a dead session lives: another bookie is \
                 running with the same id"
            ),
            MetaError::InvalidCookie(m) => write!(f, "invalid cookie: {m}"),
            MetaError::Io { path, err } => write!(f, "{path}: {err}"),
            MetaError::Layout(m) => write!(f, "ledger layout: {m}"),
            MetaError::BadData(m) => write!(f, "bad metadata: {m}"),
            MetaError::GcRefused(m) => write!(f, "garbage collection refused: {m}"),
            MetaError::Closed => write!(f, "the registration task has stopped"),
        }
    }
}

impl std::error::Error for MetaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MetaError::Zk { err, .. } => Some(err),
            MetaError::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = MetaError> = std::result::Result<T, E>;
