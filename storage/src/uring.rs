//! `UringStorage`: the default real-disk driver, io_uring with O_DIRECT files.
//!
//! Kept boring on purpose (an I/O layer that only moves bytes): no policy lives here. [`Storage::submit`] turns one
//! [`Op`] into one SQE (`Write`, `Read`, `Fsync` with `DATASYNC`) and queues it in the ring's
//! submission queue; [`Storage::poll`] hands every queued SQE to the kernel in one
//! `io_uring_enter` and routes the CQEs back to completions. Namespace operations are the same
//! plain synchronous syscalls as in the psync driver ([`crate::psync`]'s `Dir`).
//!
//! Ownership: each operation takes a *slot* from a table preallocated at `ring_entries * 2`
//! (the completion queue's size, so the CQ can never overflow). The slot keeps the caller's
//! token and the owned [`AlignedBuf`] until the CQE arrives; `user_data` is the slot index.
//! Moving an `AlignedBuf` moves only its header, never the heap memory the kernel was given,
//! and the buffer is not touched or freed until its CQE is reaped. Dropping the driver waits for
//! every operation in flight (and leaks the buffers if the ring fails), so the kernel never
//! writes into freed memory. No allocation per operation after construction.
//!
//! Deliberately left out:
//! - `IOSQE_IO_LINK` write→fsync: measured 20–40 % slower here (docs/machine.md §1.5). The core submits
//!   the sync after the write's completion, as the storage contract requires anyway.
//! - SQPOLL: takes a whole core on 2-vCPU targets (docs/machine.md §1.5).
//! - Registered (fixed) buffers and files: buffers belong to callers and arrive per operation,
//!   so fixed buffers would need a driver-owned arena plus an index in every `Op`, and they count
//!   against `RLIMIT_MEMLOCK` (8 MiB here) without `CAP_IPC_LOCK`; at this machine's rates they
//!   gave no measurable gain (docs/machine.md §1.5, fio `F_fixedbufs_regfiles`). Revisit with an arena
//!   when a profile shows page pinning cost.
//! - Timed waits need `IORING_FEAT_EXT_ARG` (Linux 5.11); without it setup fails with ENOSYS
//!   and [`crate::open_dir`] falls back to psync.

use crate::psync::{off_t, Dir};
use crate::{
    check_aligned, AlignedBuf, Completion, DriverKind, FileId, IoError, Op, Storage, Wait,
};
use io_uring::{opcode, types, IoUring, Probe};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// An SQE ready to push, the buffer it points into, and whether it is a read.
type Built = (io_uring::squeue::Entry, Option<AlignedBuf>, bool);
/// A refused submission: why, and the caller's buffer back.
type Refused = (IoError, Option<AlignedBuf>);

/// One operation in flight: the caller's token and the buffer the kernel is using.
struct Slot {
    token: u64,
    buf: Option<AlignedBuf>,
    is_read: bool,
    busy: bool,
    /// The error [`crate::fault`] injected: the slot's SQE is a no-op that completes with it.
    #[cfg(feature = "fault-injection")]
    fail: Option<IoError>,
}

/// The io_uring driver. See the module docs.
pub struct UringStorage {
    /// Boxed: the ring's bookkeeping is large and `RealStorage` holds this by value.
    ring: Box<IoUring>,
    dir: Dir,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Signalled on completions in [`UringWake::EventFd`] mode.
    eventfd: Option<OwnedFd>,
}

/// How the owner of a ring learns that operations completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UringWake {
    /// By entering the kernel (`poll` with a wait): the fastest mode, for a thread whose only
    /// wait point is the ring (the journal benchmark, flush and reader threads).
    Enter,
    /// Through an eventfd an event loop can wait on (a shard serving sockets with epoll).
    EventFd,
}

/// Explains why io_uring setup failed, for the log and for humans.
/// `IORING_ENTER_GETEVENTS` from the kernel ABI (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;

fn setup_hint(errno: i32) -> String {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "absent".into());
    let why = match errno {
        libc::EPERM | libc::EACCES => {
            "io_uring_setup is forbidden: a seccomp filter (Docker's default profile blocks \
             io_uring; run with a profile that allows io_uring_setup/enter/register) or \
             kernel.io_uring_disabled=1/2 with this user outside kernel.io_uring_group"
        }
        libc::ENOSYS => {
            "the kernel has no io_uring (CONFIG_IO_URING off, kernel < 5.1, or a seccomp filter \
             returning ENOSYS), or lacks IORING_FEAT_EXT_ARG / READ / WRITE (needs Linux >= 5.11)"
        }
        libc::ENOMEM => {
            "not enough locked memory for the ring: raise RLIMIT_MEMLOCK (ulimit -l) or use \
             fewer ring entries"
        }
        _ => "unexpected io_uring setup failure",
    };
    format!("{why} [kernel.io_uring_disabled={sysctl}]")
}

impl UringStorage {
    /// Creates `dir` if missing, opens it and sets up a ring of `ring_entries` submission
    /// entries (rounded up to a power of two by the kernel). When io_uring is unavailable the
    /// reason is logged with a hint and its errno returned; [`crate::open_dir`] then falls back.
    pub fn open_dir(dir: &Path, ring_entries: u32) -> Result<UringStorage, IoError> {
        Self::open_dir_with(dir, ring_entries, UringWake::Enter)
    }

    /// As [`UringStorage::open_dir`], choosing how the owner learns of completions.
    pub fn open_dir_with(
        dir: &Path,
        ring_entries: u32,
        wake: UringWake,
    ) -> Result<UringStorage, IoError> {
        Self::with_dir(dir, || Dir::open(dir), ring_entries, wake)
    }

    /// As [`UringStorage::open_dir`], over a directory set ([`crate::dirset`]).
    pub fn open_set(
        placement: std::sync::Arc<crate::dirset::Placement>,
        ring_entries: u32,
    ) -> Result<UringStorage, IoError> {
        let home = placement.members.first().cloned().unwrap_or_default();
        Self::with_dir(
            &home,
            || Dir::open_set(placement),
            ring_entries,
            UringWake::Enter,
        )
    }

    fn with_dir(
        dir: &Path,
        open: impl FnOnce() -> Result<Dir, IoError>,
        ring_entries: u32,
        wake: UringWake,
    ) -> Result<UringStorage, IoError> {
        let entries = ring_entries.clamp(1, 32768);
        let built = match wake {
            // DEFER_TASKRUN + SINGLE_ISSUER: completions are posted only when this thread
            // enters the kernel, with no task-work interruptions and no cross-thread wake-up;
            // measured 1.3x the records/s of a plain ring with the journal benchmark
            // (ARCHITECTURE.md). It needs Linux 6.1 and binds the ring to the thread that first
            // submits: a storage must be used by the thread that opened it. Older kernels get
            // a plain ring.
            UringWake::Enter => IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)
                .or_else(|_| IoUring::new(entries)),
            // Completions must signal an eventfd that an event loop (epoll) waits on, so they
            // must be posted without this thread entering the kernel: a plain ring.
            UringWake::EventFd => IoUring::new(entries),
        };
        let ring = built.map_err(|e| {
            let err = IoError::from_io(&e);
            log::error!(
                "io_uring setup failed for {}: {err}: {}",
                dir.display(),
                setup_hint(err.errno)
            );
            err
        })?;
        let unsupported = |what: &str| {
            log::error!(
                "io_uring on this kernel lacks {what}: {}",
                setup_hint(libc::ENOSYS)
            );
            IoError {
                errno: libc::ENOSYS,
            }
        };
        if !ring.params().is_feature_ext_arg() {
            return Err(unsupported("IORING_FEAT_EXT_ARG (timed waits)"));
        }
        let mut probe = Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err() {
            return Err(unsupported("IORING_REGISTER_PROBE"));
        }
        for (code, name) in [
            (opcode::Read::CODE, "IORING_OP_READ"),
            (opcode::Write::CODE, "IORING_OP_WRITE"),
            (opcode::Fsync::CODE, "IORING_OP_FSYNC"),
        ] {
            if !probe.is_supported(code) {
                return Err(unsupported(name));
            }
        }
        let dir = open()?;
        // One slot per CQ entry: in-flight operations can never overflow the CQ.
        let n = (ring.params().cq_entries() as usize).min(ring_entries.max(1) as usize * 2);
        let slots = (0..n)
            .map(|_| Slot {
                token: 0,
                buf: None,
                is_read: false,
                busy: false,
                #[cfg(feature = "fault-injection")]
                fail: None,
            })
            .collect();
        let free = (0..n as u32).rev().collect();
        let eventfd = match wake {
            UringWake::Enter => None,
            UringWake::EventFd => {
                // SAFETY: plain syscall; the result is checked and owned below.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                if fd < 0 {
                    return Err(IoError::from_io(&std::io::Error::last_os_error()));
                }
                // SAFETY: `fd` is a fresh descriptor we own.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                ring.submitter()
                    .register_eventfd(fd.as_raw_fd())
                    .map_err(|e| IoError::from_io(&e))?;
                Some(fd)
            }
        };
        Ok(UringStorage {
            ring: Box::new(ring),
            dir,
            slots,
            free,
            eventfd,
        })
    }

    /// The eventfd signalled on every completion ([`UringWake::EventFd`] only). Its counter
    /// must be read (drained) by the owner before waiting on it again.
    pub fn eventfd(&self) -> Option<BorrowedFd<'_>> {
        self.eventfd.as_ref().map(|fd| fd.as_fd())
    }

    /// The directory this storage works in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Builds the SQE for `op`, checking the handle and alignment.
    fn build(&mut self, op: Op) -> Result<Built, Refused> {
        match op {
            Op::Write { file, offset, buf } => {
                let (fd, len) = match self.check(file, offset, &buf) {
                    Ok(v) => v,
                    Err(e) => return Err((e, Some(buf))),
                };
                let sqe = opcode::Write::new(types::Fd(fd), buf.as_ptr(), len)
                    .offset(offset)
                    .build();
                Ok((sqe, Some(buf), false))
            }
            Op::Read {
                file,
                offset,
                mut buf,
            } => {
                let (fd, len) = match self.check(file, offset, &buf) {
                    Ok(v) => v,
                    Err(e) => return Err((e, Some(buf))),
                };
                let sqe = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len)
                    .offset(offset)
                    .build();
                Ok((sqe, Some(buf), true))
            }
            Op::SyncData { file } => {
                let fd = self.dir.fd(file).map_err(|e| (e, None))?;
                let sqe = opcode::Fsync::new(types::Fd(fd))
                    .flags(types::FsyncFlags::DATASYNC)
                    .build();
                Ok((sqe, None, false))
            }
            Op::SyncDir => {
                // The other members of a directory set, if any, synchronously (rare: a
                // store's commit), then the home through the ring.
                self.dir.sync_spill().map_err(|e| (e, None))?;
                let sqe = opcode::Fsync::new(types::Fd(self.dir.dir_fd())).build();
                Ok((sqe, None, false))
            }
        }
    }

    /// The fd and the 32-bit length of a read or write, or why it cannot be issued.
    fn check(&self, file: FileId, offset: u64, buf: &AlignedBuf) -> Result<(i32, u32), IoError> {
        let fd = self.dir.fd(file)?;
        check_aligned(offset, buf.len())?;
        off_t(offset)?;
        let len = u32::try_from(buf.len()).map_err(|_| IoError::EINVAL)?;
        Ok((fd, len))
    }

    /// Forgets the buffers of operations in flight: the kernel may still use them, so they
    /// must never be freed.
    fn leak_buffers(&mut self) {
        for slot in &mut self.slots {
            if let Some(buf) = slot.buf.take() {
                std::mem::forget(buf);
            }
        }
    }

    /// Moves every ready CQE into `out`.
    fn reap(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.completion() {
            let slot = match self.slots.get_mut(cqe.user_data() as usize) {
                Some(slot) if slot.busy => slot,
                _ => {
                    log::error!("io_uring CQE with unknown user_data {}", cqe.user_data());
                    continue;
                }
            };
            slot.busy = false;
            let res = cqe.result();
            let result = if res < 0 {
                Err(IoError { errno: -res })
            } else {
                Ok(res as usize)
            };
            #[cfg(feature = "fault-injection")]
            let result = match slot.fail.take() {
                Some(err) => Err(err),
                None => result,
            };
            let mut buf = slot.buf.take();
            if let (true, Ok(n), Some(b)) = (slot.is_read, result, buf.as_mut()) {
                let n = n.min(b.len());
                b.set_len(n);
            }
            out.push(Completion {
                token: slot.token,
                result,
                buf,
            });
            self.free.push(cqe.user_data() as u32);
        }
    }

    /// Submits queued SQEs and, if `want` > 0, waits for a completion (bounded by `timeout_us`).
    /// Interrupted and timed-out waits are not errors.
    fn enter(&mut self, want: usize, timeout_us: Option<u64>) -> Result<(), IoError> {
        let r = match timeout_us {
            Some(us) if want > 0 => {
                let ts = types::Timespec::new()
                    .sec(us / 1_000_000)
                    .nsec((us % 1_000_000) as u32 * 1000);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ if want == 0 => {
                // Submit and run deferred completions without blocking (GETEVENTS with
                // min_complete 0): with DEFER_TASKRUN nothing is posted to the CQ otherwise.
                let to_submit = self.ring.submission().len() as u32;
                // SAFETY: valid flags, no extra argument.
                unsafe {
                    self.ring.submitter().enter::<libc::sigset_t>(
                        to_submit,
                        0,
                        IORING_ENTER_GETEVENTS,
                        None,
                    )
                }
            }
            _ => self.ring.submit_and_wait(want),
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::ETIME) | Some(libc::EINTR) => Ok(()),
                // Completions must be reaped first; the caller's reap does that.
                Some(libc::EBUSY) | Some(libc::EAGAIN) => Ok(()),
                _ => Err(IoError::from_io(&e)),
            },
        }
    }
}

impl Storage for UringStorage {
    fn kind(&self) -> DriverKind {
        DriverKind::Uring
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        self.dir.list()
    }
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        self.dir.open_file(name, create)
    }
    fn close(&mut self, file: FileId) {
        // An SQE still in the SQ names the fd by number: hand queued SQEs to the kernel (which
        // then holds its own file reference) so a later open cannot reuse the number under them.
        if !self.ring.submission().is_empty() {
            if let Err(err) = self.enter(0, None) {
                log::warn!("io_uring submit before close failed: {err}");
            }
        }
        self.dir.close(file)
    }
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        self.dir.file_len(file)
    }
    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        self.dir.allocate(file, offset, len)
    }
    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        self.dir.truncate(file, len)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        self.dir.rename(from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), IoError> {
        self.dir.remove(name)
    }
    fn sync_dir(&mut self) -> Result<(), IoError> {
        self.dir.sync_dir()
    }

    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        let injected = self.dir.injected(&op);
        let (sqe, buf, is_read) = match injected {
            None => self.build(op)?,
            // Not performed: a no-op through the ring, so the error arrives as a completion,
            // in order with the others, like a device's EIO.
            Some(_) => (opcode::Nop::new().build(), op.into_buf(), false),
        };
        let Some(idx) = self.free.pop() else {
            return Err((IoError::EAGAIN, buf));
        };
        let sqe = sqe.user_data(u64::from(idx));
        // SAFETY: the SQE points into `buf`'s heap memory, which the slot owns from here until
        // the CQE is reaped; the fd stays open because files are not closed with ops in flight
        // (and the kernel holds its own file reference once the SQE is submitted).
        let mut pushed = unsafe { self.ring.submission().push(&sqe).is_ok() };
        if !pushed && self.ring.submit().is_ok() {
            // SAFETY: as above.
            pushed = unsafe { self.ring.submission().push(&sqe).is_ok() };
        }
        if !pushed {
            self.free.push(idx);
            return Err((IoError::EAGAIN, buf));
        }
        let slot = &mut self.slots[idx as usize];
        slot.token = token;
        slot.buf = buf;
        slot.is_read = is_read;
        slot.busy = true;
        #[cfg(feature = "fault-injection")]
        {
            slot.fail = injected;
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        // Completions already in the CQ satisfy any wait: reap them before entering the kernel.
        let before = out.len();
        self.reap(out);
        let want = match wait {
            Wait::AtLeastOne { .. } if out.len() == before && self.in_flight() > 0 => 1,
            _ => 0,
        };
        let timeout_us = match wait {
            Wait::AtLeastOne { timeout_us } => timeout_us,
            Wait::No => None,
        };
        if want == 0 && self.ring.submission().is_empty() && self.in_flight() == 0 {
            return Ok(()); // nothing to submit, wait for or reap: no syscall
        }
        // Also submits the SQEs queued since the last call.
        let entered = self.enter(want, timeout_us);
        self.reap(out);
        entered
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn submit_pending(&mut self) -> Result<(), IoError> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => Ok(()),
                _ => Err(IoError::from_io(&e)),
            },
        }
    }
}

impl Drop for UringStorage {
    fn drop(&mut self) {
        // The kernel may still be reading or writing slot buffers: wait for all of them.
        let mut sink = Vec::new();
        let mut waited_s = 0;
        while self.in_flight() > 0 {
            if waited_s == 60 {
                log::error!(
                    "io_uring: {} operations still in flight after 60 s on drop; leaking their buffers",
                    self.in_flight()
                );
                self.leak_buffers();
                return;
            }
            waited_s += 1;
            sink.clear();
            if let Err(err) = self.poll(
                &mut sink,
                Wait::AtLeastOne {
                    timeout_us: Some(1_000_000),
                },
            ) {
                log::error!(
                    "io_uring failed while draining {} operations on drop ({err}); leaking their buffers",
                    self.in_flight()
                );
                self.leak_buffers();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setup error names the likely cause and the sysctl's value, per errno.
    #[test]
    fn setup_hints_name_the_cause() {
        let eperm = setup_hint(libc::EPERM);
        assert!(
            eperm.contains("seccomp") && eperm.contains("io_uring_disabled"),
            "{eperm}"
        );
        assert!(eperm.contains("[kernel.io_uring_disabled="), "{eperm}");
        assert!(setup_hint(libc::ENOSYS).contains("5.11"));
        assert!(setup_hint(libc::ENOMEM).contains("RLIMIT_MEMLOCK"));
    }
}
