//! This process's CPU time, memory, file descriptors and start time, as the Prometheus
//! client's `process_*` family reports them (`StandardExports` of the Java client a Java
//! bookie runs): `process_cpu_seconds_total`, `process_start_time_seconds`,
//! `process_open_fds`, `process_max_fds`, `process_virtual_memory_bytes`,
//! `process_resident_memory_bytes`. Dashboards built for Java bookies chart these; we export
//! the same names with the same meaning.
//!
//! Read from `/proc/self/{stat,status,limits,fd}` and `/proc/stat` without `unsafe`: the
//! clock-tick unit of `stat` is the kernel's `USER_HZ`, fixed at 100 in the /proc ABI; memory
//! comes from `status` in kB (as the Java client reads it), so no page size is needed.

use std::path::Path;

/// The /proc ABI's clock tick (`USER_HZ`): 100 per second on every Linux architecture.
const USER_HZ: f64 = 100.0;

/// One reading of this process's figures; a field is `None` where /proc did not give it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStat {
    /// User + system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub resident_memory_bytes: Option<u64>,
}

/// This process, now.
pub fn process() -> ProcessStat {
    let proc = Path::new("/proc/self");
    let read = |name: &str| std::fs::read_to_string(proc.join(name)).ok();
    let mut out = ProcessStat::default();
    if let Some(stat) = read("stat") {
        if let Some((ticks, start_ticks)) = parse_stat(&stat) {
            out.cpu_seconds = Some(ticks as f64 / USER_HZ);
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| parse_btime(&s));
            out.start_time_seconds = boot.map(|b| b as f64 + start_ticks as f64 / USER_HZ);
        }
    }
    if let Some(status) = read("status") {
        out.virtual_memory_bytes = status_kb(&status, "VmSize:").map(|kb| kb * 1024);
        out.resident_memory_bytes = status_kb(&status, "VmRSS:").map(|kb| kb * 1024);
    }
    out.max_fds = read("limits").and_then(|l| parse_max_open_files(&l));
    out.open_fds = std::fs::read_dir(proc.join("fd"))
        .ok()
        .map(|d| d.count() as u64);
    out
}

/// From `/proc/<pid>/stat`: (utime + stime, starttime), in clock ticks. The command name (field
/// 2) may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((field(14)? + field(15)?, field(22)?))
}

/// `btime` of `/proc/stat`: the boot time, seconds since the epoch.
pub fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A `Key:   N kB` line of `/proc/<pid>/status`, in kB.
pub fn status_kb(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits` (`None` when unlimited).
pub fn parse_max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_with_spaces_and_parens() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 130 0 0 20 0 7 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((380, 123456)));
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn status_limits_and_btime() {
        let status = "Name:\tbookie\nVmPeak:\t  9000 kB\nVmSize:\t  8192 kB\nVmRSS:\t    512 kB\n";
        assert_eq!(status_kb(status, "VmSize:"), Some(8192));
        assert_eq!(status_kb(status, "VmRSS:"), Some(512));
        assert_eq!(status_kb(status, "VmSwap:"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited), None);
        assert_eq!(
            parse_btime("cpu 1 2 3\nbtime 1765000000\nprocesses 9\n"),
            Some(1765000000)
        );
    }

    #[test]
    fn this_process_reads() {
        let p = process();
        assert!(p.cpu_seconds.is_some_and(|c| c >= 0.0));
        assert!(p.resident_memory_bytes.is_some_and(|r| r > 0));
        assert!(
            p.open_fds.is_some_and(|n| n >= 3),
            "stdin, stdout, stderr at least"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = p.start_time_seconds.expect("a start time");
        assert!(
            start <= now + 1.0 && start > now - 86400.0 * 365.0,
            "{start} vs {now}"
        );
    }
}
