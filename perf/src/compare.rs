//! `bkperf compare BASE.json CAND.json` and `bkperf compare-rounds`: the regression verdicts of
//! docs/interop.md §5.2 over `bookie-bench/1` reports.
//!
//! Per metric, the paired ratio r = candidate / baseline of each round; the decision is on the
//! median ratio, with a direction-consistency requirement (at least n − ⌊n/4⌋ rounds worse:
//! 4 of 5, 7 of 9, 1 of 1) and an absolute floor for latencies:
//!
//! | metric | regression if median ratio | floor |
//! |---|---|---|
//! | throughput (`achieved_rate_ops`) | < 0.90 | – |
//! | p50 | > 1.10 | Δ ≥ 50 µs |
//! | p99 | > 1.20 | Δ ≥ 200 µs |
//! | p99.9 | > 1.50 | Δ ≥ 1 ms |
//! | max | report only | |
//! | cpu/op (the bookie's CPU per operation) | > 1.10, closed-loop runs only | – |
//!
//! `--max-regression X` (e.g. `10%`, `100%`) replaces every threshold by one factor f = 1 + X:
//! latency and CPU ratios above f and throughput ratios below 1/f regress; `100%` therefore means
//! "2× worse". `--bar METRIC=X` sets one metric's factor the same way (the gate's bars come from a
//! measured sensitivity table: docs/gate.md). Latencies are gated only for open-loop
//! (`fixed_rate`) runs that are not saturated; closed-loop or saturated runs are judged on
//! throughput (and CPU per operation) alone (§5.1). The bookie's CPU per operation is gated only
//! in closed-loop runs, where it is the operation's work rather than the price of waking up.
//! Failed or timed-out operations in a candidate round fail outright, unless
//! `--tolerate-failed F` is given: then only a median failed fraction above F fails (for smoke
//! runs on a shared machine where a bookie's backpressure may turn a few adds away).
//!
//! Outcomes: **FAIL** (median beyond the threshold, consistent, past the floor) exits 1;
//! **WARN** (median beyond but inconsistent: rerun with more rounds) and **PASS** exit 0;
//! unreadable input exits 2. Two files are the one-round case.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use crate::report::Table;

/// Arguments of `bkperf compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The baseline report.
    pub base: PathBuf,
    /// The candidate report.
    pub cand: PathBuf,
    /// One threshold for every metric instead of the §5.2 table, e.g. 10% or 0.1.
    #[arg(long)]
    pub max_regression: Option<String>,
    /// Tolerate failed operations up to this fraction of the candidate's (median), e.g. 1%.
    #[arg(long)]
    pub tolerate_failed: Option<String>,
    /// One metric's bar instead of the table's, `METRIC=X` (repeatable): e.g. `cpu/op=6%`,
    /// `throughput=6%`, `p99.9=60%`. Metrics: throughput, p50, p99, p99.9, cpu/op.
    #[arg(long = "bar", value_name = "METRIC=X")]
    pub bars: Vec<String>,
}

/// Arguments of `bkperf compare-rounds`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareRoundsArgs {
    /// Baseline reports, one per round, in round order.
    #[arg(long, num_args = 1.., required = true)]
    pub base: Vec<PathBuf>,
    /// Candidate reports, one per round, in the same order.
    #[arg(long, num_args = 1.., required = true)]
    pub cand: Vec<PathBuf>,
    /// One threshold for every metric instead of the §5.2 table, e.g. 10% or 100%.
    #[arg(long)]
    pub max_regression: Option<String>,
    /// Tolerate failed operations up to this fraction of the candidate's (median), e.g. 1%.
    #[arg(long)]
    pub tolerate_failed: Option<String>,
    /// One metric's bar instead of the table's, `METRIC=X` (repeatable): e.g. `cpu/op=6%`.
    #[arg(long = "bar", value_name = "METRIC=X")]
    pub bars: Vec<String>,
    /// Also write the verdict table as JSON (`bookie-verdict/1`) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Append the verdict as one JSON line (`bookie-gate-history/1`) to this file: the trend
    /// page's input (`bkperf trend`).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// The baseline's revision, for --json and --history (e.g. a commit hash).
    #[arg(long, default_value = "")]
    pub base_rev: String,
    /// The candidate's revision, for --json and --history.
    #[arg(long, default_value = "")]
    pub cand_rev: String,
    /// What the comparison was, for --history: `landing` (the submission against the previous
    /// landing) or `drift` (against a landing further back).
    #[arg(long, default_value = "landing")]
    pub kind: String,
}

/// The bars a comparison is judged by: the table's, one factor for all (`--max-regression`),
/// or one metric's own (`--bar`), and the failed operations tolerated.
#[derive(Clone, Debug, Default)]
pub struct Bars {
    pub max_regression: Option<f64>,
    pub per_metric: Vec<(String, f64)>,
    pub tolerate_failed: f64,
}

impl Bars {
    pub fn parse(
        max_regression: &Option<String>,
        bars: &[String],
        tolerate_failed: &Option<String>,
    ) -> Result<Bars, String> {
        let mut per_metric = Vec::new();
        for b in bars {
            let (name, x) = b
                .split_once('=')
                .ok_or_else(|| format!("bad --bar {b:?}: use METRIC=X, e.g. cpu/op=6%"))?;
            if !METRIC_NAMES.contains(&name) {
                return Err(format!(
                    "bad --bar {b:?}: no metric {name:?} (one of {})",
                    METRIC_NAMES.join(", ")
                ));
            }
            per_metric.push((name.to_string(), parse_fraction(x)?));
        }
        Ok(Bars {
            max_regression: threshold(max_regression)?,
            per_metric,
            tolerate_failed: tolerance(tolerate_failed)?,
        })
    }

    /// The factor for `metric`: its own bar, else the common factor, else None (the table's).
    fn factor(&self, metric: &str) -> Option<f64> {
        self.per_metric
            .iter()
            .rev()
            .find(|(m, _)| m == metric)
            .map(|(_, x)| *x)
            .or(self.max_regression)
    }
}

/// The gated metrics, as `--bar` names them.
const METRIC_NAMES: [&str; 5] = ["throughput", "p50", "p99", "p99.9", "cpu/op"];

/// The figures of one report that are judged.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    pub workload: String,
    pub throughput: f64,
    pub p50: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub failed: u64,
    pub ok: u64,
    pub open_loop: bool,
    pub saturated: bool,
    /// The bookie's CPU per operation over the measured window (µs, all its threads), when
    /// bkperf could read it.
    pub cpu_per_op: Option<f64>,
}

impl Metrics {
    pub fn from_report(r: &Value) -> Result<Metrics, String> {
        if r["schema"] != "bookie-bench/1" {
            return Err(format!(
                "not a bookie-bench/1 report (schema {})",
                r["schema"]
            ));
        }
        let res = &r["results"];
        let num = |v: &Value, what: &str| {
            v.as_f64()
                .ok_or_else(|| format!("report has no numeric {what}"))
        };
        let lat = &res["latency_us"];
        Ok(Metrics {
            workload: r["workload"]["id"].as_str().unwrap_or("?").to_string(),
            throughput: num(&res["achieved_rate_ops"], "results.achieved_rate_ops")?,
            p50: num(&lat["p50"], "latency_us.p50")?,
            p99: num(&lat["p99"], "latency_us.p99")?,
            p99_9: num(&lat["p99_9"], "latency_us.p99_9")?,
            max: num(&lat["max"], "latency_us.max")?,
            failed: res["ops_failed"].as_u64().unwrap_or(0)
                + res["ops_timeout"].as_u64().unwrap_or(0),
            ok: res["ops_ok"].as_u64().unwrap_or(0),
            open_loop: r["workload"]["mode"] == "fixed_rate",
            saturated: r["validity"]["saturated"].as_bool().unwrap_or(false),
            cpu_per_op: r["resources"]["bookie_per_op"]["cpu_us_per_op"]
                .as_f64()
                .filter(|x| *x > 0.0),
        })
    }

    pub fn load(path: &Path) -> Result<Metrics, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        Metrics::from_report(&v).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Which way is worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// Verdict of one metric or of a whole comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Pass,
    /// Not gated (report only, or not applicable to the run's mode).
    Info,
    Warn,
    Fail,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Info => "-",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One row of the verdict table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub metric: &'static str,
    pub base_median: f64,
    pub cand_median: f64,
    pub median_ratio: f64,
    pub worse: usize,
    pub rounds: usize,
    /// The ratio beyond which this metric regresses (None: not gated).
    pub threshold: Option<f64>,
    pub verdict: Verdict,
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Rounds that must be worse for a consistent regression: 1 of 1, 3 of 3, 4 of 5, 7 of 9.
pub fn required_worse(n: usize) -> usize {
    n - n / 4
}

/// Parses `10%`, `0.1`, `100%`.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("bad threshold {text:?}: use e.g. 10% or 0.1"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("threshold {text:?} must be more than 0"));
    }
    Ok(v)
}

/// Judges paired rounds (`base[i]` against `cand[i]`).
#[cfg(test)]
pub fn judge(base: &[Metrics], cand: &[Metrics], max_regression: Option<f64>) -> Vec<Row> {
    let bars = Bars {
        max_regression,
        ..Bars::default()
    };
    judge_with(base, cand, &bars)
}

/// Judges paired rounds (`base[i]` against `cand[i]`) by `bars`.
///
/// The bookie's CPU per operation is gated only for closed-loop runs, where the bookie works
/// flat out and each operation's CPU is its work; in an open-loop run at a modest rate it is
/// mostly the cost of waking up, and is reported only.
pub fn judge_with(base: &[Metrics], cand: &[Metrics], bars: &Bars) -> Vec<Row> {
    let tolerate_failed = bars.tolerate_failed;
    let n = base.len().min(cand.len());
    let latency_gated = (0..n).all(|i| {
        base[i].open_loop && cand[i].open_loop && !base[i].saturated && !cand[i].saturated
    });
    let cpu_known = (0..n).all(|i| base[i].cpu_per_op.is_some() && cand[i].cpu_per_op.is_some());
    let cpu_gated = cpu_known && (0..n).all(|i| !base[i].open_loop && !cand[i].open_loop);
    type Get = fn(&Metrics) -> f64;
    let metrics: [(&'static str, Get, Better, Option<f64>, f64); 6] = [
        (
            "throughput",
            |m| m.throughput,
            Better::Higher,
            Some(0.90),
            0.0,
        ),
        ("p50", |m| m.p50, Better::Lower, Some(1.10), 50.0),
        ("p99", |m| m.p99, Better::Lower, Some(1.20), 200.0),
        ("p99.9", |m| m.p99_9, Better::Lower, Some(1.50), 1000.0),
        ("max", |m| m.max, Better::Lower, None, 0.0),
        (
            "cpu/op",
            |m| m.cpu_per_op.unwrap_or(f64::NAN),
            Better::Lower,
            Some(1.10),
            0.0,
        ),
    ];
    let mut rows = Vec::new();
    for (name, get, better, default_threshold, floor) in metrics {
        if name == "cpu/op" && !cpu_known {
            continue;
        }
        let ratios: Vec<f64> = (0..n)
            .map(|i| {
                let (b, c) = (get(&base[i]), get(&cand[i]));
                if b > 0.0 {
                    c / b
                } else if c > 0.0 {
                    f64::INFINITY
                } else {
                    1.0
                }
            })
            .collect();
        let worse = ratios
            .iter()
            .filter(|&&r| match better {
                Better::Higher => r < 1.0,
                Better::Lower => r > 1.0,
            })
            .count();
        let (bm, cm) = (
            median(&(0..n).map(|i| get(&base[i])).collect::<Vec<_>>()),
            median(&(0..n).map(|i| get(&cand[i])).collect::<Vec<_>>()),
        );
        let mr = {
            let finite: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
            if finite.len() < ratios.len() && finite.len() * 2 <= ratios.len() {
                f64::INFINITY
            } else {
                median(&ratios)
            }
        };
        let gated = match (name, better) {
            ("cpu/op", _) => cpu_gated,
            (_, Better::Higher) => true,
            (_, Better::Lower) => latency_gated,
        };
        let threshold = default_threshold
            .filter(|_| gated)
            .map(|t| match bars.factor(name) {
                None => t,
                Some(x) => match better {
                    Better::Higher => 1.0 / (1.0 + x),
                    Better::Lower => 1.0 + x,
                },
            });
        let verdict = match threshold {
            None => Verdict::Info,
            Some(t) => {
                let beyond = match better {
                    Better::Higher => mr < t,
                    Better::Lower => mr > t && (cm - bm) >= floor,
                };
                if !beyond {
                    Verdict::Pass
                } else if worse >= required_worse(n) {
                    Verdict::Fail
                } else {
                    Verdict::Warn
                }
            }
        };
        rows.push(Row {
            metric: name,
            base_median: bm,
            cand_median: cm,
            median_ratio: mr,
            worse,
            rounds: n,
            threshold,
            verdict,
        });
    }
    // Failed ops: any fails outright (§5.2), unless a tolerated fraction is given, when the
    // median fraction of failed candidate operations must stay within it.
    let fraction = |m: &Metrics| m.failed as f64 / (m.ok + m.failed).max(1) as f64;
    let cand_fail = median(&cand.iter().take(n).map(fraction).collect::<Vec<_>>());
    let failed: u64 = cand.iter().take(n).map(|m| m.failed).sum();
    let fails = if tolerate_failed > 0.0 {
        cand_fail > tolerate_failed
    } else {
        failed > 0
    };
    rows.push(Row {
        metric: "failed ops",
        base_median: median(&base.iter().take(n).map(fraction).collect::<Vec<_>>()),
        cand_median: cand_fail,
        median_ratio: f64::NAN,
        worse: cand.iter().take(n).filter(|m| m.failed > 0).count(),
        rounds: n,
        threshold: Some(tolerate_failed),
        verdict: if fails { Verdict::Fail } else { Verdict::Pass },
    });
    rows
}

/// The overall verdict: the worst gated row.
pub fn overall(rows: &[Row]) -> Verdict {
    rows.iter()
        .map(|r| r.verdict)
        .filter(|v| *v != Verdict::Info)
        .max()
        .unwrap_or(Verdict::Pass)
}

fn render(rows: &[Row], base: &[Metrics], cand: &[Metrics]) -> String {
    let mut t = Table::new(&[
        "metric",
        "baseline",
        "candidate",
        "ratio",
        "worse",
        "threshold",
        "verdict",
    ]);
    for r in rows {
        let fmt = |x: f64| {
            if x.is_nan() {
                "-".to_string()
            } else if r.metric == "failed ops" {
                format!("{:.2}%", x * 100.0)
            } else if x >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        };
        t.row(vec![
            r.metric.to_string(),
            fmt(r.base_median),
            fmt(r.cand_median),
            if r.median_ratio.is_nan() {
                "-".into()
            } else {
                format!("{:.3}", r.median_ratio)
            },
            format!("{}/{}", r.worse, r.rounds),
            match r.threshold {
                None => "report only".into(),
                Some(x) if r.metric == "failed ops" => format!("> {:.2}%", x * 100.0),
                Some(x) if r.metric == "throughput" => format!("< {x:.3}"),
                Some(x) => format!("> {x:.3}"),
            },
            r.verdict.name().to_string(),
        ]);
    }
    let mut out = String::new();
    let workload = cand
        .first()
        .or(base.first())
        .map_or("?", |m| m.workload.as_str());
    out.push_str(&format!(
        "workload {workload}: {} round(s); throughput in ops/s, latency in us; ratio = candidate / baseline (median of per-round ratios)\n",
        rows.first().map_or(0, |r| r.rounds)
    ));
    if !rows
        .iter()
        .any(|r| r.metric == "p50" && r.threshold.is_some())
    {
        out.push_str(
            "latency not gated: closed-loop or saturated run(s) are judged on throughput (and the bookie's CPU per op) only\n",
        );
    }
    out.push_str(&t.render());
    out
}

fn finish(rows: &[Row], base: &[Metrics], cand: &[Metrics]) -> ExitCode {
    println!("{}", render(rows, base, cand));
    let v = overall(rows);
    println!("verdict: {}", v.name());
    if v == Verdict::Warn {
        println!("(beyond the threshold but not consistently: rerun with more rounds)");
    }
    if v == Verdict::Fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn threshold(arg: &Option<String>) -> Result<Option<f64>, String> {
    arg.as_deref().map(parse_fraction).transpose()
}

fn tolerance(arg: &Option<String>) -> Result<f64, String> {
    Ok(threshold(arg)?.unwrap_or(0.0))
}

/// `bkperf compare`.
pub fn run(args: &CompareArgs) -> ExitCode {
    let loaded = (|| -> Result<_, String> {
        Ok((
            Metrics::load(&args.base)?,
            Metrics::load(&args.cand)?,
            Bars::parse(&args.max_regression, &args.bars, &args.tolerate_failed)?,
        ))
    })();
    match loaded {
        Ok((b, c, bars)) => {
            let (b, c) = (vec![b], vec![c]);
            finish(&judge_with(&b, &c, &bars), &b, &c)
        }
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(2)
        }
    }
}

/// `bkperf compare-rounds`.
pub fn run_rounds(args: &CompareRoundsArgs) -> ExitCode {
    let loaded = (|| -> Result<_, String> {
        if args.base.len() != args.cand.len() {
            return Err(format!(
                "{} baseline and {} candidate reports: rounds must pair up",
                args.base.len(),
                args.cand.len()
            ));
        }
        let b = args
            .base
            .iter()
            .map(|p| Metrics::load(p))
            .collect::<Result<Vec<_>, _>>()?;
        let c = args
            .cand
            .iter()
            .map(|p| Metrics::load(p))
            .collect::<Result<Vec<_>, _>>()?;
        let bars = Bars::parse(&args.max_regression, &args.bars, &args.tolerate_failed)?;
        Ok((b, c, bars))
    })();
    let (b, c, bars) = match loaded {
        Ok(x) => x,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let rows = judge_with(&b, &c, &bars);
    let verdict = verdict_json(&rows, &c, args);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&verdict).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            log::error!("cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if let Some(path) = &args.history {
        if let Err(e) = append_line(path, &verdict) {
            log::error!("cannot append to {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    finish(&rows, &b, &c)
}

/// The verdict as JSON: the `bookie-verdict/1` file, and one line of the gate's history.
fn verdict_json(rows: &[Row], cand: &[Metrics], args: &CompareRoundsArgs) -> Value {
    let num = |x: f64| {
        if x.is_finite() {
            serde_json::json!((x * 10_000.0).round() / 10_000.0)
        } else {
            Value::Null
        }
    };
    let metrics: Vec<Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "metric": r.metric,
                "base_median": num(r.base_median),
                "cand_median": num(r.cand_median),
                "ratio": num(r.median_ratio),
                "worse": r.worse,
                "rounds": r.rounds,
                "threshold": r.threshold.map(num),
                "verdict": r.verdict.name(),
            })
        })
        .collect();
    serde_json::json!({
        "schema": "bookie-gate-history/1",
        "date": crate::report::utc_now_iso(),
        "kind": args.kind,
        "base_rev": args.base_rev,
        "cand_rev": args.cand_rev,
        "workload": cand.first().map_or("?", |m| m.workload.as_str()),
        "verdict": overall(rows).name(),
        "metrics": metrics,
    })
}

fn append_line(path: &Path, v: &Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{}", serde_json::to_string(v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(throughput: f64, p50: f64, p99: f64, p99_9: f64) -> Metrics {
        Metrics {
            workload: "w".into(),
            throughput,
            p50,
            p99,
            p99_9,
            max: p99_9 * 2.0,
            failed: 0,
            ok: 1000,
            open_loop: true,
            saturated: false,
            cpu_per_op: None,
        }
    }

    fn verdict_of(rows: &[Row], metric: &str) -> Verdict {
        rows.iter()
            .find(|r| r.metric == metric)
            .expect("row")
            .verdict
    }

    #[test]
    fn same_numbers_pass() {
        let a = vec![m(1000.0, 300.0, 900.0, 3000.0)];
        let rows = judge(&a, &a, None);
        assert_eq!(overall(&rows), Verdict::Pass);
        assert!(rows
            .iter()
            .filter(|r| r.metric != "failed ops")
            .all(|r| r.median_ratio == 1.0));
    }

    #[test]
    fn thresholds_of_the_spec_table() {
        let base = vec![m(1000.0, 300.0, 900.0, 3000.0)];
        // p50 +20 % and +60 µs: fail. p99 +15 %: pass (threshold 1.20).
        let cand = vec![m(1000.0, 360.0, 1035.0, 3000.0)];
        let rows = judge(&base, &cand, None);
        assert_eq!(verdict_of(&rows, "p50"), Verdict::Fail);
        assert_eq!(verdict_of(&rows, "p99"), Verdict::Pass);
        assert_eq!(overall(&rows), Verdict::Fail);
        // Throughput 0.89 fails, 0.91 passes.
        assert_eq!(
            verdict_of(
                &judge(&base, &[m(890.0, 300.0, 900.0, 3000.0)], None),
                "throughput"
            ),
            Verdict::Fail
        );
        assert_eq!(
            verdict_of(
                &judge(&base, &[m(910.0, 300.0, 900.0, 3000.0)], None),
                "throughput"
            ),
            Verdict::Pass
        );
        // max is never gated.
        let mut worse_max = m(1000.0, 300.0, 900.0, 3000.0);
        worse_max.max = 1e9;
        assert_eq!(
            verdict_of(&judge(&base, &[worse_max], None), "max"),
            Verdict::Info
        );
    }

    #[test]
    fn absolute_floors_keep_small_latencies_from_failing() {
        // p50 doubles but only by 40 µs (< 50 µs floor): pass.
        let rows = judge(
            &[m(1000.0, 40.0, 100.0, 400.0)],
            &[m(1000.0, 80.0, 250.0, 1300.0)],
            None,
        );
        assert_eq!(verdict_of(&rows, "p50"), Verdict::Pass);
        assert_eq!(
            verdict_of(&rows, "p99"),
            Verdict::Pass,
            "150 us < 200 us floor"
        );
        assert_eq!(
            verdict_of(&rows, "p99.9"),
            Verdict::Pass,
            "900 us < 1 ms floor"
        );
    }

    #[test]
    fn max_regression_override_is_a_symmetric_factor() {
        let base = vec![m(1000.0, 1000.0, 2000.0, 5000.0)];
        // 1.9x worse everywhere: passes a 100 % bar, fails a 10 % bar.
        let cand = vec![m(1000.0 / 1.9, 1900.0, 3800.0, 9500.0)];
        assert_eq!(overall(&judge(&base, &cand, Some(1.0))), Verdict::Pass);
        assert_eq!(overall(&judge(&base, &cand, Some(0.1))), Verdict::Fail);
        let cand = vec![m(400.0, 2100.0, 2000.0, 5000.0)];
        let rows = judge(&base, &cand, Some(1.0));
        assert_eq!(verdict_of(&rows, "throughput"), Verdict::Fail, "0.4 < 1/2");
        assert_eq!(verdict_of(&rows, "p50"), Verdict::Fail, "2.1 > 2");
        assert_eq!(parse_fraction("10%"), Ok(0.1));
        assert_eq!(parse_fraction("0.25"), Ok(0.25));
        assert!(parse_fraction("-5%").is_err() && parse_fraction("x").is_err());
    }

    #[test]
    fn closed_loop_and_saturated_runs_gate_only_throughput() {
        let base = vec![m(1000.0, 300.0, 900.0, 3000.0)];
        let mut cand = m(1000.0, 3000.0, 9000.0, 30000.0);
        cand.open_loop = false;
        let rows = judge(&base, &[cand.clone()], None);
        assert_eq!(verdict_of(&rows, "p50"), Verdict::Info);
        assert_eq!(overall(&rows), Verdict::Pass);
        cand.open_loop = true;
        cand.saturated = true;
        assert_eq!(overall(&judge(&base, &[cand], None)), Verdict::Pass);
    }

    #[test]
    fn cpu_per_op_is_gated_in_closed_loops_only_and_bars_override_one_metric() {
        let closed = |thr: f64, cpu: f64| Metrics {
            open_loop: false,
            cpu_per_op: Some(cpu),
            ..m(thr, 300.0, 900.0, 3000.0)
        };
        let base: Vec<Metrics> = (0..5).map(|_| closed(1000.0, 3.0)).collect();
        // 8 % more CPU per op, throughput unchanged: passes the table's 1.10, fails a 4 % bar.
        let cand: Vec<Metrics> = (0..5).map(|_| closed(1000.0, 3.24)).collect();
        assert_eq!(
            verdict_of(&judge(&base, &cand, None), "cpu/op"),
            Verdict::Pass
        );
        let bars = Bars::parse(&None, &["cpu/op=4%".into()], &None).unwrap();
        let rows = judge_with(&base, &cand, &bars);
        assert_eq!(verdict_of(&rows, "cpu/op"), Verdict::Fail);
        assert_eq!(
            verdict_of(&rows, "throughput"),
            Verdict::Pass,
            "its bar is the table's"
        );
        // In an open loop the same figures are reported, not gated.
        let open = |c: &Metrics| Metrics {
            open_loop: true,
            ..c.clone()
        };
        let (ob, oc): (Vec<_>, Vec<_>) = (
            base.iter().map(open).collect(),
            cand.iter().map(open).collect(),
        );
        assert_eq!(
            verdict_of(&judge_with(&ob, &oc, &bars), "cpu/op"),
            Verdict::Info
        );
        // Without CPU figures there is no row at all.
        let none = judge(
            &[m(1000.0, 300.0, 900.0, 3000.0)],
            &[m(1000.0, 300.0, 900.0, 3000.0)],
            None,
        );
        assert!(none.iter().all(|r| r.metric != "cpu/op"));
        // A throughput bar of 4 % fails below 1/1.04.
        let slow: Vec<Metrics> = (0..5).map(|_| closed(955.0, 3.0)).collect();
        let bars = Bars::parse(&None, &["throughput=4%".into()], &None).unwrap();
        assert_eq!(
            verdict_of(&judge_with(&base, &slow, &bars), "throughput"),
            Verdict::Fail
        );
        assert!(Bars::parse(&None, &["latency=4%".into()], &None).is_err());
        assert!(Bars::parse(&None, &["cpu/op".into()], &None).is_err());
    }

    #[test]
    fn failed_ops_fail_outright() {
        let base = vec![m(1000.0, 300.0, 900.0, 3000.0)];
        let mut cand = base[0].clone();
        cand.failed = 1;
        assert_eq!(overall(&judge(&base, &[cand.clone()], None)), Verdict::Fail);
        // Tolerated up to 1 %: 1 failed of 1001 passes, 20 of 1020 fails.
        let tolerant = Bars {
            tolerate_failed: 0.01,
            ..Bars::default()
        };
        let within = judge_with(&base, &[cand.clone()], &tolerant);
        assert_eq!(overall(&within), Verdict::Pass);
        cand.failed = 20;
        assert_eq!(
            overall(&judge_with(&base, &[cand], &tolerant)),
            Verdict::Fail
        );
    }

    /// Noise: one bad round in five does not fail; a median beyond the bar with only 3 of 5
    /// rounds worse warns; 4 of 5 worse fails.
    #[test]
    fn rounds_use_the_median_and_the_consistency_rule() {
        let base: Vec<Metrics> = (0..5).map(|_| m(1000.0, 300.0, 900.0, 3000.0)).collect();
        let mut cand = base.clone();
        cand[2] = m(500.0, 900.0, 5000.0, 30000.0); // one terrible round
        assert_eq!(overall(&judge(&base, &cand, None)), Verdict::Pass);
        // Median throughput 0.85, but only 3 of 5 rounds worse: WARN.
        let ratios = [0.85, 0.80, 0.84, 1.05, 1.02];
        let cand: Vec<Metrics> = ratios
            .iter()
            .map(|r| m(1000.0 * r, 300.0, 900.0, 3000.0))
            .collect();
        let rows = judge(&base, &cand, None);
        assert_eq!(verdict_of(&rows, "throughput"), Verdict::Warn);
        assert_eq!(overall(&rows), Verdict::Warn);
        // 4 of 5 worse: FAIL.
        let ratios = [0.85, 0.80, 0.84, 0.99, 1.02];
        let cand: Vec<Metrics> = ratios
            .iter()
            .map(|r| m(1000.0 * r, 300.0, 900.0, 3000.0))
            .collect();
        assert_eq!(
            verdict_of(&judge(&base, &cand, None), "throughput"),
            Verdict::Fail
        );
        assert_eq!(required_worse(1), 1);
        assert_eq!(required_worse(5), 4);
        assert_eq!(required_worse(9), 7);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    #[test]
    fn metrics_from_a_report() {
        let r = serde_json::json!({
            "schema": "bookie-bench/1",
            "workload": {"id": "W1", "mode": "fixed_rate"},
            "results": {"achieved_rate_ops": 999.5, "ops_failed": 1, "ops_timeout": 2,
                        "latency_us": {"p50": 100, "p99": 200, "p99_9": 300, "max": 400}},
            "validity": {"saturated": false, "warnings": []}
        });
        let m = Metrics::from_report(&r).expect("reads");
        assert_eq!(
            (m.throughput, m.p99_9, m.failed, m.open_loop),
            (999.5, 300.0, 3, true)
        );
        assert!(Metrics::from_report(&serde_json::json!({"schema": "x"})).is_err());
        assert!(Metrics::from_report(&serde_json::json!({"schema": "bookie-bench/1"})).is_err());
    }
}
