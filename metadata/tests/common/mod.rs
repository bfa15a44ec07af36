//! The tests' ZooKeeper: a real ZooKeeper 3.8 (Debian package), started per test with
//! `scripts/zk` on a free loopback port and stopped on drop. Without ZooKeeper installed a test
//! prints `SKIPPED(zookeeper not installed)` and passes, unless `BOOKIE_REQUIRE_ZK=1`, which
//! makes it fail.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use metadata::{BookieServiceInfo, MetadataConfig};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk")
}

pub struct Zk {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Zk {
    /// Starts a server, or returns None (after printing SKIPPED) when ZooKeeper is missing.
    pub fn start(test: &str) -> Option<Zk> {
        let jars = std::env::var("ZK_JAR_DIR").unwrap_or_else(|_| "/usr/share/java".into());
        let installed = Path::new(&jars).join("zookeeper.jar").exists()
            && Command::new("java")
                .arg("-version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        if !installed {
            eprintln!("\n*** SKIPPED(zookeeper not installed): {test} — apt-get install -y zookeeper ***\n");
            assert!(
                std::env::var("BOOKIE_REQUIRE_ZK").as_deref() != Ok("1"),
                "BOOKIE_REQUIRE_ZK=1 but ZooKeeper is not installed"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = run_script("start", dir.path(), None);
        Some(Zk { dir, port })
    }

    pub fn servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn stop(&self) {
        run_script("stop", self.dir.path(), None);
    }

    pub fn restart(&self) {
        self.outage(Duration::ZERO);
    }

    /// Stops the server for `down`, then starts it again with its data on the same port.
    pub fn outage(&self, down: Duration) {
        self.stop();
        std::thread::sleep(down);
        run_script("start", self.dir.path(), Some(self.port));
    }
}

fn run_script(cmd: &str, dir: &Path, port: Option<u16>) -> u16 {
    let mut c = Command::new("bash");
    c.arg(script()).arg(cmd).arg(dir);
    if let Some(p) = port {
        c.arg(p.to_string());
    }
    let out = c.output().expect("run scripts/zk");
    assert!(
        out.status.success(),
        "scripts/zk {cmd} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

impl Drop for Zk {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn cfg(zk: &Zk, root: &str, id: &str, timeout_ms: u64) -> MetadataConfig {
    let mut c = MetadataConfig::for_cluster(&zk.servers(), root);
    c.bookie_id = id.to_string();
    c.session_timeout = Duration::from_millis(timeout_ms);
    c.service_info = BookieServiceInfo::for_bookie("127.0.0.1", 3181, false, None);
    c
}

pub async fn until<F, Fut>(what: &str, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t = Instant::now();
    while t.elapsed() < limit {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}
