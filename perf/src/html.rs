//! `--html FILE`: one self-contained HTML page (inline SVG, no script, no network) that shows a
//! run at a glance:
//! - the latency percentile spectrum: latency (log scale) against percentile on the usual
//!   HDR axis, log10(1/(1 − p)), so 90 %, 99 %, 99.9 %, … are evenly spaced; corrected latency
//!   solid, uncorrected dashed, one colour per side;
//! - latency over time: p50, p99 and max of each second (log scale), where a stall shows as a
//!   spike of max and p99;
//! - throughput over time: completed operations per second, where a stall shows as a dip;
//! - the summary table and the run's facts (workload, machine, git), from the JSON report.

use hdrhistogram::Histogram;
use serde_json::Value;

use crate::bench::{sides_for_page, Outcome, Plan};
use crate::report::{IntervalStat, LatencySummary};

const W: f64 = 860.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 45.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 45.0;

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub color: &'static str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// Escapes text for HTML (also used by the trend page).
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Latency tick labels for a log axis in microseconds.
fn us_label(us: f64) -> String {
    if us >= 1e6 {
        format!("{}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{}ms", us / 1e3)
    } else {
        format!("{us}us")
    }
}

/// The next "nice" number (1, 2, 2.5, 5 × 10^k) at or above x.
fn nice_ceil(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&v| v >= x)
        .unwrap_or(10.0 * p)
}

/// An SVG line chart. `log_y` plots log10(y) (y ≤ 0 is clamped to 1). `x_ticks` are
/// (position, label); y ticks are chosen here.
pub fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    x_range: (f64, f64),
    log_y: bool,
    x_ticks: &[(f64, String)],
    series: &[Series],
) -> String {
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (mut y_lo, mut y_hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    if !y_lo.is_finite() {
        (y_lo, y_hi) = (1.0, 10.0);
    }
    let ty = |y: f64| if log_y { y.max(1.0).log10() } else { y };
    let (mut lo, mut hi) = if log_y {
        (ty(y_lo).floor(), ty(y_hi).ceil())
    } else {
        (0.0, nice_ceil(y_hi * 1.05))
    };
    if hi <= lo {
        hi = lo + 1.0;
    }
    if !log_y && hi <= 0.0 {
        (lo, hi) = (0.0, 1.0);
    }
    let (x0, x1) = x_range;
    let xspan = if x1 > x0 { x1 - x0 } else { 1.0 };
    let px = |x: f64| LEFT + (x - x0) / xspan * (W - LEFT - RIGHT);
    let py = |y: f64| TOP + (1.0 - (ty(y) - lo) / (hi - lo)) * (H - TOP - BOTTOM);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="14" font-size="13" font-weight="bold">{}</text>
"#,
        LEFT,
        esc(title)
    );
    // Y grid and ticks.
    let y_ticks: Vec<(f64, String)> = if log_y {
        (lo as i32..=hi as i32)
            .map(|e| {
                let v = 10f64.powi(e);
                (v, us_label(v))
            })
            .collect()
    } else {
        (0..=4)
            .map(|i| {
                let v = hi / 4.0 * i as f64;
                (v, format!("{v:.0}"))
            })
            .collect()
    };
    for (v, label) in &y_ticks {
        let y = py(*v);
        s.push_str(&format!(
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>
"##,
            W - RIGHT,
            LEFT - 5.0,
            y + 4.0,
            esc(label)
        ));
    }
    for (x, label) in x_ticks {
        let xp = px(*x);
        s.push_str(&format!(
            r##"<line x1="{xp:.1}" x2="{xp:.1}" y1="{TOP}" y2="{}" stroke="#eee"/><text x="{xp:.1}" y="{}" text-anchor="middle">{}</text>
"##,
            H - BOTTOM,
            H - BOTTOM + 14.0,
            esc(label)
        ));
    }
    s.push_str(&format!(
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#888"/>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>
"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM,
        (LEFT + W - RIGHT) / 2.0,
        H - 8.0,
        esc(x_label),
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    ));
    for (i, se) in series.iter().enumerate() {
        if se.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        s.push_str(&format!(
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8" {} points="{}"/>
"#,
            se.color,
            if se.dashed {
                r#"stroke-dasharray="5,4""#
            } else {
                ""
            },
            pts.join(" ")
        ));
        // Legend, top-left inside the plot.
        let ly = TOP + 14.0 + 14.0 * i as f64;
        s.push_str(&format!(
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2" {}/><text x="{}" y="{}">{}</text>
"#,
            LEFT + 10.0,
            LEFT + 34.0,
            se.color,
            if se.dashed {
                r#"stroke-dasharray="5,4""#
            } else {
                ""
            },
            LEFT + 40.0,
            ly + 4.0,
            esc(&se.label)
        ));
    }
    s.push_str("</svg>\n");
    s
}

/// Points of the percentile spectrum: (log10(1/(1−p)), latency µs), p up to the last value.
pub fn spectrum(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    if h.is_empty() {
        return pts;
    }
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        if q >= 1.0 {
            break;
        }
        pts.push(((1.0 / (1.0 - q)).log10(), v.value_iterated_to() as f64));
    }
    // End at the maximum, placed at the last percentile resolvable with this count.
    let last_x = (h.len() as f64)
        .log10()
        .max(pts.last().map_or(0.0, |p| p.0));
    pts.push((last_x, h.max() as f64));
    pts
}

const COLORS: [(&str, &str); 2] = [("#1f77b4", "#6baed6"), ("#d62728", "#ff9896")];

/// The whole page.
pub fn page(report: &Value, plan: &Plan, o: &Outcome) -> String {
    let sides = sides_for_page(plan, o);
    let mut spec_series = Vec::new();
    let mut time_series = Vec::new();
    let mut ops_series = Vec::new();
    let mut max_x: f64 = 2.0;
    let mut max_t: f64 = 1.0;
    for (i, (name, side, open)) in sides.iter().enumerate() {
        let (dark, light) = COLORS[i % COLORS.len()];
        let corrected = spectrum(&side.latency);
        max_x = max_x.max(corrected.last().map_or(0.0, |p| p.0));
        spec_series.push(Series {
            label: format!(
                "{name} {}",
                if *open {
                    "corrected (from intended send)"
                } else {
                    "from send"
                }
            ),
            color: dark,
            dashed: false,
            points: corrected,
        });
        if *open {
            spec_series.push(Series {
                label: format!("{name} uncorrected (from actual send)"),
                color: light,
                dashed: true,
                points: spectrum(&side.uncorrected),
            });
        }
        let stats: Vec<IntervalStat> = side
            .intervals
            .iter()
            .enumerate()
            .map(|(t, h)| IntervalStat::from_histogram((t + 1) as f64, h))
            .collect();
        max_t = max_t.max(stats.len() as f64);
        let pick = |f: fn(&IntervalStat) -> u64| {
            stats
                .iter()
                .filter(|s| s.ops > 0)
                .map(|s| (s.t_s - 0.5, f(s) as f64))
                .collect::<Vec<_>>()
        };
        time_series.push(Series {
            label: format!("{name} max"),
            color: light,
            dashed: true,
            points: pick(|s| s.max),
        });
        time_series.push(Series {
            label: format!("{name} p99"),
            color: dark,
            dashed: false,
            points: pick(|s| s.p99),
        });
        time_series.push(Series {
            label: format!("{name} p50"),
            color: if i == 0 { "#2ca02c" } else { "#9467bd" },
            dashed: false,
            points: pick(|s| s.p50),
        });
        ops_series.push(Series {
            label: format!("{name} ops/s"),
            color: dark,
            dashed: false,
            points: stats.iter().map(|s| (s.t_s - 0.5, s.ops as f64)).collect(),
        });
    }
    let max_x = max_x.ceil().clamp(2.0, 7.0);
    let x_ticks: Vec<(f64, String)> = (0..=max_x as i32)
        .map(|k| {
            let label = match k {
                0 => "0%".to_string(),
                1 => "90%".to_string(),
                k => format!("99.{}%", "9".repeat((k - 2) as usize)).replace("99.%", "99%"),
            };
            (k as f64, label)
        })
        .collect();
    let t_step = (max_t / 10.0).ceil().max(1.0);
    let t_ticks: Vec<(f64, String)> = (0..=(max_t / t_step) as i32)
        .map(|k| (k as f64 * t_step, format!("{}s", k as f64 * t_step)))
        .collect();
    let spectrum_svg = chart(
        "Latency by percentile",
        "percentile",
        "latency",
        (0.0, max_x),
        true,
        &x_ticks,
        &spec_series,
    );
    let time_svg = chart(
        "Latency over time (per second, corrected)",
        "time since the end of the warm-up",
        "latency",
        (0.0, max_t),
        true,
        &t_ticks,
        &time_series,
    );
    let ops_svg = chart(
        "Completed operations per second",
        "time since the end of the warm-up",
        "ops/s",
        (0.0, max_t),
        false,
        &t_ticks,
        &ops_series,
    );
    let mut rows = String::new();
    for (name, side, open) in &sides {
        for (kind, h) in [
            ("corrected", &side.latency),
            ("uncorrected", &side.uncorrected),
        ] {
            if kind == "uncorrected" && !open {
                continue;
            }
            let s = LatencySummary::from_histogram(h);
            rows.push_str(&format!(
                "<tr><td>{name}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                if *open { kind } else { "from send" },
                side.ops_ok as f64 / o.result.measured.as_secs_f64(),
                side.errors,
                side.timeouts + side.not_sent,
                s.p50, s.p90, s.p99, s.p99_9, s.p99_99, s.max
            ));
        }
    }
    let warnings: Vec<String> = report["validity"]["warnings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str())
                .map(|w| format!("<p class=\"warn\">{}</p>", esc(w)))
                .collect()
        })
        .unwrap_or_default();
    let facts = |v: &Value| esc(&serde_json::to_string_pretty(v).unwrap_or_default());
    format!(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bkperf {id}</title>
<style>body{{font-family:sans-serif;margin:20px;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} td:first-child{{text-align:left}}
.warn{{color:#b00;font-weight:bold}} pre{{background:#f6f6f6;padding:8px;font-size:11px}} svg{{display:block;margin:10px 0}}</style>
</head><body>
<h2>bkperf: {id}</h2>
<p>{when}, commit {commit}, {bookies} bookie(s), protocol {protocol}, {secs} s measured after {warm} s warm-up. Latencies in microseconds.</p>
{warnings}
<table><tr><th>side</th><th>latency</th><th>ok/s</th><th>errors</th><th>timeouts</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>
{rows}</table>
{cost}
{stages}
{stalls}
{spectrum_svg}{time_svg}{ops_svg}
<details><summary>workload, target, client, machine</summary><pre>{workload}
{target}
{client}
{machine}</pre></details>
</body></html>
"#,
        id = esc(report["workload"]["id"].as_str().unwrap_or("run")),
        when = esc(report["run"]["id"].as_str().unwrap_or("")),
        commit = esc(report["run"]["git_commit"].as_str().unwrap_or("unknown")),
        bookies = plan.config.bookies.len(),
        protocol = plan.config.protocol.name(),
        secs = o.result.measured.as_secs_f64(),
        warm = plan.config.warmup.as_secs_f64(),
        warnings = warnings.join("\n"),
        cost = cost_html(&report["resources"]),
        stages = stages_html(&report["stages"]),
        stalls = stalls_html(&report["machine_stalls"]),
        workload = facts(&report["workload"]),
        target = facts(&report["target"]),
        client = facts(&report["client"]),
        machine = facts(&report["machine"]),
    )
}

/// CPU per operation, bookie and bkperf, beside the latency table.
fn cost_html(resources: &Value) -> String {
    let row = |who: &str, u: &Value| {
        if u.is_null() {
            return String::new();
        }
        format!(
            "<tr><td>{who}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            u["cpu_us_per_op"],
            u["cores"],
            u["context_switches_per_op"],
            match &u["syscalls_per_op"] {
                Value::Null => "-".to_string(),
                v => v.to_string(),
            }
        )
    };
    let rows =
        row("bookie", &resources["bookie_per_op"]) + &row("bkperf", &resources["client_per_op"]);
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h3>Cost per operation (measured window)</h3>\n<table><tr><th>process</th><th>CPU µs/op</th>\
         <th>cores</th><th>context switches/op</th><th>syscalls/op</th></tr>\n{rows}</table>"
    )
}

/// The machine's own share of the tail: busy and stolen CPU, late wake-ups of a sleeping thread.
fn stalls_html(s: &Value) -> String {
    if s.is_null() {
        return String::new();
    }
    let o = &s["oversleep_us"];
    format!(
        "<p>Machine over the window: CPU busy {}%, stolen by the hypervisor {}%; 1 ms sleeps woke \
         late by p99 {} us, p99.9 {} us, max {} us ({} stalls over 5 ms, each holding client and \
         bookie alike); TCP retransmission timeouts (200 ms or more each): {}.</p>",
        s["busy_pct"],
        s["steal_pct"],
        o["p99"],
        o["p99_9"],
        o["max"],
        s["stalls_over_5ms"],
        s["tcp_timeouts"]
    )
}

/// The report's per-stage breakdown as tables: stages (the tail's owner marked), then the
/// threads with the most run-queue wait.
fn stages_html(stages: &Value) -> String {
    let Some(rows) = stages["stages"].as_array() else {
        return String::new();
    };
    let owner = stages["tail_owner"].as_str();
    let cell = |v: &Value| v.as_f64().map_or("-".into(), |v| format!("{v:.0}"));
    let mut html = format!(
        "<h3>Inside the bookie ({} bookie, {})</h3>\n<table><tr><th>stage</th><th>what</th><th>count</th><th>p50</th><th>p99</th><th>p99.9</th><th>mean</th></tr>\n",
        esc(stages["bookie_impl"].as_str().unwrap_or("?")),
        if stages["window_quantiles"] == true {
            "quantiles of the measured window"
        } else {
            "quantiles NOT of the window alone"
        }
    );
    for r in rows {
        let stage = r["stage"].as_str().unwrap_or("?");
        let style = if Some(stage) == owner {
            " style=\"background:#fdd;font-weight:bold\""
        } else {
            ""
        };
        html.push_str(&format!(
            "<tr{style}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(stage),
            esc(r["what"].as_str().unwrap_or("")),
            r["count"],
            cell(&r["p50_us"]),
            cell(&r["p99_us"]),
            cell(&r["p99_9_us"]),
            cell(&r["mean_us"]),
        ));
    }
    html.push_str("</table>\n");
    for who in ["bookie", "bkperf"] {
        let Some(threads) = stages["threads"][who].as_array().filter(|t| !t.is_empty()) else {
            continue;
        };
        html.push_str(&format!(
            "<p>{who} threads (run-queue wait: runnable, not running)</p><table><tr><th>thread</th><th>cpu ms</th><th>run-queue wait ms</th></tr>\n"
        ));
        for t in threads.iter().take(16) {
            let ms = |v: &Value| v.as_f64().map_or("-".into(), |s| format!("{:.1}", s * 1e3));
            html.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(t["thread"].as_str().unwrap_or("?")),
                ms(&t["cpu_s"]),
                ms(&t["runqueue_wait_s"]),
            ));
        }
        html.push_str("</table>\n");
    }
    let mut notes: Vec<String> = stages["notes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(esc).collect())
        .unwrap_or_default();
    if let Some(u) = stages["unmapped"].as_array().filter(|u| !u.is_empty()) {
        let names: Vec<&str> = u.iter().filter_map(Value::as_str).collect();
        notes.push(format!(
            "not in this bookie's metrics: {}",
            esc(&names.join(", "))
        ));
    }
    for n in notes {
        html.push_str(&format!("<p>{n}</p>\n"));
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spectrum_is_monotonic_and_ends_at_the_max() {
        let mut h = crate::report::new_histogram();
        for v in 1..=10_000u64 {
            h.saturating_record(v);
        }
        h.saturating_record(500_000);
        let pts = spectrum(&h);
        assert!(pts.len() > 10);
        for w in pts.windows(2) {
            assert!(w[1].0 >= w[0].0 && w[1].1 >= w[0].1, "{w:?}");
        }
        let last = pts.last().expect("points");
        assert!((last.1 - 500_000.0).abs() / 500_000.0 < 0.001);
        assert!(spectrum(&crate::report::new_histogram()).is_empty());
    }

    #[test]
    fn chart_is_well_formed_svg() {
        let svg = chart(
            "t <&>",
            "x",
            "y",
            (0.0, 10.0),
            true,
            &[(0.0, "0".into()), (10.0, "10".into())],
            &[Series {
                label: "a".into(),
                color: "#000",
                dashed: true,
                points: vec![(0.0, 100.0), (10.0, 20_000.0)],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert!(svg.contains("<polyline") && svg.contains("stroke-dasharray"));
        assert!(svg.contains(">100us<") && svg.contains(">100ms<"), "{svg}");
    }
}
