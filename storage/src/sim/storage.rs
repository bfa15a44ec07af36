//! `SimStorage`: the [`Storage`] view of one directory of a [`SimDisk`].

use std::cell::RefMut;
use std::collections::BTreeMap;

use super::disk::{Inner, Ino, OpKind};
use super::SimDisk;
use crate::{
    check_aligned, AlignedBuf, Completion, DriverKind, FileId, IoError, Op, Storage, Wait,
};

/// A [`Storage`] on a [`SimDisk`] directory. Dead after [`SimDisk::crash`]: every call then
/// fails with EIO.
pub struct SimStorage {
    disk: SimDisk,
    dir: String,
    handle: u64,
    epoch: u64,
    files: BTreeMap<FileId, Ino>,
    next_file: FileId,
}

impl SimStorage {
    pub(super) fn new(disk: SimDisk, dir: &str, handle: u64) -> SimStorage {
        let epoch = disk.inner.borrow().epoch;
        SimStorage {
            disk,
            dir: dir.to_string(),
            handle,
            epoch,
            files: BTreeMap::new(),
            next_file: 1,
        }
    }

    /// The device this directory is on.
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    /// The disk, settled to the current time, if this handle is still alive.
    fn live(&self) -> Result<RefMut<'_, Inner>, IoError> {
        let mut inner = self.disk.inner.borrow_mut();
        if inner.epoch != self.epoch {
            return Err(IoError::EIO);
        }
        inner.settle();
        Ok(inner)
    }

    fn ino(&self, file: FileId) -> Result<Ino, IoError> {
        self.files.get(&file).copied().ok_or(IoError::EBADF)
    }
}

impl Drop for SimStorage {
    fn drop(&mut self) {
        if let Ok(mut inner) = self.disk.inner.try_borrow_mut() {
            inner.drop_handle(self.handle);
        }
    }
}

impl Storage for SimStorage {
    fn kind(&self) -> DriverKind {
        DriverKind::Sim
    }

    fn list(&mut self) -> Result<Vec<String>, IoError> {
        self.live()?.list(&self.dir)
    }

    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        let ino = self.live()?.open(&self.dir, name, create)?;
        let file = self.next_file;
        self.next_file = self.next_file.checked_add(1).ok_or(IoError::EINVAL)?;
        self.files.insert(file, ino);
        Ok(file)
    }

    fn close(&mut self, file: FileId) {
        let Some(ino) = self.files.remove(&file) else {
            return;
        };
        if let Ok(mut inner) = self.live() {
            if inner.busy(self.handle, ino) {
                inner.stats.misuse += 1;
            }
        }
    }

    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        let mut inner = self.live()?;
        inner.file_len(self.ino(file)?)
    }

    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        let mut inner = self.live()?;
        inner.allocate(self.ino(file)?, offset, len)
    }

    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        let mut inner = self.live()?;
        inner.truncate(self.ino(file)?, len)
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        self.live()?.rename(&self.dir, from, to)
    }

    fn remove(&mut self, name: &str) -> Result<(), IoError> {
        self.live()?.remove(&self.dir, name)
    }

    fn sync_dir(&mut self) -> Result<(), IoError> {
        self.live()?.sync_dir(&self.dir)
    }

    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        fn into_buf(op: Op) -> Option<AlignedBuf> {
            match op {
                Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
                Op::SyncData { .. } | Op::SyncDir => None,
            }
        }
        let mut inner = match self.live() {
            Ok(inner) => inner,
            Err(err) => return Err((err, into_buf(op))),
        };
        let checked = match &op {
            Op::Write { file, offset, buf } | Op::Read { file, offset, buf } => self
                .ino(*file)
                .and_then(|ino| check_aligned(*offset, buf.len()).map(|()| ino)),
            Op::SyncData { file } => self.ino(*file),
            Op::SyncDir => {
                let result = inner.sync_dir(&self.dir).map(|_| 0);
                return inner.submit(self.handle, token, OpKind::SyncDir { result });
            }
        };
        let ino = match checked {
            Ok(ino) => ino,
            Err(err) => {
                inner.stats.rejected += 1;
                return Err((err, into_buf(op)));
            }
        };
        let kind = match op {
            Op::Write { offset, buf, .. } => OpKind::Write { ino, offset, buf },
            Op::Read { offset, buf, .. } => OpKind::Read { ino, offset, buf },
            Op::SyncData { .. } => OpKind::Sync {
                ino,
                upto: 0,
                len: 0,
            },
            Op::SyncDir => unreachable!("handled above"),
        };
        inner.submit(self.handle, token, kind)
    }

    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        let mut inner = self.live()?;
        if let Wait::AtLeastOne { timeout_us } = wait {
            if !inner.has_done(self.handle) {
                if let Some(ready) = inner.earliest_ready(self.handle) {
                    let target = match timeout_us {
                        Some(t) => ready.min(inner.now.saturating_add(t)),
                        None => ready,
                    };
                    inner.now = inner.now.max(target);
                    inner.settle();
                }
            }
        }
        inner.take_done(self.handle, out);
        Ok(())
    }

    fn in_flight(&self) -> usize {
        let inner = self.disk.inner.borrow();
        if inner.epoch != self.epoch {
            return 0;
        }
        inner.in_flight(self.handle)
    }
}
