//! What a sleep and a wake-up cost on this machine: `bkperf probe`'s second table, so that a
//! CPU-per-operation figure can be read against the machine's price of an event.
//!
//! At a modest rate, a bookie's CPU per add is not the work of the add (a saturated closed loop
//! spends ~2.3 µs on it) but the events around it: each socket read that wakes a sleeping
//! shard, each journal commit's completions, each reply that wakes the client. On a virtual
//! machine an event costs more than on bare metal: an inter-processor interrupt, waking a
//! halted vCPU and re-arming a timer each exit to the hypervisor. Measured here, each for a
//! budget of time:
//! - **cross-CPU wake-up**: two threads pinned to different CPUs hand one byte back and forth
//!   over two pipes; each hand-off wakes a thread asleep on an otherwise idle CPU (a client's
//!   send waking a shard, a shard's reply waking the client);
//! - **same-CPU wake-up**: the same with both threads on one CPU (a shard and its io-wq worker);
//! - **50 µs timer sleep**: one thread sleeps 50 µs, over and over (bkperf's send tick), with
//!   a 1 µs timer slack as bkperf sets it;
//! - **loopback TCP round trip**: a 1 KiB request and a 16-byte reply between two threads pinned
//!   to different CPUs over 127.0.0.1 with blocking reads: one add and its reply, nothing batched.
//!
//! CPU is both threads' own (`CLOCK_THREAD_CPUTIME_ID`) over the loop, divided by the events;
//! latency is a round trip's wall time (half of it for one wake-up) or a sleep's lateness.
//! Interrupt handling that lands on an idle CPU, and the hypervisor's own time, are not in
//! the CPU column: it is what the two threads are charged, as a bookie's threads would be.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nix::sched::{sched_setaffinity, CpuSet};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use serde_json::{json, Value};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One measurement: how many events, the CPU they cost and their latencies.
pub struct EventRun {
    pub label: &'static str,
    /// Events counted: wake-ups, sleeps or round trips.
    pub events: u64,
    /// Both threads' CPU over the loop, in nanoseconds.
    pub cpu_ns: u64,
    /// Per event, in nanoseconds: a wake-up's latency, a sleep's lateness or a round trip.
    pub latency_ns: Histogram<u64>,
}

impl EventRun {
    /// CPU per event, in microseconds.
    pub fn cpu_us_per_event(&self) -> f64 {
        self.cpu_ns as f64 / 1e3 / self.events.max(1) as f64
    }

    pub fn to_json(&self) -> Value {
        let q = |p: f64| self.latency_ns.value_at_quantile(p) as f64 / 1e3;
        json!({
            "events": self.events,
            "cpu_us_per_event": (self.cpu_us_per_event() * 100.0).round() / 100.0,
            "latency_us": {"p50": q(0.5), "p99": q(0.99), "p999": q(0.999),
                           "max": self.latency_ns.max() as f64 / 1e3},
        })
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

fn thread_cpu_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Repeats `event` on the calling thread until `budget` passes: how many times, the thread's CPU
/// over them, and each one's latency as `event` returns it (nanoseconds).
fn timed_events(
    budget: Duration,
    mut event: impl FnMut() -> Result<u64, String>,
) -> Result<(u64, u64, Histogram<u64>), String> {
    let mut latency = histogram();
    let start = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut events = 0u64;
    while start.elapsed() < budget {
        let _ = latency.record(event()?.max(1));
        events += 1;
    }
    Ok((events, thread_cpu_ns() - cpu0, latency))
}

/// Pins the calling thread to `cpu` (modulo the CPUs there are); false if it could not.
fn pin(cpu: usize) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut set = CpuSet::new();
    set.set(cpu % cpus).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
}

/// The CPUs the two threads of a cross-CPU measurement go to: 0 and 1, or 0 and 0 on one CPU.
fn two_cpus() -> (usize, usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0, usize::from(cpus > 1))
}

/// Two threads on `cpus` hand a byte back and forth over two pipes for `budget`. Each hand-off
/// is one wake-up: a round trip is two.
pub fn pipe_ping_pong(
    label: &'static str,
    cpus: (usize, usize),
    budget: Duration,
) -> Result<EventRun, BoxError> {
    let (to_peer_r, to_peer_w) = nix::unistd::pipe()?;
    let (to_main_r, to_main_w) = nix::unistd::pipe()?;
    let (mut to_peer_w, mut to_main_r) = (File::from(to_peer_w), File::from(to_main_r));
    let (mut peer_in, mut peer_out) = (File::from(to_peer_r), File::from(to_main_w));
    let peer = std::thread::Builder::new()
        .name("probe-peer".into())
        .spawn(move || -> Result<u64, String> {
            pin(cpus.1);
            let cpu0 = thread_cpu_ns();
            let mut b = [0u8; 1];
            loop {
                peer_in.read_exact(&mut b).map_err(|e| e.to_string())?;
                if b[0] == 1 {
                    return Ok(thread_cpu_ns() - cpu0);
                }
                peer_out.write_all(&b).map_err(|e| e.to_string())?;
            }
        })?;
    let main_side = std::thread::spawn(move || -> Result<(u64, u64, Histogram<u64>), String> {
        pin(cpus.0);
        let mut b = [0u8; 1];
        let run = timed_events(budget, || {
            let t0 = Instant::now();
            to_peer_w.write_all(&[0]).map_err(|e| e.to_string())?;
            to_main_r.read_exact(&mut b).map_err(|e| e.to_string())?;
            // One wake-up is half a round trip.
            Ok(t0.elapsed().as_nanos() as u64 / 2)
        });
        to_peer_w.write_all(&[1]).map_err(|e| e.to_string())?;
        run
    });
    let (trips, main_cpu, latency_ns) = main_side.join().map_err(|_| "probe thread panicked")??;
    let peer_cpu = peer.join().map_err(|_| "probe peer panicked")??;
    Ok(EventRun {
        label,
        events: trips * 2,
        cpu_ns: main_cpu + peer_cpu,
        latency_ns,
    })
}

/// One thread sleeps `period` over and over for `budget` (timer slack 1 µs): CPU per sleep and
/// each sleep's lateness.
pub fn timer_sleeps(
    label: &'static str,
    period: Duration,
    budget: Duration,
) -> Result<EventRun, BoxError> {
    let t = std::thread::spawn(move || {
        pin(0);
        let _ = nix::sys::prctl::set_timerslack(1000);
        timed_events(budget, || {
            let t0 = Instant::now();
            std::thread::sleep(period);
            Ok(t0.elapsed().saturating_sub(period).as_nanos() as u64)
        })
    });
    let (events, cpu_ns, latency_ns) = t.join().map_err(|_| "probe thread panicked")??;
    Ok(EventRun {
        label,
        events,
        cpu_ns,
        latency_ns,
    })
}

/// A 1 KiB request and a 16-byte reply over loopback TCP (no Nagle), blocking, between two
/// threads on `cpus`, for `budget`: CPU per round trip and its wall time.
pub fn tcp_round_trips(
    label: &'static str,
    cpus: (usize, usize),
    budget: Duration,
) -> Result<EventRun, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let peer = std::thread::Builder::new()
        .name("probe-peer".into())
        .spawn(move || -> Result<u64, String> {
            pin(cpus.1);
            let mut s = accept_within(&listener, Duration::from_secs(5))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            let cpu0 = thread_cpu_ns();
            let mut req = [0u8; 1024];
            let reply = [7u8; 16];
            // Until the client closes: a short read at the end is its EOF.
            while s.read_exact(&mut req).is_ok() {
                s.write_all(&reply).map_err(|e| e.to_string())?;
            }
            Ok(thread_cpu_ns() - cpu0)
        })?;
    let client = std::thread::spawn(move || -> Result<(u64, u64, Histogram<u64>), String> {
        pin(cpus.0);
        let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let req = [5u8; 1024];
        let mut reply = [0u8; 16];
        timed_events(budget, || {
            let t0 = Instant::now();
            s.write_all(&req).map_err(|e| e.to_string())?;
            s.read_exact(&mut reply).map_err(|e| e.to_string())?;
            Ok(t0.elapsed().as_nanos() as u64)
        })
        // Dropping the stream here closes it: the peer's read ends.
    });
    let (trips, client_cpu, latency_ns) = client.join().map_err(|_| "probe thread panicked")??;
    let peer_cpu = peer.join().map_err(|_| "probe peer panicked")??;
    Ok(EventRun {
        label,
        events: trips,
        cpu_ns: client_cpu + peer_cpu,
        latency_ns,
    })
}

/// The first connection to `listener`, or an error after `wait` (a client that failed to
/// connect must not leave its peer blocked in `accept` forever). Returned in blocking mode.
fn accept_within(listener: &TcpListener, wait: Duration) -> Result<TcpStream, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + wait;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("no connection to the TCP probe's peer: {e}")),
        }
    }
}

/// The four measurements, `budget` each.
pub fn run_all(budget: Duration) -> Result<Vec<EventRun>, BoxError> {
    let cross = two_cpus();
    Ok(vec![
        pipe_ping_pong("cross-CPU wake-up", cross, budget)?,
        pipe_ping_pong("same-CPU wake-up", (0, 0), budget)?,
        timer_sleeps("50 us timer sleep", Duration::from_micros(50), budget)?,
        tcp_round_trips("loopback TCP 1 KiB round trip", cross, budget)?,
    ])
}

/// The table printed by `bkperf probe`.
pub fn render(runs: &[EventRun]) -> String {
    let mut out = String::from(
        "event                            events  CPU us/event  p50 us  p99 us  p99.9 us\n",
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    for r in runs {
        let q = |p: f64| r.latency_ns.value_at_quantile(p) as f64 / 1e3;
        out.push_str(&format!(
            "{:<31} {:>7}  {:>12.2}  {:>6.1}  {:>6.1}  {:>8.1}\n",
            r.label,
            r.events,
            r.cpu_us_per_event(),
            q(0.5),
            q(0.99),
            q(0.999)
        ));
    }
    out.push_str(
        "CPU: both threads' own time per event (a wake-up, a sleep, a round trip); latency: half \
         a ping-pong round trip, a sleep's lateness, a TCP round trip\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each measurement counts events, charges them CPU and records a latency per event (a
    /// ping-pong one per round trip of two wake-ups).
    #[test]
    fn each_event_is_counted_and_charged() {
        let budget = Duration::from_millis(100);
        let runs = run_all(budget).expect("probe");
        assert_eq!(runs.len(), 4);
        for r in &runs {
            assert!(r.events > 10, "{}: only {} events", r.label, r.events);
            assert_eq!(
                r.latency_ns.len(),
                r.events / if r.label.contains("wake") { 2 } else { 1 }
            );
            let cpu = r.cpu_us_per_event();
            assert!(
                cpu > 0.0 && cpu < 10_000.0,
                "{}: {cpu} us per event",
                r.label
            );
        }
        let table = render(&runs);
        assert!(table.contains("cross-CPU wake-up") && table.contains("loopback TCP"));
        assert_eq!(runs[0].to_json()["events"], runs[0].events);
    }

    /// A peer whose client never connects gives up instead of waiting in `accept` for ever.
    #[test]
    fn a_peer_without_a_client_gives_up() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let err = accept_within(&listener, Duration::from_millis(20)).expect_err("no client");
        assert!(err.contains("no connection"), "{err}");
    }
}
