//! End-to-end tests of the `bkperf` binary: workloads against `bkperf sink` (always) and
//! against a real `bookie` child (when the binary is built next to bkperf, as under
//! `cargo test --workspace`; `BKPERF_REQUIRE_BOOKIE=1` makes its absence a failure), the
//! report's shape against a golden list of its keys, the HTML page, and `compare` verdicts
//! and exit codes on real reports.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const BKPERF: &str = env!("CARGO_BIN_EXE_bkperf");

/// The tests run one at a time: each measures, and the bookie (a debug build under
/// `cargo test`) must not compete with another test's load for the machine's two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's own temporary directory, removed when the test ends (it left one per run in the
/// temp dir before).
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bkperf-e2e-")
        .tempdir()
        .expect("temp dir")
}

fn tmp(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// A `bkperf sink` child on a free port; killed on drop.
struct SinkProc {
    child: Child,
    addr: String,
}

impl SinkProc {
    fn start() -> SinkProc {
        let mut child = Command::new(BKPERF)
            .args(["sink", "--listen", "127.0.0.1:0", "--duration", "120s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts bkperf sink");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reads the banner");
        let addr = line
            .split_whitespace()
            .nth(4)
            .expect("bkperf sink listening on ADDR ...")
            .to_string();
        SinkProc { child, addr }
    }
}

impl Drop for SinkProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bkperf(args: &[&str]) -> Output {
    let out = Command::new(BKPERF)
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("runs bkperf");
    eprintln!(
        "$ bkperf {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).expect("JSON")
}

/// Every key path of a JSON value with its type; array elements are collapsed to `[]`.
fn shape(v: &Value, prefix: &str, out: &mut Vec<String>) {
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    out.push(format!("{prefix} {kind}"));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                shape(x, &format!("{prefix}.{k}"), out);
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                shape(first, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// Golden check of the report's shape. `BKPERF_BLESS=1` rewrites the golden file.
fn check_golden(report: &Value, golden: &str) {
    let mut lines = Vec::new();
    shape(report, "", &mut lines);
    // Fields whose type depends on the machine or the run are not part of the contract.
    lines.retain(|l| {
        !l.starts_with(".results.errors_by_kind.")
            && !l.starts_with(".machine.calibration")
            && !l.starts_with(".validity.warnings[]")
    });
    lines.sort();
    let text = lines.join("\n") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(golden);
    if std::env::var_os("BKPERF_BLESS").is_some() {
        std::fs::write(&path, &text).expect("writes golden");
    }
    let want = std::fs::read_to_string(&path).expect("golden file exists");
    assert_eq!(text, want, "report shape differs from {}", path.display());
}

#[test]
fn write_against_the_sink_report_html_and_compare() {
    let _serial = serial();
    let scratch = scratch();
    let sink = SinkProc::start();
    let (json, html) = (
        tmp(&scratch, "sink-write.json"),
        tmp(&scratch, "sink-write.html"),
    );
    let out = bkperf(&[
        "write",
        "--bookies",
        &sink.addr,
        "--rate",
        "5000",
        "--warmup",
        "300ms",
        "--duration",
        "1s",
        "--json",
        json.to_str().expect("utf-8"),
        "--html",
        html.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("corrected") && stdout.contains("uncorrected"));
    let r = read_json(&json);
    check_golden(&r, "write-report.keys");
    assert_eq!(r["schema"], "bookie-bench/1");
    assert_eq!(r["workload"]["mode"], "fixed_rate");
    assert_eq!(r["workload"]["target_rate_ops"], 5000.0);
    assert_eq!(r["client"]["digest"], "CRC32C");
    let ok = r["results"]["ops_ok"].as_u64().expect("ops_ok");
    assert!((4950..=5050).contains(&ok), "{ok}");
    assert_eq!(r["results"]["ops_failed"], 0);
    assert_eq!(r["results"]["latency_us"]["corrected"], true);
    assert!(r["results"]["hdr"]["data"]
        .as_str()
        .expect("hdr")
        .starts_with("HISTFAAA"));
    // Saturation depends on the machine (a stalled VM makes the corrected p99 run away from
    // the uncorrected one even at 5k/s against the sink): the report and the console agree.
    let saturated = r["validity"]["saturated"]
        .as_bool()
        .expect("validity.saturated");
    assert_eq!(
        saturated,
        stdout.contains("WARNING write: saturated"),
        "{stdout}"
    );
    let page = std::fs::read_to_string(&html).expect("html written");
    assert!(page.starts_with("<!DOCTYPE html>") && page.matches("<svg").count() == 3);
    assert!(!page.contains("<script"), "self-contained, no script");

    // compare: the same report passes; a 3x slower candidate fails with exit code 1.
    let same = bkperf(&[
        "compare",
        json.to_str().expect("utf-8"),
        json.to_str().expect("utf-8"),
    ]);
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).contains("verdict: PASS"));
    let mut worse = r.clone();
    for k in ["p50", "p99", "p99_9"] {
        let v = worse["results"]["latency_us"][k].as_u64().expect("latency") * 3;
        worse["results"]["latency_us"][k] = v.into();
    }
    let worse_path = tmp(&scratch, "worse.json");
    std::fs::write(&worse_path, worse.to_string()).expect("writes");
    let fail = bkperf(&[
        "compare",
        json.to_str().expect("utf-8"),
        worse_path.to_str().expect("utf-8"),
    ]);
    assert_eq!(fail.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&fail.stdout).contains("verdict: FAIL"));
    // ... but not past a 300 % bar.
    let lenient = bkperf(&[
        "compare",
        "--max-regression",
        "300%",
        json.to_str().expect("utf-8"),
        worse_path.to_str().expect("utf-8"),
    ]);
    assert_eq!(lenient.status.code(), Some(0));
    let missing = bkperf(&[
        "compare",
        "/nonexistent.json",
        json.to_str().expect("utf-8"),
    ]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn mixed_against_the_sink_reports_both_sides() {
    let _serial = serial();
    let scratch = scratch();
    let sink = SinkProc::start();
    let json = tmp(&scratch, "sink-mixed.json");
    let out = bkperf(&[
        "mixed",
        "--bookies",
        &format!("{},{}", sink.addr, sink.addr),
        "--protocol",
        "v2",
        "-e",
        "2",
        "-w",
        "2",
        "-a",
        "2",
        "--rate",
        "2000",
        "--pattern",
        "sequential",
        "--batch",
        "16",
        "--preload",
        "100",
        "--warmup",
        "200ms",
        "--duration",
        "1s",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let r = read_json(&json);
    assert_eq!(r["workload"]["write_quorum"], 2);
    assert!(r["results"]["ops_ok"].as_u64().expect("writes") >= 1980);
    let reads = &r["results_read"];
    assert!(reads["ops_ok"].as_u64().expect("reads") > 100, "{reads}");
    assert_eq!(reads["ops_failed"], 0);
}

/// Errors a real bookie may return: only `ETOOMANYREQUESTS` (its backpressure, seen now and
/// then under `cargo test` on a busy machine), at most 5 % of `expected` operations, none with
/// `BKPERF_STRICT=1`. Anything else (EIO, a bad entry, a failed connection) fails.
fn check_bookie_errors(results: &Value, expected: u64) {
    if results.is_null() {
        return;
    }
    let failed = results["ops_failed"].as_u64().expect("ops_failed");
    if failed == 0 {
        return;
    }
    let kinds = results["errors_by_kind"]
        .as_object()
        .expect("errors_by_kind");
    let busy = kinds
        .get("ETOOMANYREQUESTS")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    eprintln!("NOTE: the bookie answered with errors: {kinds:?}");
    assert!(
        busy == failed && failed * 20 <= expected && std::env::var_os("BKPERF_STRICT").is_none(),
        "bookie errors: {kinds:?} of {expected} operations"
    );
}

/// The `bookie` binary next to bkperf's, if it is built; without it the caller skips its test
/// (said on stderr), unless `BKPERF_REQUIRE_BOOKIE` is set, which fails it.
fn bookie_binary() -> Option<PathBuf> {
    let bookie = Path::new(BKPERF).with_file_name("bookie");
    if bookie.exists() {
        return Some(bookie);
    }
    assert!(
        std::env::var_os("BKPERF_REQUIRE_BOOKIE").is_none(),
        "no bookie binary at {}",
        bookie.display()
    );
    eprintln!(
        "skipped: no bookie binary at {} (cargo build -p bookie)",
        bookie.display()
    );
    None
}

/// The real bookie, when built: writes (open loop), random reads and tailing reads complete
/// without errors, and bkperf drives the sink at least twice as fast as the bookie.
#[test]
fn workloads_against_a_real_bookie() {
    let _serial = serial();
    let scratch = scratch();
    let Some(bookie) = bookie_binary() else {
        return;
    };
    let bin = bookie.to_str().expect("utf-8");
    let json = tmp(&scratch, "bookie-write.json");
    let out = bkperf(&[
        "write",
        "--bookie-bin",
        bin,
        "--rate",
        "2000",
        "--warmup",
        "500ms",
        "--duration",
        "2s",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let r = read_json(&json);
    check_bookie_errors(&r["results"], 4000);
    assert_eq!(r["results"]["ops_timeout"], 0);
    let ok = r["results"]["ops_ok"].as_u64().expect("ops_ok");
    assert!((3960..=4040).contains(&ok), "{ok}");
    assert!(r["resources"]["bookie_cpu_s"].as_f64().is_some());

    for pattern in ["random", "tailing"] {
        let json = tmp(&scratch, &format!("bookie-read-{pattern}.json"));
        let out = bkperf(&[
            "read",
            "--bookie-bin",
            bin,
            "--pattern",
            pattern,
            "--preload",
            "200",
            "--rate",
            "1000",
            "--warmup",
            "300ms",
            "--duration",
            "1s",
            "--json",
            json.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{pattern}");
        let r = read_json(&json);
        check_bookie_errors(&r["results"], 1000);
        check_bookie_errors(&r["results_write"], 1000);
        assert!(
            r["results"]["ops_ok"].as_u64().expect("reads") > 100,
            "{pattern}"
        );
    }

    // bkperf's ceiling: closed loop against the sink versus against the bookie.
    let sink = SinkProc::start();
    let rate = |args: &[&str], name: &str| {
        let json = tmp(&scratch, name);
        let mut a = vec![
            "write",
            "--outstanding",
            "256",
            "--warmup",
            "500ms",
            "--duration",
            "2s",
            "--json",
        ];
        a.push(json.to_str().expect("utf-8"));
        a.extend_from_slice(args);
        assert!(bkperf(&a).status.success());
        read_json(&json)["results"]["achieved_rate_ops"]
            .as_f64()
            .expect("rate")
    };
    let against_sink = rate(&["--bookies", &sink.addr], "ceiling-sink.json");
    let against_bookie = rate(&["--bookie-bin", bin], "ceiling-bookie.json");
    eprintln!("closed loop: sink {against_sink:.0}/s, bookie {against_bookie:.0}/s");
    // The requirement is 2x at full speed (release: ~1.07 M vs ~0.22 M adds/s measured here);
    // `cargo test` runs opt-level 1 builds of both, where the margin is smaller (~2.5x).
    let needed = if cfg!(debug_assertions) { 1.5 } else { 2.0 };
    assert!(
        against_sink >= needed * against_bookie,
        "bkperf drives the sink at {against_sink:.0}/s, under {needed}x the bookie's {against_bookie:.0}/s"
    );
}

/// Against a started bookie, the report carries the per-stage breakdown: every add stage with
/// the window's count and ordered quantiles, the bookie's and bkperf's threads, and the HTML
/// page shows it; against the sink (no HTTP port) there is no `stages` section at all.
#[test]
fn stage_breakdown_from_a_real_bookie() {
    let _serial = serial();
    let scratch = scratch();
    let Some(bookie) = bookie_binary() else {
        return;
    };
    let (json, html) = (tmp(&scratch, "stages.json"), tmp(&scratch, "stages.html"));
    let out = bkperf(&[
        "write",
        "--bookie-bin",
        bookie.to_str().expect("utf-8"),
        "--rate",
        "1000",
        "--warmup",
        "500ms",
        "--duration",
        "1s",
        "--json",
        json.to_str().expect("utf-8"),
        "--html",
        html.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("bookie stages over the measured window"));
    let r = read_json(&json);
    let stages = &r["stages"];
    assert_eq!(stages["bookie_impl"], "rust");
    assert_eq!(stages["window_quantiles"], true);
    let rows = stages["stages"].as_array().expect("stage rows");
    let ok = r["results"]["ops_ok"].as_u64().expect("ops_ok");
    for name in [
        "decode",
        "write_cache",
        "journal_group_wait",
        "journal_write",
        "journal_fsync",
        "journal",
        "reply",
    ] {
        let row = rows
            .iter()
            .find(|x| x["stage"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {stages}"));
        let count = row["count"].as_u64().expect("count");
        // The window's adds, give or take those in flight at its two edges.
        assert!(
            count * 10 >= ok * 9 && count <= ok + 100,
            "{name}: {count} of {ok}"
        );
        let q = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{name} {k}"));
        assert!(
            q("p50_us") <= q("p99_us") && q("p99_us") <= q("p99_9_us"),
            "{row}"
        );
    }
    assert!(stages["tail_owner"].is_string());
    let threads = |who: &str| stages["threads"][who].as_array().expect("threads").clone();
    assert!(threads("bookie").iter().any(|t| t["thread"] == "shard-0"));
    assert!(threads("bkperf").iter().any(|t| t["thread"] == "bkperf-0"));
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("Inside the bookie") && page.contains("journal_fsync"));

    // The sink has no metrics: no section, and the report stays as it was.
    let sink = SinkProc::start();
    let json = tmp(&scratch, "stages-sink.json");
    let out = bkperf(&[
        "write",
        "--bookies",
        &sink.addr,
        "--rate",
        "1000",
        "--warmup",
        "200ms",
        "--duration",
        "500ms",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    assert!(read_json(&json).get("stages").is_none());
}

/// `bkperf read --cold` against a real bookie: the preloaded entries leave the write cache
/// before the clock starts (the bookie flushes on request and its gauge reads 0), the report
/// says so, and the reads come from ledger storage: the bookie's cache-miss stage counts them,
/// or its read-ahead brought them (sequential reads: most are answered from the read-ahead
/// cache, filled by one device read per run).
#[test]
fn cold_reads_come_from_ledger_storage() {
    let _serial = serial();
    let scratch = scratch();
    let Some(bookie) = bookie_binary() else {
        return;
    };
    let json = tmp(&scratch, "cold.json");
    let out = bkperf(&[
        "read",
        "--bookie-bin",
        bookie.to_str().expect("utf-8"),
        "--pattern",
        "sequential",
        "--preload",
        "2000",
        "--cold",
        "--cold-wait",
        "30s",
        "--warmup",
        "200ms",
        "--duration",
        "1s",
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let r = read_json(&json);
    assert_eq!(r["read_mode"]["cold"], true, "{}", r["read_mode"]);
    let how = r["read_mode"]["how"].as_str().expect("how");
    assert!(how.contains("bookie_write_cache_size 0"), "{how}");
    let misses = r["stages"]["stages"]
        .as_array()
        .expect("stage rows")
        .iter()
        .find(|x| x["stage"] == "cache_miss_read")
        .and_then(|x| x["count"].as_u64())
        .unwrap_or(0);
    let ra = &r["stages"]["read_ahead"];
    let hits = ra["cache_hits"]
        .as_u64()
        .expect("read-ahead counters of our bookie");
    let ok = r["results"]["ops_ok"].as_u64().expect("ops_ok");
    assert!(ok > 0);
    assert!(
        (misses + hits) * 10 >= ok * 9,
        "{misses} disk reads and {hits} read-ahead hits for {ok} reads"
    );
    assert!(
        ra["device_reads"].as_u64().unwrap_or(0) > 0 && hits > 0,
        "sequential cold reads are read ahead: {ra}"
    );
}
