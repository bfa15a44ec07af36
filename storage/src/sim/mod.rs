//! A deterministic simulated disk: the [`Storage`](crate::Storage) port with no kernel, which
//! keeps what was written apart from what was synced, and reorders, fails, tears and drops I/O
//! from one seed. It is the reference for what the crash tests of the journal and the entry log
//! prove, so the model is spelled out here.
//!
//! # Shape
//! A [`SimDisk`] is one device (a cheap clonable handle; single-threaded). It holds named
//! directories; [`SimDisk::storage`] gives a [`SimStorage`] view of one of them. A virtual
//! clock ([`SimDisk::now_us`]) moves only when a caller waits in `poll` or calls
//! [`SimDisk::advance`]. Everything, from latencies to faults to crash outcomes, is drawn from
//! [`SimRng`] streams forked from [`SimConfig::seed`] with fixed salts ("latency", "faults",
//! "crash", "list"), so the same seed and the same calls give the same results bit for bit,
//! and switching one fault class off does not shift the other streams.
//!
//! # Files and directories
//! - A file is an inode with two images: *volatile* (what reads and `file_len` see) and
//!   *durable* (what survives a crash), each with its own length. Completed writes and
//!   `truncate`/`allocate` are applied to the volatile image and appended, numbered, to the
//!   inode's *pending* list. `allocate` behaves like `fallocate` mode 0: it grows the size.
//! - A directory maps names to inodes, once volatile and once durable. `open(create)`,
//!   `rename` and `remove` change the volatile namespace and append to the directory's
//!   unsynced log; `sync_dir` makes the whole volatile namespace durable. Directories named in
//!   [`SimDisk::storage`] themselves always exist durably.
//!
//! # Data operations
//! - `submit` checks the O_DIRECT rules ([`check_aligned`](crate::check_aligned)): a
//!   misaligned offset or length fails at once with EINVAL and the buffer handed back. A bad
//!   `FileId` gives EBADF.
//! - Each accepted op gets a ready time: now + a latency drawn from `latency_us` (min..=max).
//!   It *completes* (takes effect) when the clock reaches that time, in (ready time, submission)
//!   order, so completion order differs from submission order. A write changes the volatile
//!   image when it completes; a read sees the volatile image when it completes.
//! - `poll(Wait::No)` returns what has completed. `poll(Wait::AtLeastOne { timeout_us })`, if
//!   nothing has completed, moves the clock to this handle's earliest ready time (or by the
//!   timeout, if that comes first) and returns what completed; with nothing in flight it
//!   returns at once.
//! - A `SyncData` records at *submission* the file's pending-list watermark and its size. When
//!   it completes successfully, exactly the pending entries below that watermark (in order)
//!   are applied to the durable image and the durable size becomes the recorded size. Writes
//!   that complete after the submission stay pending; syncs of other files do not help. An
//!   older sync completing after a newer one changes nothing.
//!
//! # Runtime faults ([`FaultConfig`], rates per operation, drawn at completion)
//! - Write: EIO or ENOSPC (nothing written); short write, `Ok(n)` with `n` a non-zero multiple
//!   of [`ALIGN`](crate::ALIGN) below the length (only writes of two or more blocks), of which
//!   only the first `n` bytes are applied.
//! - Read: EIO; short read (a non-zero multiple of `ALIGN` below what was available); one
//!   flipped bit in the returned data (a latent sector error; the disk itself is unchanged).
//! - Sync: EIO (`SyncData` and `sync_dir`). Normally a failed sync leaves everything pending,
//!   so a retry can still make it durable. `allocate` may fail with ENOSPC.
//! - *fsyncgate* (`fsyncgate: true`): a failed `SyncData` drops that file's pending writes
//!   below its watermark from everything that can become durable: reads still see them (the
//!   page cache keeps them), later syncs succeed without making them durable, and a crash
//!   never resurrects them. Writes after the failure become durable normally. This is how
//!   Linux behaved; a correct journal must stop at the first failed sync.
//!
//! # Crash ([`SimDisk::crash`])
//! - Each file's new durable image starts from its durable image. Then every pending write
//!   (completed, not covered by a completed sync) and every write still in flight, in order,
//!   is resolved with the seed as one of: lost; applied entirely; torn (a random subset of its
//!   sectors of [`SimConfig::sector_size`] applied); applied with one sector overwritten by
//!   garbage. Unsynced writes may therefore survive. Pending truncations that shrink are
//!   applied in order. The durable size becomes, at random, the old durable size or the
//!   volatile one; bytes never written read as zeros.
//! - Each directory keeps a random *prefix* (in order) of its unsynced log: creates, renames
//!   and removes since the last `sync_dir` may vanish; synced ones never do. Inodes no longer
//!   named anywhere are freed.
//! - Ops in flight are discarded (their completions never arrive). Every [`SimStorage`] made
//!   before the crash is dead: each call returns EIO, none panics. New handles from
//!   [`SimDisk::storage`] see the durable image, which is now also the volatile one.
//!
//! No sequence of calls through the public API panics.

mod disk;
mod image;
mod rng;
mod storage;

pub use rng::SimRng;
pub use storage::SimStorage;

use std::cell::RefCell;
use std::rc::Rc;

/// The configuration of one simulated device.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Seed of every random choice the disk makes.
    pub seed: u64,
    /// Granularity of torn writes at a crash: 512 or 4096 (other values are rounded to one of
    /// these).
    pub sector_size: usize,
    /// Runtime fault rates; changeable later with [`SimDisk::set_faults`].
    pub faults: FaultConfig,
    /// Latency of each data operation in virtual microseconds, drawn uniformly in min..=max.
    pub latency_us: (u64, u64),
}

impl SimConfig {
    /// No faults, 4 KiB sectors, latencies between 10 and 500 µs.
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            sector_size: 4096,
            faults: FaultConfig::none(),
            latency_us: (10, 500),
        }
    }

    pub fn with_sector_size(mut self, sector_size: usize) -> SimConfig {
        self.sector_size = sector_size;
        self
    }

    pub fn with_faults(mut self, faults: FaultConfig) -> SimConfig {
        self.faults = faults;
        self
    }

    pub fn with_latency_us(mut self, min: u64, max: u64) -> SimConfig {
        self.latency_us = (min, max);
        self
    }
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig::new(0)
    }
}

/// Probabilities (0.0..=1.0) of runtime faults, per operation of the kind named.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    pub write_eio: f64,
    pub read_eio: f64,
    /// For `SyncData` and `sync_dir`.
    pub sync_eio: f64,
    /// For writes and `allocate`.
    pub enospc: f64,
    pub short_write: f64,
    pub short_read: f64,
    pub read_bitflip: f64,
    /// A failed `SyncData` silently drops the writes it covered (see the module docs).
    pub fsyncgate: bool,
}

impl FaultConfig {
    pub fn none() -> FaultConfig {
        FaultConfig::default()
    }

    /// Every fault class at rate `p` (fsyncgate off).
    pub fn all(p: f64) -> FaultConfig {
        FaultConfig {
            write_eio: p,
            read_eio: p,
            sync_eio: p,
            enospc: p,
            short_write: p,
            short_read: p,
            read_bitflip: p,
            fsyncgate: false,
        }
    }

    pub fn with_write_eio(mut self, p: f64) -> FaultConfig {
        self.write_eio = p;
        self
    }
    pub fn with_read_eio(mut self, p: f64) -> FaultConfig {
        self.read_eio = p;
        self
    }
    pub fn with_sync_eio(mut self, p: f64) -> FaultConfig {
        self.sync_eio = p;
        self
    }
    pub fn with_enospc(mut self, p: f64) -> FaultConfig {
        self.enospc = p;
        self
    }
    pub fn with_short_write(mut self, p: f64) -> FaultConfig {
        self.short_write = p;
        self
    }
    pub fn with_short_read(mut self, p: f64) -> FaultConfig {
        self.short_read = p;
        self
    }
    pub fn with_read_bitflip(mut self, p: f64) -> FaultConfig {
        self.read_bitflip = p;
        self
    }
    pub fn with_fsyncgate(mut self, on: bool) -> FaultConfig {
        self.fsyncgate = on;
        self
    }
}

/// Counters of everything the disk did, for tests and for narrowing a failing seed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Data operations accepted by `submit`.
    pub ops: u64,
    /// Requests rejected at `submit` (misaligned, bad handle, too large).
    pub rejected: u64,
    pub writes: u64,
    pub reads: u64,
    pub syncs: u64,
    pub dir_syncs: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub write_eio: u64,
    pub read_eio: u64,
    pub sync_eio: u64,
    pub enospc: u64,
    pub short_writes: u64,
    pub short_reads: u64,
    pub bitflips: u64,
    /// Writes dropped by fsyncgate after a failed sync.
    pub fsyncgate_dropped: u64,
    pub crashes: u64,
    /// Unsynced writes resolved at crashes, by outcome.
    pub crash_lost: u64,
    pub crash_applied: u64,
    pub crash_torn: u64,
    pub crash_garbage: u64,
    /// Unsynced directory operations that vanished at crashes.
    pub crash_dir_ops_lost: u64,
    /// Contract violations that the sim tolerated (closing a file with ops in flight).
    pub misuse: u64,
    /// The most ops queued on the device at once (all handles): the depth reached.
    pub max_queued: u64,
}

/// One simulated device. Clones share the device.
#[derive(Clone)]
pub struct SimDisk {
    inner: Rc<RefCell<disk::Inner>>,
}

impl SimDisk {
    pub fn new(config: SimConfig) -> SimDisk {
        SimDisk {
            inner: Rc::new(RefCell::new(disk::Inner::new(config))),
        }
    }

    /// A [`Storage`](crate::Storage) view of directory `dir`, created if needed.
    pub fn storage(&self, dir: &str) -> SimStorage {
        let handle = self.inner.borrow_mut().new_handle(dir);
        SimStorage::new(self.clone(), dir, handle)
    }

    /// Virtual time in microseconds.
    pub fn now_us(&self) -> u64 {
        self.inner.borrow().now
    }

    /// Moves virtual time forward, completing every op that becomes ready.
    pub fn advance(&self, us: u64) {
        let mut inner = self.inner.borrow_mut();
        inner.now = inner.now.saturating_add(us);
        inner.settle();
    }

    pub fn faults(&self) -> FaultConfig {
        self.inner.borrow().config.faults
    }

    pub fn set_faults(&self, faults: FaultConfig) {
        self.inner.borrow_mut().config.faults = faults;
    }

    /// Power loss: resolves every unsynced state by the crash model (module docs) and kills
    /// every existing [`SimStorage`].
    pub fn crash(&self) {
        self.inner.borrow_mut().crash();
    }

    pub fn stats(&self) -> SimStats {
        self.inner.borrow().stats.clone()
    }

    /// Contents of `dir/name` as it would be after a crash with nothing pending (the durable
    /// namespace and durable image), or `None` if the name is not durable.
    pub fn durable_file(&self, dir: &str, name: &str) -> Option<Vec<u8>> {
        self.inner.borrow().file(dir, name, true)
    }

    /// Contents of `dir/name` as reads see it now.
    pub fn volatile_file(&self, dir: &str, name: &str) -> Option<Vec<u8>> {
        self.inner.borrow().file(dir, name, false)
    }

    /// Durable names in `dir`, sorted.
    pub fn durable_names(&self, dir: &str) -> Vec<String> {
        self.inner.borrow().names(dir, true)
    }

    /// Volatile names in `dir`, sorted.
    pub fn volatile_names(&self, dir: &str) -> Vec<String> {
        self.inner.borrow().names(dir, false)
    }
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("SimDisk")
            .field("now_us", &inner.now)
            .field("config", &inner.config)
            .field("stats", &inner.stats)
            .finish()
    }
}
