//! [`Framework::server_features`] and [`Framework::require`]: the probes of [`super::features`],
//! asked for the framework's current session.

use super::deadline::Deadline;
use super::error::Result;
use super::feature::Feature;
use super::features::ServerFeatures;
use super::handle::Framework;

impl Framework {
    /// What the server of the current session can do: probed once per session generation on a
    /// probe session of its own (never on the framework's session), then answered from the cache.
    /// See the table in `docs/operations.md` ("Server features").
    ///
    /// # Errors
    /// As [`Framework::session`] while no session is live; [`Error::Timeout`] when `deadline`
    /// passes during the probe.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled probe closes its probe session and caches nothing; the next call
    /// probes again.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::Feature;
    /// let features = framework.server_features(std::time::Duration::from_secs(5)).await?;
    /// assert!(features.supports(Feature::MultiRead));
    /// # Ok(()) }
    /// ```
    ///
    /// [`Error::Timeout`]: crate::Error::Timeout
    pub async fn server_features(&self, deadline: impl Into<Deadline>) -> Result<ServerFeatures> {
        let deadline = deadline.into();
        let generation = self.session(deadline).await?.generation();
        let connect_string = self.core().ensemble.connect_string(&self.core().config.connect_string);
        self.core().features.server_features(&connect_string, generation, deadline).await
    }

    /// Fails with [`Error::MissingFeature`] (naming the feature and the server's version) when the
    /// server cannot do `feature`: the one call a recipe that needs a feature makes when it starts,
    /// so it fails there with a clear error rather than at its first request.
    ///
    /// # Errors
    /// [`Error::MissingFeature`]; otherwise as [`server_features`](Self::server_features).
    ///
    /// # Cancel safety
    /// As [`server_features`](Self::server_features).
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{Error, Feature};
    /// match framework.require(Feature::TtlNodes, std::time::Duration::from_secs(5)).await {
    ///     Err(Error::MissingFeature { server_version, .. }) => println!("ZooKeeper {server_version} has no TTL nodes"),
    ///     other => other?,
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// [`Error::MissingFeature`]: crate::Error::MissingFeature
    pub async fn require(&self, feature: Feature, deadline: impl Into<Deadline>) -> Result<()> {
        // Once a probe of this framework found it, a recipe's start needs no probe (nor a session
        // of its own) again: servers do not lose a feature short of a downgrade.
        if self.core().features.seen(feature) {
            return Ok(());
        }
        self.server_features(deadline).await?.require(feature)
    }
}
