//! Command-line tools over the cluster metadata, for tests and operators; the bookie binary can
//! forward `bookie initnewcluster|metaformat|listbookies ...` to [`run`].
//!
//! ```text
//! bk-metadata [--uri zk+hierarchical://127.0.0.1:2181/ledgers | --zk HOSTS [--root /ledgers]]
//!             [--timeout-ms N]
//!             initnewcluster | metaformat | listbookies | whatisinstanceid | listledgers
//!             | createledgers ID... | deleteledgers ID...
//! ```
//!
//! The arguments are parsed with clap; the options may also follow the command. One of `--uri`
//! and `--zk` is required (`--uri` wins when both are given; `--root` only goes with `--zk`), and
//! ledger ids are decimal and at most `i64::MAX`. A bad command line exits 2 with the error and
//! the usage on stderr; `-h`/`--help` prints the help on stdout and exits 0.
//!
//! `createledgers` writes placeholder metadata znodes (an empty body: enough for garbage
//! collection, which only looks at which ids exist) for tests and benchmarks whose ledgers were
//! written without a client's metadata; `deleteledgers` removes ledger znodes as a client's
//! `deleteLedger` does, leaving the bookies to collect the data.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

use crate::cluster;
use crate::config::{parse_metadata_uri, MetadataConfig, MetadataUri, DEFAULT_LEDGERS_ROOT};
use crate::error::{MetaError, Result};
use crate::ledgers;
use crate::zk;

/// Cluster metadata tools over ZooKeeper.
#[derive(Parser, Debug)]
#[command(
    name = "bk-metadata",
    override_usage = "bk-metadata [--uri METADATA_SERVICE_URI | --zk HOSTS [--root PATH]] \
                      [--timeout-ms N] <COMMAND>",
    disable_help_subcommand = true,
    args_override_self = true
)]
struct Cli {
    /// The metadata service URI, e.g. zk+hierarchical://127.0.0.1:2181/ledgers.
    #[arg(long, value_name = "METADATA_SERVICE_URI", global = true, value_parser = parse_uri)]
    uri: Option<MetadataUri>,
    /// The ZooKeeper connect string (h1:p1,h2:p2), when there is no --uri.
    #[arg(long, value_name = "HOSTS", global = true)]
    zk: Option<String>,
    /// The ledgers root znode, with --zk.
    #[arg(long, value_name = "PATH", global = true, default_value = DEFAULT_LEDGERS_ROOT)]
    root: String,
    /// The ZooKeeper session timeout in milliseconds.
    #[arg(long, value_name = "N", global = true)]
    timeout_ms: Option<u64>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
enum Cmd {
    /// Create the cluster metadata (<root>, INSTANCEID, LAYOUT, ...).
    Initnewcluster,
    /// Wipe and re-create the cluster metadata (a new INSTANCEID).
    Metaformat,
    /// List the registered bookies (writable and read-only).
    Listbookies,
    /// Print the cluster's instance id (exit 0), or fail when the cluster is not initialised
    /// (`bookkeeper shell whatisinstanceid`, which the Pulsar chart's init containers wait on).
    Whatisinstanceid,
    /// List the ledger ids that have metadata.
    Listledgers,
    /// Create placeholder metadata znodes for these ledger ids.
    Createledgers {
        /// Ledger ids (decimal, at most 9223372036854775807).
        #[arg(value_name = "ID", value_parser = parse_ledger_id)]
        ids: Vec<u64>,
    },
    /// Delete the metadata znodes of these ledger ids.
    Deleteledgers {
        /// Ledger ids (decimal, at most 9223372036854775807).
        #[arg(value_name = "ID", value_parser = parse_ledger_id)]
        ids: Vec<u64>,
    },
}

fn parse_uri(s: &str) -> std::result::Result<MetadataUri, String> {
    parse_metadata_uri(s).map_err(|e| e.to_string())
}

/// A ledger id: decimal digits only, at most `i64::MAX` (ledger ids are Java longs).
fn parse_ledger_id(s: &str) -> std::result::Result<u64, String> {
    Some(s)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&id| id <= i64::MAX as u64)
        .ok_or_else(|| format!("bad ledger id {s} (a decimal number at most {})", i64::MAX))
}

/// Parses `args` (without the program name) into the metadata configuration and the command.
fn parse(args: &[String]) -> std::result::Result<(MetadataConfig, Cmd), clap::Error> {
    let cli =
        Cli::try_parse_from(std::iter::once("bk-metadata").chain(args.iter().map(|a| a.as_str())))?;
    let mut cfg = match (cli.uri, cli.zk) {
        (Some(u), _) => {
            let mut c = MetadataConfig::for_cluster(&u.zk_servers, &u.ledgers_root);
            c.layout = u.layout;
            c
        }
        (None, Some(s)) => MetadataConfig::for_cluster(&s, &cli.root),
        (None, None) => {
            return Err(Cli::command().error(
                ErrorKind::MissingRequiredArgument,
                "--uri or --zk is required",
            ))
        }
    };
    if let Some(t) = cli.timeout_ms {
        cfg.session_timeout = std::time::Duration::from_millis(t);
    }
    Ok((cfg, cli.command))
}

async fn exec(cfg: &MetadataConfig, cmd: &Cmd) -> Result<()> {
    let zk = zk::connect(cfg).await?;
    match cmd {
        Cmd::Initnewcluster => {
            let id = cluster::init_new_cluster(&zk, cfg).await?;
            println!("initialised {} with INSTANCEID {id}", cfg.ledgers_root);
        }
        Cmd::Metaformat => {
            let id = cluster::metaformat(&zk, cfg).await?;
            println!("formatted {} with new INSTANCEID {id}", cfg.ledgers_root);
        }
        Cmd::Listbookies => {
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
        Cmd::Whatisinstanceid => {
            let id = cluster::read_instance_id(&zk, cfg)
                .await?
                .ok_or_else(|| MetaError::ClusterNotInitialized(cfg.ledgers_root.clone()))?;
            println!(
                "Metadata Service Uri: zk+{}://{}{} InstanceId: {id}",
                cfg.layout.scheme_name(),
                cfg.zk_servers.replace(',', ";"),
                cfg.ledgers_root
            );
        }
        Cmd::Listledgers => {
            for id in ledgers::live_ledgers(&zk, cfg, None).await? {
                println!("{id}");
            }
        }
        Cmd::Createledgers { ids } => {
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
        Cmd::Deleteledgers { ids } => {
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
            // The help on stdout with 0; a usage error on stderr with 2.
            let _ = e.print();
            return e.exit_code();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UriLayout;
    use std::time::Duration;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn ok(s: &str) -> (MetadataConfig, Cmd) {
        parse(&argv(s)).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn err(s: &str) -> clap::Error {
        match parse(&argv(s)) {
            Ok(v) => panic!("{s:?} parsed as {v:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn zk_with_default_and_given_root() {
        let (c, cmd) = ok("--zk 127.0.0.1:2181 initnewcluster");
        assert_eq!(cmd, Cmd::Initnewcluster);
        assert_eq!(c.zk_servers, "127.0.0.1:2181");
        assert_eq!(c.ledgers_root, "/ledgers");
        assert_eq!(c.layout, UriLayout::FromZk);
        assert_eq!(c.session_timeout, Duration::from_millis(10_000));

        let (c, cmd) = ok("--zk h1:1,h2:2 --root /other/ --timeout-ms 2500 metaformat");
        assert_eq!(cmd, Cmd::Metaformat);
        assert_eq!(c.zk_servers, "h1:1,h2:2");
        assert_eq!(c.ledgers_root, "/other");
        assert_eq!(c.session_timeout, Duration::from_millis(2500));
    }

    #[test]
    fn uri_wins_over_zk_and_root() {
        let (c, cmd) = ok(
            "--zk ignored:1 --root /ignored --uri zk+hierarchical://a:1;b:2/my/ledgers listbookies",
        );
        assert_eq!(cmd, Cmd::Listbookies);
        assert_eq!(c.zk_servers, "a:1,b:2");
        assert_eq!(c.ledgers_root, "/my/ledgers");
        assert_eq!(c.layout, UriLayout::Hierarchical);
    }

    #[test]
    fn the_argv_the_bookie_forwards() {
        // bookie/src/main.rs `meta_command`: no program name, options first, then the command.
        for cmd in ["initnewcluster", "metaformat", "listbookies"] {
            let (c, _) = ok(&format!(
                "--uri zk://z:2181/ledgers --timeout-ms 30000 {cmd}"
            ));
            assert_eq!(c.session_timeout, Duration::from_millis(30_000));
            let (c, _) = ok(&format!("--zk z:2181 --root /bk --timeout-ms 10000 {cmd}"));
            assert_eq!(c.ledgers_root, "/bk");
        }
    }

    #[test]
    fn commands_and_ids() {
        assert_eq!(ok("--zk z listledgers").1, Cmd::Listledgers);
        assert_eq!(
            ok("--zk z createledgers 1 2 9223372036854775807").1,
            Cmd::Createledgers {
                ids: vec![1, 2, i64::MAX as u64]
            }
        );
        assert_eq!(
            ok("--zk z deleteledgers 0 42").1,
            Cmd::Deleteledgers { ids: vec![0, 42] }
        );
        // no ids is allowed (nothing to do), as before
        assert_eq!(
            ok("--zk z createledgers").1,
            Cmd::Createledgers { ids: vec![] }
        );
    }

    #[test]
    fn options_after_the_command_and_repeated() {
        let (c, cmd) = ok("createledgers 7 --zk z --root /r 8 --timeout-ms 5");
        assert_eq!(cmd, Cmd::Createledgers { ids: vec![7, 8] });
        assert_eq!(
            (c.zk_servers.as_str(), c.ledgers_root.as_str()),
            ("z", "/r")
        );
        assert_eq!(c.session_timeout, Duration::from_millis(5));
        // the last one wins
        let (c, _) = ok("--zk a --zk b listledgers");
        assert_eq!(c.zk_servers, "b");
    }

    #[test]
    fn missing_uri_and_zk() {
        let e = err("initnewcluster");
        assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument);
        assert!(e.to_string().contains("--uri or --zk is required"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = err("--root /ledgers --timeout-ms 5 listbookies");
        assert!(e.to_string().contains("--uri or --zk is required"), "{e}");
    }

    #[test]
    fn missing_or_unknown_command() {
        assert_eq!(err("--zk z").exit_code(), 2);
        assert_eq!(err("").exit_code(), 2);
        let e = err("--zk z frobnicate");
        assert_eq!(e.kind(), ErrorKind::InvalidSubcommand);
        assert!(e.to_string().contains("frobnicate"), "{e}");
        // `help` is not a command
        assert_eq!(err("--zk z help").kind(), ErrorKind::InvalidSubcommand);
    }

    #[test]
    fn bad_ledger_ids() {
        for bad in [
            "x",
            "+5",
            "1.0",
            "0x10",
            "9223372036854775808",
            "18446744073709551616",
        ] {
            let e = err(&format!("--zk z createledgers 1 {bad}"));
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{bad}");
            assert!(
                e.to_string().contains(&format!("bad ledger id {bad}")),
                "{e}"
            );
            assert_eq!(e.exit_code(), 2);
        }
        assert_eq!(
            err("--zk z deleteledgers nope").kind(),
            ErrorKind::ValueValidation
        );
        // a negative id reads as an unknown option
        assert_eq!(
            err("--zk z deleteledgers -1").kind(),
            ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn unknown_arguments_and_bad_values() {
        let e = err("--zk z --bogus listledgers");
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--bogus"), "{e}");
        // ids only go with createledgers/deleteledgers
        assert_eq!(
            err("--zk z listledgers 5").kind(),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            err("--zk z initnewcluster extra").kind(),
            ErrorKind::UnknownArgument
        );
        assert_eq!(err("--zk").kind(), ErrorKind::InvalidValue);
        assert_eq!(
            err("--zk z --timeout-ms soon listledgers").kind(),
            ErrorKind::ValueValidation
        );
        let e = err("--uri http://z:2181/ledgers listledgers");
        assert_eq!(e.kind(), ErrorKind::ValueValidation);
        assert!(e.to_string().contains("scheme must be zk"), "{e}");
    }

    #[test]
    fn help_exits_zero() {
        for h in ["--help", "-h", "--zk z -h", "createledgers --help"] {
            let e = err(h);
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{h}");
            assert_eq!(e.exit_code(), 0, "{h}");
            assert!(e.to_string().contains("Usage: bk-metadata"), "{e}");
        }
        let help = err("--help").to_string();
        for word in [
            "--uri <METADATA_SERVICE_URI>",
            "--zk <HOSTS>",
            "--root <PATH>",
            "--timeout-ms <N>",
            "initnewcluster",
            "deleteledgers",
        ] {
            assert!(help.contains(word), "{word} not in {help}");
        }
    }

    #[test]
    fn run_exit_codes_without_zookeeper() {
        // parse errors return before any connection is attempted (help: `help_exits_zero`)
        assert_eq!(run(&argv("listledgers")), 2);
        assert_eq!(run(&argv("--zk z createledgers bad")), 2);
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
