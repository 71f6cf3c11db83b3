//! The network of a partitionable [`TestingCluster`](crate::TestingCluster): each member in a
//! network namespace of its own, with its own address on a private subnet, so that traffic
//! between chosen members can be cut or slowed.
//!
//! - [`topology`]: which member pairs a partition, a ring or a bridge cuts (no I/O);
//! - [`commands`]: running `ip` and `tc`;
//! - [`link_delay`]: a member's links slowed in user space where the kernel has no `netem`;
//! - [`namespaces`]: the bridge, the namespaces, the cutting routes, `netem`, the teardown.
//!
//! Each file imports only the ones before it in this list (and [`Degradation`], defined here).

mod commands;
mod link_delay;
pub(crate) mod namespaces;
pub(crate) mod topology;

use std::time::Duration;

use crate::error::{Result, TestingError};

/// How [`TestingCluster::degrade`](crate::TestingCluster::degrade) slows a member's links: a
/// `tc netem` delay (with jitter) and a loss rate, applied to every packet the member sends and
/// every packet it receives.
///
/// A round trip between the degraded member and anyone (another member or a client) therefore
/// grows by twice the delay.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use zk_recipes_testing::Degradation;
///
/// let slow = Degradation::delay(Duration::from_millis(100)).jitter(Duration::from_millis(10)).loss(0.01)?;
/// assert_eq!(slow.delay_time(), Duration::from_millis(100));
/// assert!(Degradation::delay(Duration::ZERO).loss(1.5).is_err());
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Degradation {
    delay: Duration,
    jitter: Duration,
    loss: f64,
}

impl Degradation {
    /// Delays every packet by `delay`; no jitter and no loss until [`jitter`](Self::jitter) and
    /// [`loss`](Self::loss) say otherwise.
    pub fn delay(delay: Duration) -> Degradation {
        Degradation { delay, jitter: Duration::ZERO, loss: 0.0 }
    }

    /// Varies each packet's delay uniformly by up to `jitter` either way; defaults to none.
    pub fn jitter(mut self, jitter: Duration) -> Degradation {
        self.jitter = jitter;
        self
    }

    /// Drops each packet with probability `loss` (`0.0..=1.0`); defaults to 0.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] outside `0.0..=1.0`.
    pub fn loss(mut self, loss: f64) -> Result<Degradation> {
        if !(0.0..=1.0).contains(&loss) {
            return Err(TestingError::InvalidArgument(format!("a loss rate of {loss} is not in 0.0..=1.0")));
        }
        self.loss = loss;
        Ok(self)
    }

    /// The delay.
    pub fn delay_time(&self) -> Duration {
        self.delay
    }

    /// The jitter.
    pub fn jitter_time(&self) -> Duration {
        self.jitter
    }

    /// The loss rate.
    pub fn loss_rate(&self) -> f64 {
        self.loss
    }

    /// `netem`'s arguments: `delay 100000us 10000us loss 1%`.
    pub(crate) fn netem_arguments(&self) -> Vec<String> {
        let mut arguments = vec![
            "delay".to_owned(),
            format!("{}us", self.delay.as_micros()),
            format!("{}us", self.jitter.as_micros()),
        ];
        if self.loss > 0.0 {
            arguments.extend(["loss".to_owned(), format!("{}%", self.loss * 100.0)]);
        }
        arguments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Degradation>();
    }

    #[test]
    fn netem_arguments_spell_delay_jitter_and_loss() {
        let degradation = Degradation::delay(Duration::from_millis(100))
            .jitter(Duration::from_millis(5))
            .loss(0.25)
            .expect("valid");
        assert_eq!(degradation.netem_arguments(), ["delay", "100000us", "5000us", "loss", "25%"]);
        assert_eq!(
            Degradation::delay(Duration::from_millis(1)).netem_arguments(),
            ["delay", "1000us", "0us"]
        );
    }
}
