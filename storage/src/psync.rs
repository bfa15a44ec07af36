//! PLACEHOLDER, being written by a helper: the psync driver.
use crate::*;
pub struct PsyncStorage;
impl PsyncStorage {
    pub fn open_dir(_dir: &std::path::Path) -> Result<PsyncStorage, IoError> {
        Err(IoError::EINVAL)
    }
}
impl Storage for PsyncStorage {
    fn kind(&self) -> DriverKind {
        todo!()
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        todo!()
    }
    fn open(&mut self, _name: &str, _create: bool) -> Result<FileId, IoError> {
        todo!()
    }
    fn close(&mut self, _file: FileId) {
        todo!()
    }
    fn file_len(&mut self, _file: FileId) -> Result<u64, IoError> {
        todo!()
    }
    fn allocate(&mut self, _file: FileId, _offset: u64, _len: u64) -> Result<(), IoError> {
        todo!()
    }
    fn truncate(&mut self, _file: FileId, _len: u64) -> Result<(), IoError> {
        todo!()
    }
    fn rename(&mut self, _from: &str, _to: &str) -> Result<(), IoError> {
        todo!()
    }
    fn remove(&mut self, _name: &str) -> Result<(), IoError> {
        todo!()
    }
    fn sync_dir(&mut self) -> Result<(), IoError> {
        todo!()
    }
    fn submit(&mut self, _token: u64, _op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        todo!()
    }
    fn poll(&mut self, _out: &mut Vec<Completion>, _wait: Wait) -> Result<(), IoError> {
        todo!()
    }
    fn in_flight(&self) -> usize {
        todo!()
    }
}
