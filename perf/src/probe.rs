//! `bkperf probe`: the device's own limits in this run, so every other number can be read
//! against them.
//!
//! Measured with plain `pwrite` + `fdatasync` on O_DIRECT files in `--dir` (no io_uring, no
//! bookie code), one operation at a time, like docs/machine.md's `synclat`:
//! - the 4 KiB commit (write + fdatasync) on a pre-written file: what a journal commit costs
//!   at best (docs/machine.md §1.2), with the write and the fdatasync also timed apart;
//! - sequential writes with one fdatasync per 64 KiB and per 1 MiB: the group-commit trade-off
//!   (docs/machine.md §1.3), as bandwidth plus commit latency;
//! - the 4 KiB commit appending to a growing file and into fallocated space, which are slower
//!   on ext4 (docs/machine.md §1.4), so that a journal that forgets to pre-write shows up;
//! - CRC32C GiB/s on one core, the CPU calibration;
//! - what a sleep and a wake-up cost in CPU, across CPUs, on one CPU, on a 50 µs timer and
//!   around a loopback TCP round trip ([`crate::eventprobe`]): the price of an event that a
//!   CPU-per-operation figure at a modest rate is mostly made of;
//! - the read side, through io_uring (the bookie's own driver, `storage`): 4 KiB random reads
//!   at queue depth 1 and 32, and sequential reads of 128 KiB and 1 MiB at depth 1, over the
//!   pre-written file, so catch-up read targets can be stated against the device (the host may
//!   cache a virtual disk's backing file: read figures are then the host's, and optimistic).
//!
//! Writes overwrite a pre-written region (wrapping around), because overwriting written space
//! is what a pre-allocated or recycled journal does. Each measurement runs `--seconds` (the two
//! ext4 variants half of it); the default gives a ~10 s probe. [`calibrate`] is the short form
//! (docs/interop.md §5.1: 1,000 commits and a CRC loop) for other subcommands' reports.

use crate::report::{self, Calibration, IntervalStat, LatencySummary, Table};
use hdrhistogram::Histogram;
use nix::errno::Errno;
use nix::fcntl::{fallocate, open, FallocateFlags, OFlag};
use nix::sys::stat::Mode;
use nix::sys::uio::pwrite;
use nix::unistd::fdatasync;
use serde_json::{json, Value};
use std::error::Error;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage::{AlignedBuf, Storage};

/// Arguments of `bkperf probe`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Directory on the device to probe (created if missing; probe files are removed after).
    #[arg(long)]
    pub dir: PathBuf,
    /// Seconds per measurement (the append/fallocate variants take half).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Write a bookie-bench/1 JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

type BoxError = Box<dyn Error>;

/// Size of the pre-written file the overwrite measurements cycle through.
const PREWRITTEN: u64 = 256 << 20;
/// The 4 KiB commits cycle through the first part only (a journal's recent tail).
const SMALL_REGION: u64 = 64 << 20;

/// An O_DIRECT file in the probe directory, removed on drop.
struct ProbeFile {
    fd: OwnedFd,
    path: PathBuf,
}

impl ProbeFile {
    fn create(dir: &Path, name: &str) -> Result<ProbeFile, BoxError> {
        let path = dir.join(name);
        let c = CString::new(path.as_os_str().as_bytes())?;
        let flags =
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_DIRECT | OFlag::O_CLOEXEC;
        let fd = match open(c.as_c_str(), flags, Mode::from_bits_truncate(0o644)) {
            Ok(fd) => fd,
            Err(errno) => {
                let hint = if errno == Errno::EINVAL {
                    " (the file system rejects O_DIRECT; tmpfs does: probe a directory on the real disk)"
                } else {
                    ""
                };
                let err = std::io::Error::from(errno);
                return Err(
                    format!("cannot open {} with O_DIRECT: {err}{hint}", path.display()).into(),
                );
            }
        };
        Ok(ProbeFile { fd, path })
    }

    fn pwrite(&self, buf: &AlignedBuf, offset: u64) -> Result<(), BoxError> {
        let off = i64::try_from(offset)?;
        let n = match pwrite(&self.fd, buf, off) {
            Ok(n) => n,
            Err(errno) => {
                return Err(format!(
                    "pwrite {}: {}",
                    self.path.display(),
                    std::io::Error::from(errno)
                )
                .into())
            }
        };
        if n != buf.len() {
            return Err(format!(
                "pwrite {}: short write {n} of {}",
                self.path.display(),
                buf.len()
            )
            .into());
        }
        Ok(())
    }

    fn fdatasync(&self) -> Result<(), BoxError> {
        fdatasync(&self.fd).map_err(|errno| {
            format!(
                "fdatasync {}: {}",
                self.path.display(),
                std::io::Error::from(errno)
            )
            .into()
        })
    }

    fn fallocate(&self, len: u64) -> Result<(), BoxError> {
        fallocate(&self.fd, FallocateFlags::empty(), 0, i64::try_from(len)?).map_err(|errno| {
            format!(
                "fallocate {}: {}",
                self.path.display(),
                std::io::Error::from(errno)
            )
            .into()
        })
    }

    /// Fills `[0, len)` with `buf`-sized writes and syncs, so later writes are overwrites.
    fn prewrite(&self, len: u64, buf: &AlignedBuf) -> Result<(), BoxError> {
        let mut off = 0;
        while off < len {
            self.pwrite(buf, off)?;
            off += buf.len() as u64;
        }
        self.fdatasync()
    }
}

impl Drop for ProbeFile {
    /// The descriptor is closed when `fd` drops, right after.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A buffer of `len` bytes of pseudo-random data (a virtual disk might shortcut zeros).
fn random_buf(len: usize, seed: u64) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    buf
}

/// Where a commit loop writes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Placement {
    /// Overwrite `[0, region)`, wrapping around.
    Overwrite { region: u64 },
    /// Append to the end of the file (it grows).
    Append,
    /// Write into `[0, limit)` fallocated beforehand; stop at `limit`.
    Fallocated { limit: u64 },
}

/// The outcome of one commit loop.
struct CommitRun {
    label: &'static str,
    bytes_per_commit: usize,
    commits: u64,
    elapsed: Duration,
    commit: Histogram<u64>,
    write: Histogram<u64>,
    sync: Histogram<u64>,
    intervals: Vec<IntervalStat>,
}

impl CommitRun {
    fn commits_per_s(&self) -> f64 {
        self.commits as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn mb_s(&self) -> f64 {
        self.commits_per_s() * self.bytes_per_commit as f64 / 1e6
    }

    fn to_json(&self) -> Value {
        json!({
            "bytes_per_commit": self.bytes_per_commit,
            "commits": self.commits,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "commits_per_s": (self.commits_per_s() * 10.0).round() / 10.0,
            "mb_s": (self.mb_s() * 10.0).round() / 10.0,
            "commit_latency_us": LatencySummary::from_histogram(&self.commit).to_json(false),
            "write_latency_us": LatencySummary::from_histogram(&self.write).to_json(false),
            "fdatasync_latency_us": LatencySummary::from_histogram(&self.sync).to_json(false),
        })
    }
}

/// Repeats `pwrite(chunk)` + `fdatasync` until `budget` passes (or `max_commits`, or the
/// fallocated space ends), timing each commit and its two halves.
fn commit_loop(
    label: &'static str,
    file: &ProbeFile,
    buf: &AlignedBuf,
    placement: Placement,
    budget: Duration,
    max_commits: u64,
) -> Result<CommitRun, BoxError> {
    let chunk = buf.len() as u64;
    let (mut commit, mut write, mut sync) = (
        report::new_histogram(),
        report::new_histogram(),
        report::new_histogram(),
    );
    let mut interval = report::new_histogram();
    let mut intervals = Vec::new();
    let mut offset = 0u64;
    let mut commits = 0u64;
    let start = Instant::now();
    let mut next_interval = Duration::from_secs(1);
    loop {
        let now = start.elapsed();
        if now >= budget || commits >= max_commits {
            break;
        }
        if now >= next_interval {
            intervals.push(IntervalStat::from_histogram(now.as_secs_f64(), &interval));
            interval.reset();
            next_interval += Duration::from_secs(1);
        }
        match placement {
            Placement::Overwrite { region } if offset + chunk > region => offset = 0,
            Placement::Fallocated { limit } if offset + chunk > limit => break,
            _ => {}
        }
        let t0 = Instant::now();
        file.pwrite(buf, offset)?;
        let t1 = Instant::now();
        file.fdatasync()?;
        let t2 = Instant::now();
        report::record_us(&mut write, t1 - t0);
        report::record_us(&mut sync, t2 - t1);
        report::record_us(&mut commit, t2 - t0);
        report::record_us(&mut interval, t2 - t0);
        offset += chunk;
        commits += 1;
    }
    let elapsed = start.elapsed();
    if !interval.is_empty() {
        intervals.push(IntervalStat::from_histogram(
            elapsed.as_secs_f64(),
            &interval,
        ));
    }
    Ok(CommitRun {
        label,
        bytes_per_commit: buf.len(),
        commits,
        elapsed,
        commit,
        write,
        sync,
        intervals,
    })
}

/// CRC32C throughput over a 1 MiB buffer for about `budget`, in GiB/s.
pub fn crc32c_gib_s(budget: Duration) -> f64 {
    let buf = random_buf(1 << 20, 0x5eed);
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut crc = 0u32;
    while start.elapsed() < budget || bytes == 0 {
        for _ in 0..16 {
            crc = crc32c::crc32c_append(crc, &buf);
            bytes += buf.len() as u64;
        }
    }
    std::hint::black_box(crc);
    bytes as f64 / start.elapsed().as_secs_f64().max(1e-9) / (1u64 << 30) as f64
}

/// The short calibration of docs/interop.md §5.1: 1,000 commits of 4 KiB (pwrite + fdatasync on a
/// pre-written O_DIRECT file in `dir`) and a CRC32C loop. Takes well under a second on an SSD.
#[allow(dead_code)] // API for the journal benchmark and later subcommands
pub fn calibrate(dir: &Path) -> Result<Calibration, BoxError> {
    std::fs::create_dir_all(dir)?;
    let file = ProbeFile::create(dir, ".bkperf-calibrate.dat")?;
    let buf = random_buf(4096, 7);
    file.prewrite(4 << 20, &random_buf(1 << 20, 8))?;
    let run = commit_loop(
        "calibration",
        &file,
        &buf,
        Placement::Overwrite { region: 4 << 20 },
        Duration::from_secs(30),
        1000,
    )?;
    let s = LatencySummary::from_histogram(&run.commit);
    Ok(Calibration {
        fsync_4k_p50_us: s.p50,
        fsync_4k_p99_us: s.p99,
        crc32c_gib_s: crc32c_gib_s(Duration::from_millis(200)),
    })
}

/// Runs `bkperf probe`.
pub fn run(args: &ProbeArgs) -> Result<(), BoxError> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(format!("--seconds must be in (0, 3600], got {}", args.seconds).into());
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let machine = report::MachineInfo::gather(Some(&args.dir));
    let secs = Duration::from_secs_f64(args.seconds);
    let half = secs / 2;
    log::info!(
        "probing {} ({} on {}), {:.1} s per measurement",
        args.dir.display(),
        machine.fs,
        machine.data_dir_device,
        args.seconds
    );

    let file = ProbeFile::create(&args.dir, ".bkperf-probe.dat")?;
    let mib = random_buf(1 << 20, 1);
    let t = Instant::now();
    file.prewrite(PREWRITTEN, &mib)?;
    log::info!(
        "pre-wrote {} MiB in {:.2} s",
        PREWRITTEN >> 20,
        t.elapsed().as_secs_f64()
    );

    let mut runs = Vec::new();
    let b4k = random_buf(4096, 2);
    let overwrite_small = Placement::Overwrite {
        region: SMALL_REGION,
    };
    let overwrite_all = Placement::Overwrite { region: PREWRITTEN };
    log::info!("4 KiB commit, overwrite");
    runs.push(commit_loop(
        "4k overwrite",
        &file,
        &b4k,
        overwrite_small,
        secs,
        u64::MAX,
    )?);
    log::info!("64 KiB per fdatasync, overwrite");
    let b64k = random_buf(64 << 10, 3);
    runs.push(commit_loop(
        "64k overwrite",
        &file,
        &b64k,
        overwrite_all,
        secs,
        u64::MAX,
    )?);
    log::info!("1 MiB per fdatasync, overwrite");
    runs.push(commit_loop(
        "1m overwrite",
        &file,
        &mib,
        overwrite_all,
        secs,
        u64::MAX,
    )?);
    let reads = read_runs(&args.dir, ".bkperf-probe.dat", secs)?;
    drop(file);

    log::info!("4 KiB commit, appending");
    let append = ProbeFile::create(&args.dir, ".bkperf-probe-append.dat")?;
    runs.push(commit_loop(
        "4k append",
        &append,
        &b4k,
        Placement::Append,
        half,
        u64::MAX,
    )?);
    drop(append);

    log::info!("4 KiB commit, fallocated space");
    let falloc = ProbeFile::create(&args.dir, ".bkperf-probe-falloc.dat")?;
    // Enough for ~16 k commits per second of budget; the loop stops at the end if faster.
    let limit = (half.as_secs_f64().ceil() as u64).max(1) * 16_000 * 4096;
    falloc.fallocate(limit)?;
    runs.push(commit_loop(
        "4k fallocated",
        &falloc,
        &b4k,
        Placement::Fallocated { limit },
        half,
        u64::MAX,
    )?);
    drop(falloc);

    log::info!("CRC32C");
    let crc = crc32c_gib_s(Duration::from_secs_f64(
        (args.seconds / 4.0).clamp(0.1, 2.0),
    ));

    let main = &runs[0];
    let main_summary = LatencySummary::from_histogram(&main.commit);
    let calibration = Calibration {
        fsync_4k_p50_us: main_summary.p50,
        fsync_4k_p99_us: main_summary.p99,
        crc32c_gib_s: crc,
    };

    log::info!("sleeps and wake-ups");
    let events = crate::eventprobe::run_all(Duration::from_secs_f64(
        (args.seconds / 2.0).clamp(0.1, 5.0),
    ))
    .map_err(|e| format!("the wake-up probe failed: {e}"))?;

    print!("{}", render(&runs, crc, &machine));
    print!("{}", render_reads(&reads));
    print!("{}", crate::eventprobe::render(&events));

    let mut warnings = Vec::new();
    if !matches!(machine.fs.as_str(), "ext4" | "xfs" | "btrfs") {
        warnings.push(format!(
            "data directory is on {}, not a disk file system",
            machine.fs
        ));
    }
    if machine.loadavg_start[0] > machine.cores as f64 * 0.5 {
        warnings.push(format!(
            "load average {:.2} at start on {} cores: the machine is busy",
            machine.loadavg_start[0], machine.cores
        ));
    }
    for w in &warnings {
        log::warn!("{w}");
    }

    if let Some(path) = &args.json {
        let probe: serde_json::Map<String, Value> = runs
            .iter()
            .map(|r| (r.label.replace(' ', "_"), r.to_json()))
            .chain(
                reads
                    .iter()
                    .map(|r| (r.label.replace(' ', "_"), r.to_json())),
            )
            .chain([("crc32c_gib_s".to_string(), json!(crc))])
            .chain([(
                "events".to_string(),
                Value::Object(
                    events
                        .iter()
                        .map(|r| (r.label.replace([' ', '-'], "_"), r.to_json()))
                        .collect(),
                ),
            )])
            .collect();
        let mut builder = report::ReportBuilder::new("bkperf-probe", "candidate")
            .target(json!({"impl": "device", "storage": "pwrite+fdatasync O_DIRECT", "journal_sync": true}))
            .workload(json!({
                "id": "probe-4k-commit", "mode": "closed_loop", "max_outstanding": 1,
                "entry_bytes": 4096, "warmup_s": 0, "duration_s": args.seconds,
            }))
            .results(&report::Results {
                ops_ok: main.commits,
                ops_failed: 0,
                elapsed: main.elapsed,
                bytes: main.commits * main.bytes_per_commit as u64,
                latency: &main.commit,
                corrected: false,
                intervals: main.intervals.clone(),
                uncorrected: None,
                timeouts: 0,
            })
            .machine(&machine, Some(&calibration))
            .section("probe", Value::Object(probe));
        for w in warnings {
            builder = builder.warning(w);
        }
        report::write_json(path, &builder.build())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        log::info!("wrote {}", path.display());
    }
    Ok(())
}

/// The outcome of one read loop.
struct ReadRun {
    label: &'static str,
    bytes_per_read: usize,
    depth: usize,
    reads: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
}

impl ReadRun {
    fn reads_per_s(&self) -> f64 {
        self.reads as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn mb_s(&self) -> f64 {
        self.reads_per_s() * self.bytes_per_read as f64 / 1e6
    }

    fn to_json(&self) -> Value {
        json!({
            "bytes_per_read": self.bytes_per_read,
            "queue_depth": self.depth,
            "reads": self.reads,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "reads_per_s": (self.reads_per_s() * 10.0).round() / 10.0,
            "mb_s": (self.mb_s() * 10.0).round() / 10.0,
            "read_latency_us": LatencySummary::from_histogram(&self.latency).to_json(false),
        })
    }
}

/// Random 4 KiB reads at depth 1 and 32, sequential 128 KiB and 1 MiB at depth 1, over the
/// pre-written file `name` in `dir`, each for `budget`.
fn read_runs(dir: &Path, name: &str, budget: Duration) -> Result<Vec<ReadRun>, BoxError> {
    let mut storage = storage::open_dir(dir, 64, false)
        .map_err(|e| format!("cannot open {} for reads: {e}", dir.display()))?;
    let file = storage
        .open(name, false)
        .map_err(|e| format!("cannot open {name} for reads: {e}"))?;
    let specs: [(&'static str, usize, usize, bool); 4] = [
        ("read 4k random qd1", 4096, 1, true),
        ("read 4k random qd32", 4096, 32, true),
        ("read 128k sequential", 128 << 10, 1, false),
        ("read 1m sequential", 1 << 20, 1, false),
    ];
    let mut out = Vec::new();
    for (label, size, depth, random) in specs {
        log::info!("{label}");
        let r = read_loop(
            &mut storage,
            (file, PREWRITTEN),
            (label, size, depth, random),
            budget,
        );
        match r {
            Ok(r) => out.push(r),
            Err(e) => {
                storage.close(file);
                return Err(e);
            }
        }
    }
    storage.close(file);
    Ok(out)
}

/// Keeps `depth` reads of `size` bytes in flight over the first `len` bytes of `file` for
/// `budget`, timing each from submission to completion.
fn read_loop<S: Storage>(
    storage: &mut S,
    (file, len): (storage::FileId, u64),
    (label, size, depth, random): (&'static str, usize, usize, bool),
    budget: Duration,
) -> Result<ReadRun, BoxError> {
    let slots = (len / size as u64).max(1);
    let mut latency = report::new_histogram();
    let mut started: Vec<Instant> = vec![Instant::now(); depth];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ size as u64;
    let mut next_seq = 0u64;
    let mut offset = || {
        let slot = if random {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % slots
        } else {
            next_seq = (next_seq + 1) % slots;
            next_seq
        };
        slot * size as u64
    };
    let submit = |storage: &mut S, token: usize, buf: AlignedBuf, at: u64| {
        storage
            .submit(
                token as u64,
                storage::Op::Read {
                    file,
                    offset: at,
                    buf,
                },
            )
            .map_err(|(e, _)| format!("read submit: {e}"))
    };
    let start = Instant::now();
    for (token, t) in started.iter_mut().enumerate() {
        *t = Instant::now();
        submit(storage, token, AlignedBuf::zeroed(size), offset())?;
    }
    storage
        .submit_pending()
        .map_err(|e| format!("submit: {e}"))?;
    let mut reads = 0u64;
    let mut in_flight = depth;
    let mut done = Vec::new();
    while in_flight > 0 {
        storage
            .poll(&mut done, storage::Wait::AtLeastOne { timeout_us: None })
            .map_err(|e| format!("read poll: {e}"))?;
        let stop = start.elapsed() >= budget;
        for c in done.drain(..) {
            let token = c.token as usize;
            match c.result {
                Ok(n) if n == size => {}
                Ok(n) => return Err(format!("{label}: short read {n} of {size}").into()),
                Err(e) => return Err(format!("{label}: {e}").into()),
            }
            report::record_us(&mut latency, started[token].elapsed());
            reads += 1;
            in_flight -= 1;
            if !stop {
                let buf = c.buf.unwrap_or_else(|| AlignedBuf::zeroed(size));
                started[token] = Instant::now();
                submit(storage, token, buf, offset())?;
                in_flight += 1;
            }
        }
        storage
            .submit_pending()
            .map_err(|e| format!("submit: {e}"))?;
    }
    Ok(ReadRun {
        label,
        bytes_per_read: size,
        depth,
        reads,
        elapsed: start.elapsed(),
        latency,
    })
}

/// The read rows (latency per read in µs, submission to completion).
fn render_reads(runs: &[ReadRun]) -> String {
    let mut headers = vec!["measurement", "reads/s", "MB/s"];
    headers.extend(LatencySummary::HEADERS);
    let mut table = Table::new(&headers);
    for r in runs {
        let mut cells = vec![
            r.label.to_string(),
            format!("{:.0}", r.reads_per_s()),
            format!("{:.1}", r.mb_s()),
        ];
        cells.extend(LatencySummary::from_histogram(&r.latency).cells());
        table.row(cells);
    }
    table.render()
}

/// The human-readable result: one row per measurement (commit latency in µs).
fn render(runs: &[CommitRun], crc: f64, machine: &report::MachineInfo) -> String {
    let mut headers = vec!["measurement", "commits/s", "MB/s"];
    headers.extend(LatencySummary::HEADERS);
    let mut table = Table::new(&headers);
    let mut row = |label: String, rate: String, mb: String, s: &LatencySummary| {
        let mut cells = vec![label, rate, mb];
        cells.extend(s.cells());
        table.row(cells);
    };
    for r in runs {
        let s = LatencySummary::from_histogram(&r.commit);
        row(
            format!("{} commit", r.label),
            format!("{:.0}", r.commits_per_s()),
            format!("{:.1}", r.mb_s()),
            &s,
        );
        if r.label == "4k overwrite" {
            row(
                "  write part".into(),
                String::new(),
                String::new(),
                &LatencySummary::from_histogram(&r.write),
            );
            row(
                "  fdatasync part".into(),
                String::new(),
                String::new(),
                &LatencySummary::from_histogram(&r.sync),
            );
        }
    }
    format!(
        "bkperf probe: {} / {} cores / {} GiB / {} on {} ({})\n{}CRC32C: {crc:.2} GiB/s (one core)\n",
        machine.cpu_model,
        machine.cores,
        machine.mem_gib,
        machine.fs,
        machine.data_dir_device,
        machine.kernel,
        table.render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short real run of the loops: counts, histograms and wrap-around behave.
    #[test]
    fn commit_loop_wraps_overwrites_and_stops_at_fallocated_end() {
        let dir = std::env::temp_dir().join(format!("bkperf-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let Ok(file) = ProbeFile::create(&dir, "t.dat") else {
            eprintln!("SKIPPED: temp dir rejects O_DIRECT");
            return;
        };
        let buf = random_buf(4096, 1);
        file.prewrite(16 * 4096, &buf).expect("prewrite");
        let r = commit_loop(
            "t",
            &file,
            &buf,
            Placement::Overwrite { region: 16 * 4096 },
            Duration::from_secs(5),
            40,
        )
        .expect("overwrite loop");
        assert_eq!(r.commits, 40, "wrapped around the 16-block region");
        assert_eq!(r.commit.len(), 40);
        let size = nix::sys::stat::fstat(&file.fd).expect("fstat").st_size;
        assert_eq!(size, 16 * 4096, "overwrites never grow the file");
        let r = commit_loop(
            "f",
            &file,
            &buf,
            Placement::Fallocated { limit: 8 * 4096 },
            Duration::from_secs(5),
            100,
        )
        .expect("fallocated loop");
        assert_eq!(r.commits, 8, "stops at the end of the fallocated space");
        drop(file);
        assert!(!dir.join("t.dat").exists(), "probe file removed");
        let _ = std::fs::remove_dir(&dir);
    }

    /// The read loop keeps its depth, reads whole blocks inside the file, and counts each.
    #[test]
    fn read_loop_counts_reads_at_depth() {
        let dir = std::env::temp_dir().join(format!("bkperf-probe-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let Ok(file) = ProbeFile::create(&dir, "r.dat") else {
            eprintln!("SKIPPED: temp dir rejects O_DIRECT");
            return;
        };
        file.prewrite(1 << 20, &random_buf(64 << 10, 4))
            .expect("prewrite");
        let mut st = storage::open_dir(&dir, 64, false).expect("storage");
        let f = st.open("r.dat", false).expect("open");
        for (size, depth, random) in [(4096, 8, true), (64 << 10, 1, false)] {
            let r = read_loop(
                &mut st,
                (f, 1 << 20),
                ("t", size, depth, random),
                Duration::from_millis(50),
            )
            .expect("read loop");
            assert!(r.reads >= depth as u64, "{} reads", r.reads);
            assert_eq!(r.latency.len(), r.reads);
            assert_eq!(st.in_flight(), 0, "drained");
            assert!(r.to_json()["mb_s"].as_f64().unwrap() > 0.0);
        }
        st.close(f);
        drop(file);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn crc_rate_is_positive() {
        assert!(crc32c_gib_s(Duration::from_millis(10)) > 0.0);
    }
}
