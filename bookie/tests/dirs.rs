//! Several journal and ledger directories (`journalDirectories`, `ledgerDirectories` as lists):
//! every journal directory journals for a shard, entry logs spread over every ledger directory,
//! and what was written reads back after a restart from wherever it went.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
mod common;

use common::bookie::BookieBuilder;
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, StatusCode};

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: entry(ledger, e, e - 1, &[e as u8; 2000]),
        recovery: false,
        write_flags: None,
    }
}

fn status_of(c: &mut BlockingClient, r: Request) -> StatusCode {
    c.call_v3(r, None).expect("call").response.status()
}

/// Entry-log segments (`*.log`) below `dir`, recursively.
fn segments(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += segments(&p);
        } else if p.extension().is_some_and(|x| x == "log") {
            n += 1;
        }
    }
    n
}

/// Writes `dir/bk_server.conf` for a bookie on `port` with these directories (lists joined as
/// Java does) and `extra` lines; returns its path.
fn write_conf(
    dir: &Path,
    port: u16,
    journals: &[PathBuf],
    ledgers: &[PathBuf],
    extra: &str,
) -> PathBuf {
    let list = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let conf = dir.join("bk_server.conf");
    std::fs::write(
        &conf,
        format!(
            "bookiePort={port}\nlisteningInterface=lo\njournalDirectories={}\n\
             ledgerDirectories={}\n{extra}",
            list(journals),
            list(ledgers)
        ),
    )
    .unwrap();
    conf
}

#[test]
fn journals_and_entry_logs_spread_over_every_directory() {
    let dir = common::tempdir("bookie-dirs-");
    let journals: Vec<PathBuf> = (0..2).map(|k| dir.path().join(format!("j{k}"))).collect();
    let ledgers: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("l{k}"))).collect();
    let (port, http) = (free_port(), free_port());
    let conf = write_conf(
        dir.path(),
        port,
        &journals,
        &ledgers,
        &format!("logSizeLimit=131072\nhttpServerEnabled=true\nhttpServerPort={http}\n"),
    );
    let builder = BookieBuilder::serve_conf(&conf, port)
        .args(["--no-pin"])
        .http_port(http);
    // One shard: two journal directories need two.
    let refused = builder.command().args(["--shards", "1"]).output().unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("2 journal directories but 1 shards"), "{err}");

    let builder = builder.args(["--shards", "2"]);
    let mut b = builder.start();
    let mut c = b.client();
    for ledger in 1..=8i64 {
        for e in 0..60 {
            assert_eq!(status_of(&mut c, add(ledger, e)), StatusCode::EOK);
        }
    }
    let (code, body) = b.http("PUT", "/api/v1/bookie/flush", "{}");
    assert_eq!(code, 200, "{body}");
    // The flush runs on the shards' flush threads: wait until the write caches are empty.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, metrics) = b.http("GET", "/metrics", "");
        let cached: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("bookie_write_cache_size"))
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
            .sum();
        if cached == 0.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "write cache never flushed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for j in &journals {
        assert!(
            j.join("LOCK").exists() || j.read_dir().unwrap().next().is_some(),
            "{} in use",
            j.display()
        );
    }
    assert!(journals[0].join("shard-0").is_dir() && journals[1].join("shard-1").is_dir());
    // ~960 KB of entries in 128 KiB segments over 3 directories, each used.
    let per_dir: Vec<usize> = ledgers.iter().map(|l| segments(l)).collect();
    assert!(
        per_dir.iter().all(|&n| n > 0),
        "segments per directory: {per_dir:?}"
    );
    b.stop();

    // Back from every directory after a restart; the metrics name every ledger directory.
    let mut b = builder.start();
    let mut c = b.client();
    for ledger in 1..=8i64 {
        for e in 0..60 {
            let r = c.call_v3(read(ledger, e), None).expect("read");
            assert_eq!(r.response.status(), StatusCode::EOK, "{ledger}:{e}");
        }
    }
    let (_, metrics) = b.http("GET", "/metrics", "");
    assert!(metrics.contains("bookie_ledger_num_dirs 3"), "{metrics}");
    b.stop();

    // A duplicate directory is a configuration error naming the key.
    std::fs::write(
        &conf,
        format!(
            "bookiePort={port}\njournalDirectories={0},{0}\nledgerDirectories={1}\n",
            journals[0].display(),
            ledgers[0].display()
        ),
    )
    .unwrap();
    let out = BookieBuilder::serve_conf(&conf, port)
        .command()
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("journalDirectories") && err.contains("twice"),
        "{err}"
    );
}

/// The default shard count on pinned shard threads: each shard's ledger storage makes its home
/// in the directory it owns (shard n: ledger directory n mod 2), as with `--shards` given.
/// Before the count was fixed on the main thread, a pinned shard counted the one core it may
/// run on, and every shard but shard 0 found no directory of its own.
#[test]
fn default_shards_on_pinned_threads_own_their_directories() {
    let dir = common::tempdir("bookie-pinned-");
    // One journal directory: with two, the count is at least two whatever the cores say.
    let journals: Vec<PathBuf> = vec![dir.path().join("j0")];
    let ledgers: Vec<PathBuf> = (0..2).map(|k| dir.path().join(format!("l{k}"))).collect();
    let port = free_port();
    let conf = write_conf(
        dir.path(),
        port,
        &journals,
        &ledgers,
        "httpServerEnabled=false\n",
    );
    // No --no-pin, no --shards: pinned shards, as many as the cores.
    let mut b = BookieBuilder::serve_conf(&conf, port).start();
    let mut c = b.client();
    for ledger in 1..=8i64 {
        assert_eq!(status_of(&mut c, add(ledger, 0)), StatusCode::EOK);
    }
    b.stop();
    let shards: Vec<usize> = journals
        .iter()
        .flat_map(|j| std::fs::read_dir(j).unwrap().flatten())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("shard-")?.parse().ok())
        .collect();
    assert!(!shards.is_empty(), "no shard directories");
    for n in shards {
        let home = ledgers[n % 2].join(format!("shard-{n}")).join("MANIFEST");
        let other = ledgers[(n + 1) % 2]
            .join(format!("shard-{n}"))
            .join("MANIFEST");
        assert!(
            home.exists() && !other.exists(),
            "shard {n}: MANIFEST not (only) in {}",
            home.display()
        );
    }
}

/// A Java bookie's directories that cannot be taken over (issues 29, 32): a configuration
/// naming another storage class than they hold, or a file no Java bookie writes beside them;
/// `serve` and `--print-config` refuse them, exit 1, name what they found, and change nothing;
/// `inspect` refuses Java's `current/`. The layout is written by hand here; interop's X06 makes
/// it with a real Java bookie.
#[test]
fn a_java_bookies_directories_are_refused_and_left_untouched() {
    let dir = common::tempdir("bookie-java-dirs-");
    let (journal, ledgers) = (dir.path().join("journal"), dir.path().join("ledgers"));
    let files = [
        journal.join("current/VERSION"),
        journal.join("current/19a3c5e2b10.txn"),
        ledgers.join("current/VERSION"),
        ledgers.join("current/lastMark"),
        ledgers.join("current/0.log"),
        ledgers.join("current/ledgers/CURRENT"),
        ledgers.join("current/locations/CURRENT"),
    ];
    for (k, f) in files.iter().enumerate() {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, format!("java file {k}")).unwrap();
    }
    let listing = || {
        let mut v = Vec::new();
        let mut stack = vec![journal.clone(), ledgers.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    v.push((p.clone(), std::fs::read(&p).unwrap()));
                }
            }
        }
        v.sort();
        v
    };
    let before = listing();
    let port = free_port();
    let conf = write_conf(
        dir.path(),
        port,
        std::slice::from_ref(&journal),
        std::slice::from_ref(&ledgers),
        "httpServerEnabled=false\n",
    );
    let builder = BookieBuilder::serve_conf(&conf, port).args(["--no-pin"]);
    // The configuration names SortedLedgerStorage (Java's default) while the directories hold
    // DbLedgerStorage's RocksDB: no takeover guesses at which one the Java bookie ran.
    for extra in [&[][..], &["--print-config"][..]] {
        let out = output_within(builder.command().args(extra), Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains("refusing to start"), "{err}");
        assert!(
            err.contains("ledgerStorageClass is SortedLedgerStorage"),
            "{err}"
        );
        assert!(err.contains(&ledgers.display().to_string()), "{err}");
        assert!(err.contains("RocksDB"), "{err}");
        if extra.is_empty() {
            assert!(!common::bookie::accepts(port), "it must not listen");
        } else {
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(printed.contains(&format!("bookiePort={port}")), "{printed}");
        }
    }
    // With the right class, a file no Java bookie writes beside them still stops the start,
    // naming the directory and what it holds.
    let stray = ledgers.join("current/notes.txt");
    std::fs::write(&stray, b"an operator's notes").unwrap();
    let conf = write_conf(
        dir.path(),
        port,
        std::slice::from_ref(&journal),
        std::slice::from_ref(&ledgers),
        "httpServerEnabled=false\n\
         ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n",
    );
    let out = output_within(
        &mut BookieBuilder::serve_conf(&conf, port)
            .args(["--no-pin"])
            .command(),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{} (ledger directory)", ledgers.display())),
        "{err}"
    );
    assert!(err.contains("notes.txt"), "{err}");
    assert!(err.contains("1 Java journal file(s)"), "{err}");
    assert!(!common::bookie::accepts(port), "it must not listen");
    std::fs::remove_file(&stray).unwrap();
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_bookie"))
            .args(["inspect", "entrylog"])
            .arg(ledgers.join("current")),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds a Java bookie's files"), "{err}");
    assert_eq!(listing(), before, "the Java files after the refusals");
}

/// Runs `cmd` to its end, or kills it and fails the test after `limit` (a bookie that accepted
/// the directories would serve forever instead of exiting).
fn output_within(cmd: &mut std::process::Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the bookie binary");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}
