//! Starting a framework: the session floor, with the nodes floor's state attached to it and the
//! nodes floor's cleanup worker running beside it. The one place that knows both floors.

use crate::nodes::floor;
use crate::session::builder::FrameworkBuilder;
use crate::session::{Framework, Result};

impl FrameworkBuilder {
    /// Checks the configuration and starts the framework: returns at once, and the session comes
    /// up in the background (the server need not be up yet). Must be called within a tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty connect string, a
    /// zero session timeout or an empty ACL, or when called outside a tokio runtime;
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a namespace that is not a valid path
    /// segment.
    pub fn start(self) -> Result<Framework> {
        self.check()?;
        let nodes = floor::parts(self.batch_writes);
        let framework = Framework::start(self, nodes);
        floor::start_workers(&framework);
        Ok(framework)
    }
}
