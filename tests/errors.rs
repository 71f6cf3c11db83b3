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

#[test]
fn every_error_answers_the_same_questions_alike() {
    let cases: Vec<(&str, Answers, Answers, Answers, Answers)> = vec![
        (
            "framework",
            q(
                &timeout(),
                FrameworkError::is_timeout,
                FrameworkError::is_closed,
                FrameworkError::is_retryable,
                FrameworkError::is_node_lost,
            ),
            q(
                &FrameworkError::Closed,
                FrameworkError::is_timeout,
                FrameworkError::is_closed,
                FrameworkError::is_retryable,
                FrameworkError::is_node_lost,
            ),
            q(
                &connection_loss(),
                FrameworkError::is_timeout,
                FrameworkError::is_closed,
                FrameworkError::is_retryable,
                FrameworkError::is_node_lost,
            ),
            q(
                &lost(),
                FrameworkError::is_timeout,
                FrameworkError::is_closed,
                FrameworkError::is_retryable,
                FrameworkError::is_node_lost,
            ),
        ),
        (
            "lock",
            q(
                &LockError::from(timeout()),
                LockError::is_timeout,
                LockError::is_closed,
                LockError::is_retryable,
                LockError::is_node_lost,
            ),
            q(
                &LockError::from(FrameworkError::Closed),
                LockError::is_timeout,
                LockError::is_closed,
                LockError::is_retryable,
                LockError::is_node_lost,
            ),
            q(
                &LockError::from(connection_loss()),
                LockError::is_timeout,
                LockError::is_closed,
                LockError::is_retryable,
                LockError::is_node_lost,
            ),
            q(
                &LockError::from(lost()),
                LockError::is_timeout,
                LockError::is_closed,
                LockError::is_retryable,
                LockError::is_node_lost,
            ),
        ),
        (
            "semaphore",
            q(
                &SemaphoreError::from(LockError::from(timeout())),
                SemaphoreError::is_timeout,
                SemaphoreError::is_closed,
                SemaphoreError::is_retryable,
                SemaphoreError::is_node_lost,
            ),
            q(
                &SemaphoreError::from(LockError::from(FrameworkError::Closed)),
                SemaphoreError::is_timeout,
                SemaphoreError::is_closed,
                SemaphoreError::is_retryable,
                SemaphoreError::is_node_lost,
            ),
            q(
                &SemaphoreError::from(LockError::from(connection_loss())),
                SemaphoreError::is_timeout,
                SemaphoreError::is_closed,
                SemaphoreError::is_retryable,
                SemaphoreError::is_node_lost,
            ),
            q(
                &SemaphoreError::from(LockError::from(lost())),
                SemaphoreError::is_timeout,
                SemaphoreError::is_closed,
                SemaphoreError::is_retryable,
                SemaphoreError::is_node_lost,
            ),
        ),
        (
            "leader",
            q(
                &LeaderError::from(timeout()),
                LeaderError::is_timeout,
                LeaderError::is_closed,
                LeaderError::is_retryable,
                LeaderError::is_node_lost,
            ),
            q(
                &LeaderError::from(FrameworkError::Closed),
                LeaderError::is_timeout,
                LeaderError::is_closed,
                LeaderError::is_retryable,
                LeaderError::is_node_lost,
            ),
            q(
                &LeaderError::from(connection_loss()),
                LeaderError::is_timeout,
                LeaderError::is_closed,
                LeaderError::is_retryable,
                LeaderError::is_node_lost,
            ),
            q(
                &LeaderError::from(LockError::from(lost())),
                LeaderError::is_timeout,
                LeaderError::is_closed,
                LeaderError::is_retryable,
                LeaderError::is_node_lost,
            ),
        ),
        (
            "barrier",
            q(
                &BarrierError::from(timeout()),
                BarrierError::is_timeout,
                BarrierError::is_closed,
                BarrierError::is_retryable,
                BarrierError::is_node_lost,
            ),
            q(
                &BarrierError::from(FrameworkError::Closed),
                BarrierError::is_timeout,
                BarrierError::is_closed,
                BarrierError::is_retryable,
                BarrierError::is_node_lost,
            ),
            q(
                &BarrierError::from(connection_loss()),
                BarrierError::is_timeout,
                BarrierError::is_closed,
                BarrierError::is_retryable,
                BarrierError::is_node_lost,
            ),
            q(
                &BarrierError::from(lost()),
                BarrierError::is_timeout,
                BarrierError::is_closed,
                BarrierError::is_retryable,
                BarrierError::is_node_lost,
            ),
        ),
        (
            "lease",
            q(
                &LeaseError::from(timeout()),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(FrameworkError::Closed),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(connection_loss()),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(lost()),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
        ),
        (
            "lease, kazoo's lock",
            q(
                &LeaseError::from(LockError::from(timeout())),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(LockError::from(FrameworkError::Closed)),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(LockError::from(connection_loss())),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
            q(
                &LeaseError::from(LockError::from(lost())),
                LeaseError::is_timeout,
                LeaseError::is_closed,
                LeaseError::is_retryable,
                LeaseError::is_node_lost,
            ),
        ),
        (
            "partition",
            q(
                &PartitionError::from(timeout()),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(FrameworkError::Closed),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(connection_loss()),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(lost()),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
        ),
        (
            "partition, an item's lock",
            q(
                &PartitionError::from(LockError::from(timeout())),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(LockError::from(FrameworkError::Closed)),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(LockError::from(connection_loss())),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
            q(
                &PartitionError::from(LockError::from(lost())),
                PartitionError::is_timeout,
                PartitionError::is_closed,
                PartitionError::is_retryable,
                PartitionError::is_node_lost,
            ),
        ),
    ];
    // (timeout, closed, retryable, node lost): a deadline that passed is not retried (the caller
    // chose it), nor is a node lost with its session (only a caller that can start over may).
    for (name, on_timeout, on_closed, on_connection_loss, on_lost) in cases {
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

fn q<E>(
    err: &E,
    timeout: fn(&E) -> bool,
    closed: fn(&E) -> bool,
    retryable: fn(&E) -> bool,
    node_lost: fn(&E) -> bool,
) -> Answers {
    (timeout(err), closed(err), retryable(err), node_lost(err))
}
