//! `--cold`: make sure the entries a read run reads sit in ledger storage, not in the bookie's
//! write cache, before the clock starts — for any bookie.
//!
//! A read of an entry written a moment ago is served from memory; a catch-up read of a
//! backlog is not. So after the preload: ask the bookie to flush (`PUT /api/v1/bookie/gc`: ours
//! flushes its write cache before a garbage collection; a Java bookie answers it and collects
//! garbage), then watch the bookie's /metrics until `bookie_write_cache_size` (both bookies
//! export it) reads 0. A bookie whose metrics cannot be read is given the full wait (a Java
//! bookie flushes at least every `flushInterval`, 60 s by default). The returned text says which
//! of these happened, for the console and the report.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Makes the preload cold; returns how.
pub fn make_cold(http: Option<SocketAddr>, wait: Duration) -> String {
    let Some(addr) = http else {
        std::thread::sleep(wait);
        return format!(
            "cold: no admin port known (--bookie-http), waited {:.0} s for the bookie's own flush",
            wait.as_secs_f64()
        );
    };
    let asked = match trigger_flush(addr) {
        Ok(status) => format!("PUT /api/v1/bookie/gc answered HTTP {status}"),
        Err(e) => format!("PUT /api/v1/bookie/gc failed ({e})"),
    };
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < wait {
        match crate::stages::fetch_metrics(addr).map(|m| write_cache_bytes(&m)) {
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
    let mut found = None;
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("bookie_write_cache_size") else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        if let Some(v) = rest
            .rsplit(' ')
            .next()
            .and_then(|v| v.trim().parse::<f64>().ok())
        {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// `PUT /api/v1/bookie/gc` with an empty JSON body; the HTTP status.
fn trigger_flush(addr: SocketAddr) -> Result<String, String> {
    let fail = |e: std::io::Error| e.to_string();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    write!(
        s,
        "PUT /api/v1/bookie/gc HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .map_err(fail)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(fail)?;
    let text = String::from_utf8_lossy(&raw);
    Ok(text.split_whitespace().nth(1).unwrap_or("?").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_write_cache_gauge() {
        let m = "# TYPE bookie_write_cache_size gauge\n\
                 bookie_write_cache_size 4096\n\
                 bookie_write_cache_size_other 7\n\
                 bookie_write_cache_size{shard=\"1\"} 100\n";
        assert_eq!(write_cache_bytes(m), Some(4196.0));
        assert_eq!(write_cache_bytes("bookie_other 1\n"), None);
    }
}
