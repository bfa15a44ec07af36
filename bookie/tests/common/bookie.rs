//! A real `bookie serve` process for the end-to-end tests: started from the test binary's
//! `bookie` executable on a free (or given) port, with its stderr inherited or written to a
//! log file, waited for until it listens, and stopped with SIGTERM (a clean stop that must
//! exit 0) or killed with SIGKILL (a crash). Dropping it kills it, so a failing test leaves no
//! bookie behind. Test-specific waits (refusals, registrations) stay in the test files and use
//! `exited`, `signal` and `log_text`.

use std::ffi::OsString;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use net::client::blocking::BlockingClient;
use net::client::ClientConfig;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long a started bookie may take to listen before `start` fails the test.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);

/// How to launch a `bookie serve`: its arguments, port, admin port, log and environment.
/// Launches as often as asked (a restart is a second launch of the same builder).
#[derive(Clone, Debug)]
pub struct BookieBuilder {
    args: Vec<OsString>,
    port: u16,
    http: Option<u16>,
    log: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    listen_timeout: Duration,
}

impl BookieBuilder {
    /// `bookie serve --port <port>`.
    pub fn serve(port: u16) -> BookieBuilder {
        BookieBuilder::with_args(
            port,
            ["serve".into(), "--port".into(), port.to_string().into()],
        )
    }

    /// `bookie serve` alone: the configuration comes from `BK_<key>` variables (`env`), which
    /// name `port` as the bookie port.
    pub fn serve_env(port: u16) -> BookieBuilder {
        BookieBuilder::with_args(port, ["serve".into()])
    }

    /// `bookie serve --conf <conf>`, whose configuration names `port` as the bookie port.
    pub fn serve_conf(conf: &Path, port: u16) -> BookieBuilder {
        BookieBuilder::with_args(port, ["serve".into(), "--conf".into(), conf.into()])
    }

    fn with_args<const N: usize>(port: u16, args: [OsString; N]) -> BookieBuilder {
        BookieBuilder {
            args: args.into(),
            port,
            http: None,
            log: None,
            env: Vec::new(),
            listen_timeout: LISTEN_TIMEOUT,
        }
    }

    /// More command-line arguments, after the ones given so far.
    pub fn args<I, S>(mut self, args: I) -> BookieBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// `--data-dir <dir>`.
    pub fn data_dir(self, dir: &Path) -> BookieBuilder {
        self.args([OsString::from("--data-dir"), dir.into()])
    }

    /// `--http-port <port>`; `start` then also waits for the admin server to listen.
    pub fn http_port(mut self, port: u16) -> BookieBuilder {
        self.http = Some(port);
        self.args(["--http-port".to_string(), port.to_string()])
    }

    /// Stderr to a file (created anew by each launch) instead of the test's own stderr.
    pub fn log_to(mut self, path: &Path) -> BookieBuilder {
        self.log = Some(path.to_path_buf());
        self
    }

    /// An environment variable of the process.
    pub fn env(mut self, key: &str, value: &str) -> BookieBuilder {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long `start` waits for the bookie to listen (`LISTEN_TIMEOUT` unless set).
    pub fn listen_timeout(mut self, timeout: Duration) -> BookieBuilder {
        self.listen_timeout = timeout;
        self
    }

    /// The command line and environment, stdio untouched (for `.output()` runs).
    ///
    /// A standalone `serve` without an admin port of the test's choosing gets `--no-http`: its
    /// default admin port is the fixed 8080, which parallel tests must not take.
    pub fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bookie"));
        c.args(&self.args).envs(self.env.iter().cloned());
        let has = |flag: &str| self.args.iter().any(|a| a == flag);
        let env_conf = self
            .env
            .iter()
            .any(|(k, _)| k.to_string_lossy().starts_with("BK_"));
        if self.args.first().is_some_and(|a| a == "serve")
            && !has("--conf")
            && !env_conf
            && !has("--no-http")
            && !has("--http-port")
        {
            c.arg("--no-http");
        }
        c
    }

    /// Launches it without waiting: stdout discarded, stderr to the log file or inherited.
    pub fn spawn(&self) -> BookieProcess {
        let stderr = match &self.log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log file")),
            None => Stdio::inherit(),
        };
        let child = self
            .command()
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the bookie binary");
        BookieProcess {
            child: Some(child),
            launch: self.clone(),
        }
    }

    /// Launches it and waits until it listens (its admin server too, if it has one).
    pub fn start(&self) -> BookieProcess {
        let mut b = self.spawn();
        b.wait_listening();
        b
    }
}

/// A running (or stopped) bookie process; killed when dropped.
#[derive(Debug)]
pub struct BookieProcess {
    child: Option<Child>,
    launch: BookieBuilder,
}

impl BookieProcess {
    /// The bookie port.
    pub fn port(&self) -> u16 {
        self.launch.port
    }

    /// The admin (HTTP) port, if one was given.
    pub fn http_port(&self) -> Option<u16> {
        self.launch.http
    }

    /// One HTTP request to its admin server: (status, body).
    pub fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let port = self.http_port().expect("the bookie has an admin port");
        super::http(port, method, path, body)
    }

    /// The value of an unlabelled metric on the bookie's `/metrics` page.
    pub fn metric(&self, name: &str) -> f64 {
        let (code, page) = self.http("GET", "/metrics", "");
        assert_eq!(code, 200, "GET /metrics");
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    }

    /// Flushes the write cache (`PUT /api/v1/bookie/flush`) and waits until
    /// `bookie_write_cache_size` is 0: every entry is then read from ledger storage (a
    /// restart is not enough: it replays the journal into the write cache).
    pub fn flush_write_cache(&self) {
        assert_eq!(self.http("PUT", "/api/v1/bookie/flush", "").0, 200);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.metric("bookie_write_cache_size") != 0.0 {
            assert!(Instant::now() < deadline, "the write cache was not flushed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A blocking client of the bookie with a 20 s read timeout.
    pub fn client(&self) -> BlockingClient {
        connect(self.port())
    }

    /// A blocking client of the bookie with the given read timeout.
    pub fn client_with_timeout(&self, read_timeout: Duration) -> BlockingClient {
        connect_with_timeout(self.port(), read_timeout)
    }

    /// Whether the bookie port accepts a connection now.
    pub fn accepts(&self) -> bool {
        accepts(self.port())
    }

    /// Waits until the bookie port (and the admin port, if any) accept connections; fails the
    /// test, with the log if there is one, if the bookie exits first or takes too long.
    pub fn wait_listening(&mut self) {
        let deadline = Instant::now() + self.launch.listen_timeout;
        while !self.accepts() || self.http_port().is_some_and(|p| !accepts(p)) {
            if let Some(status) = self.exited() {
                panic!("bookie exited with {status}:\n{}", self.log_text());
            }
            assert!(Instant::now() < deadline, "bookie did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Something listens on the port: it must be this bookie, not another process that
        // took the port first (this one then fails to bind and exits).
        let pid = self.child.as_ref().expect("the bookie was started").id();
        while !listens(pid, self.port()) {
            if let Some(status) = self.exited() {
                panic!(
                    "bookie exited with {status} (port {} taken by another process?):\n{}",
                    self.port(),
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "port {} accepts connections, but not this bookie's (pid {pid})",
                self.port()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills a stopped or crashed bookie's leftovers and launches it again, as before, waiting
    /// until it listens.
    pub fn restart(&mut self) {
        self.kill();
        *self = self.launch.start();
    }

    /// Its exit status if it has exited (reaped here), `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut().expect("the bookie was started");
        child.try_wait().expect("try_wait")
    }

    /// Waits up to `timeout` for a bookie that must not start to exit; its status (panics if it
    /// still runs then).
    pub fn exit_within(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(Instant::now() < deadline, "the bookie kept running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Sends `signal` without waiting for the process.
    pub fn signal(&self, signal: Signal) {
        let child = self.child.as_ref().expect("the bookie was started");
        // Our own child process.
        let _ = kill(Pid::from_raw(child.id() as i32), signal);
    }

    /// SIGTERM and wait: a clean stop, which must exit 0.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Our own child process.
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let status = child.wait().expect("wait for the bookie");
            assert!(status.success(), "bookie exited with {status}");
        }
    }

    /// SIGKILL and wait: a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Resident set size in bytes, from `/proc/<pid>/status`.
    pub fn rss(&self) -> usize {
        let child = self.child.as_ref().expect("the bookie was started");
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .expect("the bookie is running");
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .expect("VmRSS line");
        let kib: usize = line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("VmRSS value");
        kib * 1024
    }

    /// What it wrote to its log file so far (empty if it logs to the test's stderr).
    pub fn log_text(&self) -> String {
        self.launch
            .log
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    }
}

impl Drop for BookieProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether process `pid` holds a listening TCP socket on `port` (any address): the inode of
/// each listening socket on the port (`/proc/net/tcp`, `tcp6`) among its open files.
pub fn listens(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex, st 0A is LISTEN, the inode is field 9.
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) && f.get(3) == Some(&"0A") {
                if let Some(inode) = f.get(9) {
                    inodes.push(format!("socket:[{inode}]"));
                }
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}

/// Whether something on loopback `port` accepts a connection now.
///
/// A connection whose local port is the port it connected to is a TCP self-connect (Linux
/// allows it on loopback when the ephemeral source port happens to equal a port nobody listens
/// on yet): it proves nothing and is not counted.
pub fn accepts(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|s| s.local_addr().is_ok_and(|a| a.port() != port))
}

/// A blocking client of the bookie on loopback `port` with a 20 s read timeout.
pub fn connect(port: u16) -> BlockingClient {
    connect_with_timeout(port, Duration::from_secs(20))
}

/// A blocking client of the bookie on loopback `port` with the given read timeout.
pub fn connect_with_timeout(port: u16, read_timeout: Duration) -> BlockingClient {
    let mut attempts = 0;
    let c = loop {
        let c = BlockingClient::connect(("127.0.0.1", port), ClientConfig::default())
            .expect("connect to the bookie");
        // A self-connect (see `accepts`) is not the bookie: try again.
        let own = c.stream().local_addr().map(|a| a.port()).unwrap_or(0);
        attempts += 1;
        if own != port || attempts >= 10 {
            break c;
        }
    };
    c.stream()
        .set_read_timeout(Some(read_timeout))
        .expect("timeout");
    c
}
