//! What a process spent over the measured window: CPU (user + system, every thread, io_uring
//! workers included) and context switches from /proc, and system calls from `perf stat -e
//! raw_syscalls:sys_enter -p PID` when `perf` is installed and allowed. Divided by the
//! operations of the window it gives the cost per operation that goes beside latency, for our
//! bookie, a Java bookie (`--bookie-pid`) and bkperf itself alike.
//!
//! Limits: for another process, context switches are summed over the threads alive at the
//! window's end (a thread that exited inside the window, such as an idle io_uring worker,
//! takes its count with it). bkperf's own figures come from `getrusage`, which keeps the
//! counts of exited threads, less its stall probe's thread (`stalls.rs`: a timed wake-up every
//! millisecond, which is the probe's cost, not the load generator's).
//! /proc/PID/io's `syscr`/`syscw` are not used: they miss send/recv, so they would count a
//! tokio bookie's socket calls and not bkperf's.

use std::collections::HashMap;
use std::time::Instant;

use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::signal::{kill, Signal};
use nix::sys::time::TimeVal;
use nix::unistd::{sysconf, Pid, SysconfVar};

/// One reading of a process.
#[derive(Clone, Debug)]
pub struct Sample {
    at: Instant,
    cpu_s: f64,
    /// tid -> voluntary + involuntary context switches.
    switches: HashMap<u32, u64>,
}

/// What a process spent between two samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Usage {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub context_switches: u64,
    /// `None` without a working `perf stat` (see [`SyscallCount`]).
    pub syscalls: Option<u64>,
}

impl Sample {
    /// Reads `pid` now; `None` when the process is gone or /proc unreadable.
    pub fn take(pid: u32) -> Option<Sample> {
        let at = Instant::now();
        let cpu_s = cpu_s(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
        let mut switches = HashMap::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
        {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
                switches.insert(tid, context_switches(&status));
            }
        }
        Some(Sample {
            at,
            cpu_s,
            switches,
        })
    }

    /// This process, every thread it ever had (`getrusage(RUSAGE_SELF)`).
    pub fn own() -> Sample {
        let at = Instant::now();
        let u = rusage(UsageWho::RUSAGE_SELF);
        Sample {
            at,
            cpu_s: u.cpu_s,
            // One pseudo-thread: the process-wide count.
            switches: HashMap::from([(0, u.switches)]),
        }
    }

    /// From `self` to `later`, with the system calls a [`SyscallCount`] counted meanwhile.
    pub fn until(&self, later: &Sample, syscalls: Option<u64>) -> Usage {
        let context_switches = later
            .switches
            .iter()
            .map(|(tid, n)| n.saturating_sub(self.switches.get(tid).copied().unwrap_or(0)))
            .sum();
        Usage {
            wall_s: later.at.duration_since(self.at).as_secs_f64(),
            cpu_s: (later.cpu_s - self.cpu_s).max(0.0),
            context_switches,
            syscalls,
        }
    }
}

/// CPU and context switches of one thread (or, with `RUSAGE_SELF`, a process).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadCost {
    pub cpu_s: f64,
    pub switches: u64,
}

impl ThreadCost {
    /// The calling thread's totals so far.
    pub fn now() -> ThreadCost {
        rusage(UsageWho::RUSAGE_THREAD)
    }

    pub fn minus(&self, earlier: &ThreadCost) -> ThreadCost {
        ThreadCost {
            cpu_s: (self.cpu_s - earlier.cpu_s).max(0.0),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

fn rusage(who: UsageWho) -> ThreadCost {
    let Ok(u) = getrusage(who) else {
        return ThreadCost::default();
    };
    let tv = |t: TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    ThreadCost {
        cpu_s: tv(u.user_time()) + tv(u.system_time()),
        switches: (u.voluntary_context_switches() + u.involuntary_context_switches()).max(0) as u64,
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`; -1 when unknown, as sysconf says).
fn clock_ticks() -> std::ffi::c_long {
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(hz)) => hz,
        _ => -1,
    }
}

impl Usage {
    /// Without what `part` (a thread of this process, inside the window) cost.
    pub fn without(mut self, part: &ThreadCost) -> Usage {
        self.cpu_s = (self.cpu_s - part.cpu_s).max(0.0);
        self.context_switches = self.context_switches.saturating_sub(part.switches);
        self
    }

    /// Per-operation figures for `ops` operations, as JSON.
    pub fn per_op_json(&self, ops: u64) -> serde_json::Value {
        let n = ops.max(1) as f64;
        let round = |v: f64, k: f64| (v * k).round() / k;
        serde_json::json!({
            "cpu_us_per_op": round(self.cpu_s * 1e6 / n, 100.0),
            "cores": round(self.cpu_s / self.wall_s.max(1e-9), 1000.0),
            "context_switches_per_op": round(self.context_switches as f64 / n, 1000.0),
            "syscalls_per_op": self.syscalls.map(|s| round(s as f64 / n, 1000.0)),
            "cpu_s": round(self.cpu_s, 1000.0),
            "wall_s": round(self.wall_s, 1000.0),
            "ops": ops,
        })
    }

    /// "9.6 µs CPU/op (0.93 cores), 0.300 context switches/op, 1.250 syscalls/op".
    pub fn per_op_text(&self, ops: u64) -> String {
        let n = ops.max(1) as f64;
        let mut s = format!(
            "{:.2} µs CPU/op ({:.2} cores), {:.3} context switches/op",
            self.cpu_s * 1e6 / n,
            self.cpu_s / self.wall_s.max(1e-9),
            self.context_switches as f64 / n
        );
        if let Some(calls) = self.syscalls {
            s.push_str(&format!(", {:.3} syscalls/op", calls as f64 / n));
        }
        s
    }
}

/// utime + stime of /proc/PID/stat, in seconds.
pub(crate) fn cpu_s(stat: &str) -> Option<f64> {
    // The command name may contain spaces: the fields start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    let hz = clock_ticks().max(1) as f64;
    Some((utime + stime) / hz)
}

fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn context_switches(status: &str) -> u64 {
    field(status, "voluntary_ctxt_switches:") + field(status, "nonvoluntary_ctxt_switches:")
}

/// System calls of a process (all its threads) counted by `perf stat` from [`start`] to
/// [`finish`]; `None` where perf is missing or not allowed (perf_event_paranoid, containers).
///
/// [`start`]: SyscallCount::start
/// [`finish`]: SyscallCount::finish
pub struct SyscallCount {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl SyscallCount {
    pub fn start(pid: u32) -> Option<SyscallCount> {
        let out =
            std::env::temp_dir().join(format!("bkperf-syscalls-{}-{pid}.csv", std::process::id()));
        let child = std::process::Command::new("perf")
            .args(["stat", "-e", "raw_syscalls:sys_enter", "-x", ",", "-o"])
            .arg(&out)
            .args(["-p", &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| log::debug!("no syscall count (perf stat): {e}"))
            .ok()?;
        Some(SyscallCount { child, out })
    }

    pub fn finish(mut self) -> Option<u64> {
        self.stop();
        let text = std::fs::read_to_string(&self.out).ok();
        let n = text.as_deref().and_then(perf_stat_count);
        if n.is_none() {
            log::debug!("perf stat counted no syscalls: {text:?}");
        }
        n
    }

    /// SIGINT (perf stat prints its counts and exits), SIGKILL after 5 s, and reaped.
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // Our own, not yet reaped, child.
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while let Ok(None) = self.child.try_wait() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for SyscallCount {
    /// Also on an error path: perf stat must not stay attached to the bookie.
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.out);
    }
}

/// The count of perf stat's CSV output (`59675,,raw_syscalls:sys_enter,...`).
fn perf_stat_count(csv: &str) -> Option<u64> {
    csv.lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_text() {
        let stat = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0";
        let hz = clock_ticks() as f64;
        assert_eq!(cpu_s(stat), Some(400.0 / hz));
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(context_switches(status), 15);
        assert_eq!(
            perf_stat_count("# started\n\n59675,,raw_syscalls:sys_enter,479399379,100.00,,\n"),
            Some(59675)
        );
        assert_eq!(
            perf_stat_count("<not counted>,,raw_syscalls:sys_enter,0,100.00,,"),
            None
        );
    }

    #[test]
    fn a_busy_window_of_this_process_is_counted() {
        let me = std::process::id();
        let a = Sample::take(me).expect("/proc/self");
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 30 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let u = a.until(&Sample::take(me).unwrap(), None);
        assert!(u.cpu_s > 0.0, "{u:?}");
        assert!(u.wall_s >= 0.035, "{u:?}");
        assert!(u.context_switches >= 1, "the sleep switches: {u:?}");
        let j = u.per_op_json(1000);
        assert!(j["cpu_us_per_op"].as_f64().unwrap() > 0.0, "{j}");
    }
}
