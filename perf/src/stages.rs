//! Where an add's latency goes inside the bookie: its `/metrics` scraped before and after the
//! measured window, turned into a per-stage breakdown (count, p50, p99, p99.9) and per-thread
//! scheduling (CPU time, time runnable but waiting on a run queue) of the bookie and of bkperf.
//!
//! Our bookie exports each stage of the add path as a Prometheus histogram,
//! `bookie_rs_stage_latency_ms{stage=...}`, with the bound of every non-empty fine bucket
//! (≤ 19 % wide): the difference of two scrapes is the window's own histogram, and its
//! quantiles are the upper bounds of the buckets holding them. Threads come from
//! `bookie_rs_thread_{cpu,runqueue_wait}_seconds_total{thread=...}` (the bookie) and
//! `/proc/self/task/*/schedstat` (bkperf itself).
//!
//! A Java bookie has no such histograms: its latencies are summaries whose quantiles cover its
//! own recent past, not the window, and cannot be subtracted. The stages that have a Java
//! counterpart are shown with the counterpart's quantiles after the run and the window's count
//! (its `_count` is a counter); the others are listed as not mapped.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::report::Table;

/// The add path's stages in order, and the aggregate and read stages after them, with the Java
/// bookie's nearest summary (docs/semantics.md §6.2) where there is one.
const STAGES: [(&str, &str, Option<&str>); 11] = [
    ("decode", "socket read → dispatch", None),
    (
        "cross_shard_queue",
        "queue to the ledger's shard",
        Some("bookkeeper_server_WRITE_THREAD_QUEUED_LATENCY"),
    ),
    ("write_cache", "ledger table add", Some("bookie_add_entry")),
    (
        "journal_blocked",
        "waiting for a journal buffer",
        Some("bookkeeper_server_ADD_ENTRY_BLOCKED_WAIT"),
    ),
    (
        "journal_group_wait",
        "appended → group write submitted",
        Some("bookie_journal_JOURNAL_QUEUE_LATENCY"),
    ),
    (
        "journal_write",
        "group write",
        Some("bookie_journal_JOURNAL_FLUSH_LATENCY"),
    ),
    (
        "journal_fsync",
        "written → synced",
        Some("bookie_journal_JOURNAL_SYNC"),
    ),
    (
        "reply",
        "durable → reply written",
        Some("bookkeeper_server_CHANNEL_WRITE"),
    ),
    (
        "journal",
        "= group wait + write + fsync",
        Some("bookie_journal_JOURNAL_ADD_ENTRY"),
    ),
    ("cache_miss_read", "reads from disk", None),
    (
        "write_cache_full",
        "cache full: reads stopped (per episode)",
        None,
    ),
];

/// Stages that are parts of an add (the aggregate `journal` and reads are not).
fn is_add_part(stage: &str) -> bool {
    !matches!(stage, "journal" | "cache_miss_read")
}

const STAGE_METRIC: &str = "bookie_rs_stage_latency_ms";

/// One sample line of the Prometheus text format.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses the text exposition format (0.0.4): comments and malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let (labels, rest) = parse_labels(&line[open + 1..])?;
            (&line[..open], labels, rest)
        }
        None => {
            let end = line.find(char::is_whitespace)?;
            (&line[..end], Vec::new(), &line[end..])
        }
    };
    // A timestamp may follow the value.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// `key="value",...}` → the labels and what follows the closing brace.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        let mut chars = s[eq + 1..].char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => {
                    end = Some(eq + 1 + i + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        labels.push((key, value));
        s = &s[end?..];
    }
}

/// A cumulative histogram: (upper bound in ms, observations ≤ it), bounds ascending, the last
/// `+Inf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub count: f64,
    pub sum_ms: f64,
}

impl Histogram {
    /// Observations ≤ `le`: the count at the largest bound not above it (a bound absent from
    /// one scrape had nothing in its own bucket there).
    fn cumulative_at(&self, le: f64) -> f64 {
        self.buckets
            .iter()
            .take_while(|(b, _)| *b <= le)
            .last()
            .map_or(0.0, |(_, c)| *c)
    }

    /// What was observed after `before` was taken (counters only grow; a restarted bookie's
    /// negative differences are clamped to 0).
    pub fn minus(&self, before: &Histogram) -> Histogram {
        let mut bounds: Vec<f64> = self
            .buckets
            .iter()
            .chain(&before.buckets)
            .map(|(b, _)| *b)
            .collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        Histogram {
            buckets: bounds
                .into_iter()
                .map(|b| {
                    let d = self.cumulative_at(b) - before.cumulative_at(b);
                    (b, d.max(0.0))
                })
                .collect(),
            count: (self.count - before.count).max(0.0),
            sum_ms: (self.sum_ms - before.sum_ms).max(0.0),
        }
    }

    /// The upper bound (ms) of the bucket holding quantile `q`; `None` when empty.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last().map_or(0.0, |(_, c)| *c);
        if total <= 0.0 {
            return None;
        }
        let rank = (q * total).ceil().clamp(1.0, total);
        let (bound, _) = self.buckets.iter().find(|(_, c)| *c >= rank)?;
        if bound.is_finite() {
            return Some(*bound);
        }
        // Beyond the last finite bound: the largest finite bound is all that is known.
        self.buckets
            .iter()
            .rev()
            .find(|(b, _)| b.is_finite())
            .map(|(b, _)| *b)
    }
}

/// The histograms of metric `name`, by the value of `label`.
pub fn histograms(samples: &[Sample], name: &str, label: &str) -> BTreeMap<String, Histogram> {
    let mut out: BTreeMap<String, Histogram> = BTreeMap::new();
    let bucket = format!("{name}_bucket");
    let (count, sum) = (format!("{name}_count"), format!("{name}_sum"));
    for s in samples {
        let Some(key) = s.label(label) else { continue };
        let h = out.entry(key.to_string()).or_default();
        if s.name == bucket {
            let le = match s.label("le") {
                Some("+Inf") => f64::INFINITY,
                Some(v) => match v.parse() {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                None => continue,
            };
            h.buckets.push((le, s.value));
        } else if s.name == count {
            h.count = s.value;
        } else if s.name == sum {
            h.sum_ms = s.value;
        }
    }
    for h in out.values_mut() {
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// One thread's scheduler time.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadTime {
    pub name: String,
    pub cpu_s: f64,
    pub wait_s: f64,
}

impl From<procstat::ThreadSched> for ThreadTime {
    fn from(t: procstat::ThreadSched) -> ThreadTime {
        ThreadTime {
            name: t.name,
            cpu_s: t.cpu_ns as f64 / 1e9,
            wait_s: t.wait_ns as f64 / 1e9,
        }
    }
}

/// This process's threads, summed per name (`procstat`).
pub fn own_threads() -> Vec<ThreadTime> {
    procstat::threads()
        .into_iter()
        .map(ThreadTime::from)
        .collect()
}

/// The calling thread's scheduler time (`procstat`).
pub fn this_thread() -> Option<ThreadTime> {
    procstat::this_thread().map(ThreadTime::from)
}

fn add_thread(out: &mut Vec<ThreadTime>, name: &str, cpu_s: f64, wait_s: f64) {
    match out.iter_mut().find(|t| t.name == name) {
        Some(t) => {
            t.cpu_s += cpu_s;
            t.wait_s += wait_s;
        }
        None => out.push(ThreadTime {
            name: name.to_string(),
            cpu_s,
            wait_s,
        }),
    }
}

/// This process's threads now, and those that exited with their last reading.
fn own_now(exited: &[ThreadTime]) -> Vec<ThreadTime> {
    let mut now = own_threads();
    for t in exited {
        add_thread(&mut now, &t.name, t.cpu_s, t.wait_s);
    }
    now
}

/// The bookie's threads from its `bookie_rs_thread_*_seconds_total` counters.
fn bookie_threads(samples: &[Sample]) -> Vec<ThreadTime> {
    let mut out = Vec::new();
    for s in samples {
        let Some(name) = s.label("thread") else {
            continue;
        };
        match s.name.as_str() {
            "bookie_rs_thread_cpu_seconds_total" => add_thread(&mut out, name, s.value, 0.0),
            "bookie_rs_thread_runqueue_wait_seconds_total" => {
                add_thread(&mut out, name, 0.0, s.value)
            }
            _ => {}
        }
    }
    out
}

/// `after - before` per thread name (a thread only in `after` started during the run; one only
/// in `before` ended, and its time is lost).
fn thread_deltas(before: &[ThreadTime], after: &[ThreadTime]) -> Vec<ThreadTime> {
    let mut out: Vec<ThreadTime> = after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.name == a.name);
            ThreadTime {
                name: a.name.clone(),
                cpu_s: (a.cpu_s - b.map_or(0.0, |b| b.cpu_s)).max(0.0),
                wait_s: (a.wait_s - b.map_or(0.0, |b| b.wait_s)).max(0.0),
            }
        })
        .filter(|t| t.cpu_s > 0.0 || t.wait_s > 0.0)
        .collect();
    out.sort_by(|a, b| b.wait_s.total_cmp(&a.wait_s).then(a.name.cmp(&b.name)));
    out
}

/// Which bookie answered the scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookieKind {
    /// Ours: subtractable stage histograms.
    Rust,
    /// Java's names: summaries only.
    Java,
    /// Neither kind of series found.
    Unknown,
}

impl BookieKind {
    fn of(samples: &[Sample]) -> BookieKind {
        if samples
            .iter()
            .any(|s| s.name.starts_with(STAGE_METRIC) && s.label("stage").is_some())
        {
            BookieKind::Rust
        } else if samples
            .iter()
            .any(|s| s.name.starts_with("bookkeeper_server_ADD_ENTRY_REQUEST"))
        {
            BookieKind::Java
        } else {
            BookieKind::Unknown
        }
    }

    fn name(self) -> &'static str {
        match self {
            BookieKind::Rust => "rust",
            BookieKind::Java => "java",
            BookieKind::Unknown => "unknown",
        }
    }
}

/// One stage over the measured window, latencies in µs.
#[derive(Clone, Debug, PartialEq)]
pub struct StageRow {
    pub stage: &'static str,
    pub what: &'static str,
    /// The series it comes from (ours, or the Java counterpart).
    pub series: String,
    pub count: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p99_9_us: Option<f64>,
    pub mean_us: Option<f64>,
}

/// Our bookie's read-ahead over the window (`bookie_rs_read_*` counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAhead {
    /// Device reads of runs.
    pub runs: u64,
    /// Entries they brought beyond the asked ones.
    pub entries: u64,
    /// Reads answered from the read-ahead cache.
    pub hits: u64,
    /// Reads that waited in the shard for the run bringing them (`None`: an older bookie).
    pub waits: Option<u64>,
}

/// The per-stage and per-thread breakdown of a run.
#[derive(Clone, Debug)]
pub struct Breakdown {
    pub source: String,
    pub kind: BookieKind,
    /// Whether the quantiles are the window's own (histograms subtracted).
    pub subtracted: bool,
    pub stages: Vec<StageRow>,
    /// Stages without a series in this bookie's metrics.
    pub unmapped: Vec<&'static str>,
    pub bookie_threads: Vec<ThreadTime>,
    pub bkperf_threads: Vec<ThreadTime>,
    /// Our bookie's read-ahead over the window.
    pub read_ahead: Option<ReadAhead>,
    pub notes: Vec<String>,
}

/// The increase of a counter (summed over its series) between two scrapes.
fn counter_delta(before: &[Sample], after: &[Sample], name: &str) -> Option<u64> {
    let sum = |s: &[Sample]| {
        s.iter()
            .filter(|x| x.name == name)
            .map(|x| x.value)
            .reduce(|a, b| a + b)
    };
    let a = sum(after)?;
    Some((a - sum(before).unwrap_or(0.0)).max(0.0).round() as u64)
}

/// What was taken at the start of the measured window.
pub struct Before {
    pub metrics: Option<String>,
    pub own_threads: Vec<ThreadTime>,
    pub error: Option<String>,
}

/// Scrapes `http` (when given) and bkperf's own threads: the start of the window.
pub fn snapshot(http: Option<SocketAddr>) -> Before {
    let (metrics, error) = match http.map(fetch_metrics) {
        Some(Ok(text)) => (Some(text), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    Before {
        metrics,
        own_threads: own_threads(),
        error,
    }
}

/// The breakdown from the two scrapes of `source`, and bkperf's threads then and now
/// (`exited`: threads that ended since, with their time when they did).
pub fn breakdown(source: &str, before: &Before, after: &str, exited: &[ThreadTime]) -> Breakdown {
    let b = parse(before.metrics.as_deref().unwrap_or(""));
    let a = parse(after);
    let kind = BookieKind::of(&a);
    let mut out = Breakdown {
        source: source.to_string(),
        kind,
        subtracted: kind == BookieKind::Rust,
        stages: Vec::new(),
        unmapped: Vec::new(),
        bookie_threads: thread_deltas(&bookie_threads(&b), &bookie_threads(&a)),
        bkperf_threads: thread_deltas(&before.own_threads, &own_now(exited)),
        read_ahead: None,
        notes: Vec::new(),
    };
    if let (Some(runs), Some(entries), Some(hits)) = (
        counter_delta(&b, &a, "bookie_rs_read_ahead_runs_total"),
        counter_delta(&b, &a, "bookie_rs_read_ahead_entries_total"),
        counter_delta(&b, &a, "bookie_rs_read_cache_hits_total"),
    ) {
        out.read_ahead = Some(ReadAhead {
            runs,
            entries,
            hits,
            waits: counter_delta(&b, &a, "bookie_rs_read_ahead_waits_total"),
        });
    }
    let refused = |cause: &str| {
        let name = format!("bookie_rs_journal_refused_{cause}_total");
        counter_delta(&b, &a, &name).unwrap_or(0)
    };
    let (no_buffer, no_segment) = (refused("no_buffer"), refused("no_segment"));
    if no_buffer + no_segment > 0 {
        out.notes.push(format!(
            "the journal refused appends (backpressure, the journal_blocked stage): \
             {no_buffer} with every group buffer in use, {no_segment} waiting for the next \
             segment to be prepared"
        ));
    }
    match kind {
        BookieKind::Rust => rust_stages(&b, &a, &mut out),
        BookieKind::Java => java_stages(&b, &a, &mut out),
        BookieKind::Unknown => {
            out.unmapped = STAGES.iter().map(|(s, _, _)| *s).collect();
            out.notes.push(
                "no stage histograms (bookie_rs_stage_latency_ms) nor Java summaries \
                 (bookkeeper_server_ADD_ENTRY_REQUEST) in the bookie's /metrics"
                    .into(),
            );
        }
    }
    if out.bookie_threads.is_empty() {
        out.notes
            .push("no per-thread scheduler counters from the bookie".into());
    }
    out
}

fn rust_stages(before: &[Sample], after: &[Sample], out: &mut Breakdown) {
    let (b, a) = (
        histograms(before, STAGE_METRIC, "stage"),
        histograms(after, STAGE_METRIC, "stage"),
    );
    let empty = Histogram::default();
    for (stage, what, _) in STAGES {
        let Some(after) = a.get(stage) else {
            out.unmapped.push(stage);
            continue;
        };
        let h = after.minus(b.get(stage).unwrap_or(&empty));
        let us = |q: f64| h.quantile_ms(q).map(|ms| ms * 1000.0);
        out.stages.push(StageRow {
            stage,
            what,
            series: format!("{STAGE_METRIC}{{stage=\"{stage}\"}}"),
            count: h.count.round() as u64,
            p50_us: us(0.5),
            p99_us: us(0.99),
            p99_9_us: us(0.999),
            mean_us: (h.count > 0.0).then(|| h.sum_ms * 1000.0 / h.count),
        });
    }
}

/// The value of `name{...quantile="q"}` among the series with the largest count (several
/// journals or directories: the busiest), successful operations only where labelled.
fn java_series(samples: &[Sample], name: &str) -> Option<(Vec<(String, String)>, f64)> {
    let count = format!("{name}_count");
    samples
        .iter()
        .filter(|s| s.name == count && s.label("success") != Some("false"))
        .max_by(|x, y| x.value.total_cmp(&y.value))
        .map(|s| (s.labels.clone(), s.value))
}

fn java_stages(before: &[Sample], after: &[Sample], out: &mut Breakdown) {
    for (stage, what, java) in STAGES {
        let Some(name) = java else {
            out.unmapped.push(stage);
            continue;
        };
        let Some((labels, count_after)) = java_series(after, name) else {
            out.unmapped.push(stage);
            continue;
        };
        let count_before = before
            .iter()
            .find(|s| s.name == format!("{name}_count") && s.labels == labels)
            .map_or(0.0, |s| s.value);
        let quantile = |q: &str| {
            after
                .iter()
                .find(|s| {
                    s.name == name
                        && s.label("quantile") == Some(q)
                        && labels.iter().all(|(k, v)| s.label(k) == Some(v))
                })
                .map(|s| s.value * 1000.0)
                .filter(|v| v.is_finite())
        };
        out.stages.push(StageRow {
            stage,
            what,
            series: name.to_string(),
            count: (count_after - count_before).max(0.0).round() as u64,
            p50_us: quantile("0.5"),
            p99_us: quantile("0.99"),
            p99_9_us: quantile("0.999"),
            mean_us: None,
        });
    }
    out.notes.push(
        "Java bookie: its latencies are summaries (quantiles over its own recent past, not \
         subtractable), shown as they stood after the run; counts are the window's; each \
         counterpart only approximates our stage (JOURNAL_SYNC and JOURNAL_FLUSH_LATENCY count \
         syncs and flushes, not adds)"
            .into(),
    );
}

impl Breakdown {
    /// The stage that owns the most of the tail: the add-path stage with the largest p99.9.
    pub fn tail_owner(&self) -> Option<&StageRow> {
        self.stages
            .iter()
            .filter(|r| is_add_part(r.stage) && r.count > 0)
            .max_by(|a, b| {
                a.p99_9_us
                    .unwrap_or(0.0)
                    .total_cmp(&b.p99_9_us.unwrap_or(0.0))
            })
    }

    /// The human tables: stages, then threads by run-queue wait.
    pub fn render(&self) -> String {
        let mut s = format!(
            "bookie stages over the measured window ({} bookie, {}{}):\n",
            self.kind.name(),
            self.source,
            if self.subtracted {
                ""
            } else {
                "; quantiles NOT for the window alone"
            }
        );
        let owner = self.tail_owner().map(|r| r.stage);
        let mut t = Table::new(&["stage", "what", "count", "p50", "p99", "p99.9", "mean", ""]);
        let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        for r in &self.stages {
            t.row(vec![
                r.stage.to_string(),
                r.what.to_string(),
                r.count.to_string(),
                cell(r.p50_us),
                cell(r.p99_us),
                cell(r.p99_9_us),
                cell(r.mean_us),
                if Some(r.stage) == owner {
                    "<- largest p99.9".into()
                } else {
                    String::new()
                },
            ]);
        }
        s.push_str(&t.render());
        s.push_str("\nstage latency in microseconds (upper bounds of ≤19 % buckets)\n");
        if let Some(ra) = self.read_ahead {
            let waits = ra
                .waits
                .map(|w| format!(", {w} of them after waiting in the shard for their run"))
                .unwrap_or_default();
            s.push_str(&format!(
                "read-ahead: {} device reads of runs brought {} entries ahead; \
                 {} reads answered from the read-ahead cache{waits}\n",
                ra.runs, ra.entries, ra.hits
            ));
        }
        if !self.unmapped.is_empty() {
            s.push_str(&format!(
                "not in this bookie's metrics: {}\n",
                self.unmapped.join(", ")
            ));
        }
        for (who, threads) in [
            ("bookie", &self.bookie_threads),
            ("bkperf", &self.bkperf_threads),
        ] {
            if threads.is_empty() {
                continue;
            }
            let mut t = Table::new(&["thread", "cpu ms", "run-queue wait ms"]);
            for th in threads.iter().take(16) {
                t.row(vec![
                    th.name.clone(),
                    format!("{:.1}", th.cpu_s * 1e3),
                    format!("{:.1}", th.wait_s * 1e3),
                ]);
            }
            s.push_str(&format!("{who} threads over the run:\n{}", t.render()));
        }
        for n in &self.notes {
            s.push_str(&format!("note: {n}\n"));
        }
        s
    }

    /// The report's optional `stages` section.
    pub fn to_json(&self) -> Value {
        let round = |v: Option<f64>| v.map(|v| (v * 10.0).round() / 10.0);
        let threads = |ts: &[ThreadTime]| {
            ts.iter()
                .map(|t| {
                    json!({
                        "thread": t.name,
                        "cpu_s": (t.cpu_s * 1e4).round() / 1e4,
                        "runqueue_wait_s": (t.wait_s * 1e4).round() / 1e4,
                    })
                })
                .collect::<Vec<_>>()
        };
        json!({
            "source": self.source,
            "bookie_impl": self.kind.name(),
            "window_quantiles": self.subtracted,
            "unit": "us",
            "stages": self.stages.iter().map(|r| json!({
                "stage": r.stage,
                "what": r.what,
                "series": r.series,
                "count": r.count,
                "p50_us": round(r.p50_us),
                "p99_us": round(r.p99_us),
                "p99_9_us": round(r.p99_9_us),
                "mean_us": round(r.mean_us),
            })).collect::<Vec<_>>(),
            "tail_owner": self.tail_owner().map(|r| r.stage),
            "read_ahead": self.read_ahead.map(|ra| json!({
                "device_reads": ra.runs,
                "entries_ahead": ra.entries,
                "cache_hits": ra.hits,
                "shard_waits": ra.waits,
            })),
            "unmapped": self.unmapped,
            "threads": {
                "bookie": threads(&self.bookie_threads),
                "bkperf": threads(&self.bkperf_threads),
            },
            "notes": self.notes,
        })
    }
}

/// `GET /metrics` over plain HTTP/1.0; the body.
pub fn fetch_metrics(addr: SocketAddr) -> Result<String, String> {
    http(addr, "GET", "/metrics", None)
}

/// One plain HTTP/1.0 request to a bookie's admin port (`body`: a JSON body); the response
/// body of a 200, an error naming the request otherwise.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<String, String> {
    let what = format!("{method} http://{addr}{path}");
    let fail = |e: std::io::Error| format!("{what}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    let payload = match body {
        Some(b) => format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ),
        None => "Accept: text/plain\r\n\r\n".to_string(),
    };
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n{payload}"
    )
    .map_err(fail)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(fail)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{what}: no HTTP header"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        return Err(format!("{what}: HTTP {status}"));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    Ok(if chunked {
        dechunk(body)
    } else {
        body.to_string()
    })
}

/// The body of a chunked transfer (a Java server may answer HTTP/1.0 so).
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two real scrapes of our bookie (tests/fixtures), before and after 2,000 adds.
    const BEFORE: &str = include_str!("../tests/fixtures/metrics-before.txt");
    const AFTER: &str = include_str!("../tests/fixtures/metrics-after.txt");

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let s = parse(
            "# TYPE x counter\n\
             x 3\n\
             y{a=\"1\",b=\"q\\\"u\\\\o\\nte\"} NaN\n\
             z_bucket{stage=\"decode\",le=\"+Inf\"} 7 1700000000\n\
             garbage line\n\
             w{a=\"unterminated} 1\n",
        );
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!((s[0].name.as_str(), s[0].value), ("x", 3.0));
        assert_eq!(s[1].label("b"), Some("q\"u\\o\nte"));
        assert!(s[1].value.is_nan());
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert_eq!(s[2].value, 7.0);
    }

    fn hist(buckets: &[(f64, f64)]) -> Histogram {
        Histogram {
            buckets: buckets.to_vec(),
            count: buckets.last().map_or(0.0, |b| b.1),
            sum_ms: 0.0,
        }
    }

    /// Subtraction over bound sets that differ (a bound absent from one scrape has the count
    /// of the next lower bound there) and quantiles as bucket upper bounds.
    #[test]
    fn subtraction_and_quantiles() {
        let before = hist(&[(0.1, 10.0), (0.2, 10.0), (f64::INFINITY, 10.0)]);
        let after = hist(&[
            (0.1, 10.0),
            (0.15, 60.0),
            (0.2, 100.0),
            (1.0, 109.0),
            (4.0, 110.0),
            (f64::INFINITY, 110.0),
        ]);
        let d = after.minus(&before);
        assert_eq!(d.count, 100.0);
        assert_eq!(
            d.buckets,
            vec![
                (0.1, 0.0),
                (0.15, 50.0),
                (0.2, 90.0),
                (1.0, 99.0),
                (4.0, 100.0),
                (f64::INFINITY, 100.0)
            ]
        );
        assert_eq!(d.quantile_ms(0.5), Some(0.15));
        assert_eq!(d.quantile_ms(0.51), Some(0.2));
        assert_eq!(d.quantile_ms(0.99), Some(1.0));
        assert_eq!(d.quantile_ms(0.999), Some(4.0));
        assert_eq!(before.minus(&before).quantile_ms(0.5), None);
        // Past the last finite bound, the last finite bound is all that is known.
        let tail = hist(&[(1.0, 1.0), (f64::INFINITY, 2.0)]);
        assert_eq!(tail.quantile_ms(1.0), Some(1.0));
    }

    /// The real scrapes: every add stage counts the 2,000 adds, quantiles are ordered, the
    /// journal's parts are each below the journal total's p99.9, and the bookie's threads
    /// are there.
    #[test]
    fn breakdown_of_real_scrapes() {
        let before = Before {
            metrics: Some(BEFORE.to_string()),
            own_threads: Vec::new(),
            error: None,
        };
        let b = breakdown("fixture", &before, AFTER, &[]);
        assert_eq!(b.kind, BookieKind::Rust);
        // The fixture was scraped before the bookie had the `write_cache_full` stage.
        assert!(
            b.subtracted && b.unmapped == ["write_cache_full"],
            "{:?}",
            b.unmapped
        );
        let row = |s: &str| b.stages.iter().find(|r| r.stage == s).expect(s);
        for s in [
            "decode",
            "write_cache",
            "journal_group_wait",
            "journal_write",
            "journal_fsync",
            "journal",
            "reply",
        ] {
            let r = row(s);
            assert_eq!(r.count, 2000, "{s}");
            let (p50, p99, p999) = (r.p50_us.unwrap(), r.p99_us.unwrap(), r.p99_9_us.unwrap());
            assert!(p50 <= p99 && p99 <= p999, "{s}: {r:?}");
        }
        assert_eq!(row("cache_miss_read").count, 0);
        assert!(b.tail_owner().is_some());
        assert!(b.bookie_threads.iter().any(|t| t.name == "shard-0"));
        let text = b.render();
        assert!(text.contains("<- largest p99.9"), "{text}");
        let j = b.to_json();
        assert_eq!(j["stages"][0]["stage"], "decode");
        assert_eq!(j["window_quantiles"], true);
    }

    /// A Java bookie's summaries: mapped stages carry its quantiles and the window's count;
    /// stages without a counterpart are listed; nothing claims to be the window's quantiles.
    #[test]
    fn java_summaries_map_where_they_can() {
        let java = |n: u64| {
            format!(
                "bookie_journal_JOURNAL_SYNC{{journalIndex=\"0\",success=\"true\",quantile=\"0.5\"}} 0.8\n\
                 bookie_journal_JOURNAL_SYNC{{journalIndex=\"0\",success=\"true\",quantile=\"0.99\"}} 2.5\n\
                 bookie_journal_JOURNAL_SYNC{{journalIndex=\"0\",success=\"true\",quantile=\"0.999\"}} NaN\n\
                 bookie_journal_JOURNAL_SYNC_count{{journalIndex=\"0\",success=\"true\"}} {n}\n\
                 bookie_journal_JOURNAL_SYNC_count{{journalIndex=\"0\",success=\"false\"}} 0\n\
                 bookkeeper_server_ADD_ENTRY_REQUEST_count{{success=\"true\"}} {n}\n"
            )
        };
        let before = Before {
            metrics: Some(java(100)),
            own_threads: Vec::new(),
            error: None,
        };
        let b = breakdown("java", &before, &java(350), &[]);
        assert_eq!(b.kind, BookieKind::Java);
        assert!(!b.subtracted);
        assert_eq!(b.stages.len(), 1, "{:?}", b.stages);
        let r = &b.stages[0];
        assert_eq!((r.stage, r.count), ("journal_fsync", 250));
        assert_eq!(
            (r.p50_us, r.p99_us, r.p99_9_us),
            (Some(800.0), Some(2500.0), None)
        );
        assert!(b.unmapped.contains(&"decode") && b.unmapped.contains(&"journal"));
        assert!(b.render().contains("NOT for the window alone"));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }

    #[test]
    fn own_threads_include_this_one() {
        let t = std::thread::Builder::new()
            .name("stages-probe".into())
            .spawn(own_threads)
            .expect("spawn")
            .join()
            .expect("join");
        assert!(t.iter().any(|t| t.name == "stages-probe"), "{t:?}");
        let me = std::thread::Builder::new()
            .name("stages-self".into())
            .spawn(this_thread)
            .expect("spawn")
            .join()
            .expect("join")
            .expect("reads /proc/thread-self");
        assert_eq!(me.name, "stages-self");
    }
}
