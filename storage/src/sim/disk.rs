//! The device model behind [`SimDisk`](super::SimDisk): inodes, directories, the queue of ops
//! in flight, the virtual clock, runtime faults and the crash.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::image::Image;
use super::{SimConfig, SimRng, SimStats};
use crate::{AlignedBuf, Completion, IoError, ALIGN};

pub(crate) type Ino = u64;

/// A change to a file's volatile image that is not yet durable, numbered by `seq`.
#[derive(Debug)]
enum Change {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Inode {
    volatile: Image,
    durable: Image,
    /// Changes not yet durable, in `seq` order.
    pending: Vec<(u64, Change)>,
    /// Sequence number of the next change.
    next_seq: u64,
    /// Every change below this is durable (or was dropped by fsyncgate).
    durable_upto: u64,
}

impl Inode {
    fn change(&mut self, change: Change) {
        match &change {
            Change::Write { offset, data } => self.volatile.write(*offset, data),
            Change::SetLen(len) => self.volatile.set_len(*len),
        }
        self.pending.push((self.next_seq, change));
        self.next_seq += 1;
    }

    /// A successful sync submitted at watermark `upto` when the size was `len`.
    fn sync(&mut self, upto: u64, len: u64) {
        if upto <= self.durable_upto {
            return; // a newer sync already completed
        }
        let split = self.pending.partition_point(|(seq, _)| *seq < upto);
        for (_, change) in self.pending.drain(..split) {
            match change {
                Change::Write { offset, data } => self.durable.write(offset, &data),
                Change::SetLen(len) => self.durable.set_len(len),
            }
        }
        self.durable.set_len(len);
        self.durable_upto = upto;
    }

    /// fsyncgate: a failed sync at watermark `upto` loses the writes it covered.
    fn gate(&mut self, upto: u64) -> u64 {
        let before = self.pending.len();
        self.pending
            .retain(|(seq, c)| *seq >= upto || !matches!(c, Change::Write { .. }));
        (before - self.pending.len()) as u64
    }
}

#[derive(Debug)]
enum DirOp {
    Create { name: String, ino: Ino },
    Rename { from: String, to: String },
    Remove { name: String },
}

impl DirOp {
    fn apply(&self, names: &mut BTreeMap<String, Ino>) {
        match self {
            DirOp::Create { name, ino } => {
                names.insert(name.clone(), *ino);
            }
            DirOp::Rename { from, to } => {
                if let Some(ino) = names.remove(from) {
                    names.insert(to.clone(), ino);
                }
            }
            DirOp::Remove { name } => {
                names.remove(name);
            }
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Dir {
    volatile: BTreeMap<String, Ino>,
    durable: BTreeMap<String, Ino>,
    log: Vec<DirOp>,
}

#[derive(Debug)]
pub(crate) enum OpKind {
    Write {
        ino: Ino,
        offset: u64,
        buf: AlignedBuf,
    },
    Read {
        ino: Ino,
        offset: u64,
        buf: AlignedBuf,
    },
    Sync {
        ino: Ino,
        upto: u64,
        len: u64,
    },
    /// A directory sync, applied when submitted (earlier durability is never wrong); the
    /// completion carries its result at the op's ready time.
    SyncDir {
        result: Result<usize, IoError>,
    },
}

#[derive(Debug)]
struct InFlight {
    handle: u64,
    token: u64,
    kind: OpKind,
}

pub(crate) struct Inner {
    pub(crate) config: SimConfig,
    pub(crate) now: u64,
    /// Incremented by each crash; handles from an older epoch are dead.
    pub(crate) epoch: u64,
    pub(crate) stats: SimStats,
    latency_rng: SimRng,
    fault_rng: SimRng,
    crash_rng: SimRng,
    list_rng: SimRng,
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    dirs: BTreeMap<String, Dir>,
    /// Ops in flight keyed by (ready time, submission number).
    queue: BTreeMap<(u64, u64), InFlight>,
    next_op: u64,
    /// Completed ops per live handle, not yet polled.
    done: BTreeMap<u64, VecDeque<Completion>>,
    next_handle: u64,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// Largest offset + length the sim accepts (like a file system's maximum file size).
const MAX_FILE_SIZE: u64 = 1 << 44;

impl Inner {
    pub(crate) fn new(mut config: SimConfig) -> Inner {
        config.sector_size = if config.sector_size <= 512 { 512 } else { 4096 };
        let root = SimRng::new(config.seed);
        Inner {
            latency_rng: root.fork("latency"),
            fault_rng: root.fork("faults"),
            crash_rng: root.fork("crash"),
            list_rng: root.fork("list"),
            config,
            now: 0,
            epoch: 0,
            stats: SimStats::default(),
            inodes: BTreeMap::new(),
            next_ino: 1,
            dirs: BTreeMap::new(),
            queue: BTreeMap::new(),
            next_op: 0,
            done: BTreeMap::new(),
            next_handle: 1,
        }
    }

    pub(crate) fn new_handle(&mut self, dir: &str) -> u64 {
        self.dirs.entry(dir.to_string()).or_default();
        let handle = self.next_handle;
        self.next_handle += 1;
        self.done.insert(handle, VecDeque::new());
        handle
    }

    pub(crate) fn drop_handle(&mut self, handle: u64) {
        self.done.remove(&handle);
    }

    fn dir(&mut self, dir: &str) -> Result<&mut Dir, IoError> {
        self.dirs.get_mut(dir).ok_or(IoError::ENOENT)
    }

    // ---- namespace -------------------------------------------------------------------------

    pub(crate) fn list(&mut self, dir: &str) -> Result<Vec<String>, IoError> {
        let mut names: Vec<String> = self.dir(dir)?.volatile.keys().cloned().collect();
        // No particular order, on purpose: a caller relying on one is caught.
        for i in (1..names.len()).rev() {
            let j = self.list_rng.below(i as u64 + 1) as usize;
            names.swap(i, j);
        }
        Ok(names)
    }

    pub(crate) fn open(&mut self, dir: &str, name: &str, create: bool) -> Result<Ino, IoError> {
        if !valid_name(name) {
            return Err(IoError::EINVAL);
        }
        let next_ino = self.next_ino;
        let d = self.dir(dir)?;
        if let Some(&ino) = d.volatile.get(name) {
            return Ok(ino);
        }
        if !create {
            return Err(IoError::ENOENT);
        }
        d.volatile.insert(name.to_string(), next_ino);
        d.log.push(DirOp::Create {
            name: name.to_string(),
            ino: next_ino,
        });
        self.inodes.insert(next_ino, Inode::default());
        self.next_ino += 1;
        Ok(next_ino)
    }

    pub(crate) fn rename(&mut self, dir: &str, from: &str, to: &str) -> Result<(), IoError> {
        if !valid_name(from) || !valid_name(to) {
            return Err(IoError::EINVAL);
        }
        let d = self.dir(dir)?;
        let ino = *d.volatile.get(from).ok_or(IoError::ENOENT)?;
        if from == to {
            return Ok(());
        }
        d.volatile.remove(from);
        d.volatile.insert(to.to_string(), ino);
        d.log.push(DirOp::Rename {
            from: from.to_string(),
            to: to.to_string(),
        });
        Ok(())
    }

    pub(crate) fn remove(&mut self, dir: &str, name: &str) -> Result<(), IoError> {
        if !valid_name(name) {
            return Err(IoError::EINVAL);
        }
        let d = self.dir(dir)?;
        d.volatile.remove(name).ok_or(IoError::ENOENT)?;
        d.log.push(DirOp::Remove {
            name: name.to_string(),
        });
        Ok(())
    }

    pub(crate) fn sync_dir(&mut self, dir: &str) -> Result<(), IoError> {
        self.dir(dir)?;
        self.stats.dir_syncs += 1;
        if self.fault_rng.chance(self.config.faults.sync_eio) {
            self.stats.sync_eio += 1;
            return Err(IoError::EIO);
        }
        let d = self.dir(dir)?;
        for op in d.log.drain(..) {
            op.apply(&mut d.durable);
        }
        debug_assert_eq!(d.durable, d.volatile);
        Ok(())
    }

    // ---- file metadata ---------------------------------------------------------------------

    fn inode(&mut self, ino: Ino) -> Result<&mut Inode, IoError> {
        self.inodes.get_mut(&ino).ok_or(IoError::EBADF)
    }

    pub(crate) fn file_len(&mut self, ino: Ino) -> Result<u64, IoError> {
        Ok(self.inode(ino)?.volatile.len())
    }

    pub(crate) fn truncate(&mut self, ino: Ino, len: u64) -> Result<(), IoError> {
        if len > MAX_FILE_SIZE {
            return Err(IoError { errno: libc::EFBIG });
        }
        self.inode(ino)?.change(Change::SetLen(len));
        Ok(())
    }

    pub(crate) fn allocate(&mut self, ino: Ino, offset: u64, len: u64) -> Result<(), IoError> {
        let end = offset.checked_add(len).ok_or(IoError::EINVAL)?;
        if end > MAX_FILE_SIZE {
            return Err(IoError { errno: libc::EFBIG });
        }
        self.inode(ino)?;
        if self.fault_rng.chance(self.config.faults.enospc) {
            self.stats.enospc += 1;
            return Err(IoError::ENOSPC);
        }
        let inode = self.inode(ino)?;
        if end > inode.volatile.len() {
            inode.change(Change::SetLen(end));
        }
        Ok(())
    }

    // ---- data path -------------------------------------------------------------------------

    /// Queues an op; the caller has checked the handle and alignment.
    pub(crate) fn submit(
        &mut self,
        handle: u64,
        token: u64,
        kind: OpKind,
    ) -> Result<(), (IoError, Option<AlignedBuf>)> {
        let kind = match kind {
            OpKind::Sync { ino, .. } => match self.inodes.get(&ino) {
                Some(inode) => OpKind::Sync {
                    ino,
                    upto: inode.next_seq,
                    len: inode.volatile.len(),
                },
                None => return Err((IoError::EBADF, None)),
            },
            OpKind::Write { offset, buf, .. } | OpKind::Read { offset, buf, .. }
                if offset
                    .checked_add(buf.len() as u64)
                    .is_none_or(|e| e > MAX_FILE_SIZE) =>
            {
                self.stats.rejected += 1;
                return Err((IoError { errno: libc::EFBIG }, Some(buf)));
            }
            other => other,
        };
        let (min, max) = self.config.latency_us;
        let latency = self
            .latency_rng
            .range(min.min(max), max.max(min).saturating_add(1));
        let ready = self.now.saturating_add(latency);
        let seq = self.next_op;
        self.next_op += 1;
        self.stats.ops += 1;
        self.queue.insert(
            (ready, seq),
            InFlight {
                handle,
                token,
                kind,
            },
        );
        self.stats.max_queued = self.stats.max_queued.max(self.queue.len() as u64);
        Ok(())
    }

    /// Completes every op whose ready time has come, in (ready time, submission) order.
    pub(crate) fn settle(&mut self) {
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let op = entry.remove();
            let completion = self.complete(op.token, op.kind);
            if let Some(done) = self.done.get_mut(&op.handle) {
                done.push_back(completion);
            }
        }
    }

    /// Ops of `handle` in flight or completed and not yet polled.
    pub(crate) fn in_flight(&self, handle: u64) -> usize {
        let queued = self.queue.values().filter(|op| op.handle == handle).count();
        queued + self.done.get(&handle).map_or(0, VecDeque::len)
    }

    pub(crate) fn earliest_ready(&self, handle: u64) -> Option<u64> {
        self.queue
            .iter()
            .find(|(_, op)| op.handle == handle)
            .map(|(&(ready, _), _)| ready)
    }

    pub(crate) fn take_done(&mut self, handle: u64, out: &mut Vec<Completion>) -> usize {
        let done = self.done.entry(handle).or_default();
        let n = done.len();
        out.extend(done.drain(..));
        n
    }

    /// Whether `handle` has an op on `ino` in flight.
    pub(crate) fn busy(&self, handle: u64, ino: Ino) -> bool {
        self.queue.values().any(|op| {
            op.handle == handle
                && match op.kind {
                    OpKind::Write { ino: i, .. }
                    | OpKind::Read { ino: i, .. }
                    | OpKind::Sync { ino: i, .. } => i == ino,
                    OpKind::SyncDir { .. } => false,
                }
        })
    }

    pub(crate) fn has_done(&self, handle: u64) -> bool {
        self.done.get(&handle).is_some_and(|d| !d.is_empty())
    }

    fn complete(&mut self, token: u64, kind: OpKind) -> Completion {
        let faults = self.config.faults;
        let rng = &mut self.fault_rng;
        let stats = &mut self.stats;
        match kind {
            OpKind::Write { ino, offset, buf } => {
                stats.writes += 1;
                let (eio, enospc, short) = (
                    rng.chance(faults.write_eio),
                    rng.chance(faults.enospc),
                    rng.chance(faults.short_write),
                );
                let len = buf.len();
                let result = if eio {
                    stats.write_eio += 1;
                    Err(IoError::EIO)
                } else if enospc {
                    stats.enospc += 1;
                    Err(IoError::ENOSPC)
                } else {
                    let mut n = len;
                    if short && len >= 2 * ALIGN {
                        n = ALIGN * rng.range(1, (len / ALIGN) as u64) as usize;
                        stats.short_writes += 1;
                    }
                    match self.inodes.get_mut(&ino) {
                        Some(inode) => {
                            if n > 0 {
                                inode.change(Change::Write {
                                    offset,
                                    data: buf[..n].to_vec(),
                                });
                            }
                            stats.bytes_written += n as u64;
                            Ok(n)
                        }
                        None => Err(IoError::EBADF),
                    }
                };
                Completion {
                    token,
                    result,
                    buf: Some(buf),
                }
            }
            OpKind::Read {
                ino,
                offset,
                mut buf,
            } => {
                stats.reads += 1;
                let (eio, short, flip) = (
                    rng.chance(faults.read_eio),
                    rng.chance(faults.short_read),
                    rng.chance(faults.read_bitflip),
                );
                let result = match self.inodes.get(&ino) {
                    None => Err(IoError::EBADF),
                    Some(_) if eio => {
                        stats.read_eio += 1;
                        Err(IoError::EIO)
                    }
                    Some(inode) => {
                        let len = buf.len();
                        let mut n = inode.volatile.read(offset, &mut buf[..len]);
                        if short && n > ALIGN {
                            n = ALIGN * rng.range(1, n.div_ceil(ALIGN) as u64) as usize;
                            stats.short_reads += 1;
                        }
                        if flip && n > 0 {
                            let bit = rng.below(n as u64 * 8);
                            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
                            stats.bitflips += 1;
                        }
                        buf.set_len(n);
                        stats.bytes_read += n as u64;
                        Ok(n)
                    }
                };
                Completion {
                    token,
                    result,
                    buf: Some(buf),
                }
            }
            OpKind::SyncDir { result } => Completion {
                token,
                result,
                buf: None,
            },
            OpKind::Sync { ino, upto, len } => {
                stats.syncs += 1;
                let eio = rng.chance(faults.sync_eio);
                let result = match self.inodes.get_mut(&ino) {
                    None => Err(IoError::EBADF),
                    Some(inode) if eio => {
                        stats.sync_eio += 1;
                        if faults.fsyncgate {
                            stats.fsyncgate_dropped += inode.gate(upto);
                        }
                        Err(IoError::EIO)
                    }
                    Some(inode) => {
                        inode.sync(upto, len);
                        Ok(0)
                    }
                };
                Completion {
                    token,
                    result,
                    buf: None,
                }
            }
        }
    }

    // ---- crash -----------------------------------------------------------------------------

    pub(crate) fn crash(&mut self) {
        self.stats.crashes += 1;
        self.epoch += 1;
        self.done.clear();
        let rng = &mut self.crash_rng;

        // Directories: a random prefix of each unsynced log survives.
        for d in self.dirs.values_mut() {
            let keep = rng.below(d.log.len() as u64 + 1) as usize;
            self.stats.crash_dir_ops_lost += (d.log.len() - keep) as u64;
            for op in &d.log[..keep] {
                op.apply(&mut d.durable);
            }
            d.log.clear();
            d.volatile = d.durable.clone();
        }
        let live: BTreeSet<Ino> = self
            .dirs
            .values()
            .flat_map(|d| d.durable.values().copied())
            .collect();
        self.inodes.retain(|ino, _| live.contains(ino));

        // Writes still in flight, per inode, in submission order.
        let mut in_flight: BTreeMap<Ino, Vec<(u64, u64, AlignedBuf)>> = BTreeMap::new();
        for ((_, seq), op) in std::mem::take(&mut self.queue) {
            if let OpKind::Write { ino, offset, buf } = op.kind {
                in_flight.entry(ino).or_default().push((seq, offset, buf));
            }
        }
        for writes in in_flight.values_mut() {
            writes.sort_by_key(|w| w.0);
        }

        let sector = self.config.sector_size;
        for (ino, inode) in &mut self.inodes {
            let mut image = inode.durable.clone();
            for (_, change) in inode.pending.drain(..) {
                match change {
                    Change::Write { offset, data } => {
                        resolve_write(rng, &mut self.stats, sector, &mut image, offset, &data)
                    }
                    Change::SetLen(len) => {
                        if len < image.len() {
                            image.set_len(len);
                        }
                    }
                }
            }
            for (_, offset, buf) in in_flight.remove(ino).unwrap_or_default() {
                resolve_write(rng, &mut self.stats, sector, &mut image, offset, &buf);
            }
            let len = if rng.chance(0.5) {
                inode.durable.len()
            } else {
                inode.volatile.len()
            };
            image.set_len(len);
            inode.volatile = image.clone();
            inode.durable = image;
            inode.durable_upto = inode.next_seq;
        }
    }

    // ---- diagnostics -----------------------------------------------------------------------

    pub(crate) fn file(&self, dir: &str, name: &str, durable: bool) -> Option<Vec<u8>> {
        let d = self.dirs.get(dir)?;
        let names = if durable { &d.durable } else { &d.volatile };
        let inode = self.inodes.get(names.get(name)?)?;
        Some(
            if durable {
                &inode.durable
            } else {
                &inode.volatile
            }
            .to_vec(),
        )
    }

    pub(crate) fn names(&self, dir: &str, durable: bool) -> Vec<String> {
        self.dirs.get(dir).map_or_else(Vec::new, |d| {
            let names = if durable { &d.durable } else { &d.volatile };
            names.keys().cloned().collect()
        })
    }
}

/// Decides what of one unsynced write reaches the platter at a crash.
fn resolve_write(
    rng: &mut SimRng,
    stats: &mut SimStats,
    sector: usize,
    image: &mut Image,
    offset: u64,
    data: &[u8],
) {
    if data.is_empty() {
        return;
    }
    match rng.below(4) {
        0 => stats.crash_lost += 1,
        1 => {
            image.write(offset, data);
            stats.crash_applied += 1;
        }
        2 => {
            for (i, chunk) in data.chunks(sector).enumerate() {
                if rng.chance(0.5) {
                    image.write(offset + (i * sector) as u64, chunk);
                }
            }
            stats.crash_torn += 1;
        }
        _ => {
            image.write(offset, data);
            let sectors = data.len().div_ceil(sector) as u64;
            let at = rng.below(sectors) as usize * sector;
            let mut garbage = vec![0u8; sector.min(data.len() - at)];
            rng.fill(&mut garbage);
            image.write(offset + at as u64, &garbage);
            stats.crash_garbage += 1;
        }
    }
}
