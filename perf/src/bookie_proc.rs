//! A real `bookie` as a child process, for runs that are not given `--bookies`.
//!
//! The binary is `--bookie-bin`, or `bookie` next to the running `bkperf` (same cargo target
//! directory and profile). When it is missing and bkperf runs under `cargo run` (the `CARGO`
//! variable is set), it is built first with `cargo build -p bookie` in the same profile, so
//! `cargo run --release -p perf` alone is enough. The bookie gets a fresh data directory under
//! the current directory (`./bkperf-bookie-<pid>`, removed afterwards) and a free port
//! (`bookie serve --port P --data-dir DIR --http-port H`, plus any `--bookie-arg`s; H serves the
//! /metrics bkperf scrapes for its per-stage breakdown); bkperf waits until the port accepts connections, and on drop
//! sends SIGTERM, waits up to 10 s, then SIGKILLs. Its CPU time and peak RSS are read from
//! /proc for the report's `resources`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error>;

/// A running bookie child.
pub struct BookieChild {
    child: Child,
    addr: SocketAddr,
    /// Its HTTP admin server (/metrics), unless the extra arguments turned it off or chose
    /// the port.
    http: Option<SocketAddr>,
    dir: PathBuf,
    bin: PathBuf,
    cpu_at_start: f64,
}

/// Where the `bookie` binary is expected: beside the current executable.
pub fn default_binary() -> Result<PathBuf, BoxError> {
    Ok(std::env::current_exe()?.with_file_name("bookie"))
}

/// Builds the bookie with cargo when bkperf runs under cargo and the binary is missing.
fn build_with_cargo(bin: &Path) -> Result<(), BoxError> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Err(format!(
            "no bookie binary at {}: build it with `cargo build --release -p bookie`, or pass \
             --bookie-bin PATH or --bookies HOST:PORT",
            bin.display()
        )
        .into());
    };
    let release = bin
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|p| p == "release");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "bookie"]);
    if release {
        cmd.arg("--release");
    }
    eprintln!(
        "bkperf: {} is missing; building it: cargo build -p bookie{}",
        bin.display(),
        if release { " --release" } else { "" }
    );
    let status = cmd.status()?;
    if !status.success() || !bin.exists() {
        return Err(format!("cargo build -p bookie failed ({status})").into());
    }
    Ok(())
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl BookieChild {
    /// Starts the bookie and waits (up to `ready_timeout`) until it accepts connections.
    pub fn start(
        bin: Option<&Path>,
        extra_args: &[String],
        ready_timeout: Duration,
    ) -> Result<BookieChild, BoxError> {
        let bin = match bin {
            Some(b) => b.to_path_buf(),
            None => {
                let b = default_binary()?;
                if !b.exists() {
                    build_with_cargo(&b)?;
                }
                b
            }
        };
        if !bin.exists() {
            return Err(format!("no bookie binary at {}", bin.display()).into());
        }
        let port = free_port()?;
        let dir =
            std::env::current_dir()?.join(format!("bkperf-bookie-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let log = std::fs::File::create(dir.join("bookie.log"))?;
        let own_http = !extra_args
            .iter()
            .any(|a| a.starts_with("--http-port") || a == "--no-http");
        let http_port = if own_http { Some(free_port()?) } else { None };
        let child = Command::new(&bin)
            .arg("serve")
            .args(extra_args)
            .args(
                http_port
                    .map(|p| vec!["--http-port".to_string(), p.to_string()])
                    .unwrap_or_default(),
            )
            .arg("--port")
            .arg(port.to_string())
            .arg("--data-dir")
            .arg(&dir)
            // The bookie stops when bkperf dies (killed by a signal, too); a bookie that does
            // not know the variable ignores it.
            .env("BOOKIE_EXIT_WITH_PARENT", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut me = BookieChild {
            child,
            addr,
            http: http_port.map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
            dir,
            bin,
            cpu_at_start: 0.0,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = me.child.try_wait()? {
                let tail = me.log_tail();
                return Err(format!(
                    "bookie {} exited before serving ({status}); its log ends with:\n{tail}",
                    me.bin.display()
                )
                .into());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if started.elapsed() > ready_timeout {
                return Err(format!(
                    "bookie {} did not accept connections on {addr} within {:?}; log:\n{}",
                    me.bin.display(),
                    ready_timeout,
                    me.log_tail()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        me.cpu_at_start = me.cpu_s();
        log::info!(
            "bookie {} serving on {addr} (data in {}) after {:.1} s",
            me.bin.display(),
            me.dir.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(me)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its HTTP admin server, when bkperf chose the port.
    pub fn http(&self) -> Option<SocketAddr> {
        self.http
    }

    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    pub fn binary(&self) -> &Path {
        &self.bin
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("bookie.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The bookie's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU seconds (user + system) the bookie used so far.
    pub fn cpu_s(&self) -> f64 {
        proc_cpu_s(self.child.id()).unwrap_or(0.0)
    }

    /// CPU seconds since it started serving.
    pub fn cpu_since_ready_s(&self) -> f64 {
        self.cpu_s() - self.cpu_at_start
    }

    /// Peak resident set (VmHWM) in MiB.
    pub fn max_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

/// utime + stime of a process from /proc/PID/stat.
fn proc_cpu_s(pid: u32) -> Option<f64> {
    crate::usage::cpu_s(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

impl Drop for BookieChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Our own child.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match self.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        log::warn!("bookie did not stop within 10 s of SIGTERM; killing it");
                        let _ = self.child.kill();
                        let _ = self.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        if std::env::var_os("BKPERF_KEEP_BOOKIE_DIR").is_none() {
            if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                log::warn!("cannot remove {}: {e}", self.dir.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_time_is_readable() {
        let t = proc_cpu_s(std::process::id()).expect("reads /proc/self/stat");
        assert!(t >= 0.0);
    }

    /// A "bookie" that exits at once is reported with its log, not waited on forever.
    #[test]
    fn a_bookie_that_exits_is_an_error() {
        let started = Instant::now();
        let err = BookieChild::start(Some(Path::new("/bin/false")), &[], Duration::from_secs(20))
            .err()
            .expect("fails");
        assert!(err.to_string().contains("exited before serving"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
