//! Read-only RocksDB, for the index a Java DbLedgerStorage bookie keeps in RocksDB
//! (docs/java-formats.md §6): opened with `rocksdb_open_for_read_only`, which replays the
//! write-ahead log in memory, takes no lock and writes nothing into the database directory, so
//! that Java can still open it after a takeover (a rollback).
//!
//! Why the system library, loaded at run time (`dlopen` through `libloading`), and not the
//! `rocksdb` crate: that crate compiles RocksDB's C++ (20–40 minutes on this project's 2-core
//! CI, whose whole budget is 35), and linking the system library would make every bookie
//! binary need `librocksdb` to start, though only a takeover of a DbLedgerStorage bookie
//! reads RocksDB. The C API's read calls used here are stable across RocksDB 6–9. Debian 12
//! ships RocksDB 7.8.3 (`librocksdb-dev`, or `librocksdb7.8` for the library alone); it reads
//! what Java's rocksdbjni 6.16–9.9 write with Java's options (block-based tables of format
//! versions 2–5, LZ4/Snappy, xxHash/CRC32C checksums): the interop tier checks it against a
//! real 4.18 bookie's databases.
//!
//! This crate is the only one besides `storage` with `unsafe` code: each foreign call has its
//! `SAFETY:` note; what leaves the crate is safe Rust (owned `Vec<u8>` keys and values).

use std::ffi::{c_char, c_uchar, c_void, CStr, CString};
use std::path::Path;
use std::ptr;
use std::sync::{Arc, OnceLock};

type Opaque = *mut c_void;

/// The C functions this crate calls, resolved once from the library.
struct Api {
    _lib: libloading::Library,
    options_create: unsafe extern "C" fn() -> Opaque,
    options_destroy: unsafe extern "C" fn(Opaque),
    open_for_read_only:
        unsafe extern "C" fn(Opaque, *const c_char, c_uchar, *mut *mut c_char) -> Opaque,
    close: unsafe extern "C" fn(Opaque),
    readoptions_create: unsafe extern "C" fn() -> Opaque,
    readoptions_destroy: unsafe extern "C" fn(Opaque),
    readoptions_set_verify_checksums: unsafe extern "C" fn(Opaque, c_uchar),
    readoptions_set_fill_cache: unsafe extern "C" fn(Opaque, c_uchar),
    get: unsafe extern "C" fn(
        Opaque,
        Opaque,
        *const c_char,
        usize,
        *mut usize,
        *mut *mut c_char,
    ) -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_void),
    create_iterator: unsafe extern "C" fn(Opaque, Opaque) -> Opaque,
    iter_destroy: unsafe extern "C" fn(Opaque),
    iter_valid: unsafe extern "C" fn(Opaque) -> c_uchar,
    iter_seek_to_first: unsafe extern "C" fn(Opaque),
    iter_seek: unsafe extern "C" fn(Opaque, *const c_char, usize),
    iter_seek_for_prev: unsafe extern "C" fn(Opaque, *const c_char, usize),
    iter_next: unsafe extern "C" fn(Opaque),
    iter_key: unsafe extern "C" fn(Opaque, *mut usize) -> *const c_char,
    iter_value: unsafe extern "C" fn(Opaque, *mut usize) -> *const c_char,
    iter_get_error: unsafe extern "C" fn(Opaque, *mut *mut c_char),
    // For `writer` (tests and fixtures): a database written the way Java writes it.
    options_set_create_if_missing: unsafe extern "C" fn(Opaque, c_uchar),
    options_set_compression: unsafe extern "C" fn(Opaque, i32),
    open: unsafe extern "C" fn(Opaque, *const c_char, *mut *mut c_char) -> Opaque,
    writeoptions_create: unsafe extern "C" fn() -> Opaque,
    writeoptions_destroy: unsafe extern "C" fn(Opaque),
    writebatch_create: unsafe extern "C" fn() -> Opaque,
    writebatch_destroy: unsafe extern "C" fn(Opaque),
    writebatch_put: unsafe extern "C" fn(Opaque, *const c_char, usize, *const c_char, usize),
    writebatch_delete: unsafe extern "C" fn(Opaque, *const c_char, usize),
    writebatch_delete_range:
        unsafe extern "C" fn(Opaque, *const c_char, usize, *const c_char, usize),
    write: unsafe extern "C" fn(Opaque, Opaque, Opaque, *mut *mut c_char),
    flush: unsafe extern "C" fn(Opaque, Opaque, *mut *mut c_char),
    flushoptions_create: unsafe extern "C" fn() -> Opaque,
    flushoptions_destroy: unsafe extern "C" fn(Opaque),
}

/// Where the library may be, most specific last-resort first: the development symlink, then
/// the sonames of the releases that have the calls above.
const LIBRARY_NAMES: &[&str] = &[
    "librocksdb.so",
    "librocksdb.so.9",
    "librocksdb.so.8",
    "librocksdb.so.7.8",
    "librocksdb.so.7",
    "librocksdb.so.6",
];

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Api, String> {
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading RocksDB runs its static initialisers, which only set up the
        // library's own globals; nothing else in this process shares them.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return resolve(lib).map_err(|e| format!("{name}: {e}")),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(format!(
        "cannot load the RocksDB library, which reading a Java DbLedgerStorage bookie's index \
         needs (Debian/Ubuntu: apt-get install librocksdb-dev); tried {}",
        tried.join("; ")
    ))
}

fn resolve(lib: libloading::Library) -> Result<Api, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is RocksDB's C API function of that name, whose C signature
            // (rocksdb/c.h, unchanged from 6.x to 9.x) is the field's type.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{}: {e}", $name))?
        };
    }
    Ok(Api {
        options_create: sym!("rocksdb_options_create"),
        options_destroy: sym!("rocksdb_options_destroy"),
        open_for_read_only: sym!("rocksdb_open_for_read_only"),
        close: sym!("rocksdb_close"),
        readoptions_create: sym!("rocksdb_readoptions_create"),
        readoptions_destroy: sym!("rocksdb_readoptions_destroy"),
        readoptions_set_verify_checksums: sym!("rocksdb_readoptions_set_verify_checksums"),
        readoptions_set_fill_cache: sym!("rocksdb_readoptions_set_fill_cache"),
        get: sym!("rocksdb_get"),
        free: sym!("rocksdb_free"),
        create_iterator: sym!("rocksdb_create_iterator"),
        iter_destroy: sym!("rocksdb_iter_destroy"),
        iter_valid: sym!("rocksdb_iter_valid"),
        iter_seek_to_first: sym!("rocksdb_iter_seek_to_first"),
        iter_seek: sym!("rocksdb_iter_seek"),
        iter_seek_for_prev: sym!("rocksdb_iter_seek_for_prev"),
        iter_next: sym!("rocksdb_iter_next"),
        iter_key: sym!("rocksdb_iter_key"),
        iter_value: sym!("rocksdb_iter_value"),
        iter_get_error: sym!("rocksdb_iter_get_error"),
        options_set_create_if_missing: sym!("rocksdb_options_set_create_if_missing"),
        options_set_compression: sym!("rocksdb_options_set_compression"),
        open: sym!("rocksdb_open"),
        writeoptions_create: sym!("rocksdb_writeoptions_create"),
        writeoptions_destroy: sym!("rocksdb_writeoptions_destroy"),
        writebatch_create: sym!("rocksdb_writebatch_create"),
        writebatch_destroy: sym!("rocksdb_writebatch_destroy"),
        writebatch_put: sym!("rocksdb_writebatch_put"),
        writebatch_delete: sym!("rocksdb_writebatch_delete"),
        writebatch_delete_range: sym!("rocksdb_writebatch_delete_range"),
        write: sym!("rocksdb_write"),
        flush: sym!("rocksdb_flush"),
        flushoptions_create: sym!("rocksdb_flushoptions_create"),
        flushoptions_destroy: sym!("rocksdb_flushoptions_destroy"),
        _lib: lib,
    })
}

/// Takes an error string RocksDB allocated, if any.
fn take_error(api: &Api, err: *mut c_char) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: RocksDB sets `err` to a NUL-terminated string it allocated with malloc; we copy
    // it and free it once with its own `rocksdb_free`.
    let s = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above: allocated by RocksDB, freed once.
    unsafe { (api.free)(err.cast()) };
    Some(s)
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: a NUL byte in the path", path.display()))
}

struct Handle {
    api: &'static Api,
    db: Opaque,
    read_options: Opaque,
}

// SAFETY: a RocksDB `DB` serves concurrent reads from any thread (its documented thread
// safety); the read options are only read by RocksDB after creation.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: both were created by this handle and are destroyed once; no iterator outlives
        // the handle (each `Iter` holds an `Arc` of it).
        unsafe {
            (self.api.readoptions_destroy)(self.read_options);
            (self.api.close)(self.db);
        }
    }
}

/// A RocksDB database opened read-only. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Db {
    h: Arc<Handle>,
}

impl Db {
    /// Opens `path` read-only: the write-ahead log is replayed in memory, nothing is written.
    /// Reads verify block checksums.
    pub fn open_read_only(path: &Path) -> Result<Db, String> {
        let api = api()?;
        let name = c_path(path)?;
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: options are created and destroyed here; `name` outlives the call; `err` is a
        // valid out-pointer.
        let db = unsafe {
            let options = (api.options_create)();
            let db = (api.open_for_read_only)(options, name.as_ptr(), 0, &mut err);
            (api.options_destroy)(options);
            db
        };
        if let Some(e) = take_error(api, err) {
            return Err(format!("{}: {e}", path.display()));
        }
        if db.is_null() {
            return Err(format!("{}: RocksDB returned no database", path.display()));
        }
        // SAFETY: plain constructors and setters on an object we own.
        let read_options = unsafe {
            let r = (api.readoptions_create)();
            (api.readoptions_set_verify_checksums)(r, 1);
            (api.readoptions_set_fill_cache)(r, 0);
            r
        };
        Ok(Db {
            h: Arc::new(Handle {
                api,
                db,
                read_options,
            }),
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let api = self.h.api;
        let mut len = 0usize;
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: the handle is open; `key` is valid for `key.len()` bytes during the call.
        let v = unsafe {
            (api.get)(
                self.h.db,
                self.h.read_options,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        if let Some(e) = take_error(api, err) {
            return Err(e);
        }
        if v.is_null() {
            return Ok(None);
        }
        // SAFETY: RocksDB returned a malloc'ed buffer of `len` bytes; copied, then freed once.
        let out = unsafe { std::slice::from_raw_parts(v.cast::<u8>(), len) }.to_vec();
        // SAFETY: as above.
        unsafe { (api.free)(v.cast()) };
        Ok(Some(out))
    }

    /// An iterator over the database, in key order (bytewise), not positioned yet.
    pub fn iter(&self) -> Iter {
        let api = self.h.api;
        // SAFETY: the handle is open and outlives the iterator (the `Arc` it holds).
        let it = unsafe { (api.create_iterator)(self.h.db, self.h.read_options) };
        Iter {
            h: self.h.clone(),
            it,
        }
    }
}

/// A key and its value, copied out of RocksDB.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A positioned cursor over a [`Db`].
pub struct Iter {
    h: Arc<Handle>,
    it: Opaque,
}

impl Drop for Iter {
    fn drop(&mut self) {
        // SAFETY: created by `Db::iter`, destroyed once, before the handle (held by `h`).
        unsafe { (self.h.api.iter_destroy)(self.it) }
    }
}

impl Iter {
    pub fn seek_to_first(&mut self) {
        // SAFETY: a live iterator.
        unsafe { (self.h.api.iter_seek_to_first)(self.it) }
    }

    /// To the first key at or after `key`.
    pub fn seek(&mut self, key: &[u8]) {
        // SAFETY: a live iterator; `key` is valid during the call (RocksDB copies it).
        unsafe { (self.h.api.iter_seek)(self.it, key.as_ptr().cast(), key.len()) }
    }

    /// To the last key at or before `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        // SAFETY: as for `seek`.
        unsafe { (self.h.api.iter_seek_for_prev)(self.it, key.as_ptr().cast(), key.len()) }
    }

    pub fn next(&mut self) {
        // SAFETY: a live iterator; RocksDB requires it to be valid, which callers check first
        // (`entry` returns None otherwise and the loops stop).
        if self.valid() {
            unsafe { (self.h.api.iter_next)(self.it) }
        }
    }

    fn valid(&self) -> bool {
        // SAFETY: a live iterator.
        unsafe { (self.h.api.iter_valid)(self.it) != 0 }
    }

    /// The current key and value, or `None` past the end; an error RocksDB met (a corrupt
    /// block) is returned, never taken for the end.
    pub fn entry(&self) -> Result<Option<KeyValue>, String> {
        let api = self.h.api;
        if !self.valid() {
            let mut err: *mut c_char = ptr::null_mut();
            // SAFETY: a live iterator; `err` a valid out-pointer.
            unsafe { (api.iter_get_error)(self.it, &mut err) };
            return match take_error(api, err) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        let (mut kl, mut vl) = (0usize, 0usize);
        // SAFETY: the iterator is valid; key and value point into RocksDB's memory, valid until
        // the iterator moves; both are copied at once.
        unsafe {
            let k = (api.iter_key)(self.it, &mut kl);
            let v = (api.iter_value)(self.it, &mut vl);
            Ok(Some((
                std::slice::from_raw_parts(k.cast::<u8>(), kl).to_vec(),
                std::slice::from_raw_parts(v.cast::<u8>(), vl).to_vec(),
            )))
        }
    }
}

/// Writing a database as Java's bookie does (tests and fixtures only: the bookie never writes
/// Java's databases).
pub mod writer {
    use super::*;

    /// One write batch's operations.
    pub enum Op<'a> {
        Put(&'a [u8], &'a [u8]),
        Delete(&'a [u8]),
        DeleteRange(&'a [u8], &'a [u8]),
    }

    /// Creates (or opens) `path`, applies `batches` each as one synced batch, and, when
    /// `flush`, flushes the memtable to an SST (otherwise the data stays in the WAL only, as
    /// after a Java bookie was killed). `lz4`: LZ4 blocks, as Java's locations database.
    pub fn write(path: &Path, batches: &[Vec<Op>], lz4: bool, flush: bool) -> Result<(), String> {
        let api = api()?;
        let name = c_path(path)?;
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: objects created and destroyed here; pointers valid during each call.
        unsafe {
            let options = (api.options_create)();
            (api.options_set_create_if_missing)(options, 1);
            // rocksdb_lz4_compression = 4, rocksdb_snappy_compression = 1
            (api.options_set_compression)(options, if lz4 { 4 } else { 1 });
            let db = (api.open)(options, name.as_ptr(), &mut err);
            (api.options_destroy)(options);
            if let Some(e) = take_error(api, err) {
                return Err(e);
            }
            let wo = (api.writeoptions_create)();
            for ops in batches {
                let b = (api.writebatch_create)();
                for op in ops {
                    match op {
                        Op::Put(k, v) => (api.writebatch_put)(
                            b,
                            k.as_ptr().cast(),
                            k.len(),
                            v.as_ptr().cast(),
                            v.len(),
                        ),
                        Op::Delete(k) => (api.writebatch_delete)(b, k.as_ptr().cast(), k.len()),
                        Op::DeleteRange(s, e) => (api.writebatch_delete_range)(
                            b,
                            s.as_ptr().cast(),
                            s.len(),
                            e.as_ptr().cast(),
                            e.len(),
                        ),
                    }
                }
                (api.write)(db, wo, b, &mut err);
                (api.writebatch_destroy)(b);
                if let Some(e) = take_error(api, err) {
                    (api.writeoptions_destroy)(wo);
                    (api.close)(db);
                    return Err(e);
                }
                err = ptr::null_mut();
            }
            (api.writeoptions_destroy)(wo);
            if flush {
                let fo = (api.flushoptions_create)();
                (api.flush)(db, fo, &mut err);
                (api.flushoptions_destroy)(fo);
                if let Some(e) = take_error(api, err) {
                    (api.close)(db);
                    return Err(e);
                }
            }
            (api.close)(db);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{write, Op};
    use super::*;

    fn key(l: u64, e: u64) -> Vec<u8> {
        [l.to_be_bytes(), e.to_be_bytes()].concat()
    }

    #[test]
    fn reads_what_was_written_from_sst_and_wal_with_tombstones() {
        for flush in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("locations");
            let mut puts = Vec::new();
            for l in 1..=3u64 {
                for e in 0..50u64 {
                    puts.push((
                        key(l, e),
                        ((l << 32) | (1024 + e * 100)).to_be_bytes().to_vec(),
                    ));
                }
            }
            let batch1: Vec<Op> = puts.iter().map(|(k, v)| Op::Put(k, v)).collect();
            let (start, end) = (key(2, 0), key(2, u64::MAX >> 1));
            let gone = key(3, 7);
            let batch2 = vec![Op::DeleteRange(&start, &end), Op::Delete(&gone)];
            write(&p, &[batch1, batch2], true, flush).unwrap();

            let db = Db::open_read_only(&p).unwrap();
            assert_eq!(
                db.get(&key(1, 5)).unwrap(),
                Some(((1u64 << 32) | 1524).to_be_bytes().to_vec())
            );
            assert_eq!(db.get(&key(2, 5)).unwrap(), None, "range tombstone");
            assert_eq!(db.get(&key(3, 7)).unwrap(), None, "point tombstone");
            assert_eq!(db.get(&key(9, 0)).unwrap(), None);
            // Iteration skips deleted keys; seek_for_prev finds a ledger's last entry.
            let mut it = db.iter();
            it.seek_to_first();
            let mut n = 0;
            while let Some((k, _)) = it.entry().unwrap() {
                assert_ne!(&k[0..8], &2u64.to_be_bytes());
                n += 1;
                it.next();
            }
            assert_eq!(n, 99, "flush {flush}");
            it.seek_for_prev(&key(1, u64::MAX >> 1));
            assert_eq!(it.entry().unwrap().unwrap().0, key(1, 49));
            it.seek(&key(3, 7));
            assert_eq!(it.entry().unwrap().unwrap().0, key(3, 8));
            // The directory is unchanged by the read-only open: a second open sees the same.
            drop(it);
            drop(db);
            let again = Db::open_read_only(&p).unwrap();
            assert!(again.get(&key(1, 49)).unwrap().is_some());
        }
    }

    #[test]
    fn a_missing_database_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = Db::open_read_only(&dir.path().join("nope")).err().unwrap();
        assert!(err.contains("nope"), "{err}");
    }
}
