//! The bookie's microsecond clock ([`crate::admin::metrics::now_us`]): the CPU's time-stamp
//! counter where the kernel itself keeps time with it, else `Instant`.
//!
//! Why: an add reads the clock about five times (its stages, the LAC's timestamp, the reply's
//! ready time), and in a closed loop on one core 5 % of the bookie's CPU was
//! `clock_gettime` through the vDSO (about 25 ns a read on this VM, against 10 ns for
//! `rdtsc`). The counter is used only when it is safe and faster:
//! - the kernel's clocksource is `tsc` (it checked that the counter is invariant and
//!   synchronised across CPUs; a VM whose counter is unstable gets `kvm-clock` instead);
//! - [`calibrate`] ran (once, at start-up, before any shard): it measures the counter's rate
//!   against `Instant` over 20 ms, and times both reads, keeping the counter only if it is the
//!   cheaper (a hypervisor that traps `rdtsc` makes it slower, not wrong).
//!
//! Readings are continuous across the switch: the counter's time starts from the `Instant`
//! reading taken at calibration.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The counter's conversion, fixed at calibration.
struct Tsc {
    /// Counter value at calibration.
    base: u64,
    /// `Instant` microseconds at calibration (since [`EPOCH`]).
    base_us: u64,
    /// Microseconds per tick, times 2^32.
    us_per_tick_q32: u64,
}

static EPOCH: OnceLock<Instant> = OnceLock::new();
static TSC: OnceLock<Option<Tsc>> = OnceLock::new();

/// Microseconds since the process's clock epoch.
#[inline]
pub fn now_us() -> u64 {
    if let Some(Some(tsc)) = TSC.get() {
        let ticks = read_tsc().saturating_sub(tsc.base);
        return tsc.base_us + ((ticks as u128 * tsc.us_per_tick_q32 as u128) >> 32) as u64;
    }
    instant_us()
}

fn instant_us() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// Decides once whether [`now_us`] reads the counter; blocks about 20 ms when the kernel keeps
/// time with it. Returns what was chosen, for the start-up log.
pub fn calibrate() -> &'static str {
    let chosen = TSC.get_or_init(|| {
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        if !cfg!(target_arch = "x86_64") || source.trim() != "tsc" {
            return None;
        }
        let (us0, t0) = (instant_us(), read_tsc());
        std::thread::sleep(Duration::from_millis(20));
        let (us1, t1) = (instant_us(), read_tsc());
        let (ticks, us) = (t1.wrapping_sub(t0), us1.saturating_sub(us0));
        if ticks == 0 || us < 10_000 || ticks / us == 0 {
            return None;
        }
        // Keep the counter only if a read is cheaper than the vDSO's.
        let cost = |read: &dyn Fn() -> u64| {
            let start = Instant::now();
            let mut sum = 0u64;
            for _ in 0..2_000 {
                sum = sum.wrapping_add(read());
            }
            std::hint::black_box(sum);
            start.elapsed()
        };
        if cost(&read_tsc) >= cost(&instant_us) {
            return None;
        }
        Some(Tsc {
            base: t1,
            base_us: us1,
            us_per_tick_q32: ((us as u128) << 32).div_ceil(ticks as u128) as u64,
        })
    });
    if chosen.is_some() {
        "the CPU's time-stamp counter"
    } else {
        "the vDSO's monotonic clock"
    }
}

#[inline]
fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads a register; it has no memory effects, and x86_64 always has it.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_keeps_time_with_instant() {
        calibrate();
        let (us0, i0) = (now_us(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (us1, i1) = (now_us(), Instant::now());
        let measured = us1 - us0;
        let real = i1.duration_since(i0).as_micros() as u64;
        // Within 2 % and 2 ms of `Instant` whichever clock was chosen (the test machine is
        // shared, so the bound is loose; a wrong rate would be off by far more).
        assert!(
            measured.abs_diff(real) <= real / 50 + 2_000,
            "{measured} µs against {real} µs"
        );
        let mut last = now_us();
        for _ in 0..10_000 {
            let now = now_us();
            assert!(now >= last, "went back from {last} to {now}");
            last = now;
        }
    }
}
