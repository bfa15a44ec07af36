//! Framing: the 4-byte big-endian length prefix shared by both protocols and both
//! directions (docs/protocol.md §1.2).
//!
//! Reading is two passes in the mini-redis style. [`check_frame`] looks only at the
//! prefix and says whether a whole frame is buffered; it never allocates and never
//! trusts the claimed length for anything but a comparison with the limit, so a
//! hostile prefix cannot make us reserve memory. [`split_frame`] then cuts the body
//! out of the receive buffer with `BytesMut::split_to(..).freeze()`, so every later
//! slice (an entry body, a master key) shares the receive allocation.
//!
//! The limit follows Netty's `LengthFieldBasedFrameDecoder` as configured by
//! BookKeeper: the prefix counts only the body, and `length + 4` is compared with
//! `nettyMaxFrameSizeBytes` (default 5 MiB).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, ProtocolError};

/// The default maximum frame size, prefix included (`nettyMaxFrameSizeBytes`).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 5 * 1024 * 1024;

/// Size of the length prefix.
pub const LENGTH_PREFIX_SIZE: usize = 4;

/// Looks at the start of `buf` and returns the size of the first frame (prefix
/// included) if all of it is buffered, `None` if more bytes are needed.
///
/// Errors when the prefix is negative or claims more than `max_frame_size`; the
/// connection must then be closed (that is what Netty's decoder does for Java).
pub fn check_frame(buf: &[u8], max_frame_size: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(prefix) = buf.get(..LENGTH_PREFIX_SIZE) else {
        return Ok(None);
    };
    let length = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if length < 0 {
        return Err(ProtocolError::NegativeFrameLength(length));
    }
    let frame_size = length as usize + LENGTH_PREFIX_SIZE;
    if frame_size > max_frame_size {
        return Err(ProtocolError::FrameTooLarge {
            length: length as u32,
            max_frame_size,
        });
    }
    if buf.len() < frame_size {
        return Ok(None);
    }
    Ok(Some(frame_size))
}

/// Removes the first whole frame from `buf` and returns its body (without the
/// prefix) as a slice of the receive buffer. `None` if the frame is not complete.
pub fn split_frame(
    buf: &mut BytesMut,
    max_frame_size: usize,
) -> Result<Option<Bytes>, ProtocolError> {
    let Some(frame_size) = check_frame(buf, max_frame_size)? else {
        return Ok(None);
    };
    buf.advance(LENGTH_PREFIX_SIZE);
    Ok(Some(buf.split_to(frame_size - LENGTH_PREFIX_SIZE).freeze()))
}

/// Reserves the length prefix of a new frame in `out` and returns where the frame
/// starts; pair it with [`end_frame`] once the body is written.
pub(crate) fn begin_frame(out: &mut BytesMut) -> usize {
    let start = out.len();
    out.put_u32(0);
    start
}

/// Fills in the length prefix of the frame begun at `start`.
pub(crate) fn end_frame(out: &mut BytesMut, start: usize) {
    let body_length = out.len() - start - LENGTH_PREFIX_SIZE;
    // A body that does not fit an i32 cannot be framed at all; the encoders are
    // always called with limits far below this, so this is an invariant.
    let body_length = u32::try_from(body_length).expect("frame body exceeds 4 GiB");
    out[start..start + LENGTH_PREFIX_SIZE].copy_from_slice(&body_length.to_be_bytes());
}

/// Checks the size of the frame that begins at `start` against a limit, removing it
/// from `out` if it is too large, so a caller can refuse to send it.
pub(crate) fn enforce_frame_limit(
    out: &mut BytesMut,
    start: usize,
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    let frame_size = out.len() - start;
    if frame_size > max_frame_size {
        out.truncate(start);
        return Err(EncodeError::FrameTooLarge {
            frame_size,
            max_frame_size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the limit counts the prefix, like Netty: a body of `max - 4` passes,
    /// `max - 3` fails, before any of the body has arrived.
    #[test]
    fn limit_counts_the_prefix() {
        let max = 100;
        let ok = (96u32).to_be_bytes();
        assert_eq!(check_frame(&ok, max), Ok(None));
        let too_big = (97u32).to_be_bytes();
        assert_eq!(
            check_frame(&too_big, max),
            Err(ProtocolError::FrameTooLarge {
                length: 97,
                max_frame_size: max
            })
        );
        let negative = (-1i32).to_be_bytes();
        assert_eq!(
            check_frame(&negative, max),
            Err(ProtocolError::NegativeFrameLength(-1))
        );
    }

    /// Goal: split_frame returns whole frames only, in order, and leaves the rest.
    #[test]
    fn split_returns_whole_frames() {
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0][..]);
        assert_eq!(
            split_frame(&mut buf, 64).unwrap().unwrap(),
            Bytes::from_static(&[0xaa, 0xbb])
        );
        assert_eq!(split_frame(&mut buf, 64).unwrap().unwrap(), Bytes::new());
        assert_eq!(split_frame(&mut buf, 64).unwrap(), None);
        assert_eq!(buf.len(), 3);
    }

    /// Goal: begin/end write the body length, not counting the prefix.
    #[test]
    fn end_frame_writes_body_length() {
        let mut out = BytesMut::new();
        let start = begin_frame(&mut out);
        out.put_slice(b"abc");
        end_frame(&mut out, start);
        assert_eq!(&out[..], &[0, 0, 0, 3, b'a', b'b', b'c']);
        assert!(enforce_frame_limit(&mut out, start, 6).is_err());
        assert!(out.is_empty());
    }
}
