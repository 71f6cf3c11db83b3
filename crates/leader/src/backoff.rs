//! The pause between failed rounds of a participant's background task, shared by the latch's
//! election loop and the selector's queueing loop.

use std::time::Duration;

/// Sleeps between failed rounds: 50 ms, doubling to 1 s.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);

    pub(crate) async fn sleep(&mut self) {
        tokio::time::sleep(self.advance()).await;
    }

    /// The sleep to take now; the next one doubles.
    pub(crate) fn advance(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        now
    }

    pub(crate) fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_50_ms_up_to_a_second_and_resets() {
        let mut backoff = Backoff::default();
        let sleeps: Vec<u64> = (0..7).map(|_| backoff.advance().as_millis() as u64).collect();
        assert_eq!(sleeps, vec![50, 100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.advance(), Duration::from_millis(50));
    }
}
