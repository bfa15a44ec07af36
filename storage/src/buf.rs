//! `AlignedBuf`: an owned, sector-aligned, heap buffer.
//!
//! O_DIRECT needs the buffer address, the file offset and the length aligned to the device's
//! logical block size; io_uring needs the buffer to stay put until the kernel is done with it.
//! Both are met by a buffer that is allocated with [`ALIGN`] alignment and *moved* into the
//! driver with each operation and handed back in its completion (the "rent" model of monoio and
//! tokio-uring): a dropped future can never leave the kernel writing into freed memory, because
//! there are no futures here, only owned values.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Alignment of every buffer, and the unit of every O_DIRECT offset and length we issue.
/// 4096 covers both 512-byte and 4 KiB logical block sizes.
pub const ALIGN: usize = 4096;

/// Rounds `n` up to a multiple of [`ALIGN`].
pub const fn align_up(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// Rounds `n` down to a multiple of [`ALIGN`].
pub const fn align_down(n: usize) -> usize {
    n & !(ALIGN - 1)
}

/// An owned buffer whose start is [`ALIGN`]-aligned and whose capacity is a multiple of
/// [`ALIGN`]. `len` (at most the capacity) is how many bytes an operation writes, or how many a
/// read filled. New buffers are zeroed.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    capacity: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of at least `capacity` bytes (rounded up to [`ALIGN`], at least one
    /// sector), with `len == 0`.
    pub fn new(capacity: usize) -> AlignedBuf {
        let capacity = align_up(capacity.max(1));
        let layout = Layout::from_size_align(capacity, ALIGN).expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            capacity,
            len: 0,
        }
    }

    /// A zeroed buffer with `len == capacity`.
    pub fn zeroed(capacity: usize) -> AlignedBuf {
        let mut buf = AlignedBuf::new(capacity);
        buf.len = buf.capacity;
        buf
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the length. Panics when `len` exceeds the capacity: that is a programming error.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity, "AlignedBuf::set_len beyond capacity");
        self.len = len;
    }

    /// The whole capacity, regardless of `len`, for filling in place.
    pub fn as_mut_capacity(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for `capacity` initialised (zeroed at allocation) bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Raw pointer for drivers that hand the memory to the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for `len <= capacity` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.capacity, ALIGN).expect("buffer layout");
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer is aligned, zeroed, rounded up to a sector, and its length is bounded.
    #[test]
    fn aligned_zeroed_and_rounded() {
        let mut buf = AlignedBuf::new(10);
        assert_eq!(buf.capacity(), ALIGN);
        assert_eq!(buf.as_ptr() as usize % ALIGN, 0);
        assert!(buf.as_mut_capacity().iter().all(|&b| b == 0));
        buf.set_len(7);
        buf[..7].copy_from_slice(b"journal");
        assert_eq!(&buf[..], b"journal");
        assert_eq!(align_up(4097), 8192);
        assert_eq!(align_down(4097), 4096);
    }

    #[test]
    #[should_panic]
    fn set_len_beyond_capacity_panics() {
        AlignedBuf::new(ALIGN).set_len(ALIGN + 1);
    }
}
