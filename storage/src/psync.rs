//! `PsyncStorage`: the fallback real-disk driver, `pread`/`pwrite`/`fdatasync` on O_DIRECT files.
//!
//! Used only when io_uring cannot be set up (Docker's default seccomp profile, the
//! `kernel.io_uring_disabled` sysctl, an old kernel): [`crate::open_dir`] announces the fallback.
//! [`Storage::submit`] performs the operation synchronously, right away, and queues its
//! [`Completion`]; [`Storage::poll`] hands the queued completions out. Commits cost the same as
//! with io_uring at queue depth 1 (docs/machine.md §1.2); what is lost is overlap with other work.
//!
//! This module also holds [`Dir`], the directory and file-table half shared with the io_uring
//! driver: namespace operations (open, list, rename, remove, fstat, fallocate, ftruncate,
//! directory fsync) are plain synchronous syscalls in both drivers.

use crate::{
    check_aligned, AlignedBuf, Completion, DriverKind, FileId, IoError, Op, Storage, Wait,
};
use std::collections::VecDeque;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::RawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dirset::Placement;

/// The last OS error as an [`IoError`].
pub(crate) fn last_error() -> IoError {
    IoError::from_io(&std::io::Error::last_os_error())
}

/// Runs a syscall returning `-1`/errno until it does not fail with EINTR.
pub(crate) fn retry_eintr<T: PartialOrd + Default>(mut f: impl FnMut() -> T) -> Result<T, IoError> {
    loop {
        let r = f();
        if r >= T::default() {
            return Ok(r);
        }
        let err = last_error();
        if err.errno != libc::EINTR {
            return Err(err);
        }
    }
}

/// A directory opened with O_DIRECTORY plus the table of open files (`FileId` = index).
/// Owns every descriptor and closes them on drop. It may span other directories
/// ([`crate::dirset`]): then names are looked up in every member and new files go where the
/// placement says.
pub(crate) struct Dir {
    path: PathBuf,
    fd: RawFd,
    files: Vec<Option<RawFd>>,
    /// Members 1.. of a directory set (path, descriptor); empty for a plain directory.
    spill: Vec<(PathBuf, RawFd)>,
    placement: Option<Arc<Placement>>,
    /// The member each open file lives in (by `FileId`), for [`crate::fault`]'s rules.
    #[cfg(feature = "fault-injection")]
    file_member: Vec<usize>,
}

/// Opens a directory (creating it with its parents) with O_DIRECTORY.
fn open_directory(path: &Path) -> Result<RawFd, IoError> {
    std::fs::create_dir_all(path).map_err(|e| IoError::from_io(&e))?;
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| IoError::EINVAL)?;
    // SAFETY: c_path is a valid NUL-terminated string.
    retry_eintr(|| unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
}

/// A plain file name inside the directory, as a C string: no `/`, no NUL, not `.` or `..`.
fn c_name(name: &str) -> Result<CString, IoError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(IoError::EINVAL);
    }
    CString::new(name).map_err(|_| IoError::EINVAL)
}

impl Dir {
    /// Creates `path` if missing (with parents) and opens it.
    pub(crate) fn open(path: &Path) -> Result<Dir, IoError> {
        let fd = open_directory(path)?;
        Ok(Dir {
            path: path.to_path_buf(),
            fd,
            files: Vec::new(),
            spill: Vec::new(),
            placement: None,
            #[cfg(feature = "fault-injection")]
            file_member: Vec::new(),
        })
    }

    /// Opens every member of a directory set (creating them); the first is the home.
    pub(crate) fn open_set(placement: Arc<Placement>) -> Result<Dir, IoError> {
        let Some(home) = placement.members.first() else {
            return Err(IoError::EINVAL);
        };
        let mut dir = Dir::open(home)?;
        for member in &placement.members[1..] {
            let fd = open_directory(member)?;
            dir.spill.push((member.clone(), fd));
        }
        dir.placement = Some(placement);
        Ok(dir)
    }

    /// The descriptor of member `m` (0: the home).
    fn member_fd(&self, m: usize) -> RawFd {
        if m == 0 {
            self.fd
        } else {
            self.spill[m - 1].1
        }
    }

    fn member_path(&self, m: usize) -> &Path {
        if m == 0 {
            &self.path
        } else {
            &self.spill[m - 1].0
        }
    }

    /// The member holding `name`, if any.
    fn find(&self, name: &CString) -> Result<Option<usize>, IoError> {
        for m in 0..=self.spill.len() {
            // SAFETY: an all-zero stat is a valid out-parameter for fstatat.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: valid directory fd, NUL-terminated name, valid out pointer.
            let r = unsafe {
                libc::fstatat(
                    self.member_fd(m),
                    name.as_ptr(),
                    &mut st,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if r == 0 {
                return Ok(Some(m));
            }
            let err = last_error();
            if err.errno != libc::ENOENT {
                return Err(err);
            }
        }
        Ok(None)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's own descriptor (for an fsync of the directory).
    pub(crate) fn dir_fd(&self) -> RawFd {
        self.fd
    }

    /// The descriptor behind a `FileId`, or EBADF.
    #[inline]
    pub(crate) fn fd(&self, file: FileId) -> Result<RawFd, IoError> {
        match self.files.get(file as usize) {
            Some(Some(fd)) => Ok(*fd),
            _ => Err(IoError::EBADF),
        }
    }

    pub(crate) fn list(&mut self) -> Result<Vec<String>, IoError> {
        let mut names = Vec::new();
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for m in 0..=self.spill.len() {
            for name in self.list_member(m)? {
                if let Some(&other) = seen.get(&name) {
                    // Names are never reused: one file in two members is not ours to pick from.
                    log::error!(
                        "{name} is in both {} and {}: remove the copy that is not the bookie's",
                        self.member_path(other).display(),
                        self.member_path(m).display()
                    );
                    return Err(IoError {
                        errno: libc::EEXIST,
                    });
                }
                seen.insert(name.clone(), m);
                names.push(name);
            }
        }
        Ok(names)
    }

    fn list_member(&self, m: usize) -> Result<Vec<String>, IoError> {
        let path = self.member_path(m);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| IoError::from_io(&e))? {
            let entry = entry.map_err(|e| IoError::from_io(&e))?;
            let is_file = entry
                .file_type()
                .map_err(|e| IoError::from_io(&e))?
                .is_file();
            if !is_file {
                continue;
            }
            match entry.file_name().into_string() {
                Ok(name) => names.push(name),
                // Not a name we could have created; never hand out a mangled one.
                Err(name) => log::warn!(
                    "ignoring non-UTF-8 file name {:?} in {}",
                    name,
                    path.display()
                ),
            }
        }
        Ok(names)
    }

    /// Opens `name` with O_RDWR | O_DIRECT | O_CLOEXEC (| O_CREAT, mode 0644).
    pub(crate) fn open_file(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        let c = c_name(name)?;
        let mut flags = libc::O_RDWR | libc::O_DIRECT | libc::O_CLOEXEC;
        let mut at = self.fd;
        let mut _member = 0;
        if let Some(placement) = &self.placement {
            match self.find(&c)? {
                Some(m) => (at, _member) = (self.member_fd(m), m),
                None if create => {
                    _member = placement.member_for(name);
                    at = self.member_fd(_member);
                    flags |= libc::O_CREAT;
                }
                None => {
                    return Err(IoError {
                        errno: libc::ENOENT,
                    })
                }
            }
        } else if create {
            flags |= libc::O_CREAT;
        }
        // SAFETY: valid directory fd and NUL-terminated name.
        let fd =
            retry_eintr(|| unsafe { libc::openat(at, c.as_ptr(), flags, 0o644 as libc::c_uint) })?;
        let slot = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        let Ok(id) = FileId::try_from(slot) else {
            // SAFETY: fd was just opened by us and is not stored anywhere.
            unsafe { libc::close(fd) };
            return Err(IoError {
                errno: libc::EMFILE,
            });
        };
        self.files[slot] = Some(fd);
        #[cfg(feature = "fault-injection")]
        {
            if self.file_member.len() <= slot {
                self.file_member.resize(slot + 1, 0);
            }
            self.file_member[slot] = _member;
        }
        Ok(id)
    }

    /// The error [`crate::fault`] injects into `op`, if any: writes and syncs of a file by the
    /// directory holding it, a directory sync by every member. Never with the feature off.
    #[inline(always)]
    pub(crate) fn injected(&self, op: &Op) -> Option<IoError> {
        use crate::fault::{injected, FaultOp};
        #[cfg(feature = "fault-injection")]
        let of_file = |file: FileId| {
            let m = self.file_member.get(file as usize).copied().unwrap_or(0);
            std::iter::once(self.member_path(m.min(self.spill.len())))
        };
        #[cfg(not(feature = "fault-injection"))]
        let of_file = |_: FileId| std::iter::once(self.path.as_path());
        match *op {
            Op::Write { file, .. } => injected(FaultOp::Write, of_file(file)),
            Op::SyncData { file } => injected(FaultOp::Sync, of_file(file)),
            Op::SyncDir => injected(
                FaultOp::Sync,
                (0..=self.spill.len()).map(|m| self.member_path(m)),
            ),
            Op::Read { .. } => None,
        }
    }

    pub(crate) fn close(&mut self, file: FileId) {
        if let Some(entry) = self.files.get_mut(file as usize) {
            if let Some(fd) = entry.take() {
                // SAFETY: we own fd; close is not retried on EINTR (Linux releases the fd).
                unsafe { libc::close(fd) };
            }
        }
    }

    pub(crate) fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        let fd = self.fd(file)?;
        // SAFETY: an all-zero stat is a valid value to be overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open, st is a valid out pointer.
        retry_eintr(|| unsafe { libc::fstat(fd, &mut st) })?;
        u64::try_from(st.st_size).map_err(|_| IoError::EIO)
    }

    pub(crate) fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        let fd = self.fd(file)?;
        let off = i64::try_from(offset).map_err(|_| IoError::EINVAL)?;
        let len = i64::try_from(len).map_err(|_| IoError::EINVAL)?;
        // SAFETY: plain syscall on an open fd.
        retry_eintr(|| unsafe { libc::fallocate(fd, 0, off, len) })?;
        Ok(())
    }

    pub(crate) fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        let fd = self.fd(file)?;
        let len = i64::try_from(len).map_err(|_| IoError::EINVAL)?;
        // SAFETY: plain syscall on an open fd.
        retry_eintr(|| unsafe { libc::ftruncate(fd, len) })?;
        Ok(())
    }

    pub(crate) fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        let (f, t) = (c_name(from)?, c_name(to)?);
        // Within the member holding `from` (a rename cannot cross file systems).
        let at = match self.placement {
            Some(_) => match self.find(&f)? {
                Some(m) => self.member_fd(m),
                None => {
                    return Err(IoError {
                        errno: libc::ENOENT,
                    })
                }
            },
            None => self.fd,
        };
        // SAFETY: valid directory fd and NUL-terminated names.
        retry_eintr(|| unsafe { libc::renameat(at, f.as_ptr(), at, t.as_ptr()) })?;
        Ok(())
    }

    pub(crate) fn remove(&mut self, name: &str) -> Result<(), IoError> {
        let c = c_name(name)?;
        let at = match self.placement {
            Some(_) => match self.find(&c)? {
                Some(m) => self.member_fd(m),
                None => {
                    return Err(IoError {
                        errno: libc::ENOENT,
                    })
                }
            },
            None => self.fd,
        };
        // SAFETY: valid directory fd and NUL-terminated name.
        retry_eintr(|| unsafe { libc::unlinkat(at, c.as_ptr(), 0) })?;
        Ok(())
    }

    pub(crate) fn sync_dir(&mut self) -> Result<(), IoError> {
        if let Some(err) = self.injected(&Op::SyncDir) {
            return Err(err);
        }
        self.sync_spill()?;
        // SAFETY: plain syscall on our directory fd.
        retry_eintr(|| unsafe { libc::fsync(self.fd) })?;
        Ok(())
    }

    /// Syncs the members other than the home (a directory set's namespace changes).
    pub(crate) fn sync_spill(&mut self) -> Result<(), IoError> {
        for &(_, fd) in &self.spill {
            // SAFETY: plain syscall on a member's directory fd.
            retry_eintr(|| unsafe { libc::fsync(fd) })?;
        }
        Ok(())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        for fd in self.files.drain(..).flatten() {
            // SAFETY: we own every fd in the table.
            unsafe { libc::close(fd) };
        }
        for (_, fd) in self.spill.drain(..) {
            // SAFETY: we own every member's directory fd.
            unsafe { libc::close(fd) };
        }
        // SAFETY: we own the directory fd.
        unsafe { libc::close(self.fd) };
    }
}

/// The synchronous fallback driver. See the module docs.
pub struct PsyncStorage {
    dir: Dir,
    done: VecDeque<Completion>,
}

impl PsyncStorage {
    /// Creates `dir` if missing and opens it.
    pub fn open_dir(dir: &Path) -> Result<PsyncStorage, IoError> {
        Ok(PsyncStorage {
            dir: Dir::open(dir)?,
            done: VecDeque::with_capacity(64),
        })
    }

    /// Opens a directory set ([`crate::dirset`]).
    pub fn open_set(placement: Arc<Placement>) -> Result<PsyncStorage, IoError> {
        Ok(PsyncStorage {
            dir: Dir::open_set(placement)?,
            done: VecDeque::with_capacity(64),
        })
    }

    /// The directory this storage works in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn perform(&mut self, op: Op) -> Result<Completion, (IoError, Option<AlignedBuf>)> {
        if let Some(err) = self.dir.injected(&op) {
            return Ok(Completion {
                token: 0,
                result: Err(err),
                buf: op.into_buf(),
            });
        }
        match op {
            Op::Write { file, offset, buf } => {
                let fd = match self.dir.fd(file) {
                    Ok(fd) => fd,
                    Err(e) => return Err((e, Some(buf))),
                };
                if let Err(e) = check_aligned(offset, buf.len()).and_then(|()| off_t(offset)) {
                    return Err((e, Some(buf)));
                }
                // SAFETY: buf is valid for buf.len() bytes and outlives the call.
                let r = retry_eintr(|| unsafe {
                    libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), offset as libc::off_t)
                });
                Ok(Completion {
                    token: 0,
                    result: r.map(|n| n as usize),
                    buf: Some(buf),
                })
            }
            Op::Read {
                file,
                offset,
                mut buf,
            } => {
                let fd = match self.dir.fd(file) {
                    Ok(fd) => fd,
                    Err(e) => return Err((e, Some(buf))),
                };
                if let Err(e) = check_aligned(offset, buf.len()).and_then(|()| off_t(offset)) {
                    return Err((e, Some(buf)));
                }
                let len = buf.len();
                let ptr = buf.as_mut_ptr();
                // SAFETY: buf is valid for len <= capacity bytes and outlives the call.
                let r = retry_eintr(|| unsafe {
                    libc::pread(fd, ptr.cast(), len, offset as libc::off_t)
                });
                let result = r.map(|n| n as usize);
                if let Ok(n) = result {
                    buf.set_len(n.min(len));
                }
                Ok(Completion {
                    token: 0,
                    result,
                    buf: Some(buf),
                })
            }
            Op::SyncData { file } => {
                let fd = self.dir.fd(file).map_err(|e| (e, None))?;
                // SAFETY: plain syscall on an open fd.
                let r = retry_eintr(|| unsafe { libc::fdatasync(fd) });
                Ok(Completion {
                    token: 0,
                    result: r.map(|_| 0),
                    buf: None,
                })
            }
            Op::SyncDir => Ok(Completion {
                token: 0,
                result: self.dir.sync_dir().map(|_| 0),
                buf: None,
            }),
        }
    }
}

/// Checks that an offset fits `off_t`.
pub(crate) fn off_t(offset: u64) -> Result<(), IoError> {
    i64::try_from(offset)
        .map(|_| ())
        .map_err(|_| IoError::EINVAL)
}

impl Storage for PsyncStorage {
    fn kind(&self) -> DriverKind {
        DriverKind::Psync
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        self.dir.list()
    }
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        self.dir.open_file(name, create)
    }
    fn close(&mut self, file: FileId) {
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
        let mut completion = self.perform(op)?;
        completion.token = token;
        self.done.push_back(completion);
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>, _wait: Wait) -> Result<(), IoError> {
        // Everything submitted has already completed: waiting is never needed.
        out.extend(self.done.drain(..));
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }
}
