//! # zk-recipes-interop
//!
//! Interop drivers that only the workspace's own tests and benches use (not published).
//!
//! Curator's service discovery (`curator-x-discovery` 5.4, Debian's `libcurator-discovery-java`)
//! in a Curator driver JVM, with typed methods: the Java side of the discovery interop tests.
//!
//! [`CuratorDiscovery`] runs the driver's `discovery` command (`java/CuratorDiscovery.java` in the
//! testing crate): one Curator client and one `ServiceDiscovery<Object>` with Curator's
//! `JsonInstanceSerializer`, driven line by line as every
//! [`CuratorProcess`](zk_recipes_testing::CuratorProcess) is. Instances go in as
//! [`CuratorInstanceSpec`]s and come back as the JSON Curator serializes them, one `String` each.

mod builder;
mod discovery;
mod spec;

pub use builder::CuratorDiscoveryBuilder;
pub use discovery::CuratorDiscovery;
pub use spec::{
    CuratorArrival, CuratorCacheWatch, CuratorCachedInstances, CuratorInstanceSpec, CuratorProviderStrategy,
    CuratorServiceType, DISCOVERY_REPLY, DISCOVERY_START,
};
/// The testing crate's error and result, which every call here returns.
pub use zk_recipes_testing::{Result, TestingError};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CuratorDiscovery>();
        assert_send_sync::<CuratorDiscoveryBuilder>();
        assert_send_sync::<CuratorInstanceSpec>();
        assert_send_sync::<CuratorCachedInstances>();
        assert_send_sync::<CuratorCacheWatch>();
        assert_send_sync::<CuratorArrival>();
    }
}
