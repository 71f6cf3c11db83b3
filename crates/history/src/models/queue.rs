//! Queues: a FIFO queue, and an unordered set of items where a take removes one named item.
//!
//! # What a check of a queue proves
//! A linearizable history of [`FifoQueue`] or [`ItemSet`] proves, for the items and takes it
//! records:
//! * **at most once**: no item was taken by two `Ok` takes (nor by an `Ok` take and an `Info`
//!   take that the rest of the history says took effect);
//! * **nothing from nowhere**: every item taken was put, and put before the take completed;
//! * for [`FifoQueue`], **order**: items came out in the order their puts took effect.
//!
//! It proves **none lost** only if the history ends with a read that every item was due in: an
//! `Ok` [`QueueInput::Take`] answering `None` (the queue is empty), or an `Ok`
//! [`SetInput::Contents`] of what is left, invoked after every put completed. Without it, an item
//! that vanished is indistinguishable from one still waiting. An item taken only by `Info` takes
//! may have been taken (by a consumer that died after the take): the final read decides.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;

use crate::Model;

/// A FIFO queue (Curator's `DistributedQueue` taken by one consumer at a time: items leave in
/// the order of their sequence numbers).
///
/// ```
/// use zk_recipes_history::models::{FifoQueue, QueueInput, QueueOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, QueueInput::Put("a"), QueueOutput::Put)?;
/// history.ok(2, 20, 30, QueueInput::Take, QueueOutput::Taken(Some("a")))?;
/// history.ok(3, 25, 35, QueueInput::Take, QueueOutput::Taken(Some("a")))?; // delivered twice
/// assert!(!check(&history, FifoQueue::new()).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FifoQueue<T> {
    items: std::marker::PhantomData<fn() -> T>,
}

impl<T> FifoQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        FifoQueue { items: std::marker::PhantomData }
    }
}

/// An operation on a [`FifoQueue`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueInput<T> {
    /// Append an item: answers [`QueueOutput::Put`].
    Put(T),
    /// Remove the head: answers [`QueueOutput::Taken`].
    Take,
}

/// What an operation on a [`FifoQueue`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueOutput<T> {
    /// A put's acknowledgement.
    Put,
    /// The item taken, `None` if the queue was empty.
    Taken(Option<T>),
}

impl<T: Clone + Eq + Hash + Debug> Model for FifoQueue<T> {
    type State = VecDeque<T>;
    type Input = QueueInput<T>;
    type Output = QueueOutput<T>;

    fn init(&self) -> VecDeque<T> {
        VecDeque::new()
    }

    fn step(&self, items: &VecDeque<T>, input: &QueueInput<T>) -> (VecDeque<T>, QueueOutput<T>) {
        let mut items = items.clone();
        match input {
            QueueInput::Put(item) => {
                items.push_back(item.clone());
                (items, QueueOutput::Put)
            }
            QueueInput::Take => {
                let head = items.pop_front();
                (items, QueueOutput::Taken(head))
            }
        }
    }
}

/// A set of items where a take removes the item it names: a queue with several consumers whose
/// order is not checked, only that each item is delivered at most once and none is lost (see the
/// [module docs](self)).
///
/// The take names its item because the consumer knows what it got, even when the take's outcome
/// is unknown (its process died while acknowledging it).
///
/// ```
/// use std::collections::BTreeSet;
/// use zk_recipes_history::models::{ItemSet, SetInput, SetOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, SetInput::Insert(1), SetOutput::Inserted(true))?;
/// history.ok(1, 10, 20, SetInput::Insert(2), SetOutput::Inserted(true))?;
/// history.ok(2, 30, 40, SetInput::Take(2), SetOutput::Taken(true))?;
/// history.info(3, 30, None, SetInput::Take(1))?; // its consumer died: taken or not?
/// history.ok(4, 50, 60, SetInput::Contents, SetOutput::Contents(BTreeSet::new()))?;
/// // Nothing is left, so the unknown take took effect.
/// assert!(check(&history, ItemSet::new()).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItemSet<T> {
    items: std::marker::PhantomData<fn() -> T>,
}

impl<T> ItemSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        ItemSet { items: std::marker::PhantomData }
    }
}

/// An operation on an [`ItemSet`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetInput<T> {
    /// Add an item: answers [`SetOutput::Inserted`].
    Insert(T),
    /// Remove this item: answers [`SetOutput::Taken`].
    Take(T),
    /// Read what is in the set: answers [`SetOutput::Contents`].
    Contents,
}

/// What an operation on an [`ItemSet`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetOutput<T> {
    /// Whether the item was new.
    Inserted(bool),
    /// Whether the item was there to take (a recorded successful take answers `true`).
    Taken(bool),
    /// The items in the set.
    Contents(BTreeSet<T>),
}

impl<T: Clone + Ord + Hash + Debug> Model for ItemSet<T> {
    type State = BTreeSet<T>;
    type Input = SetInput<T>;
    type Output = SetOutput<T>;

    fn init(&self) -> BTreeSet<T> {
        BTreeSet::new()
    }

    fn step(&self, items: &BTreeSet<T>, input: &SetInput<T>) -> (BTreeSet<T>, SetOutput<T>) {
        match input {
            SetInput::Insert(item) => {
                let mut items = items.clone();
                let new = items.insert(item.clone());
                (items, SetOutput::Inserted(new))
            }
            SetInput::Take(item) => {
                let mut items = items.clone();
                let present = items.remove(item);
                (items, SetOutput::Taken(present))
            }
            SetInput::Contents => (items.clone(), SetOutput::Contents(items.clone())),
        }
    }
}
