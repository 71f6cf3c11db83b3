//! The fault schedule's randomness: [`fastrand::Rng`] seeded with the run's seed (printed at the
//! start of every run), so `--seed N` replays the same schedule. Replays hold for the same build
//! (`Cargo.lock` pins fastrand): its minor versions have changed the sequence a seed gives.

pub(crate) use fastrand::Rng;

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws the way the schedule does: ranges of milliseconds and indexes.
    fn schedule(seed: u64) -> Vec<u64> {
        let mut rng = Rng::with_seed(seed);
        (0..100).map(|step| if step % 2 == 0 { rng.u64(200..=3000) } else { rng.usize(..3) as u64 }).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        assert_eq!(schedule(42), schedule(42));
        assert_ne!(schedule(42), schedule(43));
    }
}
