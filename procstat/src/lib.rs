//! Per-thread scheduler time of this process, from `/proc/self/task/<tid>/schedstat`: how long
//! each thread ran on a CPU and how long it was runnable but waiting on a run queue.
//!
//! The bookie exports it in `/metrics` (`bookie_rs_thread_*_seconds_total`) and bkperf prints
//! its own threads beside the bookie's; both read it here, so the two tables mean the same.
//! Threads are summed per name (a name such as `iou-wrk-123` may be several threads), and a
//! thread that exited is gone with its share. Where /proc has no schedstat (a kernel built
//! without `CONFIG_SCHEDSTATS`, another OS) the answers are empty.
//!
//! [`process`] reads the whole process's CPU time, memory, descriptors and start time: the
//! `process_*` series Java bookies export.

#![forbid(unsafe_code)]

pub mod process;

use std::path::Path;

/// One thread name's scheduler time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSched {
    pub name: String,
    /// Time spent on a CPU, nanoseconds.
    pub cpu_ns: u64,
    /// Time runnable but waiting on a run queue, nanoseconds.
    pub wait_ns: u64,
}

/// This process's threads, summed per thread name, sorted by name.
pub fn threads() -> Vec<ThreadSched> {
    let mut out: Vec<ThreadSched> = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(t) = read_task(&task.path()) else {
            continue;
        };
        match out.iter_mut().find(|o| o.name == t.name) {
            Some(o) => {
                o.cpu_ns += t.cpu_ns;
                o.wait_ns += t.wait_ns;
            }
            None => out.push(t),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The calling thread's scheduler time (`/proc/thread-self`).
pub fn this_thread() -> Option<ThreadSched> {
    read_task(Path::new("/proc/thread-self"))
}

fn read_task(dir: &Path) -> Option<ThreadSched> {
    let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
    let (cpu_ns, wait_ns) = parse_schedstat(&stat)?;
    Some(ThreadSched {
        name: comm.trim().to_string(),
        cpu_ns,
        wait_ns,
    })
}

/// `schedstat`'s first two fields: ns on a CPU, ns waiting on a run queue (the third, the
/// number of time slices, is not used).
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_fields() {
        assert_eq!(
            parse_schedstat("92453144 272054504 126\n"),
            Some((92_453_144, 272_054_504))
        );
        assert_eq!(parse_schedstat("12"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn own_threads_by_name() {
        let busy = std::thread::Builder::new()
            .name("procstat-test".into())
            .spawn(|| {
                let start = std::time::Instant::now();
                let mut x = 0u64;
                while start.elapsed() < std::time::Duration::from_millis(20) {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                (x, this_thread())
            })
            .unwrap();
        let all = threads();
        let (_, me) = busy.join().unwrap();
        if all.is_empty() {
            return; // no schedstat on this kernel: nothing to check
        }
        let me = me.expect("this_thread reads /proc/thread-self when /proc/self/task works");
        assert_eq!(me.name, "procstat-test");
        assert!(me.cpu_ns > 0);
        let names: Vec<_> = all.iter().map(|t| t.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        sorted.dedup();
        assert_eq!(names.len(), sorted.len(), "one row per name");
    }
}
