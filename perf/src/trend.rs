//! `bkperf trend HISTORY.jsonl`: the regression gate's history, as a text summary and one HTML
//! page (inline SVG, no script, no network).
//!
//! Each line of the history is one verdict of `bkperf compare-rounds --history`
//! (`bookie-gate-history/1`): a workload's median ratios (candidate / baseline) per metric, for
//! one gate run. A gate run compares a submission with the previous landing (`landing`), or
//! with a landing further back (`drift`). One step's ratio hides a slow drift: five commits each
//! 3 % slower pass a 5 % bar one by one and are 16 % slower together. So the page draws, per
//! workload and metric, each landing's ratio and the ratios compounded over the landings (the
//! product: how the newest stands against the first in the file), with the bar drawn in; the
//! measured drift checks are drawn as their own points. The text summary names every metric
//! whose compounded ratio over the last `--window` landings is past its bar.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::html::esc;

/// Arguments of `bkperf trend`.
#[derive(clap::Args, Debug, Clone)]
pub struct TrendArgs {
    /// The history: JSON lines written by `compare-rounds --history` (or `scripts/bench-gate`).
    pub history: PathBuf,
    /// Write the trend page here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Landings compounded by the drift summary.
    #[arg(long, default_value_t = 5)]
    pub window: usize,
}

/// One metric's figures in one verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub ratio: f64,
    /// The ratio beyond which the gate fails it (None: reported only).
    pub threshold: Option<f64>,
    pub verdict: String,
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub date: String,
    pub kind: String,
    pub base_rev: String,
    pub cand_rev: String,
    pub workload: String,
    pub verdict: String,
    pub metrics: BTreeMap<String, Point>,
}

impl Entry {
    pub fn parse(line: &str) -> Result<Entry, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        if v["schema"] != "bookie-gate-history/1" {
            return Err(format!(
                "not a bookie-gate-history/1 line (schema {})",
                v["schema"]
            ));
        }
        let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
        let mut metrics = BTreeMap::new();
        for m in v["metrics"].as_array().into_iter().flatten() {
            let (Some(name), Some(ratio)) = (m["metric"].as_str(), m["ratio"].as_f64()) else {
                continue; // failed ops have no ratio; a metric with no data has none either
            };
            metrics.insert(
                name.to_string(),
                Point {
                    ratio,
                    threshold: m["threshold"].as_f64(),
                    verdict: m["verdict"].as_str().unwrap_or("").to_string(),
                },
            );
        }
        Ok(Entry {
            date: s("date"),
            kind: s("kind"),
            base_rev: s("base_rev"),
            cand_rev: s("cand_rev"),
            workload: s("workload"),
            verdict: s("verdict"),
            metrics,
        })
    }
}

pub fn load(path: &Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Entry::parse(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1)))
        .collect()
}

/// Whether a ratio past `threshold` is worse upwards (latency, CPU) or downwards (throughput).
fn higher_is_worse(metric: &str) -> bool {
    metric != "throughput"
}

fn past(metric: &str, ratio: f64, threshold: f64) -> bool {
    if higher_is_worse(metric) {
        ratio > threshold
    } else {
        ratio < threshold
    }
}

/// One workload's metric over the gate runs: (run index, ratio), its compounded product, and
/// the drift checks.
#[derive(Debug, Default)]
pub struct Track {
    pub landings: Vec<(usize, f64)>,
    pub compounded: Vec<(usize, f64)>,
    pub drift: Vec<(usize, f64)>,
    pub threshold: Option<f64>,
    /// The baseline of the last landing point (a repeat against it replaces that point).
    last_base: Option<String>,
}

/// The gate runs in file order (one x position per distinct candidate revision and kind run),
/// and per (workload, metric) its track.
pub fn tracks(entries: &[Entry]) -> (Vec<String>, BTreeMap<(String, String), Track>) {
    let mut runs: Vec<String> = Vec::new();
    let mut out: BTreeMap<(String, String), Track> = BTreeMap::new();
    for e in entries {
        let label = short(&e.cand_rev);
        if runs.last() != Some(&label) {
            runs.push(label);
        }
        let x = runs.len() - 1;
        for (m, p) in &e.metrics {
            let t = out.entry((e.workload.clone(), m.clone())).or_default();
            if e.kind == "drift" {
                t.drift.push((x, p.ratio));
                continue;
            }
            // A later run of the same submission against the same landing replaces the
            // earlier one: both measured one step, which compounds once.
            if t.last_base.as_deref() == Some(e.base_rev.as_str()) {
                t.landings.pop();
                t.compounded.pop();
            }
            let prev = t.compounded.last().map_or(1.0, |c| c.1);
            t.landings.push((x, p.ratio));
            t.compounded.push((x, prev * p.ratio));
            t.last_base = Some(e.base_rev.clone());
            if p.threshold.is_some() {
                t.threshold = p.threshold;
            }
        }
    }
    (runs, out)
}

fn short(rev: &str) -> String {
    rev.chars().take(8).collect()
}

/// Metrics whose ratio compounded over the last `window` landings is past their bar:
/// (workload, metric, compounded ratio, bar).
pub fn drifting(entries: &[Entry], window: usize) -> Vec<(String, String, f64, f64)> {
    let (_, tracks) = tracks(entries);
    let mut out = Vec::new();
    for ((w, m), t) in &tracks {
        let Some(bar) = t.threshold else { continue };
        let n = t.landings.len();
        let product: f64 = t.landings[n.saturating_sub(window)..]
            .iter()
            .map(|p| p.1)
            .product();
        if n > 1 && past(m, product, bar) {
            out.push((w.clone(), m.clone(), product, bar));
        }
    }
    out
}

/// `bkperf trend`.
pub fn run(args: &TrendArgs) -> Result<(), Box<dyn std::error::Error>> {
    let entries = load(&args.history)?;
    let (runs, tracks) = tracks(&entries);
    println!(
        "{}: {} verdict(s) over {} gate run(s)",
        args.history.display(),
        entries.len(),
        runs.len()
    );
    for ((w, m), t) in &tracks {
        let last = t.landings.last().map_or(f64::NAN, |p| p.1);
        let comp = t.compounded.last().map_or(f64::NAN, |p| p.1);
        println!(
            "  {w:<40} {m:<10} last {last:.3}  compounded {comp:.3} over {} landing(s){}",
            t.landings.len(),
            t.drift
                .last()
                .map_or(String::new(), |d| format!("  drift check {:.3}", d.1))
        );
    }
    let drift = drifting(&entries, args.window);
    if drift.is_empty() {
        println!(
            "no metric drifted past its bar over the last {} landings",
            args.window
        );
    }
    for (w, m, p, bar) in &drift {
        println!(
            "DRIFT: {w} {m}: compounded {p:.3} over the last {} landings is past its bar {bar:.3}",
            args.window
        );
    }
    if let Some(path) = &args.html {
        std::fs::write(path, page(&entries, &runs, &tracks))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("trend page: {}", path.display());
    }
    Ok(())
}

const W: f64 = 860.0;
const H: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 48.0;
/// Colours of the three series: each landing, compounded, drift check.
const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#2ca02c"];

/// One chart: a metric of a workload, ratio against gate run.
fn chart(workload: &str, metric: &str, runs: &[String], t: &Track) -> String {
    let mut ys: Vec<f64> = vec![1.0];
    ys.extend(t.landings.iter().map(|p| p.1));
    ys.extend(t.compounded.iter().map(|p| p.1));
    ys.extend(t.drift.iter().map(|p| p.1));
    ys.extend(t.threshold);
    let ys: Vec<f64> = ys.into_iter().filter(|y| y.is_finite()).collect();
    let lo = ys.iter().copied().fold(0.9, f64::min);
    let hi = ys.iter().copied().fold(1.1, f64::max);
    let (lo, hi) = (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05);
    let n = runs.len().max(2) as f64;
    let px = |x: usize| LEFT + (x as f64 + 0.5) / n * (W - LEFT - RIGHT);
    let py = |y: f64| TOP + (1.0 - (y - lo) / (hi - lo)) * (H - TOP - BOTTOM);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{LEFT}" y="15" font-size="13" font-weight="bold">{} — {} (candidate / baseline; {} is worse)</text>
"#,
        esc(workload),
        esc(metric),
        if higher_is_worse(metric) {
            "higher"
        } else {
            "lower"
        }
    );
    // Y ticks: five evenly spaced ratios.
    for i in 0..=4 {
        let v = lo + (hi - lo) * i as f64 / 4.0;
        let y = py(v);
        s.push_str(&format!(
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{v:.2}</text>
"##,
            W - RIGHT,
            LEFT - 5.0,
            y + 4.0
        ));
    }
    let y1 = py(1.0);
    s.push_str(&format!(
        r##"<line x1="{LEFT}" x2="{}" y1="{y1:.1}" y2="{y1:.1}" stroke="#444"/>
"##,
        W - RIGHT
    ));
    if let Some(bar) = t.threshold {
        let yb = py(bar);
        s.push_str(&format!(
            r##"<line x1="{LEFT}" x2="{}" y1="{yb:.1}" y2="{yb:.1}" stroke="#d62728" stroke-dasharray="6,4"/><text x="{}" y="{:.1}" text-anchor="end" fill="#d62728">bar {bar:.3}</text>
"##,
            W - RIGHT,
            W - RIGHT - 4.0,
            yb - 4.0
        ));
    }
    // X labels: every run when few, else every k-th.
    let step = (runs.len() / 12).max(1);
    for (i, r) in runs.iter().enumerate().filter(|(i, _)| i % step == 0) {
        s.push_str(&format!(
            r##"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>
"##,
            px(i),
            H - BOTTOM + 14.0,
            esc(r)
        ));
    }
    s.push_str(&format!(
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#888"/>
<text x="{}" y="{}" text-anchor="middle">gate run (candidate revision, oldest left)</text>
"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM,
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0
    ));
    /// (legend, points, colour, dashed)
    type Line<'a> = (&'a str, &'a [(usize, f64)], &'a str, bool);
    let series: [Line; 3] = [
        ("each landing", &t.landings, COLORS[0], false),
        ("compounded", &t.compounded, COLORS[1], true),
        ("drift check", &t.drift, COLORS[2], false),
    ];
    for (k, (label, pts, color, dashed)) in series.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let dash = if *dashed {
            r#" stroke-dasharray="5,4""#
        } else {
            ""
        };
        if *label != "drift check" {
            let line: Vec<String> = pts
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            s.push_str(&format!(
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.8"{dash} points="{}"/>
"#,
                line.join(" ")
            ));
        }
        for &(x, y) in pts.iter() {
            s.push_str(&format!(
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{label}: {y:.3}</title></circle>
"#,
                px(x),
                py(y)
            ));
        }
        let ly = TOP + 14.0 + 14.0 * k as f64;
        s.push_str(&format!(
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{label}</text>
"#,
            LEFT + 10.0,
            LEFT + 34.0,
            LEFT + 40.0,
            ly + 4.0
        ));
    }
    s.push_str("</svg>\n");
    s
}

/// The whole page: the charts, then the table of every verdict.
pub fn page(
    entries: &[Entry],
    runs: &[String],
    tracks: &BTreeMap<(String, String), Track>,
) -> String {
    let mut s = String::from(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bkperf trend: the regression gate's history</title>
<style>body{font-family:sans-serif;margin:20px;max-width:900px}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.l,th.l{text-align:left}.FAIL{background:#f8d0d0}.WARN{background:#fbeecb}</style>
</head><body>
<h1>The regression gate's history</h1>
<p>Each gate run compares a submission's bookie with the previous landing's (interleaved ABBA
rounds, the median of the paired ratios candidate / baseline). <b>Each landing</b> is that
ratio; <b>compounded</b> is the product of the landings' ratios so far: how the newest stands
against the oldest run on the page, so a drift of many small steps shows; <b>drift check</b>
is a measured comparison against a landing several back. The dashed red line is the gate's
bar.</p>
"#,
    );
    for ((w, m), t) in tracks {
        if t.landings.is_empty() && t.drift.is_empty() {
            continue;
        }
        if m == "max" {
            continue; // reported only, and too noisy to read as a trend
        }
        s.push_str(&chart(w, m, runs, t));
    }
    s.push_str("<h2>Every verdict</h2>\n<table><tr><th class=l>date</th><th class=l>kind</th><th class=l>baseline → candidate</th><th class=l>workload</th><th class=l>ratios</th><th>verdict</th></tr>\n");
    for e in entries {
        let ratios: Vec<String> = e
            .metrics
            .iter()
            .filter(|(m, _)| m.as_str() != "max")
            .map(|(m, p)| format!("{m} {:.3}", p.ratio))
            .collect();
        s.push_str(&format!(
            "<tr class={v}><td class=l>{}</td><td class=l>{}</td><td class=l>{} → {}</td><td class=l>{}</td><td class=l>{}</td><td>{v}</td></tr>\n",
            esc(&e.date),
            esc(&e.kind),
            esc(&short(&e.base_rev)),
            esc(&short(&e.cand_rev)),
            esc(&e.workload),
            esc(&ratios.join(", ")),
            v = esc(&e.verdict),
        ));
    }
    s.push_str("</table>\n</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, cand: &str, cpu: f64, thr: f64) -> String {
        format!(
            r#"{{"schema":"bookie-gate-history/1","date":"2026-12-05T00:00:00Z","kind":"{kind}","base_rev":"before-{cand}","cand_rev":"{cand}","workload":"regress-closed-1024B","verdict":"PASS","metrics":[{{"metric":"cpu/op","ratio":{cpu},"threshold":1.05,"verdict":"PASS"}},{{"metric":"throughput","ratio":{thr},"threshold":0.952,"verdict":"PASS"}},{{"metric":"failed ops","ratio":null,"threshold":0.05,"verdict":"PASS"}}]}}"#
        )
    }

    #[test]
    fn small_steps_compound_into_a_drift() {
        // Five landings, each 3 % dearer per add: each passes the 5 % bar, together 16 %.
        let entries: Vec<Entry> = (0..5)
            .map(|i| Entry::parse(&line("landing", &format!("c{i}"), 1.03, 0.995)).unwrap())
            .collect();
        assert!(entries.iter().all(|e| e.metrics["cpu/op"].ratio < 1.05));
        let d = drifting(&entries, 5);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].1, "cpu/op");
        assert!((d[0].2 - 1.03f64.powi(5)).abs() < 1e-9);
        // Over the last two only (1.06): past the bar as well; over one: not.
        assert_eq!(drifting(&entries, 2).len(), 1);
        assert!(drifting(&entries, 1).is_empty());
        // Throughput 0.995 per landing: 0.975 over five, within its 0.952 bar; 0.99 per landing
        // over six is 0.941: past it.
        assert!(drifting(&entries, 5).iter().all(|x| x.1 != "throughput"));
        let more: Vec<Entry> = (0..6)
            .map(|i| Entry::parse(&line("landing", &format!("c{i}"), 1.0, 0.99)).unwrap())
            .collect();
        assert_eq!(drifting(&more, 6)[0].1, "throughput");
    }

    #[test]
    fn drift_checks_are_not_compounded_and_the_page_renders() {
        let mut text = vec![
            line("landing", "c0", 1.01, 1.0),
            line("landing", "c1", 1.01, 1.0),
        ];
        text.push(line("drift", "c1", 1.2, 0.9));
        let entries: Vec<Entry> = text.iter().map(|l| Entry::parse(l).unwrap()).collect();
        let (runs, tracks) = tracks(&entries);
        assert_eq!(runs, vec!["c0", "c1"]);
        let t = &tracks[&("regress-closed-1024B".to_string(), "cpu/op".to_string())];
        assert_eq!(t.landings.len(), 2);
        assert_eq!(t.drift, vec![(1, 1.2)]);
        assert!((t.compounded[1].1 - 1.0201).abs() < 1e-9);
        assert!(
            !tracks.keys().any(|(_, m)| m == "failed ops"),
            "no ratio, no track"
        );
        let html = page(&entries, &runs, &tracks);
        assert!(
            html.contains("<svg") && html.contains("bar 1.050") && html.contains("drift check")
        );
        assert!(Entry::parse(r#"{"schema":"other"}"#).is_err());
        // Two runs of one submission against the same landing compound once: the later wins.
        let again = line("landing", "c2", 1.10, 1.0).replace("before-c2", "x");
        let twice = again.replace("c2", "c3").replace("1.1,", "0.9,");
        let entries: Vec<Entry> = [again, twice]
            .iter()
            .map(|l| Entry::parse(l).unwrap())
            .collect();
        let (_, tracks) = super::tracks(&entries);
        let t = &tracks[&("regress-closed-1024B".to_string(), "cpu/op".to_string())];
        assert_eq!(t.landings, vec![(1, 0.9)]);
        assert_eq!(t.compounded, vec![(1, 0.9)]);
    }
}
