//! Command-line tools over the cluster metadata, for tests and operators; the bookie binary can
//! forward `bookie initnewcluster|metaformat|listbookies|listledgers ...` to [`run`].
//!
//! ```text
//! bk-metadata [--uri zk+hierarchical://127.0.0.1:2181/ledgers | --zk HOSTS [--root /ledgers]]
//!             initnewcluster | metaformat | listbookies | listledgers
//! ```

use crate::cluster;
use crate::config::{parse_metadata_uri, MetadataConfig};
use crate::error::{MetaError, Result};
use crate::ledgers;
use crate::zk;

const USAGE: &str = "usage: bk-metadata [--uri METADATA_SERVICE_URI | --zk HOSTS [--root PATH]] \
                     [--timeout-ms N] initnewcluster|metaformat|listbookies|listledgers";

fn parse(args: &[String]) -> Result<(MetadataConfig, String)> {
    let mut uri = None;
    let mut servers = None;
    let mut root = "/ledgers".to_string();
    let mut timeout_ms = None;
    let mut cmd = None;
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
    Ok((cfg, cmd))
}

async fn exec(cfg: &MetadataConfig, cmd: &str) -> Result<()> {
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
    let (cfg, cmd) = match parse(args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    match exec(&cfg, &cmd).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}
