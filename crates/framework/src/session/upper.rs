//! What the floor above keeps in the framework and in each session.
//!
//! The nodes floor keeps state beside the framework (its cleanup queue, the parents it has seen)
//! and beside each session (the batcher, the lanes of session-marked creates). This floor holds
//! that state, made when the framework starts and when each session opens, without knowing its
//! types: so no import runs from this floor up to the one above it. Each part is read back by its
//! type ([`crate::Framework`]'s and [`crate::Session`]'s `upper::<T>()`), as `http::Extensions`
//! does.

use std::any::Any;
use std::fmt;

/// Parts of the floor above, at most one of each type.
#[derive(Default)]
pub(crate) struct UpperParts {
    parts: Vec<Box<dyn Any + Send + Sync>>,
}

impl UpperParts {
    /// These parts and `part`.
    pub(crate) fn with<T: Any + Send + Sync>(mut self, part: T) -> Self {
        self.parts.push(Box::new(part));
        self
    }

    /// The part of type `T`.
    ///
    /// # Panics
    /// If no part has that type: the floor above reads only parts it attached itself.
    pub(crate) fn get<T: Any>(&self) -> &T {
        self.parts
            .iter()
            .find_map(|part| part.downcast_ref())
            .expect("the floor above reads only the parts it attached")
    }
}

impl fmt::Debug for UpperParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpperParts").field("parts", &self.parts.len()).finish()
    }
}

/// What the floor above keeps: its parts of the framework, and how to make its parts of a
/// session as the session opens.
pub(crate) struct Upper {
    /// Kept in the framework's core.
    pub(crate) framework: UpperParts,
    /// Called on the framework's runtime as each session opens; the parts are dropped with the
    /// session's last clone.
    pub(crate) session_opened: Box<dyn Fn() -> UpperParts + Send + Sync>,
}

impl fmt::Debug for Upper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upper").field("framework", &self.framework).finish_non_exhaustive()
    }
}
