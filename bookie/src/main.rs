//! `bookie`: an Apache BookKeeper bookie on io_uring.
//!
//! - `bookie` with no arguments: a standalone bookie on 127.0.0.1:3181, data under ./data, no
//!   metadata store (the README's main job benchmarks it).
//! - `bookie serve [--conf bk_server.conf] [--port P] [--data-dir D] [--shards N] ...`: the
//!   same with settings from a bk_server.conf (`config/conf.rs`) and flags, which win over the file.
//!   An HTTP admin server (`admin/http.rs`) serves /metrics and /api/v1/bookie/... (standalone: on
//!   127.0.0.1:8080 unless `--no-http`; with a conf file: as `httpServerEnabled` says).
//! - `bookie inspect journal DIR`: prints the records of a journal directory (read-only);
//!   `bookie inspect java --conf F`: what a stopped Java bookie left on its disks.
//! - `bookie initnewcluster|metaformat|listbookies --conf bk_server.conf`: cluster metadata in
//!   ZooKeeper (`metadata::cli`). With `metadataServiceUri` or `zkServers` in its conf, `serve`
//!   checks cookies, registers and unregisters (`admin/cluster.rs`); exit code 1 on a cookie
//!   mismatch, 4 when the registration fails.

#![deny(unsafe_code)]

mod admin;
mod autorecovery;
mod config;
mod conn;
mod gc;
mod read;
mod security;
mod server;
mod shard;
mod sim;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::admin::cluster;
use crate::config::{conf, conf_env, BookieConfig};
use crate::store::{dir_audit, inspect, inspect_java, journal_recovery, lock};

#[derive(Parser, Debug)]
#[command(
    name = "bookie",
    version,
    about = "An Apache BookKeeper bookie on io_uring"
)]
struct Cli {
    /// More log output (-v debug, -vv trace); BOOKIE_LOG=level also works.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve (the default, with standalone settings).
    Serve(Box<ServeArgs>),
    /// Print what is on disk.
    Inspect {
        #[command(subcommand)]
        what: Inspect,
    },
    /// Create the cluster metadata in ZooKeeper (`<root>`, INSTANCEID, LAYOUT, ...).
    Initnewcluster(MetaArgs),
    /// Wipe and re-create the cluster metadata in ZooKeeper (a new INSTANCEID).
    Metaformat(MetaArgs),
    /// List the registered bookies (writable and read-only).
    Listbookies(MetaArgs),
    /// Print the cluster's instance id; fails while the cluster is not initialised (Java's
    /// `bookkeeper shell whatisinstanceid`).
    Whatisinstanceid(MetaArgs),
    /// Empty the bookie's journal, ledger and index directories (Java's `bookkeeper shell
    /// bookieformat [-nonInteractive] [-force] [-deleteCookie]`).
    Bookieformat {
        /// A bk_server.conf.
        #[arg(long, short = 'c')]
        conf: PathBuf,
        /// -nonInteractive (-n), -force (-f), -deleteCookie (-d), as Java spells them.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        flags: Vec<String>,
    },
    /// Run autorecovery alone, as Java's `bookkeeper autorecovery` (AutoRecoveryMain): an
    /// auditor candidate and a replication worker on the conf's metadata store, until SIGTERM.
    Autorecovery {
        /// A bk_server.conf.
        #[arg(long, short = 'c')]
        conf: PathBuf,
        /// Run only the auditor candidate, or only the worker (for pairing with Java's).
        #[arg(long, value_parser = ["both", "auditor", "worker"], default_value = "both", hide = true)]
        role: String,
    },
    /// Print a conf file's keys as the Java bookie's `getStringArray` reads them (JSON: key to
    /// elements, or to {"error": ...}); the interop tier compares it with Java's own reading.
    #[command(name = "conf-view", hide = true)]
    ConfView {
        #[arg(long, short = 'c')]
        conf: PathBuf,
    },
    /// Rewrite configuration files from the environment, as the Pulsar image's
    /// `bin/apply-config-from-env.py [--prefix P] FILE...` does (deploy/pulsar/).
    #[command(name = "apply-config-from-env")]
    ApplyConfigFromEnv {
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<String>,
    },
    /// The whole-bookie simulator (developers; `scripts/vopr`): seeds of a simulated bookie
    /// and its clients on a simulated disk, every reply checked.
    #[command(hide = true)]
    Sim(sim::cli::SimArgs),
}

#[derive(clap::Args, Debug)]
struct MetaArgs {
    /// A bk_server.conf with metadataServiceUri or zkServers (+ zkLedgersRootPath).
    #[arg(long, short = 'c')]
    conf: PathBuf,
}

#[derive(clap::Args, Debug, Default)]
struct ServeArgs {
    /// A bk_server.conf (Java properties); the flags below override what it sets.
    #[arg(long, short = 'c')]
    conf: Option<PathBuf>,
    /// httpServerPort: serve the HTTP admin server on this port (enables it).
    #[arg(long)]
    http_port: Option<u16>,
    /// No HTTP admin server.
    #[arg(long, conflicts_with = "http_port")]
    no_http: bool,
    /// Print the effective configuration (file, `BK_<key>` environment variables, flags) and
    /// where each value came from, then exit.
    #[arg(long)]
    print_config: bool,
    /// bookiePort.
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on.
    #[arg(long)]
    bind: Option<String>,
    /// Data directory: journal in DIR/journal, ledgers in DIR/ledgers.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// journalDirectories (overrides --data-dir for the journal; repeat or separate with
    /// commas for several).
    #[arg(long, value_delimiter = ',')]
    journal_dir: Vec<PathBuf>,
    /// ledgerDirectories (overrides --data-dir for ledgers; repeat or separate with commas).
    #[arg(long, value_delimiter = ',')]
    ledger_dir: Vec<PathBuf>,
    /// Shards (0 = one per core).
    #[arg(long)]
    shards: Option<usize>,
    /// Do not pin shard threads to cores.
    #[arg(long)]
    no_pin: bool,
    /// Use the pread/pwrite driver instead of io_uring.
    #[arg(long)]
    psync: bool,
    /// journalMaxGroupWaitMSec, in microseconds.
    #[arg(long)]
    group_wait_us: Option<u64>,
    /// Shortest time between two journal commits started because the disk fell idle, in
    /// microseconds (0: commit at once; fewer, fuller commits cost less CPU and I/O)
    #[arg(long)]
    commit_gap_us: Option<u64>,
    /// Cache-miss reads in flight across the bookie while a journal has records to make
    /// durable (default: one per shard; 0: no limit). With no journal waiting, `--read-depth`.
    #[arg(long)]
    reads_beside_journal: Option<usize>,
    /// Cache-miss reads in flight across the bookie while no journal waits (default 32: the
    /// queue depth at which this class of disk reaches its random-read rate).
    #[arg(long)]
    read_depth: Option<usize>,
    /// Write cache per shard, in MiB (flushed to ledger storage when half full).
    #[arg(long)]
    write_cache_mb: Option<usize>,
    /// flushInterval: flush the write cache at least this often, in milliseconds.
    #[arg(long)]
    flush_interval_ms: Option<u64>,
    /// journalRecoveryMode: `strict` refuses to start when the journal is corrupt (not just
    /// torn at its end); `tolerate` cuts the journal there, losing what follows, and starts.
    #[arg(long, value_parser = journal_recovery::parse_mode)]
    journal_recovery_mode: Option<journal::RecoveryMode>,
}

#[derive(Subcommand, Debug)]
enum Inspect {
    /// The records of a journal directory (one shard's, e.g. data/journal/shard-0).
    Journal { dir: PathBuf },
    /// Verify every entry of a ledger storage directory (e.g. data/ledgers/shard-0) and
    /// summarise its manifest, segments and index.
    Entrylog { dir: PathBuf },
    /// The entry ids the index holds for a ledger.
    Index { dir: PathBuf, ledger: u64 },
    /// A ledger's stored metadata (master key, fenced, LAC, last entry).
    Ledger { dir: PathBuf, ledger: u64 },
    /// What a stopped Java bookie left on the disks its bk_server.conf names (read-only):
    /// journals after the last mark, entry logs, and each ledger's key, fence, explicit LAC and
    /// entries (Interleaved/SortedLedgerStorage so far).
    Java {
        /// The Java bookie's configuration file.
        #[arg(long)]
        conf: PathBuf,
        /// List this ledger's entries and where each one is.
        #[arg(long)]
        ledger: Option<u64>,
        /// With --ledger: print each entry's bytes too (hex).
        #[arg(long)]
        bodies: bool,
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logline::init("BOOKIE_LOG", cli.verbose);
    let serve = |args: ServeArgs| {
        let print = args.print_config;
        let flags = serve_flags();
        let (config, sources) = settings(args).map_err(cluster::Failure::from)?;
        if print {
            print!("{}", conf_env::describe(&sources, &flags, &config));
            // `serve` would refuse these directories: say so here too (exit code 1), so that a
            // configuration checked this way is not taken for one that starts.
            return dir_audit::check(&config)
                .map(|_| ())
                .map_err(cluster::Failure::from);
        }
        for line in &sources.warnings {
            log::warn!("configuration: {line}");
        }
        let (unknown, ignored) = conf::key_report(&conf::Applied {
            ignored: sources.ignored.clone(),
            unknown: sources.unknown.clone(),
            ..Default::default()
        });
        if let Some(line) = unknown {
            log::warn!("{line}");
        }
        if let Some(line) = ignored {
            log::info!("{line}");
        }
        conf::check_startup_user(&config).map_err(cluster::Failure::from)?;
        exit_with_parent()?;
        // Before any shard reads the clock (20 ms when the time-stamp counter is a candidate).
        log::info!("timestamps from {}", admin::clock::calibrate());
        // Debug builds of the fault campaign only (storage::fault); refused otherwise.
        storage::fault::start_from_env()
            .map_err(|e| cluster::Failure::from(format!("fault injection: {e}")))?;
        server::run(config)
    };
    let result = match cli.command {
        None => serve(ServeArgs::default()),
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Initnewcluster(a)) => return meta_command("initnewcluster", &a),
        Some(Command::Metaformat(a)) => return meta_command("metaformat", &a),
        Some(Command::Listbookies(a)) => return meta_command("listbookies", &a),
        Some(Command::Whatisinstanceid(a)) => return meta_command("whatisinstanceid", &a),
        Some(Command::Bookieformat { conf, flags }) => bookieformat(&conf, &flags),
        Some(Command::Autorecovery { conf, role }) => run_autorecovery(&conf, &role),
        Some(Command::ConfView { conf }) => conf::read(&conf)
            .map(|read| {
                let view: serde_json::Map<String, serde_json::Value> =
                    conf::java_view(&read.properties)
                        .into_iter()
                        .map(|(k, v)| {
                            let v = match v {
                                Ok(list) => serde_json::json!(list),
                                Err(e) => serde_json::json!({ "error": e }),
                            };
                            (k, v)
                        })
                        .collect();
                println!("{}", serde_json::Value::Object(view));
            })
            .map_err(cluster::Failure::from),
        Some(Command::ApplyConfigFromEnv { args }) => {
            config::pulsar_env::main(&args).map_err(cluster::Failure::from)
        }
        Some(Command::Sim(args)) => sim::cli::main(args).map_err(cluster::Failure::from),
        Some(Command::Inspect { what }) => match what {
            Inspect::Journal { dir } => dir_audit::check_inspect_dir(&dir)
                .and_then(|()| lock::DirLock::acquire(dir.parent().unwrap_or(&dir)))
                .and_then(|_lock| inspect::journal(&dir)),
            Inspect::Entrylog { dir } => {
                dir_audit::check_inspect_dir(&dir).and_then(|()| inspect::entrylog(&dir))
            }
            Inspect::Index { dir, ledger } => {
                dir_audit::check_inspect_dir(&dir).and_then(|()| inspect::index(&dir, ledger))
            }
            Inspect::Ledger { dir, ledger } => {
                dir_audit::check_inspect_dir(&dir).and_then(|()| inspect::ledger(&dir, ledger))
            }
            Inspect::Java {
                conf,
                ledger,
                bodies,
                json,
            } => inspect_java::run(&conf, ledger, bodies, json),
        }
        .map_err(cluster::Failure::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{}", e.message);
            ExitCode::from(e.code.max(1))
        }
    }
}

/// `BOOKIE_EXIT_WITH_PARENT=1` (set by bkperf for the bookie it starts): the kernel sends this
/// process SIGTERM, its ordinary clean stop, when its parent dies, so a bkperf killed by a
/// signal does not leave its bookie running. An environment variable, not a flag, so that a
/// bkperf can start an older bookie (the regression gate does) without it refusing an unknown
/// argument.
fn exit_with_parent() -> Result<(), cluster::Failure> {
    if std::env::var_os("BOOKIE_EXIT_WITH_PARENT").is_none() {
        return Ok(());
    }
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(Some(nix::sys::signal::Signal::SIGTERM))
        .map_err(|e| cluster::Failure::from(format!("BOOKIE_EXIT_WITH_PARENT: {e}")))?;
    // The parent may have died before the death signal was armed.
    if nix::unistd::getppid() != parent {
        return Err(cluster::Failure::from(
            "BOOKIE_EXIT_WITH_PARENT: the parent is gone".to_string(),
        ));
    }
    Ok(())
}

/// The settings of a conf file and the `BK_<key>` variables over it, as `bookie serve` reads
/// them (for the commands that take `--conf`).
fn conf_settings(path: &std::path::Path) -> Result<BookieConfig, String> {
    let mut c = conf::conf_defaults();
    let file = conf::read(path)?;
    let props = conf_env::merge(file.properties, conf_env::properties(std::env::vars_os())?);
    conf::apply(&props, &mut c).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(c)
}

/// `bookie autorecovery --conf FILE`: the daemon until SIGTERM or SIGINT.
fn run_autorecovery(conf: &std::path::Path, role: &str) -> Result<(), cluster::Failure> {
    use ::autorecovery::live::daemon::{Daemon, Role};
    let c = conf_settings(conf)?;
    if !c.cluster.has_metadata_store() {
        return Err(cluster::Failure::from(format!(
            "{}: autorecovery needs metadataServiceUri or zkServers",
            conf.display()
        )));
    }
    let role = match role {
        "auditor" => Role::AuditorOnly,
        "worker" => Role::WorkerOnly,
        _ => Role::Both,
    };
    let cfg = crate::autorecovery::daemon_config(&c, role)?;
    let routes = std::sync::Arc::new(crate::autorecovery::routes::AutorecoveryRoutes::new(
        cfg.metadata.clone(),
        cfg.settings.clone(),
    ));
    let daemon = Daemon::start(cfg)?;
    // As Java's AutoRecoveryMain: its own HTTP server when httpServerEnabled (the Pulsar
    // chart's recovery pod is scraped there).
    let _http = if c.http.enabled {
        let tls = match c.http.tls.enabled {
            true => Some(
                c.http
                    .tls
                    .server_config()
                    .map_err(|e| cluster::Failure::from(format!("http server: {e}")))?,
            ),
            false => None,
        };
        let admin = crate::autorecovery::http::StandaloneAdmin {
            routes,
            status: daemon.status.clone(),
        };
        let server = crate::admin::http::HttpServer::start(admin, &c.http.host, c.http.port, tls)
            .map_err(cluster::Failure::from)?;
        log::info!("autorecovery: http server on {}", server.addr);
        Some(server)
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| cluster::Failure::from(format!("tokio runtime: {e}")))?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| cluster::Failure::from(format!("SIGTERM handler: {e}")))?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok::<(), cluster::Failure>(())
    })?;
    log::info!("autorecovery: stopping");
    daemon.stop();
    Ok(())
}

/// `bookie bookieformat --conf FILE [-nonInteractive] [-force] [-deleteCookie]`.
fn bookieformat(conf: &std::path::Path, flags: &[String]) -> Result<(), cluster::Failure> {
    let flags = store::format::Flags::parse(flags)?;
    let c = conf_settings(conf)?;
    match store::format::run(&c, &flags)? {
        true => Ok(()),
        false => Err(cluster::Failure::from("bookie format aborted".to_string())),
    }
}

/// `bookie initnewcluster|metaformat|listbookies|whatisinstanceid --conf FILE`:
/// `metadata::cli` with the metadata keys of the conf file.
fn meta_command(cmd: &str, args: &MetaArgs) -> ExitCode {
    let c = match conf_settings(&args.conf) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(metadata::EXIT_INVALID_CONF as u8);
        }
    };
    let k = |key: &str| cluster::conf_key(&c.cluster, key);
    let mut argv: Vec<String> = match (k("metadataServiceUri"), k("zkServers")) {
        (Some(uri), _) => vec!["--uri".into(), uri],
        (None, Some(servers)) => vec![
            "--zk".into(),
            servers,
            "--root".into(),
            c.cluster.zk_ledgers_root_path.clone(),
        ],
        (None, None) => {
            log::error!(
                "{}: neither metadataServiceUri nor zkServers is set",
                args.conf.display()
            );
            return ExitCode::from(metadata::EXIT_INVALID_CONF as u8);
        }
    };
    argv.push("--timeout-ms".into());
    argv.push(c.cluster.zk_timeout.as_millis().to_string());
    argv.push(cmd.into());
    ExitCode::from(u8::try_from(metadata::cli::run(&argv)).unwrap_or(1))
}

/// The command-line flags of `bookie serve` as given (for `--print-config`).
fn serve_flags() -> Vec<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let from = args.iter().position(|a| a == "serve").map_or(0, |i| i + 1);
    args[from..]
        .iter()
        .filter(|a| *a != "--print-config")
        .cloned()
        .collect()
}

/// The configuration: defaults, then the conf file and the `BK_<key>` environment variables
/// (`conf_env`: with either, Java's defaults underneath), then the flags.
fn settings(args: ServeArgs) -> Result<(BookieConfig, conf_env::Sources), String> {
    let env = conf_env::properties(std::env::vars_os())?;
    let mut warnings = Vec::new();
    let file = match &args.conf {
        Some(path) => {
            let read = conf::read(path)?;
            warnings.extend(conf::read_warnings(&read, path));
            Some((path.clone(), read.properties))
        }
        None => None,
    };
    let conf_mode = file.is_some() || !env.is_empty();
    let mut sources = conf_env::Sources {
        file,
        env,
        warnings,
        ..Default::default()
    };
    let (mut c, write_cache_total) = if conf_mode {
        let file_props = sources
            .file
            .as_ref()
            .map(|f| f.1.clone())
            .unwrap_or_default();
        let props = conf_env::merge(file_props, sources.env.clone());
        let mut c = conf::conf_defaults();
        let applied = conf::apply(&props, &mut c).map_err(|e| match &args.conf {
            Some(path) => format!("{}: {e}", path.display()),
            None => format!("configuration: {e}"),
        })?;
        sources.ignored = applied.ignored;
        sources.unknown = applied.unknown;
        sources.warnings.extend(applied.warnings);
        (c, applied.write_cache_total_bytes)
    } else {
        (BookieConfig::default(), None)
    };
    if let Some(dir) = args.data_dir {
        c.journal_dirs = vec![dir.join("journal")];
        c.ledger_dirs = vec![dir.join("ledgers")];
    }
    if !args.journal_dir.is_empty() {
        c.journal_dirs = args.journal_dir;
    }
    if !args.ledger_dir.is_empty() {
        c.ledger_dirs = args.ledger_dir;
    }
    if let Some(p) = args.port {
        c.port = p;
    }
    if let Some(b) = args.bind {
        c.bind_address = b;
    }
    if let Some(n) = args.shards {
        c.shards = n;
    }
    if let Some(n) = args.reads_beside_journal {
        c.reads_beside_journal = Some(n);
    }
    if let Some(n) = args.read_depth {
        c.read_depth = n.max(1);
    }
    if let Some(us) = args.commit_gap_us {
        c.journal.idle_commit_gap_us = us;
    }
    if let Some(us) = args.group_wait_us {
        c.journal.max_group_wait_us = us;
    }
    if let Some(mb) = args.write_cache_mb {
        c.write_cache_bytes = mb << 20;
    }
    if let Some(mode) = args.journal_recovery_mode {
        c.journal.recovery_mode = mode;
    }
    if let Some(ms) = args.flush_interval_ms {
        c.flush_interval = std::time::Duration::from_millis(ms);
    }
    c.pin_threads = !args.no_pin;
    c.force_psync = args.psync;
    if let (Some(total), None) = (write_cache_total, args.write_cache_mb) {
        c.write_cache_bytes = (total / c.shard_count()).max(1 << 20);
    }
    if !conf_mode {
        c.http.host = c.bind_address.clone();
    }
    if let Some(port) = args.http_port {
        c.http.port = port;
        c.http.enabled = true;
        c.http.required = true;
    }
    if args.no_http {
        c.http.enabled = false;
    }
    conf::validate(&c)?;
    Ok((c, sources))
}
