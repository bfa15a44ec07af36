//! `--cold`: make sure the entries a read run reads sit in ledger storage, not in the bookie's
//! write cache, before the clock starts — for any bookie.
//!
//! A read of an entry written a moment ago is served from memory; a catch-up read of a
//! backlog is not. So after the preload: ask the bookie to flush (`PUT /api/v1/bookie/flush`,
//! which ours serves), then watch its /metrics until `bookie_write_cache_size` (both bookies
//! can export it) reads 0. A bookie without the flush endpoint (a Java bookie) flushes by
//! itself at least every `flushInterval` (60 s by default): bkperf watches the gauge if the
//! bookie exports it, and otherwise waits `--cold-wait`. Never a garbage collection request:
//! bkperf writes ledgers without metadata in ZooKeeper, and a Java bookie's GC deletes those
//! (measured: every read then answered ENOLEDGER). The returned text says which of these
//! happened, for the console and the report.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::stages;

/// `--drop-page-cache`: writes the dirty pages back, then drops the clean page cache, so that
/// a bookie reading through it (a Java bookie) reads the disk. A drop that cannot be done (not
/// root) is an error: a warm run must not be reported as one with the page cache dropped.
pub fn drop_page_cache() -> Result<(), String> {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "1")
        .map_err(|e| format!("--drop-page-cache: /proc/sys/vm/drop_caches: {e} (needs root)"))
}

/// Makes the preload cold; returns how.
pub fn make_cold(http: Option<SocketAddr>, wait: Duration) -> String {
    let Some(addr) = http else {
        std::thread::sleep(wait);
        return format!(
            "cold: no admin port known (--bookie-http), waited {:.0} s for the bookie's own flush",
            wait.as_secs_f64()
        );
    };
    let asked = match stages::http(addr, "PUT", "/api/v1/bookie/flush", Some("{}")) {
        Ok(_) => "PUT /api/v1/bookie/flush answered HTTP 200".to_string(),
        Err(e) => format!("no flush endpoint ({e}): waiting for the bookie's own flush"),
    };
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < wait {
        match stages::fetch_metrics(addr).map(|m| write_cache_bytes(&m)) {
            Ok(Some(bytes)) if bytes <= 0.0 => {
                return format!(
                    "cold: {asked}; bookie_write_cache_size 0 after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            }
            Ok(Some(bytes)) => last = Some(bytes),
            Ok(None) | Err(_) => {
                let left = wait.saturating_sub(started.elapsed());
                std::thread::sleep(left);
                return format!(
                    "cold: {asked}; the write cache is not visible in /metrics, waited {:.0} s",
                    wait.as_secs_f64()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    format!(
        "cold (not confirmed): {asked}; bookie_write_cache_size still {} after {:.0} s",
        last.map_or("?".to_string(), |b| format!("{b:.0}")),
        wait.as_secs_f64()
    )
}

/// The sum of `bookie_write_cache_size` samples in a Prometheus text body, if any.
fn write_cache_bytes(metrics: &str) -> Option<f64> {
    stages::parse(metrics)
        .iter()
        .filter(|s| s.name == "bookie_write_cache_size")
        .map(|s| s.value)
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_write_cache_gauge() {
        let m = "# TYPE bookie_write_cache_size gauge\n\
                 bookie_write_cache_size 4096\n\
                 bookie_write_cache_size_other 7\n\
                 bookie_write_cache_size{shard=\"1\"} 100 1700000000000\n";
        assert_eq!(write_cache_bytes(m), Some(4196.0));
        assert_eq!(write_cache_bytes("bookie_other 1\n"), None);
    }
}
