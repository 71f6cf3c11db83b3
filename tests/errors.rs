//! One error vocabulary: every recipe's error answers `is_timeout`, `is_closed`, `is_retryable`
//! and (where a node of ours can be lost) `is_node_lost` the same way for the same cause.

use std::time::Duration;

use zk_recipes::barrier::BarrierError;
use zk_recipes::cache::CacheError;
use zk_recipes::counter::CounterError;
use zk_recipes::discovery::DiscoveryError;
use zk_recipes::framework::{zookeeper_client, Deadline, Error as FrameworkError};
use zk_recipes::leader::LeaderError;
use zk_recipes::lease::LeaseError;
use zk_recipes::mutex::LockError;
use zk_recipes::nodes::NodeError;
use zk_recipes::partition::PartitionError;
use zk_recipes::queue::QueueError;
use zk_recipes::semaphore::SemaphoreError;

fn timeout() -> FrameworkError {
    Deadline::after(Duration::ZERO).timeout_error()
}

fn lost() -> FrameworkError {
    FrameworkError::NodeLost { path: "/app/lock/_c_x-lock-0000000001".into() }
}

fn connection_loss() -> FrameworkError {
    FrameworkError::ZooKeeper(zookeeper_client::Error::ConnectionLoss)
}

/// (timeout, closed, retryable, node lost) for one error.
type Answers = (bool, bool, bool, bool);

/// The four questions, asked of any recipe's error.
trait Vocabulary {
    fn answers(&self) -> Answers;
}

macro_rules! vocabulary {
    ($($error:ty),* $(,)?) => {$(
        impl Vocabulary for $error {
            fn answers(&self) -> Answers {
                (self.is_timeout(), self.is_closed(), self.is_retryable(), self.is_node_lost())
            }
        }
    )*};
}

vocabulary!(FrameworkError, LockError, SemaphoreError, LeaderError, BarrierError, LeaseError, PartitionError);

/// The answers of a timeout, a close, a connection loss and a lost node, each made into a
/// recipe's error by `wrap`.
fn for_each_cause<E: Vocabulary>(wrap: impl Fn(FrameworkError) -> E) -> [Answers; 4] {
    [timeout(), FrameworkError::Closed, connection_loss(), lost()].map(|cause| wrap(cause).answers())
}

#[test]
fn every_error_answers_the_same_questions_alike() {
    let leader = for_each_cause(LeaderError::from);
    let cases: Vec<(&str, [Answers; 4])> = vec![
        ("framework", for_each_cause(|err| err)),
        ("lock", for_each_cause(LockError::from)),
        ("semaphore", for_each_cause(|err| SemaphoreError::from(LockError::from(err)))),
        // A leader's node is lost through its lock.
        ("leader", [leader[0], leader[1], leader[2], LeaderError::from(LockError::from(lost())).answers()]),
        ("barrier", for_each_cause(BarrierError::from)),
        ("lease", for_each_cause(LeaseError::from)),
        ("lease, kazoo's lock", for_each_cause(|err| LeaseError::from(LockError::from(err)))),
        ("partition", for_each_cause(PartitionError::from)),
        ("partition, an item's lock", for_each_cause(|err| PartitionError::from(LockError::from(err)))),
    ];
    // (timeout, closed, retryable, node lost): a deadline that passed is not retried (the caller
    // chose it), nor is a node lost with its session (only a caller that can start over may).
    for (name, [on_timeout, on_closed, on_connection_loss, on_lost]) in cases {
        assert_eq!(on_timeout, (true, false, false, false), "{name}: a timeout");
        assert_eq!(on_closed, (false, true, false, false), "{name}: closed");
        assert_eq!(on_connection_loss, (false, false, true, false), "{name}: a connection loss");
        assert_eq!(on_lost, (false, false, false, true), "{name}: a lost node");
    }
    // Those without a node of their own to lose.
    assert!(CacheError::from(timeout()).is_timeout() && CacheError::from(FrameworkError::Closed).is_closed());
    assert!(NodeError::from(timeout()).is_timeout() && NodeError::Closed.is_closed());
    assert!(NodeError::from(FrameworkError::Closed).is_closed());
    assert!(CounterError::from(FrameworkError::Closed).is_closed());
    assert!(CounterError::from(LockError::from(FrameworkError::Closed)).is_closed());
    assert!(CounterError::from(timeout()).is_timeout());
    assert!(QueueError::from(timeout()).is_timeout() && QueueError::from(FrameworkError::Closed).is_closed());
    assert!(QueueError::LockLost { item: "queue-0000000001".into() }.is_node_lost());
    let discovery = [
        DiscoveryError::from(timeout()),
        DiscoveryError::from(FrameworkError::Closed),
        DiscoveryError::from(connection_loss()),
    ];
    let answers: Vec<_> =
        discovery.iter().map(|err| (err.is_timeout(), err.is_closed(), err.is_retryable())).collect();
    assert_eq!(answers, [(true, false, false), (false, true, false), (false, false, true)], "discovery");
    assert!(DiscoveryError::Closed.is_closed());
    // The recipes' own variants.
    assert!(LeaseError::Lost { path: "/app/lease".into() }.is_node_lost());
    assert!(!LeaseError::Expired { path: "/app/lease".into() }.is_node_lost());
    assert!(PartitionError::Closed.is_closed());
    assert!(PartitionError::from(NodeError::Closed).is_closed());
    assert!(PartitionError::from(NodeError::from(timeout())).is_timeout());
}
