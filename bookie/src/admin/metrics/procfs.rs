//! Figures the kernel keeps about this process, read from `/proc` at scrape time (crate
//! `procstat`): the Prometheus client's `process_*` family, which a Java bookie exports for its
//! JVM and the dashboards' CPU panels query, and our per-thread scheduler counters
//! (`bookie_rs_thread_cpu_seconds_total`, `bookie_rs_thread_runqueue_wait_seconds_total`).
//!
//! Why at scrape time: nothing is recorded on the threads themselves, so these cost the add and
//! read paths nothing.

use std::fmt::Write as _;

use super::histogram::{escape_label, fmt_f64};

/// Per thread name: time on a CPU and time runnable but waiting on a run queue
/// (`/proc/self/task/*/schedstat`).
pub(super) fn render_thread_schedstats(o: &mut String, threads: &[procstat::ThreadSched]) {
    type Pick = fn(&procstat::ThreadSched) -> u64;
    let series: [(&str, Pick); 2] = [
        ("bookie_rs_thread_cpu_seconds_total", |t| t.cpu_ns),
        ("bookie_rs_thread_runqueue_wait_seconds_total", |t| {
            t.wait_ns
        }),
    ];
    for (name, pick) in series {
        let _ = writeln!(o, "# TYPE {name} counter");
        for t in threads {
            let _ = writeln!(
                o,
                "{name}{{thread=\"{}\"}} {}",
                escape_label(&t.name),
                pick(t) as f64 / 1e9
            );
        }
    }
}

/// The Prometheus client's `process_*` family, as a Java bookie exports it (its JVM's figures
/// there, this process's here); a figure /proc did not give is left out.
pub(super) fn render_process(o: &mut String, p: &procstat::process::ProcessStat) {
    let floats = [
        ("process_cpu_seconds_total", "counter", p.cpu_seconds),
        ("process_start_time_seconds", "gauge", p.start_time_seconds),
    ];
    for (name, kind, v) in floats {
        if let Some(v) = v {
            let _ = writeln!(o, "# TYPE {name} {kind}");
            let _ = writeln!(o, "{name} {}", fmt_f64(v));
        }
    }
    let ints = [
        ("process_open_fds", p.open_fds),
        ("process_max_fds", p.max_fds),
        ("process_virtual_memory_bytes", p.virtual_memory_bytes),
        ("process_resident_memory_bytes", p.resident_memory_bytes),
    ];
    for (name, v) in ints {
        if let Some(v) = v {
            let _ = writeln!(o, "# TYPE {name} gauge");
            let _ = writeln!(o, "{name} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_rendered() {
        let named = std::thread::Builder::new()
            .name("sched-probe".into())
            .spawn(procstat::threads)
            .expect("spawn")
            .join()
            .expect("join");
        assert!(named.iter().any(|t| t.name == "sched-probe"), "{named:?}");
        let mut text = String::new();
        render_thread_schedstats(
            &mut text,
            &[procstat::ThreadSched {
                name: "shard-0".into(),
                cpu_ns: 1_500_000_000,
                wait_ns: 250_000_000,
            }],
        );
        assert!(text.contains("bookie_rs_thread_cpu_seconds_total{thread=\"shard-0\"} 1.5\n"));
        assert!(text
            .contains("bookie_rs_thread_runqueue_wait_seconds_total{thread=\"shard-0\"} 0.25\n"));
    }
}
