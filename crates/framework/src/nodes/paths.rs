//! A path as a whole: [`Framework::ensure_path`] and [`Framework::delete_recursive`].

use zookeeper_client::CreateMode;

use super::on_session::{KnownParents, ParentMode};
use crate::path;
use crate::session::{Deadline, Error, Framework, Result};

impl Framework {
    /// Creates `path` and every missing ancestor as CONTAINER nodes with empty data (the server
    /// deletes a container once it has had children and is empty again). Existing nodes are left
    /// as they are.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// If cancelled after a create was sent, some of the missing containers may have been created
    /// (and an empty container is reaped by the server only once it has had children). Calling it
    /// again finishes the path.
    pub async fn ensure_path(&self, path: &str, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        path::validate(path).map_err(|reason| Error::invalid_path(path, reason))?;
        if path == "/" {
            return Ok(());
        }
        let created = self
            .create(path)
            .mode(CreateMode::Container)
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await;
        match created {
            Err(err) if !err.is_node_exists() => Err(err),
            _ => {
                // In place now: protected creates under it need not send it ahead.
                self.upper::<KnownParents>().insert(path);
                Ok(())
            }
        }
    }

    /// Deletes `path` and everything below it. A missing node is not an error.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled call may have deleted part of the tree (descendants go first,
    /// so `path` itself is deleted last). Calling it again finishes the delete.
    pub async fn delete_recursive(&self, path: &str, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.delete(path).deleting_children_if_needed().quietly().deadline(deadline).await
    }
}
