//! Several journal and ledger directories (`journalDirectories`, `ledgerDirectories` as lists):
//! every journal directory journals for a shard, entry logs spread over every ledger directory,
//! and what was written reads back after a restart from wherever it went.

use std::path::{Path, PathBuf};

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

#[test]
fn journals_and_entry_logs_spread_over_every_directory() {
    let dir = common::tempdir("bookie-dirs-");
    let journals: Vec<PathBuf> = (0..2).map(|k| dir.path().join(format!("j{k}"))).collect();
    let ledgers: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("l{k}"))).collect();
    let list = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let (port, http) = (free_port(), free_port());
    let conf = dir.path().join("bk_server.conf");
    std::fs::write(
        &conf,
        format!(
            "bookiePort={port}\nlisteningInterface=lo\njournalDirectories={}\n\
             ledgerDirectories={}\nlogSizeLimit=131072\nhttpServerEnabled=true\n\
             httpServerPort={http}\n",
            list(&journals),
            list(&ledgers)
        ),
    )
    .unwrap();
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
