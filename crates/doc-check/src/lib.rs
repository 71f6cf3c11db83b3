//! Compiles every Rust block of the README, the guides in `docs/` and the crate READMEs
//! (`crates/*/README.md`, each published as its crate's page) as doctests, so that
//! `cargo test --doc -p zk-recipes-doc-check` fails when one stops compiling. Blocks that need a
//! server are `no_run`: they compile but do not run. Nothing here is published.
//!
//! Every include is `#[cfg(doctest)]`: a plain build (`cargo package` verifying this crate from
//! its package, where the guides are not) compiles an empty crate.

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/barriers.md")]
mod barriers {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/benchmarks.md")]
mod benchmarks {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/cache.md")]
mod cache {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/counters.md")]
mod counters {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/discovery.md")]
mod discovery {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/framework.md")]
mod framework {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/interop.md")]
mod interop {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/leader.md")]
mod leader {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/lease.md")]
mod lease {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/locks.md")]
mod locks {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/migrating-from-curator.md")]
mod migrating_from_curator {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/model.md")]
mod model {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/nodes.md")]
mod nodes {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/operations.md")]
mod operations {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/partition.md")]
mod partition {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/queue.md")]
mod queue {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/reliability.md")]
mod reliability {}
// Its blocks need the TLS and SASL features: `--features tls,sasl`.
#[cfg(all(doctest, feature = "tls", feature = "sasl"))]
#[doc = include_str!("../../../docs/security.md")]
mod security {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing.md")]
mod testing {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/timeouts.md")]
mod timeouts {}

/// The crate READMEs.
#[cfg(doctest)]
mod crates {
    #[doc = include_str!("../../barrier/README.md")]
    mod barrier {}
    #[doc = include_str!("../../cache/README.md")]
    mod cache {}
    #[doc = include_str!("../../counter/README.md")]
    mod counter {}
    #[doc = include_str!("../../discovery/README.md")]
    mod discovery {}
    #[doc = include_str!("../../framework/README.md")]
    mod framework {}
    #[doc = include_str!("../../leader/README.md")]
    mod leader {}
    #[doc = include_str!("../../lease/README.md")]
    mod lease {}
    #[doc = include_str!("../../lock-internals/README.md")]
    mod lock_internals {}
    #[doc = include_str!("../../mutex/README.md")]
    mod mutex {}
    #[doc = include_str!("../../nodes/README.md")]
    mod nodes {}
    #[doc = include_str!("../../partition/README.md")]
    mod partition {}
    #[doc = include_str!("../../queue/README.md")]
    mod queue {}
    #[doc = include_str!("../../recipes/README.md")]
    mod recipes {}
    #[doc = include_str!("../../rwlock/README.md")]
    mod rwlock {}
    #[doc = include_str!("../../semaphore/README.md")]
    mod semaphore {}
    #[doc = include_str!("../../testing/README.md")]
    mod testing {}
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every guide and every crate README with Rust blocks is included above, so a new one cannot
    /// be left out of the check.
    #[test]
    fn every_guide_and_crate_readme_is_compiled() {
        let this_file = include_str!("lib.rs");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut missing = Vec::new();
        let guides = std::fs::read_dir(root.join("docs")).expect("docs/");
        for guide in guides.map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8")) {
            if guide.ends_with(".md") && !this_file.contains(&format!("../../../docs/{guide}\")")) {
                missing.push(format!("docs/{guide}"));
            }
        }
        let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
        for krate in crates.map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8")) {
            let readme = root.join("crates").join(&krate).join("README.md");
            let has_rust = std::fs::read_to_string(&readme).is_ok_and(|text| text.contains("```rust"));
            if has_rust && !this_file.contains(&format!("../../{krate}/README.md\")")) {
                missing.push(format!("crates/{krate}/README.md"));
            }
        }
        assert!(missing.is_empty(), "not compiled by doc-check: {missing:?}");
    }
}
