//! Blocking I/O over the storage port for the flush and reader threads: submit and wait, with a
//! bounded pipeline of large aligned writes ([`ChunkWriter`]) so a flush never has more than
//! `max_writes_in_flight` writes queued on the device the journal shares.
//!
//! The ideas are those of `journal/src/io.rs`; the code is separate because `entrylog` must not
//! depend on `journal`.

use storage::{align_down, align_up, AlignedBuf, Completion, FileId, IoError, Op, Storage, Wait};

/// Token of single blocking operations.
const BLOCKING_TOKEN: u64 = u64::MAX;

/// Submits `op` and waits for its completion. Nothing else may be in flight on `storage`.
pub(crate) fn exec<S: Storage>(
    storage: &mut S,
    op: Op,
) -> Result<(usize, Option<AlignedBuf>), IoError> {
    storage.submit(BLOCKING_TOKEN, op).map_err(|(e, _)| e)?;
    let mut out: Vec<Completion> = Vec::with_capacity(2);
    loop {
        storage.poll(&mut out, Wait::AtLeastOne { timeout_us: None })?;
        if let Some(i) = out.iter().position(|c| c.token == BLOCKING_TOKEN) {
            let c = out.swap_remove(i);
            return c.result.map(|n| (n, c.buf));
        }
        if storage.in_flight() == 0 && out.is_empty() {
            return Err(IoError::EIO);
        }
    }
}

/// Syncs a file's data (and size) and waits.
pub(crate) fn sync_data<S: Storage>(storage: &mut S, file: FileId) -> Result<(), IoError> {
    exec(storage, Op::SyncData { file }).map(|_| ())
}

/// The O_DIRECT read covering bytes `[offset, offset + len)` of a file: aligned start and
/// length, and `skip`, where the range starts in the buffer it fills.
pub(crate) fn aligned_read(file: FileId, offset: u64, len: usize) -> (Op, usize) {
    let start = align_down(offset as usize) as u64;
    let skip = (offset - start) as usize;
    let op = Op::Read {
        file,
        offset: start,
        buf: AlignedBuf::zeroed(align_up((skip + len).max(1))),
    };
    (op, skip)
}

/// Reads bytes `[offset, offset + len)` of a file, whatever their alignment, into a buffer
/// whose slice `[skip..skip + len]` is the requested range (`skip` is returned). Short reads
/// are continued; a read that returns nothing before `len` is satisfied is `Ok(None)` (the
/// file is shorter than the caller believed: corruption, reported by the caller).
pub(crate) fn read_range<S: Storage>(
    storage: &mut S,
    file: FileId,
    offset: u64,
    len: usize,
) -> Result<Option<(AlignedBuf, usize)>, IoError> {
    let (op, skip) = aligned_read(file, offset, len);
    let start = offset - skip as u64;
    let want = skip + len;
    let total = align_up(want.max(1));
    let (n, back) = exec(storage, op)?;
    let first = back.ok_or(IoError::EIO)?;
    if n >= want {
        return Ok(Some((first, skip)));
    }
    // Short read (a fault, or the end of the file): continue from the last whole block.
    let mut whole = AlignedBuf::zeroed(total);
    whole.as_mut_capacity()[..n].copy_from_slice(&first[..n]);
    let mut filled = n;
    let mut last = n;
    for _ in 0..64 {
        if last == 0 {
            return Ok(None);
        }
        let have = align_down(filled);
        let (got, back) = exec(
            storage,
            Op::Read {
                file,
                offset: start + have as u64,
                buf: AlignedBuf::zeroed(total - have),
            },
        )?;
        let back = back.ok_or(IoError::EIO)?;
        whole.as_mut_capacity()[have..have + got].copy_from_slice(&back[..got]);
        filled = have + got;
        last = got;
        if filled >= want {
            whole.set_len(filled);
            return Ok(Some((whole, skip)));
        }
    }
    Ok(None)
}

/// A sequential writer of one file in large aligned chunks with a bounded number of writes in
/// flight. Bytes are copied into the current chunk; a full chunk is submitted; when
/// `max_in_flight` writes are outstanding the writer waits for one. [`ChunkWriter::finish`]
/// zero-pads to a block boundary and waits for everything.
pub(crate) struct ChunkWriter {
    file: FileId,
    /// File offset of `cur[0]`.
    base: u64,
    cur: AlignedBuf,
    free: Vec<AlignedBuf>,
    chunk: usize,
    max_in_flight: usize,
    /// (token, expected length) of writes in flight.
    pending: Vec<(u64, usize)>,
    next_token: u64,
    out: Vec<Completion>,
    /// Bytes submitted, for stats.
    pub(crate) bytes_written: u64,
}

impl ChunkWriter {
    /// A writer at `offset` (block-aligned).
    pub(crate) fn new(file: FileId, offset: u64, chunk: usize, max_in_flight: usize) -> Self {
        debug_assert_eq!(offset % storage::ALIGN as u64, 0);
        let chunk = align_up(chunk.max(storage::ALIGN));
        let mut cur = AlignedBuf::new(chunk);
        cur.set_len(0);
        ChunkWriter {
            file,
            base: offset,
            cur,
            free: Vec::new(),
            chunk,
            max_in_flight: max_in_flight.max(1),
            pending: Vec::new(),
            next_token: 0,
            out: Vec::new(),
            bytes_written: 0,
        }
    }

    /// The file offset the next byte goes to.
    pub(crate) fn pos(&self) -> u64 {
        self.base + self.cur.len() as u64
    }

    /// Appends `bytes`.
    pub(crate) fn write<S: Storage>(
        &mut self,
        storage: &mut S,
        mut bytes: &[u8],
    ) -> Result<(), IoError> {
        while !bytes.is_empty() {
            let at = self.cur.len();
            let n = (self.chunk - at).min(bytes.len());
            self.cur.as_mut_capacity()[at..at + n].copy_from_slice(&bytes[..n]);
            self.cur.set_len(at + n);
            bytes = &bytes[n..];
            if self.cur.len() == self.chunk {
                self.submit_current(storage)?;
            }
        }
        Ok(())
    }

    /// Appends `n` zero bytes.
    pub(crate) fn zeros<S: Storage>(
        &mut self,
        storage: &mut S,
        mut n: usize,
    ) -> Result<(), IoError> {
        const Z: [u8; 256] = [0; 256];
        while n > 0 {
            let k = n.min(Z.len());
            self.write(storage, &Z[..k])?;
            n -= k;
        }
        Ok(())
    }

    /// Zero-pads to a multiple of `to` (a power of two).
    pub(crate) fn pad_to<S: Storage>(&mut self, storage: &mut S, to: u64) -> Result<(), IoError> {
        let pos = self.pos();
        let pad = (crate::format::round_up(pos, to) - pos) as usize;
        self.zeros(storage, pad)
    }

    fn submit_current<S: Storage>(&mut self, storage: &mut S) -> Result<(), IoError> {
        while self.pending.len() >= self.max_in_flight {
            self.reap(storage)?;
        }
        let len = self.cur.len();
        let next = match self.free.pop() {
            Some(b) => b,
            None => AlignedBuf::new(self.chunk),
        };
        let mut buf = std::mem::replace(&mut self.cur, next);
        self.cur.set_len(0);
        buf.set_len(len);
        let token = self.next_token;
        self.next_token += 1;
        let offset = self.base;
        self.base += len as u64;
        storage
            .submit(
                token,
                Op::Write {
                    file: self.file,
                    offset,
                    buf,
                },
            )
            .map_err(|(e, _)| e)?;
        self.pending.push((token, len));
        self.bytes_written += len as u64;
        Ok(())
    }

    /// Waits for at least one write in flight to complete.
    fn reap<S: Storage>(&mut self, storage: &mut S) -> Result<(), IoError> {
        storage.poll(&mut self.out, Wait::AtLeastOne { timeout_us: None })?;
        if self.out.is_empty() && storage.in_flight() == 0 {
            return Err(IoError::EIO);
        }
        let mut result = Ok(());
        for c in self.out.drain(..) {
            let Some(i) = self.pending.iter().position(|(t, _)| *t == c.token) else {
                continue;
            };
            let (_, want) = self.pending.swap_remove(i);
            match c.result {
                Ok(n) if n == want => {}
                Ok(_) => result = Err(IoError::EIO),
                Err(e) => result = Err(e),
            }
            if let Some(b) = c.buf {
                if self.free.len() < self.max_in_flight {
                    self.free.push(b);
                }
            }
        }
        result
    }

    /// Pads to a block boundary, submits the rest, and waits for every write. Returns the
    /// end offset. On error, waits for what is still in flight before returning it (a file
    /// must not be closed with operations in flight).
    pub(crate) fn finish<S: Storage>(&mut self, storage: &mut S) -> Result<u64, IoError> {
        let r = self.finish_inner(storage);
        if r.is_err() {
            self.drain(storage);
        }
        r
    }

    fn finish_inner<S: Storage>(&mut self, storage: &mut S) -> Result<u64, IoError> {
        self.pad_to(storage, storage::ALIGN as u64)?;
        if !self.cur.is_empty() {
            self.submit_current(storage)?;
        }
        while !self.pending.is_empty() {
            self.reap(storage)?;
        }
        Ok(self.base)
    }

    /// Waits for every write in flight (so blocking reads can use the same storage).
    pub(crate) fn wait_all<S: Storage>(&mut self, storage: &mut S) -> Result<(), IoError> {
        while !self.pending.is_empty() {
            self.reap(storage)?;
        }
        Ok(())
    }

    /// Waits for writes still in flight, ignoring their results (after an error).
    pub(crate) fn drain<S: Storage>(&mut self, storage: &mut S) {
        let mut spins = 0;
        while !self.pending.is_empty() && spins < 1_000_000 {
            spins += 1;
            if self.reap(storage).is_err() && storage.in_flight() == 0 {
                // Nothing left to wait for (a dead handle after a crash, or all reaped).
                self.pending.clear();
            }
        }
    }
}

/// A sequential reader with a sliding window, for scans and merges.
pub(crate) struct SeqReader {
    file: FileId,
    /// Bytes of the file that may be read (the logical length).
    len: u64,
    window: Vec<u8>,
    window_start: u64,
    chunk: usize,
}

impl SeqReader {
    pub(crate) fn new(file: FileId, len: u64, chunk: usize) -> SeqReader {
        SeqReader {
            file,
            len,
            window: Vec::new(),
            window_start: 0,
            chunk: align_up(chunk.max(storage::ALIGN)),
        }
    }

    /// True when `[pos, pos + need)` (clipped to the logical end) is in the window: `bytes`
    /// will not do I/O.
    pub(crate) fn has(&self, pos: u64, need: usize) -> bool {
        let want_end = pos.saturating_add(need as u64).min(self.len);
        pos >= self.window_start && want_end <= self.window_start + self.window.len() as u64
    }

    /// Up to `need` bytes at `pos`; fewer only at the logical end; `Ok(None)` if the file is
    /// physically shorter than the logical length says.
    pub(crate) fn bytes<S: Storage>(
        &mut self,
        storage: &mut S,
        pos: u64,
        need: usize,
    ) -> Result<Option<&[u8]>, IoError> {
        let want_end = pos.saturating_add(need as u64).min(self.len);
        let window_end = self.window_start + self.window.len() as u64;
        if pos < self.window_start || pos > window_end {
            self.window.clear();
            self.window_start = align_down(pos as usize) as u64;
        } else if pos - self.window_start >= self.chunk as u64 {
            let drop = align_down((pos - self.window_start) as usize);
            self.window.drain(..drop);
            self.window_start += drop as u64;
        }
        while self.window_start + (self.window.len() as u64) < want_end {
            let offset = self.window_start + self.window.len() as u64;
            let left = (self.len - offset) as usize;
            let n = self.chunk.min(align_up(left));
            match read_range(storage, self.file, offset, n.min(left))? {
                Some((buf, skip)) => {
                    let avail = (buf.len() - skip).min(left);
                    self.window.extend_from_slice(&buf[skip..skip + avail]);
                }
                None => return Ok(None),
            }
        }
        let from = (pos.min(want_end) - self.window_start) as usize;
        let to = (want_end - self.window_start) as usize;
        Ok(Some(&self.window[from..to]))
    }
}
