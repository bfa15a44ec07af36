//! The disk port: the one narrow interface through which the journal and the entry log reach a
//! disk, plus its drivers.
//!
//! Storage logic (crates `journal`, `entrylog`) never calls `std::fs`, io_uring or a clock. It
//! calls a [`Storage`]: a directory of files with a few synchronous namespace operations
//! (open, rename, remove, list, directory sync) and an asynchronous, completion-based data path
//! ([`Storage::submit`] an [`Op`], later [`Storage::poll`] its [`Completion`]). The shape is that
//! of io_uring, so the io_uring driver is thin, and it is equally the shape of a simulator that
//! can reorder completions, fail any one of them, or crash between any two.
//!
//! Drivers:
//! - [`uring::UringStorage`]: io_uring with O_DIRECT, the default.
//! - [`psync::PsyncStorage`]: `pread`/`pwrite`/`fdatasync` with O_DIRECT, only when io_uring is
//!   unavailable; [`open_dir`] announces the fallback loudly.
//! - [`sim::SimStorage`]: a deterministic simulated disk that keeps what was written apart from
//!   what was synced and tears, drops and fails I/O from one seed.
//!
//! The real drivers fail writes or syncs under a chosen directory on demand when built with the
//! debug-only `fault-injection` feature ([`fault`]), for the cluster fault campaign.
//!
//! # Contract (every driver honours it; the simulator checks it)
//! - Offsets, lengths and buffers of reads and writes are multiples of [`ALIGN`].
//! - A `Write` writes `buf.len()` bytes at `offset`; it may complete short (`Ok(n)` with
//!   `n < len`), in which case only the first `n` bytes are written.
//! - A `Read` reads up to `buf.len()` bytes; `Ok(n)` with `n < len` means end of file or a short
//!   read; the buffer comes back with `len` set to `n`.
//! - A `SyncData` makes durable every write *to that file* that had completed before the sync
//!   was submitted, and the file's size. Nothing orders operations in flight at the same time:
//!   a caller that needs "write, then sync" submits the sync after the write's completion.
//! - Namespace changes (create, rename, remove) are durable only after [`Storage::sync_dir`].
//! - A file must not be closed while operations on it are in flight.

pub mod buf;
pub mod dirset;
pub mod fault;
pub mod psync;
pub mod sim;
pub mod thread;
pub mod uring;

pub use buf::{align_down, align_up, AlignedBuf, ALIGN};

use std::fmt;

/// A handle to an open file, valid inside the [`Storage`] that returned it.
pub type FileId = u32;

/// An I/O error as a cheap `Copy` value: the raw `errno`. Errors that happen on the hot path
/// must not allocate, and callers match on the number, never on a message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IoError {
    pub errno: i32,
}

impl IoError {
    pub const EIO: IoError = IoError { errno: libc::EIO };
    pub const ENOSPC: IoError = IoError {
        errno: libc::ENOSPC,
    };
    pub const ENOENT: IoError = IoError {
        errno: libc::ENOENT,
    };
    pub const EEXIST: IoError = IoError {
        errno: libc::EEXIST,
    };
    pub const EINVAL: IoError = IoError {
        errno: libc::EINVAL,
    };
    pub const EBADF: IoError = IoError { errno: libc::EBADF };
    pub const EAGAIN: IoError = IoError {
        errno: libc::EAGAIN,
    };

    pub fn from_io(err: &std::io::Error) -> IoError {
        IoError {
            errno: err.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    pub fn is_no_space(self) -> bool {
        self.errno == libc::ENOSPC || self.errno == libc::EDQUOT
    }

    pub fn is_not_found(self) -> bool {
        self.errno == libc::ENOENT
    }
}

impl fmt::Debug for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let io = std::io::Error::from_raw_os_error(self.errno);
        write!(f, "{io}")
    }
}

impl std::error::Error for IoError {}

impl From<std::io::Error> for IoError {
    fn from(err: std::io::Error) -> IoError {
        IoError::from_io(&err)
    }
}

/// One asynchronous data operation. Buffers move into the driver and come back in the
/// [`Completion`].
#[derive(Debug)]
pub enum Op {
    Write {
        file: FileId,
        offset: u64,
        buf: AlignedBuf,
    },
    Read {
        file: FileId,
        offset: u64,
        buf: AlignedBuf,
    },
    SyncData {
        file: FileId,
    },
    /// [`Storage::sync_dir`] as an operation: makes every create, rename and remove issued
    /// before it durable, without blocking the submitter (a directory fsync can take
    /// milliseconds while the file system commits its journal).
    SyncDir,
}

impl Op {
    /// The buffer of a read or write, handed back when the operation is not performed.
    pub fn into_buf(self) -> Option<AlignedBuf> {
        match self {
            Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
            Op::SyncData { .. } | Op::SyncDir => None,
        }
    }
}

/// The outcome of one [`Op`], identified by the `token` the caller gave to `submit`.
#[derive(Debug)]
pub struct Completion {
    pub token: u64,
    /// Bytes transferred (0 for a sync), or the error.
    pub result: Result<usize, IoError>,
    /// The buffer of a read or write, handed back.
    pub buf: Option<AlignedBuf>,
}

/// How long [`Storage::poll`] may block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Return at once with whatever has completed.
    No,
    /// Block until at least one completion is ready or `timeout_us` passes (for the simulator,
    /// virtual time passes). With nothing in flight, return at once.
    AtLeastOne { timeout_us: Option<u64> },
}

/// Which driver a [`Storage`] is, for logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    Uring,
    Psync,
    Sim,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Uring => "io_uring",
            DriverKind::Psync => "psync",
            DriverKind::Sim => "sim",
        }
    }
}

/// A directory of files on one device: the port between storage logic and a disk.
pub trait Storage {
    fn kind(&self) -> DriverKind;

    /// Names of the regular files in the directory, in no particular order.
    fn list(&mut self) -> Result<Vec<String>, IoError>;
    /// Opens `name` for reading and writing (O_DIRECT on real disks), creating it when
    /// `create` is set. The creation is durable only after [`Storage::sync_dir`].
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError>;
    /// Closes a file with no operation in flight.
    fn close(&mut self, file: FileId);
    /// The file's current size as reads see it.
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError>;
    /// Reserves space (`fallocate`). Writing into merely allocated space is slower than
    /// overwriting written space on ext4; callers that care write zeros instead.
    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError>;
    /// Sets the file's size. Durable with the next `SyncData` of that file.
    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError>;
    /// Renames `from` to `to`, replacing `to`. Durable only after [`Storage::sync_dir`].
    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError>;
    /// Removes `name`. Durable only after [`Storage::sync_dir`].
    fn remove(&mut self, name: &str) -> Result<(), IoError>;
    /// Makes every earlier create, rename and remove in the directory durable.
    fn sync_dir(&mut self) -> Result<(), IoError>;

    /// Queues an operation. On error (a full submission queue, a bad handle, a misaligned
    /// request) nothing was queued and the buffer, if any, is handed back.
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)>;
    /// Moves finished operations into `out` (appending), blocking as `wait` allows.
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError>;
    /// Operations submitted and not yet returned by `poll`.
    fn in_flight(&self) -> usize;
    /// Hands queued operations to the device now, without waiting or reaping. Drivers that
    /// batch submissions until `poll` (io_uring) need it before their owner goes to sleep on
    /// something else (an event loop waiting on the ring's eventfd).
    fn submit_pending(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}

/// Checks the O_DIRECT alignment rules of the [contract](crate). Every driver calls it, so a
/// misaligned request fails the same way in the simulator as on a real device.
pub fn check_aligned(offset: u64, len: usize) -> Result<(), IoError> {
    if !offset.is_multiple_of(ALIGN as u64) || !len.is_multiple_of(ALIGN) {
        return Err(IoError::EINVAL);
    }
    Ok(())
}

/// A real-disk driver chosen at start-up: io_uring when the kernel allows it, else psync.
pub enum RealStorage {
    Uring(uring::UringStorage),
    Psync(psync::PsyncStorage),
}

/// Opens `dir` (creating it) with io_uring, or with psync when io_uring cannot be set up, in
/// which case the fallback is logged as a warning naming the reason. `force_psync` selects
/// psync on purpose (tests, comparisons).
pub fn open_dir(
    dir: &std::path::Path,
    ring_entries: u32,
    force_psync: bool,
) -> Result<RealStorage, IoError> {
    open_dir_with(dir, ring_entries, force_psync, uring::UringWake::Enter)
}

/// As [`open_dir`], choosing how an io_uring driver signals completions
/// ([`uring::UringWake`]). The psync fallback completes every operation inside `submit`.
pub fn open_dir_with(
    dir: &std::path::Path,
    ring_entries: u32,
    force_psync: bool,
    wake: uring::UringWake,
) -> Result<RealStorage, IoError> {
    if !force_psync {
        match uring::UringStorage::open_dir_with(dir, ring_entries, wake) {
            Ok(s) => return Ok(RealStorage::Uring(s)),
            Err(err) => log::warn!(
                "io_uring is unavailable ({err}); FALLING BACK to pread/pwrite for {}: \
                 commits will not overlap with other work. Check kernel.io_uring_disabled, \
                 the container's seccomp profile and RLIMIT_MEMLOCK.",
                dir.display()
            ),
        }
    }
    Ok(RealStorage::Psync(psync::PsyncStorage::open_dir(dir)?))
}

/// As [`open_dir`], over a directory set ([`dirset`]): the ledger storage of one shard
/// spread over several ledger (and index) directories.
pub fn open_dir_set(
    placement: std::sync::Arc<dirset::Placement>,
    ring_entries: u32,
    force_psync: bool,
) -> Result<RealStorage, IoError> {
    if !force_psync {
        match uring::UringStorage::open_set(placement.clone(), ring_entries) {
            Ok(s) => return Ok(RealStorage::Uring(s)),
            Err(err) => log::warn!(
                "io_uring is unavailable ({err}); FALLING BACK to pread/pwrite for {:?}",
                placement.members
            ),
        }
    }
    Ok(RealStorage::Psync(psync::PsyncStorage::open_set(
        placement,
    )?))
}

impl RealStorage {
    /// The eventfd an io_uring driver in [`uring::UringWake::EventFd`] mode signals; `None`
    /// for psync (whose operations complete inside `submit`).
    pub fn eventfd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            RealStorage::Uring(s) => s.eventfd(),
            RealStorage::Psync(_) => None,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            RealStorage::Uring($s) => $e,
            RealStorage::Psync($s) => $e,
        }
    };
}

impl Storage for RealStorage {
    fn kind(&self) -> DriverKind {
        delegate!(self, s => s.kind())
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        delegate!(self, s => s.list())
    }
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        delegate!(self, s => s.open(name, create))
    }
    fn close(&mut self, file: FileId) {
        delegate!(self, s => s.close(file))
    }
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        delegate!(self, s => s.file_len(file))
    }
    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        delegate!(self, s => s.allocate(file, offset, len))
    }
    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        delegate!(self, s => s.truncate(file, len))
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        delegate!(self, s => s.rename(from, to))
    }
    fn remove(&mut self, name: &str) -> Result<(), IoError> {
        delegate!(self, s => s.remove(name))
    }
    fn sync_dir(&mut self) -> Result<(), IoError> {
        delegate!(self, s => s.sync_dir())
    }
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        delegate!(self, s => s.submit(token, op))
    }
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        delegate!(self, s => s.poll(out, wait))
    }
    fn in_flight(&self) -> usize {
        delegate!(self, s => s.in_flight())
    }
    fn submit_pending(&mut self) -> Result<(), IoError> {
        delegate!(self, s => s.submit_pending())
    }
}
