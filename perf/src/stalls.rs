//! What the machine itself did to latency during the measured window: how busy the CPUs were,
//! how much time the hypervisor stole, and how late a thread that only sleeps 1 ms at a time
//! woke up.
//!
//! A request's latency includes every moment its client or bookie could not run. On a shared
//! virtual machine that is not only our threads competing: the host can deschedule the whole
//! guest. On the 2-vCPU Firecracker guest this project is measured on, the guest is frozen for
//! up to ~18 ms at a time, aligned to 100 ms periods, once its CPU plus the host's work for its
//! I/O exceeds a quota (ARCHITECTURE.md §12) — neither a pure CPU burn nor synced I/O alone
//! triggers it, the two together do. Such a freeze lands on every thread at once, so no
//! bookie stage can be blamed for it; this probe shows it beside the stage table so that a
//! tail is attributed to the machine when the machine owns it.
//!
//! The probe is one thread sleeping 1 ms in a loop and recording how late each wake-up is
//! (oversleep, HDR histogram). `/proc/stat` before and after gives busy and steal time, and
//! the kernel's TCP counters (`/proc/net/snmp`, `/proc/net/netstat`) the retransmissions and
//! retransmission timeouts: a timeout costs at least 200 ms, a delay no bookie stage shows.
//! Both are also kept per second of the window ([`MachineSecond`]: the latest wake-up and the
//! segments retransmitted), so that one slow second of the per-second table can be set beside
//! what the machine and its TCP did in that same second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Oversleeps longer than this count as a stall.
const STALL_US: u64 = 5_000;

/// CPU time of the whole machine, in clock ticks, from the first line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default)]
struct CpuTimes {
    busy: u64,
    idle: u64,
    steal: u64,
}

fn cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    if v.len() < 8 {
        return None;
    }
    Some(CpuTimes {
        busy: v[0] + v[1] + v[2] + v[5] + v[6],
        idle: v[3] + v[4],
        steal: v[7],
    })
}

/// CPUs of the machine (`cpuN` lines of `/proc/stat`), whatever this process's affinity: the
/// busy and steal shares are of all of them.
fn machine_cpus() -> usize {
    std::fs::read_to_string("/proc/stat")
        .map(|s| {
            s.lines()
                .filter(|l| {
                    l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)
                })
                .count()
        })
        .unwrap_or(0)
        .max(1)
}

/// Machine-wide TCP counters: segments retransmitted, retransmission timeouts, loss probes.
#[derive(Clone, Copy, Debug, Default)]
struct TcpCounters {
    retrans: u64,
    timeouts: u64,
    loss_probes: u64,
}

/// The value of `field` in the two-line `prefix` table of a `/proc/net` file.
fn proc_net_field(text: &str, prefix: &str, field: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let names = lines.next()?;
    let values = lines.next()?;
    let i = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

fn tcp_counters() -> Option<TcpCounters> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let netstat = std::fs::read_to_string("/proc/net/netstat").ok()?;
    Some(TcpCounters {
        retrans: proc_net_field(&snmp, "Tcp:", "RetransSegs")?,
        timeouts: proc_net_field(&netstat, "TcpExt:", "TCPTimeouts").unwrap_or(0),
        loss_probes: proc_net_field(&netstat, "TcpExt:", "TCPLossProbes").unwrap_or(0),
    })
}

/// What the machine did in one second of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineSecond {
    /// The latest a 1 ms sleep woke up in this second, in microseconds.
    pub late_max_us: u64,
    /// TCP segments retransmitted machine-wide in this second (`None`: no /proc/net/snmp).
    pub tcp_retransmitted: Option<u64>,
}

/// Splits the probe's samples into seconds of the window.
#[derive(Debug, Default)]
struct PerSecond {
    seconds: Vec<MachineSecond>,
    /// The retransmission counter when the current second began.
    retrans_mark: Option<u64>,
}

impl PerSecond {
    fn new(retrans_now: Option<u64>) -> PerSecond {
        PerSecond {
            seconds: vec![MachineSecond::default()],
            retrans_mark: retrans_now,
        }
    }

    /// A wake-up `late_us` late, `at` into the window; `retrans_now` reads the counter, called
    /// only when a second ends.
    fn note(&mut self, at: Duration, late_us: u64, retrans_now: impl FnOnce() -> Option<u64>) {
        let second = at.as_secs() as usize;
        if second >= self.seconds.len() {
            self.close(retrans_now());
            self.seconds.resize(second + 1, MachineSecond::default());
        }
        let s = &mut self.seconds[second];
        s.late_max_us = s.late_max_us.max(late_us);
    }

    /// Ends the second in progress with the counter read now.
    fn close(&mut self, retrans_now: Option<u64>) {
        if let Some(last) = self.seconds.last_mut() {
            last.tcp_retransmitted = match (self.retrans_mark, retrans_now) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            };
        }
        self.retrans_mark = retrans_now;
    }
}

/// What the probe's thread hands back: the oversleep histogram, the seconds, its own cost.
type ProbeResult = (Histogram<u64>, Vec<MachineSecond>, crate::usage::ThreadCost);

/// A running probe.
pub struct StallProbe {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ProbeResult>>,
    before: Option<CpuTimes>,
    tcp_before: Option<TcpCounters>,
    started: Instant,
}

/// What the probe saw.
#[derive(Clone, Debug)]
pub struct Stalls {
    pub window_s: f64,
    /// Shares of all CPUs' time (busy + idle + steal) over the window, in percent.
    pub busy_pct: Option<f64>,
    pub steal_pct: Option<f64>,
    pub cpus: usize,
    /// How late 1 ms sleeps woke up, in microseconds.
    pub oversleep: Histogram<u64>,
    /// TCP over the window, machine-wide: (retransmitted segments, timeouts, loss probes).
    pub tcp: Option<(u64, u64, u64)>,
    /// What the probe's own thread cost (its 1 ms wake-ups), taken out of bkperf's figures.
    pub probe_cost: crate::usage::ThreadCost,
    /// The window second by second (the last one may be partial).
    pub per_second: Vec<MachineSecond>,
}

impl StallProbe {
    pub fn start() -> StallProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let tcp_before = tcp_counters();
        let started = Instant::now();
        let retrans = || tcp_counters().map(|c| c.retrans);
        let thread = std::thread::Builder::new()
            .name("bkperf-stalls".into())
            .spawn(move || {
                let cost = crate::usage::ThreadCost::now();
                let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
                let mut seconds = PerSecond::new(tcp_before.map(|c| c.retrans));
                let tick = Duration::from_millis(1);
                while !flag.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    std::thread::sleep(tick);
                    let late = t0.elapsed().saturating_sub(tick).as_micros() as u64;
                    h.saturating_record(late.max(1));
                    seconds.note(t0.duration_since(started), late, retrans);
                }
                seconds.close(retrans());
                (
                    h,
                    seconds.seconds,
                    crate::usage::ThreadCost::now().minus(&cost),
                )
            })
            .ok();
        StallProbe {
            stop,
            thread,
            before: cpu_times(),
            tcp_before,
            started,
        }
    }

    pub fn finish(mut self) -> Option<Stalls> {
        self.stop.store(true, Ordering::Relaxed);
        let (oversleep, per_second, probe_cost) = self.thread.take()?.join().ok()?;
        let window_s = self.started.elapsed().as_secs_f64();
        let (busy_pct, steal_pct) = match (self.before, cpu_times()) {
            (Some(a), Some(b)) => {
                let busy = b.busy.saturating_sub(a.busy) as f64;
                let idle = b.idle.saturating_sub(a.idle) as f64;
                let steal = b.steal.saturating_sub(a.steal) as f64;
                let total = (busy + idle + steal).max(1.0);
                (Some(100.0 * busy / total), Some(100.0 * steal / total))
            }
            _ => (None, None),
        };
        let tcp = match (self.tcp_before, tcp_counters()) {
            (Some(a), Some(b)) => Some((
                b.retrans.saturating_sub(a.retrans),
                b.timeouts.saturating_sub(a.timeouts),
                b.loss_probes.saturating_sub(a.loss_probes),
            )),
            _ => None,
        };
        Some(Stalls {
            window_s,
            busy_pct,
            steal_pct,
            cpus: machine_cpus(),
            oversleep,
            tcp,
            probe_cost,
            per_second,
        })
    }
}

impl Drop for StallProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Stalls {
    /// Wake-ups later than [`STALL_US`].
    pub fn stalls(&self) -> u64 {
        self.oversleep
            .iter_recorded()
            .filter(|v| v.value_iterated_to() > STALL_US)
            .map(|v| v.count_at_value())
            .sum()
    }

    pub fn render(&self) -> String {
        let pct = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.1}%"));
        let ms = |q: f64| self.oversleep.value_at_quantile(q) as f64 / 1000.0;
        let tcp = match self.tcp {
            Some((r, t, p)) => format!(
                "; TCP: {r} segments retransmitted, {t} retransmission timeouts (≥ 200 ms \
                 each), {p} loss probes"
            ),
            None => String::new(),
        };
        format!(
            "machine over the window ({:.0} s, {} CPUs): busy {}, stolen by the hypervisor {}; \
             1 ms sleeps woke late by p50 {:.2} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms \
             ({} stalls over {} ms: a stall holds every thread, client and bookie alike){tcp}",
            self.window_s,
            self.cpus,
            pct(self.busy_pct),
            pct(self.steal_pct),
            ms(0.5),
            ms(0.99),
            ms(0.999),
            self.oversleep.max() as f64 / 1000.0,
            self.stalls(),
            STALL_US / 1000,
        )
    }

    pub fn to_json(&self) -> Value {
        let q = |q: f64| self.oversleep.value_at_quantile(q);
        let round1 = |v: Option<f64>| v.map(|v| (v * 10.0).round() / 10.0);
        json!({
            "window_s": (self.window_s * 100.0).round() / 100.0,
            "cpus": self.cpus,
            "busy_pct": round1(self.busy_pct),
            "steal_pct": round1(self.steal_pct),
            "oversleep_us": {
                "samples": self.oversleep.len(),
                "p50": q(0.5), "p99": q(0.99), "p99_9": q(0.999), "max": self.oversleep.max(),
            },
            "stalls_over_5ms": self.stalls(),
            "tcp_retransmitted_segments": self.tcp.map(|t| t.0),
            "tcp_timeouts": self.tcp.map(|t| t.1),
            "tcp_loss_probes": self.tcp.map(|t| t.2),
            "per_second": self.per_second.iter().map(|s| json!({
                "late_max_us": s.late_max_us,
                "tcp_retransmitted_segments": s.tcp_retransmitted,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_tables() {
        let t = "Tcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\n";
        assert_eq!(proc_net_field(t, "Tcp:", "RetransSegs"), Some(42));
        assert_eq!(proc_net_field(t, "Tcp:", "Nope"), None);
        assert!(tcp_counters().is_some(), "this machine has /proc/net/snmp");
    }

    #[test]
    fn reads_proc_stat() {
        let t = cpu_times().expect("/proc/stat");
        assert!(t.busy + t.idle > 0);
    }

    #[test]
    fn counts_late_wakeups() {
        let mut oversleep = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in [50, 80, 4_000, 6_000, 12_000] {
            oversleep.record(v).unwrap();
        }
        let s = Stalls {
            window_s: 1.0,
            busy_pct: Some(50.0),
            steal_pct: Some(2.0),
            cpus: 2,
            oversleep,
            tcp: Some((3, 1, 7)),
            probe_cost: Default::default(),
            per_second: vec![MachineSecond {
                late_max_us: 12_000,
                tcp_retransmitted: Some(3),
            }],
        };
        assert_eq!(s.stalls(), 2);
        let text = s.render();
        assert!(text.contains("2 stalls over 5 ms"), "{text}");
        assert_eq!(s.to_json()["stalls_over_5ms"], 2);
        assert!(text.contains("1 retransmission timeouts"), "{text}");
        assert_eq!(s.to_json()["tcp_timeouts"], 1);
    }

    #[test]
    fn samples_fall_in_their_second_with_that_seconds_retransmissions() {
        let mut s = PerSecond::new(Some(100));
        s.note(Duration::from_millis(10), 40, || panic!("no second ended"));
        s.note(Duration::from_millis(900), 7_000, || {
            panic!("no second ended")
        });
        // The first sample of second 3 ends second 1; second 2 saw no sample at all.
        s.note(Duration::from_millis(2_100), 90, || Some(130));
        s.close(Some(131));
        assert_eq!(
            s.seconds,
            vec![
                MachineSecond {
                    late_max_us: 7_000,
                    tcp_retransmitted: Some(30)
                },
                MachineSecond::default(),
                MachineSecond {
                    late_max_us: 90,
                    tcp_retransmitted: Some(1)
                },
            ]
        );
        // Without the counter, no figure rather than a wrong one.
        let mut s = PerSecond::new(None);
        s.note(Duration::from_millis(1_500), 5, || Some(3));
        assert_eq!(s.seconds[0].tcp_retransmitted, None);
    }

    #[test]
    fn a_short_probe_reports() {
        let p = StallProbe::start();
        std::thread::sleep(Duration::from_millis(30));
        let s = p.finish().expect("probe");
        assert!(s.oversleep.len() >= 5, "{} samples", s.oversleep.len());
        assert!(s.busy_pct.is_some());
    }
}
