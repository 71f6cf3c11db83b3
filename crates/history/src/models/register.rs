//! Registers: a value read, written and compared-and-set (Knossos' `cas-register`), and
//! ZooKeeper's versioned node, as `SharedCount` / `SharedValue` use it.

use std::fmt::Debug;
use std::hash::Hash;

use crate::Model;

/// A register holding one value: reads, blind writes, and compare-and-set by value.
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, RegisterInput::Write(1), RegisterOutput::Written)?;
/// history.ok(2, 5, 20, RegisterInput::CompareAndSet { expected: 1, new: 2 }, RegisterOutput::Swapped(true))?;
/// history.ok(3, 25, 30, RegisterInput::Read, RegisterOutput::Value(2))?;
/// assert!(check(&history, Register::new(0)).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Register<V> {
    initial: V,
}

impl<V> Register<V> {
    /// A register that holds `initial` before the first write.
    pub fn new(initial: V) -> Self {
        Register { initial }
    }
}

/// An operation on a [`Register`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RegisterInput<V> {
    /// Read the value: answers [`RegisterOutput::Value`].
    Read,
    /// Write the value: answers [`RegisterOutput::Written`].
    Write(V),
    /// Write `new` if the register holds `expected`: answers [`RegisterOutput::Swapped`].
    CompareAndSet {
        /// The value the register must hold.
        expected: V,
        /// The value written if it does.
        new: V,
    },
}

/// What an operation on a [`Register`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RegisterOutput<V> {
    /// The value read.
    Value(V),
    /// A write's acknowledgement.
    Written,
    /// Whether a compare-and-set wrote.
    Swapped(bool),
}

impl<V: Clone + Eq + Hash + Debug> Model for Register<V> {
    type State = V;
    type Input = RegisterInput<V>;
    type Output = RegisterOutput<V>;

    fn init(&self) -> V {
        self.initial.clone()
    }

    fn step(&self, value: &V, input: &RegisterInput<V>) -> (V, RegisterOutput<V>) {
        match input {
            RegisterInput::Read => (value.clone(), RegisterOutput::Value(value.clone())),
            RegisterInput::Write(new) => (new.clone(), RegisterOutput::Written),
            RegisterInput::CompareAndSet { expected, new } if expected == value => {
                (new.clone(), RegisterOutput::Swapped(true))
            }
            RegisterInput::CompareAndSet { .. } => (value.clone(), RegisterOutput::Swapped(false)),
        }
    }
}

/// A ZooKeeper node's data and version, as `SharedCount` and `SharedValue` use it: every write
/// moves the version on by one, and `trySetCount(value, version)` writes only at the version the
/// caller read (a compare-and-set on the version, not the value).
///
/// A check of `SharedCount` finds what a check by value cannot: a `try_set` that succeeded at a
/// version read before another write (an ABA the value alone hides).
///
/// ```
/// use zk_recipes_history::models::{VersionedInput, VersionedOutput, VersionedRegister};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, VersionedInput::Read, VersionedOutput::Read { value: 0, version: 0 })?;
/// history.ok(1, 20, 30, VersionedInput::SetIfVersion { version: 0, value: 1 }, VersionedOutput::Set(true))?;
/// history.ok(2, 40, 50, VersionedInput::Read, VersionedOutput::Read { value: 1, version: 1 })?;
/// assert!(check(&history, VersionedRegister::new(0)).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedRegister<V> {
    initial: V,
}

impl<V> VersionedRegister<V> {
    /// A node created with `initial` (version 0) before the first operation.
    pub fn new(initial: V) -> Self {
        VersionedRegister { initial }
    }
}

/// A node's data at a version: the state of a [`VersionedRegister`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Versioned<V> {
    /// The data.
    pub value: V,
    /// The data version (ZooKeeper's `Stat.version`).
    pub version: i32,
}

/// An operation on a [`VersionedRegister`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VersionedInput<V> {
    /// Read the data and its version: answers [`VersionedOutput::Read`].
    Read,
    /// Write unconditionally (`setCount`): answers [`VersionedOutput::Written`].
    Write(V),
    /// Write if the node is at `version` (`trySetCount`): answers [`VersionedOutput::Set`].
    SetIfVersion {
        /// The version the node must be at.
        version: i32,
        /// The value written if it is.
        value: V,
    },
}

/// What an operation on a [`VersionedRegister`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VersionedOutput<V> {
    /// The data read and its version.
    Read {
        /// The data.
        value: V,
        /// Its version.
        version: i32,
    },
    /// An unconditional write's acknowledgement.
    Written,
    /// Whether a conditional write wrote.
    Set(bool),
}

impl<V: Clone + Eq + Hash + Debug> Model for VersionedRegister<V> {
    type State = Versioned<V>;
    type Input = VersionedInput<V>;
    type Output = VersionedOutput<V>;

    fn init(&self) -> Versioned<V> {
        Versioned { value: self.initial.clone(), version: 0 }
    }

    fn step(&self, node: &Versioned<V>, input: &VersionedInput<V>) -> (Versioned<V>, VersionedOutput<V>) {
        let written = |value: &V| Versioned { value: value.clone(), version: node.version.wrapping_add(1) };
        match input {
            VersionedInput::Read => {
                (node.clone(), VersionedOutput::Read { value: node.value.clone(), version: node.version })
            }
            VersionedInput::Write(value) => (written(value), VersionedOutput::Written),
            VersionedInput::SetIfVersion { version, value } if *version == node.version => {
                (written(value), VersionedOutput::Set(true))
            }
            VersionedInput::SetIfVersion { .. } => (node.clone(), VersionedOutput::Set(false)),
        }
    }
}
