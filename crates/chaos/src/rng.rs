//! A tiny seeded PRNG (SplitMix64): a printed seed replays the same fault schedule.

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state, good enough to pick faults.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator that yields the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high` (slightly biased for huge ranges; fine for scheduling).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low + 1)
    }

    /// An index in `0..len` (`len` > 0).
    pub fn index(&mut self, len: usize) -> usize {
        (self.next_u64() % len.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let mut first = Rng::new(42);
        let mut second = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(first.next_u64(), second.next_u64());
        }
        let mut other = Rng::new(43);
        assert_ne!(Rng::new(42).next_u64(), other.next_u64());
    }

    #[test]
    fn between_stays_in_range() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let value = rng.between(3, 9);
            assert!((3..=9).contains(&value));
        }
        assert_eq!(rng.between(5, 5), 5);
    }
}
