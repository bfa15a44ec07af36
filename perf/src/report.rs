//! What every `bkperf` subcommand shares: latency histograms and their summaries, the
//! `bookie-bench/1` JSON report (docs/interop.md §5.1), machine and git facts for that report, a
//! plain-text table printer, and duration parsing.
//!
//! Latencies are recorded in microseconds into an HDR histogram with 3 significant digits and a
//! highest trackable value of 60 s ([`new_histogram`]), the configuration the Java harness uses,
//! so histograms from both sides can be merged. The report embeds the histogram in the V2 +
//! DEFLATE base64 encoding (`HISTFAAA…`), which Java's `encodeIntoCompressedByteBuffer` reads.
//!
//! Typical use by a benchmark:
//! ```ignore
//! let mut hist = report::new_histogram();
//! report::record_us(&mut hist, elapsed);                    // per operation
//! let machine = report::MachineInfo::gather(Some(&dir));      // once
//! let json = report::ReportBuilder::new("bkperf-journal", "candidate")
//!     .workload(serde_json::json!({"id": "journal-1k", "mode": "closed_loop"}))
//!     .results(&report::Results { ops_ok, ops_failed: 0, elapsed, bytes, latency: &hist,
//!                                 corrected: false, intervals })
//!     .machine(&machine, Some(&calibration))
//!     .build();
//! report::write_json(&path, &json)?;
//! ```

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The report schema name.
pub const SCHEMA: &str = "bookie-bench/1";
/// HDR configuration of every latency histogram (docs/interop.md §5.1).
pub const HDR_SIGNIFICANT_DIGITS: u8 = 3;
/// Highest trackable latency: 60 s in microseconds. Larger values are clamped to it.
pub const HDR_HIGHEST_US: u64 = 60_000_000;

/// A fresh latency histogram: microseconds, 1 µs .. 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HDR_HIGHEST_US, HDR_SIGNIFICANT_DIGITS)
        .expect("constant, valid histogram bounds")
}

/// Records one latency, clamped to the histogram's range (never fails).
pub fn record_us(hist: &mut Histogram<u64>, elapsed: Duration) {
    let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    hist.saturating_record(us);
}

/// The usual latency figures of a histogram, in microseconds. All zero when it is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

impl LatencySummary {
    /// Column headers matching [`LatencySummary::cells`].
    pub const HEADERS: [&'static str; 8] = [
        "count", "min", "mean", "p50", "p99", "p99.9", "p99.99", "max",
    ];

    /// Percentiles with HDR "value at percentile" semantics (as Java's).
    pub fn from_histogram(hist: &Histogram<u64>) -> LatencySummary {
        if hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: hist.len(),
            min: hist.min(),
            mean: hist.mean(),
            p50: hist.value_at_quantile(0.50),
            p90: hist.value_at_quantile(0.90),
            p99: hist.value_at_quantile(0.99),
            p99_9: hist.value_at_quantile(0.999),
            p99_99: hist.value_at_quantile(0.9999),
            max: hist.max(),
        }
    }

    /// The `results.latency_us` object of the report.
    pub fn to_json(self, corrected: bool) -> Value {
        json!({
            "corrected": corrected, "count": self.count, "min": self.min,
            "mean": round1(self.mean), "p50": self.p50, "p90": self.p90, "p99": self.p99,
            "p99_9": self.p99_9, "p99_99": self.p99_99, "max": self.max,
        })
    }

    /// Table cells matching [`LatencySummary::HEADERS`] (µs).
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.count.to_string(),
            self.min.to_string(),
            format!("{:.1}", self.mean),
            self.p50.to_string(),
            self.p99.to_string(),
            self.p99_9.to_string(),
            self.p99_99.to_string(),
            self.max.to_string(),
        ]
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The `results.hdr` object: the histogram as V2 + DEFLATE, base64 (`HISTFAAA…`).
/// `None` if serialization fails (it only fails on internal errors).
pub fn hdr_json(hist: &Histogram<u64>) -> Option<Value> {
    let mut raw = Vec::new();
    if let Err(err) = V2DeflateSerializer::new().serialize(hist, &mut raw) {
        log::warn!("cannot serialize the latency histogram: {err:?}");
        return None;
    }
    Some(json!({
        "unit": "us",
        "significant_digits": HDR_SIGNIFICANT_DIGITS,
        "highest_trackable": HDR_HIGHEST_US,
        "encoding": "HISTFAAA-v2-deflate-base64",
        "data": base64(&raw),
    }))
}

/// Standard base64 with padding (RFC 4648), as Java's `Base64.getEncoder()`.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One entry of `results.intervals`: what happened during one reporting interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalStat {
    /// Seconds since the start of the measured phase, at the end of the interval.
    pub t_s: f64,
    pub ops: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl IntervalStat {
    /// Summarises an interval histogram (the caller resets it afterwards).
    pub fn from_histogram(t_s: f64, hist: &Histogram<u64>) -> IntervalStat {
        let s = LatencySummary::from_histogram(hist);
        IntervalStat {
            t_s,
            ops: s.count,
            p50: s.p50,
            p99: s.p99,
            max: s.max,
        }
    }

    fn to_json(self) -> Value {
        json!({"t_s": round3(self.t_s), "ops": self.ops, "p50": self.p50, "p99": self.p99, "max": self.max})
    }
}

/// The measured outcome of a run, turned into the report's `results` by
/// [`ReportBuilder::results`].
pub struct Results<'a> {
    pub ops_ok: u64,
    pub ops_failed: u64,
    /// Length of the measured phase (warm-up excluded).
    pub elapsed: Duration,
    /// Payload bytes moved by the successful operations (for `throughput_mib_s`).
    pub bytes: u64,
    pub latency: &'a Histogram<u64>,
    /// True when latencies are measured from the intended start (open loop).
    pub corrected: bool,
    pub intervals: Vec<IntervalStat>,
    /// Open loop: the same operations measured from their actual send
    /// (`latency_uncorrected_us`).
    pub uncorrected: Option<&'a Histogram<u64>>,
    /// Operations without an answer within the timeout (`ops_timeout`).
    pub timeouts: u64,
}

/// The device/CPU calibration of `machine.calibration`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Calibration {
    pub fsync_4k_p50_us: u64,
    pub fsync_4k_p99_us: u64,
    pub crc32c_gib_s: f64,
}

/// Facts about the machine and the data directory. Every field tolerates absence ("unknown").
#[derive(Clone, Debug, Default)]
pub struct MachineInfo {
    pub cpu_model: String,
    pub cores: usize,
    pub mem_gib: f64,
    pub kernel: String,
    /// File system type of the data directory, e.g. `ext4`, `tmpfs`, `overlay`.
    pub fs: String,
    /// Mount source of the data directory, e.g. `/dev/vda`.
    pub data_dir_device: String,
    pub rustc: String,
    pub loadavg_start: [f64; 3],
}

impl MachineInfo {
    /// Reads /proc/cpuinfo, /proc/meminfo, /proc/loadavg, /proc/self/mountinfo, uname(2) and
    /// `rustc --version`. `data_dir` selects the mount whose fs and device are reported.
    pub fn gather(data_dir: Option<&Path>) -> MachineInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0);
        let mem_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0);
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let mut loadavg_start = [0.0; 3];
        for (slot, v) in loadavg_start.iter_mut().zip(loadavg.split_whitespace()) {
            *slot = v.parse().unwrap_or(0.0);
        }
        let (fs, data_dir_device) = data_dir
            .and_then(mount_of)
            .unwrap_or_else(|| ("unknown".into(), "unknown".into()));
        MachineInfo {
            cpu_model,
            cores,
            mem_gib: round1(mem_kib / (1024.0 * 1024.0)),
            kernel: kernel_release(),
            fs,
            data_dir_device,
            rustc: command_line("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
            loadavg_start,
        }
    }

    /// The report's `machine` object.
    pub fn to_json(&self, calibration: Option<&Calibration>) -> Value {
        let mut m = json!({
            "cpu_model": self.cpu_model, "cores": self.cores, "mem_gib": self.mem_gib,
            "kernel": self.kernel, "fs": self.fs, "data_dir_device": self.data_dir_device,
            "rustc": self.rustc, "loadavg_start": self.loadavg_start,
        });
        if let Some(c) = calibration {
            m["calibration"] = json!({
                "fsync_4k_p50_us": c.fsync_4k_p50_us, "fsync_4k_p99_us": c.fsync_4k_p99_us,
                "crc32c_gib_s": round3(c.crc32c_gib_s),
            });
        }
        m
    }
}

/// `uname -r` plus the machine, via uname(2).
fn kernel_release() -> String {
    let Ok(u) = nix::sys::utsname::uname() else {
        return "unknown".into();
    };
    format!(
        "{} {} {}",
        u.sysname().to_string_lossy(),
        u.release().to_string_lossy(),
        u.machine().to_string_lossy()
    )
}

/// The (fs type, mount source) of the mount holding `dir`: the longest mount point that is a
/// prefix of its canonical path, from /proc/self/mountinfo.
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, String, String)> = None;
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let (Some(mount_point), mut r) = (left.split_whitespace().nth(4), right.split_whitespace())
        else {
            continue;
        };
        let (fstype, source) = (r.next().unwrap_or("unknown"), r.next().unwrap_or("none"));
        if dir.starts_with(mount_point) && best.as_ref().is_none_or(|b| mount_point.len() >= b.0) {
            best = Some((mount_point.len(), fstype.to_string(), source.to_string()));
        }
    }
    best.map(|(_, fs, src)| (fs, src))
}

/// First line of a command's stdout, or `None` when it cannot run or fails.
fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout);
    Some(s.lines().next().unwrap_or("").trim().to_string())
}

/// The git state of the working directory's repository, when there is one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GitInfo {
    /// `git rev-parse HEAD`, or "unknown".
    pub commit: String,
    /// Whether `git status --porcelain` lists anything.
    pub dirty: bool,
}

impl GitInfo {
    /// From the current directory's repository, or else from the one bkperf was built in.
    pub fn gather() -> GitInfo {
        let here = command_line("git", &["rev-parse", "HEAD"]);
        let dir = match here {
            Some(_) => ".".to_string(),
            None => env!("CARGO_MANIFEST_DIR").to_string(),
        };
        let commit = command_line("git", &["-C", &dir, "rev-parse", "HEAD"])
            .unwrap_or_else(|| "unknown".into());
        let dirty = Command::new("git")
            .args(["-C", &dir, "status", "--porcelain", "--untracked-files=no"])
            .output()
            .map(|o| o.status.success() && !o.stdout.is_empty())
            .unwrap_or(false);
        GitInfo { commit, dirty }
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now_iso() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Builds one `bookie-bench/1` report (one run × one workload). Sections not set are emitted
/// as empty objects; `run` and `tool` are filled in by [`ReportBuilder::new`].
pub struct ReportBuilder {
    root: Map<String, Value>,
    warnings: Vec<String>,
    saturated: bool,
}

impl ReportBuilder {
    /// `tool` e.g. `"bkperf-journal"`; `role` one of `candidate`, `baseline`, `reference`.
    /// Gathers git info and the time for `run`.
    pub fn new(tool: &str, role: &str) -> ReportBuilder {
        let git = GitInfo::gather();
        let short = git.commit.get(..8).unwrap_or(&git.commit).to_string();
        let mut root = Map::new();
        root.insert("schema".into(), json!(SCHEMA));
        root.insert(
            "run".into(),
            json!({
                "id": format!("{}-{short}", utc_now_iso()),
                "git_commit": git.commit,
                "git_dirty": git.dirty,
                "ci": std::env::var_os("CI").is_some(),
                "role": role,
            }),
        );
        root.insert(
            "tool".into(),
            json!({"name": tool, "version": env!("CARGO_PKG_VERSION")}),
        );
        for key in ["target", "client", "workload", "results", "machine"] {
            root.insert(key.into(), json!({}));
        }
        ReportBuilder {
            root,
            warnings: Vec::new(),
            saturated: false,
        }
    }

    /// Sets a top-level section (`target`, `client`, `workload`, or an extra one).
    pub fn section(mut self, key: &str, value: Value) -> Self {
        self.root.insert(key.into(), value);
        self
    }

    pub fn target(self, value: Value) -> Self {
        self.section("target", value)
    }

    #[allow(dead_code)] // API for the journal benchmark and later subcommands
    pub fn client(self, value: Value) -> Self {
        self.section("client", value)
    }

    pub fn workload(self, value: Value) -> Self {
        self.section("workload", value)
    }

    /// A `results`-shaped object (also used for the second side of a mixed run).
    pub fn results_json(r: &Results<'_>) -> Value {
        let secs = r.elapsed.as_secs_f64();
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let mut results = json!({
            "ops_ok": r.ops_ok,
            "ops_failed": r.ops_failed,
            "ops_timeout": r.timeouts,
            "achieved_rate_ops": round1(per_s(r.ops_ok as f64)),
            "throughput_mib_s": round3(per_s(r.bytes as f64) / (1024.0 * 1024.0)),
            "latency_us": LatencySummary::from_histogram(r.latency).to_json(r.corrected),
            "intervals": r.intervals.iter().map(|i| i.to_json()).collect::<Vec<_>>(),
        });
        if let Some(unc) = r.uncorrected {
            let u = LatencySummary::from_histogram(unc);
            results["latency_uncorrected_us"] = json!({
                "p50": u.p50, "p90": u.p90, "p99": u.p99, "p99_9": u.p99_9,
                "p99_99": u.p99_99, "max": u.max,
            });
        }
        if let Some(hdr) = hdr_json(r.latency) {
            results["hdr"] = hdr;
        }
        results
    }

    /// Fills `results`: counts, rates, latency summary, the encoded histogram, intervals.
    pub fn results(self, r: &Results<'_>) -> Self {
        let results = Self::results_json(r);
        self.section("results", results)
    }

    /// Fills `machine`, with the calibration when one was taken.
    pub fn machine(self, info: &MachineInfo, calibration: Option<&Calibration>) -> Self {
        self.section("machine", info.to_json(calibration))
    }

    /// Adds a `validity.warnings` entry.
    pub fn warning(mut self, text: impl Into<String>) -> Self {
        self.warnings.push(text.into());
        self
    }

    /// Marks the run saturated (`validity.saturated`).
    #[allow(dead_code)] // API for the journal benchmark and later subcommands
    pub fn saturated(mut self, saturated: bool) -> Self {
        self.saturated = saturated;
        self
    }

    pub fn build(mut self) -> Value {
        self.root.insert(
            "validity".into(),
            json!({"saturated": self.saturated, "warnings": self.warnings}),
        );
        Value::Object(self.root)
    }
}

/// Writes a report as pretty JSON.
pub fn write_json(path: &Path, report: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(path, text)
}

/// A plain-text table with right-aligned columns (the first one left-aligned).
#[derive(Clone, Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, under a header and a rule.
    pub fn render(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; ncols];
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |row: &Vec<String>| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = row.get(i).map(String::as_str).unwrap_or("");
                if i == 0 {
                    s.push_str(&format!("{c:<w$}"));
                } else {
                    s.push_str(&format!("  {c:>w$}"));
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1)));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// Parses `"10s"`, `"500ms"`, `"2m"`, `"1h"`, `"250us"`, `"1.5s"`; a bare number is seconds.
#[allow(dead_code)] // API for the journal benchmark and later subcommands
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("bad duration {text:?}: expected e.g. 10s, 500ms, 2m"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "bad duration unit {other:?} in {text:?}: use us, ms, s, m or h"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("bad duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration(" 250us "), Ok(Duration::from_micros(250)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("1.2.3s").is_err());
    }

    #[test]
    fn summary_of_known_values() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.saturating_record(v);
        }
        h.saturating_record(120_000_000); // clamped to 60 s, never an error
        let s = LatencySummary::from_histogram(&h);
        assert_eq!(s.count, 1001);
        assert_eq!(s.min, 1);
        assert_eq!(s.p50, 501);
        assert!((990..=1000).contains(&s.p99), "{s:?}");
        assert!(s.max >= HDR_HIGHEST_US && s.max < HDR_HIGHEST_US + HDR_HIGHEST_US / 500);
        assert_eq!(
            LatencySummary::from_histogram(&new_histogram()),
            LatencySummary::default()
        );
    }

    #[test]
    fn base64_rfc4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    /// The encoded histogram has the Java-compatible prefix and round-trips.
    #[test]
    fn hdr_encoding_round_trips() {
        let mut h = new_histogram();
        for v in [100u64, 200, 300, 5000] {
            h.saturating_record(v);
        }
        let hdr = hdr_json(&h).expect("encodes");
        let data = hdr["data"].as_str().expect("string");
        assert!(data.starts_with("HISTFAAA"), "{data}");
        assert_eq!(hdr["highest_trackable"], json!(60_000_000));
        // Decode with the crate's own deserializer.
        let raw = decode_base64(data);
        let back: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &raw[..])
            .expect("deserializes");
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    fn decode_base64(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let mut out = Vec::new();
        for chunk in s.as_bytes().chunks(4) {
            let pad = chunk.iter().filter(|&&c| c == b'=').count();
            let n = chunk.iter().fold(0u32, |n, &c| {
                (n << 6) | u32::from(if c == b'=' { 0 } else { val(c) })
            });
            out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
        }
        out
    }

    #[test]
    fn report_has_schema_sections() {
        let mut h = new_histogram();
        h.saturating_record(150);
        let r = ReportBuilder::new("bkperf-test", "candidate")
            .workload(json!({"id": "unit"}))
            .results(&Results {
                ops_ok: 10,
                ops_failed: 1,
                elapsed: Duration::from_secs(2),
                bytes: 4 * 1024 * 1024,
                latency: &h,
                corrected: false,
                intervals: vec![IntervalStat::from_histogram(1.0, &h)],
                uncorrected: None,
                timeouts: 0,
            })
            .machine(
                &MachineInfo::gather(Some(Path::new("."))),
                Some(&Calibration {
                    fsync_4k_p50_us: 130,
                    fsync_4k_p99_us: 230,
                    crc32c_gib_s: 9.5,
                }),
            )
            .warning("unit test")
            .build();
        assert_eq!(r["schema"], "bookie-bench/1");
        assert_eq!(r["tool"]["name"], "bkperf-test");
        assert_eq!(r["run"]["role"], "candidate");
        assert_eq!(r["results"]["achieved_rate_ops"], json!(5.0));
        assert_eq!(r["results"]["throughput_mib_s"], json!(2.0));
        assert_eq!(r["results"]["latency_us"]["p50"], json!(150));
        assert_eq!(r["results"]["intervals"][0]["ops"], json!(1));
        assert!(r["results"]["hdr"]["data"].is_string());
        assert_eq!(r["machine"]["calibration"]["fsync_4k_p99_us"], json!(230));
        assert!(r["machine"]["cores"].as_u64().unwrap_or(0) >= 1);
        assert_eq!(r["validity"]["warnings"], json!(["unit test"]));
        assert!(r["target"].is_object() && r["client"].is_object());
    }

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["name", "p50"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["longer".into(), "12345".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name      p50");
        assert_eq!(lines[2], "a           1");
        assert_eq!(lines[3], "longer  12345");
    }

    #[test]
    fn utc_time_format() {
        let s = utc_now_iso();
        assert_eq!(s.len(), 20, "{s}");
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }
}
