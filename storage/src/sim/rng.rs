//! `SimRng`: xoshiro256** seeded through splitmix64, with named sub-streams.
//!
//! Our own, so that a seed means the same thing forever (no crate upgrade can shift a stream),
//! and so the simulator has no dependencies.

/// A small, fast, seeded PRNG (xoshiro256**). Never reads the wall clock or the OS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

/// One step of splitmix64: the recommended way to expand a seed into xoshiro state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a salt, so fork names map to stable numbers.
fn fnv1a(salt: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in salt.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        // splitmix64 never yields four zeros in a row, so the state is never all zero.
        SimRng { s }
    }

    /// An independent stream named `salt`, derived from this stream's current state without
    /// advancing it: drawing more or fewer numbers from one fork never shifts another.
    pub fn fork(&self, salt: &str) -> SimRng {
        let mixed = self.s[0] ^ self.s[1].rotate_left(17) ^ self.s[2].rotate_left(31) ^ self.s[3];
        SimRng::new(mixed ^ fnv1a(salt).rotate_left(7))
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n`, without modulo bias; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's method with rejection.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in the half-open range `lo..hi`; `lo` when the range is empty.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo)
    }

    /// True with probability `p` (clamped to 0..=1). Draws one number even when `p` is 0 or 1,
    /// so turning a fault class on or off does not shift the rest of its stream.
    pub fn chance(&mut self, p: f64) -> bool {
        let x = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }

    /// Fills `out` with random bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_forks_are_independent() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut fa = a.fork("faults");
        let mut fb = b.fork("faults");
        let mut la = a.fork("latency");
        assert_eq!(fa.next_u64(), fb.next_u64());
        assert_ne!(fa.next_u64(), la.next_u64());
        // Forking does not advance the parent.
        assert_eq!(a.next_u64(), b.next_u64());
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
            let r = a.range(5, 9);
            assert!((5..9).contains(&r));
        }
        assert_eq!(a.below(0), 0);
        assert_eq!(a.range(3, 3), 3);
        assert!(!a.chance(0.0));
        assert!(a.chance(1.0));
        let mut buf = [0u8; 13];
        a.fill(&mut buf);
        assert!(buf.iter().any(|&x| x != 0));
    }
}
