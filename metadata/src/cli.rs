//! Command-line tools over the cluster metadata, for tests and operators; the bookie binary can
//! forward `bookie initnewcluster|metaformat|listbookies|listledgers ...` to [`run`].
//!
//! ```text
//! bk-metadata [--uri zk+hierarchical://127.0.0.1:2181/ledgers | --zk HOSTS [--root /ledgers]]
//!             initnewcluster | metaformat | listbookies | listledgers
//!             | createledgers ID... | deleteledgers ID...
//! ```
//!
//! `createledgers` writes placeholder metadata znodes (an empty body: enough for garbage
//! collection, which only looks at which ids exist) for tests and benchmarks whose ledgers were
//! written without a client's metadata; `deleteledgers` removes ledger znodes as a client's
//! `deleteLedger` does, leaving the bookies to collect the data.

use crate::cluster;
use crate::config::{parse_metadata_uri, MetadataConfig};
use crate::error::{MetaError, Result};
use crate::ledgers;
use crate::zk;

const USAGE: &str = "usage: bk-metadata [--uri METADATA_SERVICE_URI | --zk HOSTS [--root PATH]] \
                     [--timeout-ms N] initnewcluster|metaformat|listbookies|listledgers|\
                     createledgers ID...|deleteledgers ID...";

fn parse(args: &[String]) -> Result<(MetadataConfig, String, Vec<u64>)> {
    let mut uri = None;
    let mut servers = None;
    let mut root = "/ledgers".to_string();
    let mut timeout_ms = None;
    let mut cmd = None;
    let mut ids = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| MetaError::Config(format!("{name} needs a value")))
        };
        match a.as_str() {
            "--uri" => uri = Some(val("--uri")?),
            "--zk" => servers = Some(val("--zk")?),
            "--root" => root = val("--root")?,
            "--timeout-ms" => {
                let v = val("--timeout-ms")?;
                timeout_ms = Some(
                    v.parse::<u64>()
                        .map_err(|_| MetaError::Config(format!("bad --timeout-ms {v}")))?,
                );
            }
            "-h" | "--help" => return Err(MetaError::Config(USAGE.into())),
            c if !c.starts_with('-') && cmd.is_none() => cmd = Some(c.to_string()),
            c if cmd.is_some() && c.bytes().all(|b| b.is_ascii_digit()) && !c.is_empty() => {
                ids.push(
                    c.parse::<u64>()
                        .ok()
                        .filter(|&id| id <= i64::MAX as u64)
                        .ok_or_else(|| MetaError::Config(format!("bad ledger id {c}")))?,
                );
            }
            other => {
                return Err(MetaError::Config(format!(
                    "unexpected argument {other:?}\n{USAGE}"
                )))
            }
        }
    }
    let mut cfg = match (uri, servers) {
        (Some(u), _) => {
            let u = parse_metadata_uri(&u)?;
            let mut c = MetadataConfig::for_cluster(&u.zk_servers, &u.ledgers_root);
            c.layout = u.layout;
            c
        }
        (None, Some(s)) => MetadataConfig::for_cluster(&s, &root),
        (None, None) => {
            return Err(MetaError::Config(format!(
                "--uri or --zk is required\n{USAGE}"
            )))
        }
    };
    if let Some(t) = timeout_ms {
        cfg.session_timeout = std::time::Duration::from_millis(t);
    }
    let cmd = cmd.ok_or_else(|| MetaError::Config(USAGE.into()))?;
    Ok((cfg, cmd, ids))
}

async fn exec(cfg: &MetadataConfig, cmd: &str, ids: &[u64]) -> Result<()> {
    let zk = zk::connect(cfg).await?;
    match cmd {
        "initnewcluster" => {
            let id = cluster::init_new_cluster(&zk, cfg).await?;
            println!("initialised {} with INSTANCEID {id}", cfg.ledgers_root);
        }
        "metaformat" => {
            let id = cluster::metaformat(&zk, cfg).await?;
            println!("formatted {} with new INSTANCEID {id}", cfg.ledgers_root);
        }
        "listbookies" => {
            let l = cluster::list_bookies(&zk, cfg).await?;
            println!("ReadWrite Bookies :");
            for b in &l.writable {
                println!("{b}");
            }
            println!("Readonly Bookies :");
            for b in &l.read_only {
                println!("{b}");
            }
        }
        "listledgers" => {
            for id in ledgers::live_ledgers(&zk, cfg, None).await? {
                println!("{id}");
            }
        }
        "createledgers" => {
            let layout = cluster::ensure_layout(&zk, cfg).await?;
            for &id in ids {
                let path = cfg.path(ledgers::ledger_path(layout, id).trim_start_matches('/'));
                let parent = &path[..path.rfind('/').unwrap_or(0)];
                match zk.mkdir(parent, &zk::PERSISTENT).await {
                    Ok(()) | Err(crate::zookeeper::Error::NodeExists) => {}
                    Err(e) => return Err(MetaError::zk(format!("mkdir {parent}"), e)),
                }
                zk.create(&path, b"", &zk::PERSISTENT)
                    .await
                    .map_err(|e| MetaError::zk(format!("create {path}"), e))?;
                println!("created {path}");
            }
        }
        "deleteledgers" => {
            let layout = cluster::read_layout(&zk, cfg).await?.ok_or_else(|| {
                MetaError::Layout(format!("{}/LAYOUT is missing", cfg.ledgers_root))
            })?;
            for &id in ids {
                let path = cfg.path(ledgers::ledger_path(layout, id).trim_start_matches('/'));
                zk.delete(&path, None)
                    .await
                    .map_err(|e| MetaError::zk(format!("delete {path}"), e))?;
                println!("deleted {path}");
            }
        }
        other => {
            return Err(MetaError::Config(format!(
                "unknown command {other:?}\n{USAGE}"
            )))
        }
    }
    Ok(())
}

/// Runs the CLI with `args` (without the program name) on its own current-thread runtime;
/// returns the process exit code. Not callable from inside a tokio runtime: use [`run_async`].
pub fn run(args: &[String]) -> i32 {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(run_async(args)),
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            1
        }
    }
}

/// [`run`] for callers already on a tokio runtime.
pub async fn run_async(args: &[String]) -> i32 {
    let (cfg, cmd, ids) = match parse(args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    match exec(&cfg, &cmd, &ids).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}
