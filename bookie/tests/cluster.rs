//! End to end, cluster mode: a real ZooKeeper 3.8 (`scripts/zk`, Debian package) and a real
//! `bookie serve --conf` with `zkServers` set. The bookie checks and stamps its cookies,
//! registers under `/ledgers/available/<id>`, follows the read-only flag (switched over HTTP)
//! into `/ledgers/available/readonly/<id>`, serves adds and reads, unregisters on SIGTERM (exit
//! 0), and a restart with a changed ledger directory is refused (cookie mismatch, exit 1).
//!
//! Without ZooKeeper installed the test prints `SKIPPED(zookeeper not installed)` and passes,
//! unless `BOOKIE_REQUIRE_ZK=1` (CI), which makes it fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use metadata::{cluster, zk, BookieList, MetadataConfig};
mod common;

use common::{entry, free_port, http, read};
use net::client::blocking::BlockingClient;
use net::client::ClientConfig;
use net::{Request, Response, StatusCode};

/// A throw-away ZooKeeper, stopped on drop (also when the test fails).
struct Zk {
    dir: tempfile::TempDir,
    port: u16,
}

fn zk_script(cmd: &str, dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk");
    let out = Command::new("bash")
        .arg(script)
        .arg(cmd)
        .arg(dir)
        .output()
        .expect("run scripts/zk");
    assert!(
        out.status.success(),
        "scripts/zk {cmd} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Zk {
    fn start(test: &str) -> Option<Zk> {
        let jars = std::env::var("ZK_JAR_DIR").unwrap_or_else(|_| "/usr/share/java".into());
        let installed = Path::new(&jars).join("zookeeper.jar").exists()
            && Command::new("java")
                .arg("-version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        if !installed {
            eprintln!(
                "\n*** SKIPPED(zookeeper not installed): {test} — apt-get install -y zookeeper ***\n"
            );
            assert!(
                std::env::var("BOOKIE_REQUIRE_ZK").as_deref() != Ok("1"),
                "BOOKIE_REQUIRE_ZK=1 but ZooKeeper is not installed"
            );
            return None;
        }
        let dir = common::tempdir("bookie-cluster-");
        let port = zk_script("start", dir.path())
            .parse()
            .expect("scripts/zk prints the port");
        Some(Zk { dir, port })
    }

    fn servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Zk {
    fn drop(&mut self) {
        zk_script("stop", self.dir.path());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn list_bookies(zk: &Zk) -> BookieList {
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    runtime().block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        cluster::list_bookies(&client, &cfg)
            .await
            .expect("list bookies")
    })
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_conf(path: &Path, zk: &Zk, port: u16, http: u16, journal: &Path, ledgers: &Path) {
    let text = format!(
        "zkServers=127.0.0.1:{}\nzkLedgersRootPath=/ledgers\nzkTimeout=6000\nbookiePort={port}\n\
         journalDirectories={}\nledgerDirectories={}\nhttpServerEnabled=true\n\
         httpServerPort={http}\nhttpServerHost=127.0.0.1\nallowLoopback=true\n\
         advertisedAddress=127.0.0.1\n",
        zk.port,
        journal.display(),
        ledgers.display()
    );
    std::fs::write(path, text).expect("write bk_server.conf");
}

fn bookie(conf: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bookie"));
    c.arg("serve").arg("--conf").arg(conf).args([
        "--shards",
        "2",
        "--no-pin",
        "--write-cache-mb",
        "64",
    ]);
    c
}

struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: entry(ledger, e, e - 1, b"cluster test"),
        recovery: false,
        write_flags: None,
    }
}

#[test]
fn registers_serves_unregisters_and_refuses_a_cookie_mismatch() {
    let Some(zk) = Zk::start("registers_serves_unregisters_and_refuses_a_cookie_mismatch") else {
        return;
    };
    let dir = common::tempdir("bookie-cluster-");
    let conf = dir.path().join("bk_server.conf");
    let (port, http_port) = (free_port(), free_port());
    let journal = dir.path().join("journal");
    let ledgers = dir.path().join("ledgers");
    write_conf(&conf, &zk, port, http_port, &journal, &ledgers);
    let id = format!("127.0.0.1:{port}");

    // A bookie of a cluster that was never initialised does not start.
    let out = bookie(&conf).output().expect("run the bookie");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("/ledgers"), "{stderr}");
    assert!(!journal.join("current").exists(), "stamped a cookie");

    let init = Command::new(env!("CARGO_BIN_EXE_bookie"))
        .args(["initnewcluster", "--conf"])
        .arg(&conf)
        .output()
        .expect("bookie initnewcluster");
    assert!(
        init.status.success(),
        "initnewcluster: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    assert!(list_bookies(&zk).writable.is_empty());

    let mut b = Running {
        child: bookie(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the bookie"),
    };
    wait_for("the registration", || {
        list_bookies(&zk).writable == [id.clone()]
    });
    let listed = Command::new(env!("CARGO_BIN_EXE_bookie"))
        .args(["listbookies", "--conf"])
        .arg(&conf)
        .output()
        .expect("bookie listbookies");
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
    for d in [&journal, &ledgers] {
        assert!(
            d.join("current/VERSION").exists(),
            "no cookie in {}",
            d.display()
        );
    }

    let mut c = BlockingClient::connect(("127.0.0.1", port), ClientConfig::default())
        .expect("connect to the bookie");
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    for e in 0..5 {
        let r = c.call_v3(add(3, e), None).expect("add").response;
        assert_eq!(r.status(), StatusCode::EOK);
    }
    let r = c.call_v3(read(3, 4), None).expect("read").response;
    assert_eq!(r.status(), StatusCode::EOK);
    assert!(matches!(r, Response::ReadEntry { .. }));

    // Read-only moves the registration, writable moves it back.
    let (code, _) = http(
        http_port,
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":true}",
    );
    assert_eq!(code, 200);
    wait_for("the read-only registration", || {
        let l = list_bookies(&zk);
        l.read_only == [id.clone()] && l.writable.is_empty()
    });
    let (code, _) = http(
        http_port,
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":false}",
    );
    assert_eq!(code, 200);
    wait_for("the writable registration", || {
        let l = list_bookies(&zk);
        l.writable == [id.clone()] && l.read_only.is_empty()
    });

    // SIGTERM: unregistered, exit 0.
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(b.child.id() as i32, libc::SIGTERM) };
    let status = b.child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "bookie exited with {status}");
    let l = list_bookies(&zk);
    assert!(l.writable.is_empty() && l.read_only.is_empty(), "{l:?}");

    // Same id, another ledger directory: the cookie does not match, exit 1.
    let moved: PathBuf = dir.path().join("ledgers-elsewhere");
    write_conf(&conf, &zk, port, http_port, &journal, &moved);
    let out = bookie(&conf).output().expect("run the bookie");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ledger dirs"), "{stderr}");
    assert!(stderr.contains("ledgers-elsewhere"), "{stderr}");
    eprintln!("refused as expected: {}", stderr.trim());
    assert!(list_bookies(&zk).writable.is_empty());

    // The original configuration still starts.
    write_conf(&conf, &zk, port, http_port, &journal, &ledgers);
    let mut b = Running {
        child: bookie(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the bookie"),
    };
    wait_for("the registration after a restart", || {
        list_bookies(&zk).writable == [id.clone()]
    });
    let mut c = BlockingClient::connect(("127.0.0.1", port), ClientConfig::default())
        .expect("connect to the bookie");
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let r = c.call_v3(read(3, 2), None).expect("read").response;
    assert_eq!(r.status(), StatusCode::EOK);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(b.child.id() as i32, libc::SIGTERM) };
    assert_eq!(b.child.wait().expect("wait").code(), Some(0));
}
