//! The part of a storage-port wrapper that changes nothing: a wrapper around a `Storage` that
//! only watches submissions and completions (`store/paced.rs` spaces out writes, `read/disk_share.rs`
//! takes turns for reads) forwards everything else to its `inner` port with
//! [`forward_storage!`].

/// Implements the namespace operations of `Storage` (`kind`, `list`, `open`, `close`,
/// `file_len`, `allocate`, `truncate`, `rename`, `remove`, `sync_dir`) and `submit_pending` by
/// calling `self.inner`. Use inside `impl<S: Storage> Storage for W<S>`, which then defines
/// `submit`, `poll` and `in_flight` itself.
macro_rules! forward_storage {
    () => {
        fn kind(&self) -> storage::DriverKind {
            self.inner.kind()
        }
        fn list(&mut self) -> Result<Vec<String>, storage::IoError> {
            self.inner.list()
        }
        fn open(&mut self, name: &str, create: bool) -> Result<storage::FileId, storage::IoError> {
            self.inner.open(name, create)
        }
        fn close(&mut self, file: storage::FileId) {
            self.inner.close(file)
        }
        fn file_len(&mut self, file: storage::FileId) -> Result<u64, storage::IoError> {
            self.inner.file_len(file)
        }
        fn allocate(
            &mut self,
            file: storage::FileId,
            offset: u64,
            len: u64,
        ) -> Result<(), storage::IoError> {
            self.inner.allocate(file, offset, len)
        }
        fn truncate(&mut self, file: storage::FileId, len: u64) -> Result<(), storage::IoError> {
            self.inner.truncate(file, len)
        }
        fn rename(&mut self, from: &str, to: &str) -> Result<(), storage::IoError> {
            self.inner.rename(from, to)
        }
        fn remove(&mut self, name: &str) -> Result<(), storage::IoError> {
            self.inner.remove(name)
        }
        fn sync_dir(&mut self) -> Result<(), storage::IoError> {
            self.inner.sync_dir()
        }
        fn submit_pending(&mut self) -> Result<(), storage::IoError> {
            self.inner.submit_pending()
        }
    };
}

pub(crate) use forward_storage;
