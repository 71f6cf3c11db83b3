//! [`CuratorDiscovery`]: the typed commands of a running discovery driver.

use std::time::Duration;

use zk_recipes_testing::{CuratorProcess, Result, TestingError};

use crate::spec::{
    CuratorArrival, CuratorCacheWatch, CuratorCachedInstances, CuratorInstanceSpec, CuratorProviderStrategy,
    DISCOVERY_START,
};

/// How many stderr lines an error quotes.
pub(crate) const LOG_TAIL_LINES: usize = 30;

/// Curator's service discovery in a JVM: a `ServiceDiscovery<Object>` with Curator's
/// `JsonInstanceSerializer` on one Curator client (its own session), plus the `ServiceCache`s and
/// `ServiceProvider`s started through it — the Java side of the discovery interop tests.
///
/// Instances come back as JSON, one `String` each, exactly as Curator's `JsonInstanceSerializer`
/// serializes them: for [`register`](Self::register) and [`update`](Self::update), the bytes
/// Curator writes into the instance's node; for instances read back (queries, caches, providers),
/// the instance as Curator understood the node, serialized again (so a `Map` payload read from a
/// node written elsewhere comes back with `"@class":"java.util.LinkedHashMap"`).
///
/// Every typed call waits at most the reply timeout
/// ([`DISCOVERY_REPLY`](crate::DISCOVERY_REPLY) by default). A call that
/// Curator fails (an update of an instance not registered here, a bad spec) ends the driver, as
/// every command of the Curator driver does: the call returns [`TestingError::Io`] with Curator's
/// message and stderr, and later calls fail too.
///
/// Dropping it SIGKILLs the JVM (its ephemeral nodes live until the server expires its session);
/// [`close`](Self::close) closes Curator's discovery first (which deletes the nodes of the
/// instances it registered). [`process`](Self::process) gives the underlying [`CuratorProcess`]
/// (to [`kill`](CuratorProcess::kill) it, or read its log).
///
/// # Example
/// ```no_run
/// # async fn demo(connect: &str) -> zk_recipes_interop::Result<()> {
/// use zk_recipes_interop::{
///     CuratorDiscovery, CuratorInstanceSpec, CuratorProviderStrategy, CuratorServiceType,
/// };
///
/// let mut curator = CuratorDiscovery::start(connect, "/services").await?;
/// let written = curator
///     .register(
///         &CuratorInstanceSpec::new("orders")
///             .id("orders-1")
///             .address("10.0.0.7")
///             .port(8080)
///             .payload_json(r#"{"zone":"eu-1"}"#)
///             .service_type(CuratorServiceType::Dynamic),
///     )
///     .await?;
/// println!("Curator wrote /services/orders/orders-1: {written}");
/// assert_eq!(curator.query_for_names().await?, ["orders"]);
/// assert_eq!(curator.query_for_instances("orders").await?, [written.clone()]);
///
/// curator.start_cache("orders").await?;
/// assert_eq!(curator.cache_instances("orders").await?.instances, [written]);
/// curator.start_provider("orders", CuratorProviderStrategy::RoundRobin).await?;
/// assert!(curator.provider_instance("orders").await?.is_some());
///
/// curator.unregister("orders", "orders-1").await?;
/// curator.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CuratorDiscovery {
    pub(crate) process: CuratorProcess,
    pub(crate) session_id: i64,
    pub(crate) reply_timeout: Duration,
}

impl CuratorDiscovery {
    /// What Curator's `ServiceInstance.builder().name("defaults").build()` fills in, serialized
    /// (its own short-lived JVM, no server): the default id, address, registration time and
    /// service type, the compare point for a Rust builder's defaults.
    ///
    /// # Errors
    /// As [`CuratorProcess::spawn`]; [`TestingError::Timeout`] after [`DISCOVERY_START`].
    ///
    /// # Cancel safety
    /// Cancelling SIGKILLs the JVM; nothing else is lost.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo() -> zk_recipes_interop::Result<()> {
    /// let json = zk_recipes_interop::CuratorDiscovery::default_instance().await?;
    /// assert!(json.starts_with(r#"{"name":"defaults","id":""#));
    /// # Ok(()) }
    /// ```
    pub async fn default_instance() -> Result<String> {
        let mut process = tokio::task::spawn_blocking(|| CuratorProcess::spawn(["discovery-defaults"]))
            .await
            .map_err(|join| io_error("starting the Curator driver", std::io::Error::other(join)))??;
        process.expect_line("DEFAULT-INSTANCE ", DISCOVERY_START).await
    }

    /// The Curator client's session id (the `ephemeral_owner` of its `DYNAMIC` instances' nodes).
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The driver process: to [`kill`](CuratorProcess::kill) it (a crash), or read its log.
    pub fn process(&mut self) -> &mut CuratorProcess {
        &mut self.process
    }

    /// `registerService`: creates the instance's node (`<base>/<name>/<id>`, of the kind its
    /// service type says). Returns the JSON Curator wrote into it.
    ///
    /// # Errors
    /// [`TestingError::Io`] if Curator fails (the node exists, say) or the driver exited;
    /// [`TestingError::Timeout`] after the reply timeout.
    ///
    /// # Cancel safety
    /// Not cancel safe: the instance may be registered, and its answer is then read by the next
    /// call in place of that call's.
    pub async fn register(&mut self, spec: &CuratorInstanceSpec) -> Result<String> {
        self.request(&format!("register {}", spec.to_json()), "REGISTERED ").await
    }

    /// `updateService`: rewrites the node of an instance registered through this discovery (same
    /// name and id). Returns the JSON Curator wrote.
    ///
    /// # Errors
    /// As [`register`](Self::register); Curator refuses an instance not registered here.
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn update(&mut self, spec: &CuratorInstanceSpec) -> Result<String> {
        self.request(&format!("update {}", spec.to_json()), "UPDATED ").await
    }

    /// `unregisterService`: deletes `<base>/<name>/<id>` (guaranteed delete; a missing node is
    /// fine) and forgets the instance. Curator 5.4 misses a `DYNAMIC_SEQUENTIAL` instance's node
    /// (named `<id><sequence>`): it stays until the session ends.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] for a name or id with whitespace (the protocol splits
    /// words); otherwise as [`register`](Self::register).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn unregister(&mut self, name: &str, id: &str) -> Result<()> {
        let line = format!("unregister {} {}", word(name)?, word(id)?);
        self.request(&line, "UNREGISTERED ").await.map(drop)
    }

    /// `queryForNames`: the services under the base path, sorted.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer is then read by the next call in place of that call's.
    pub async fn query_for_names(&mut self) -> Result<Vec<String>> {
        self.list("names", "NAME ", "NAMES-END").await
    }

    /// `queryForInstances(name)`: the instances of the service, sorted by id.
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister).
    ///
    /// # Cancel safety
    /// As [`query_for_names`](Self::query_for_names).
    pub async fn query_for_instances(&mut self, name: &str) -> Result<Vec<String>> {
        self.list(&format!("instances {}", word(name)?), "INSTANCE ", "INSTANCES-END").await
    }

    /// `queryForInstance(name, id)`: the instance, `None` if its node does not exist.
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister).
    ///
    /// # Cancel safety
    /// As [`query_for_names`](Self::query_for_names).
    pub async fn query_for_instance(&mut self, name: &str, id: &str) -> Result<Option<String>> {
        let line = format!("instance {} {}", word(name)?, word(id)?);
        Ok(self.list(&line, "INSTANCE ", "INSTANCES-END").await?.pop())
    }

    /// Starts a `ServiceCache` of the service `name` (one per name) and waits for its first load.
    /// A listener counts its `cacheChanged` calls ([`cache_instances`](Self::cache_instances)).
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister); Curator's driver refuses a second cache of one name.
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn start_cache(&mut self, name: &str) -> Result<()> {
        self.request(&format!("cache-start {}", word(name)?), "CACHE-STARTED ").await.map(drop)
    }

    /// What the `ServiceCache` of `name` holds now, and how many changes it has been told of. A
    /// test waiting for the cache to follow the server polls this.
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister); an error if no cache of `name` was started.
    ///
    /// # Cancel safety
    /// As [`query_for_names`](Self::query_for_names).
    pub async fn cache_instances(&mut self, name: &str) -> Result<CuratorCachedInstances> {
        self.process.send_line(&format!("cache {}", word(name)?)).await?;
        let (before, end) = self.process.lines_until("CACHE-END ", self.reply_timeout).await?;
        let changes = end
            .strip_prefix("CACHE-END changes=")
            .and_then(|count| count.trim().parse().ok())
            .ok_or_else(|| unexpected(&self.process, "CACHE-END changes=<n>", &end))?;
        Ok(CuratorCachedInstances { instances: with_prefix(before, "CACHED "), changes })
    }

    /// Starts a `ServiceCache` of the service `name` for a benchmark (the driver's
    /// `cache-watch`): measures the Java heap it takes (in use after full GCs, after its first
    /// load minus before it was built), then records which instance each `cacheChanged` brought
    /// and when, by diffing `getInstances()` against what it last saw (Curator's listener only
    /// says that something changed). [`cache_arrivals`](Self::cache_arrivals) reads the record;
    /// [`cache_instances`](Self::cache_instances) and [`close_cache`](Self::close_cache) work on
    /// it as on a cache from [`start_cache`](Self::start_cache).
    ///
    /// # Errors
    /// As [`start_cache`](Self::start_cache).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(curator: &mut zk_recipes_interop::CuratorDiscovery) -> zk_recipes_interop::Result<()> {
    /// let watch = curator.watch_cache("orders").await?;
    /// println!("{} instances in {} bytes of heap", watch.instances, watch.heap_bytes);
    /// // ... change the instances ...
    /// for arrival in curator.cache_arrivals("orders").await? {
    ///     println!("{} arrived at {} µs", arrival.id, arrival.epoch_micros);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn watch_cache(&mut self, name: &str) -> Result<CuratorCacheWatch> {
        let line = self.request(&format!("cache-watch {}", word(name)?), "CACHE-WATCHING ").await?;
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix(key)?.strip_prefix('=')?.parse::<i64>().ok())
        };
        match (field("heap_bytes"), field("instances")) {
            (Some(heap_bytes), Some(instances)) => {
                Ok(CuratorCacheWatch { heap_bytes, instances: usize::try_from(instances).unwrap_or(0) })
            }
            _ => Err(unexpected(&self.process, "CACHE-WATCHING <name> heap_bytes=<n> instances=<n>", &line)),
        }
    }

    /// The arrivals the cache of `name` started by [`watch_cache`](Self::watch_cache) recorded
    /// since the last call, in order (each `cacheChanged`'s, the instances in no set order).
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister); an error if no cache of `name` was started by
    /// [`watch_cache`](Self::watch_cache).
    ///
    /// # Cancel safety
    /// Not cancel safe: the arrivals read are forgotten by the driver.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(curator: &mut zk_recipes_interop::CuratorDiscovery) -> zk_recipes_interop::Result<()> {
    /// curator.watch_cache("orders").await?;
    /// let arrivals = curator.cache_arrivals("orders").await?;
    /// assert!(arrivals.is_empty(), "nothing changed yet");
    /// # Ok(()) }
    /// ```
    pub async fn cache_arrivals(&mut self, name: &str) -> Result<Vec<CuratorArrival>> {
        self.process.send_line(&format!("arrivals {}", word(name)?)).await?;
        let (before, end) = self.process.lines_until("ARRIVALS-END ", self.reply_timeout).await?;
        let mut arrivals = Vec::new();
        for line in with_prefix(before, "ARRIVED ") {
            let mut words = line.split_whitespace();
            match (words.next().and_then(|micros| micros.parse().ok()), words.next()) {
                (Some(epoch_micros), Some(id)) => {
                    arrivals.push(CuratorArrival { epoch_micros, id: id.to_owned() })
                }
                _ => return Err(unexpected(&self.process, "ARRIVED <epoch-micros> <id>", &line)),
            }
        }
        if end.strip_prefix("ARRIVALS-END ").and_then(|count| count.trim().parse::<usize>().ok())
            != Some(arrivals.len())
        {
            return Err(unexpected(&self.process, &format!("ARRIVALS-END {}", arrivals.len()), &end));
        }
        Ok(arrivals)
    }

    /// Closes the `ServiceCache` of `name`.
    ///
    /// # Errors
    /// As [`cache_instances`](Self::cache_instances).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn close_cache(&mut self, name: &str) -> Result<()> {
        self.request(&format!("cache-close {}", word(name)?), "CACHE-CLOSED ").await.map(drop)
    }

    /// Starts a `ServiceProvider` of the service `name` (one per name) with `strategy` and
    /// Curator's default `DownInstancePolicy` (an instance with 2 errors is left out for 30 s).
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister); Curator's driver refuses a second provider of one
    /// name.
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn start_provider(&mut self, name: &str, strategy: CuratorProviderStrategy) -> Result<()> {
        self.request(&format!("provider-start {} {}", word(name)?, strategy.as_str()), "PROVIDER-STARTED ")
            .await
            .map(drop)
    }

    /// As [`start_provider`](Self::start_provider), with `DownInstancePolicy(down_for,
    /// errors)`: an instance given `errors` [`note_error`](Self::note_error)s is left out for
    /// `down_for`.
    ///
    /// # Errors
    /// As [`start_provider`](Self::start_provider).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn start_provider_with_down_policy(
        &mut self,
        name: &str,
        strategy: CuratorProviderStrategy,
        down_for: Duration,
        errors: u32,
    ) -> Result<()> {
        let line =
            format!("provider-start {} {} {} {errors}", word(name)?, strategy.as_str(), down_for.as_millis());
        self.request(&line, "PROVIDER-STARTED ").await.map(drop)
    }

    /// The provider of `name`'s `getInstance()`: the instance its strategy picks, `None` when it
    /// has none.
    ///
    /// # Errors
    /// As [`unregister`](Self::unregister); an error if no provider of `name` was started.
    ///
    /// # Cancel safety
    /// As [`register`](Self::register) (a call moves a round-robin on).
    pub async fn provider_instance(&mut self, name: &str) -> Result<Option<String>> {
        let provided = self.request(&format!("provide {}", word(name)?), "PROVIDED ").await?;
        Ok(Some(provided).filter(|json| json != "-"))
    }

    /// The provider of `name`'s `noteError` for its instance `id`.
    ///
    /// # Errors
    /// As [`provider_instance`](Self::provider_instance); an error if the provider has no
    /// instance `id`.
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn note_error(&mut self, name: &str, id: &str) -> Result<()> {
        let line = format!("note-error {} {}", word(name)?, word(id)?);
        self.request(&line, "NOTED ").await.map(drop)
    }

    /// Closes the `ServiceProvider` of `name`.
    ///
    /// # Errors
    /// As [`provider_instance`](Self::provider_instance).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register).
    pub async fn close_provider(&mut self, name: &str) -> Result<()> {
        self.request(&format!("provider-close {}", word(name)?), "PROVIDER-CLOSED ").await.map(drop)
    }

    /// Closes the providers, the caches, the discovery (Curator deletes the nodes of the instances
    /// it registered, `STATIC` and `PERMANENT` ones too, but misses `DYNAMIC_SEQUENTIAL` ones,
    /// which end with the session) and the client, and waits for the JVM to exit with status 0.
    /// A cache or provider of a service with no instances leaves `<base>/<name>` behind: Curator
    /// makes it a container, and the server never reaps a container that never had a child.
    ///
    /// # Errors
    /// As [`register`](Self::register); [`TestingError::Io`] if the JVM exits with another status.
    ///
    /// # Cancel safety
    /// Cancelling drops the JVM, which is SIGKILLed wherever it was.
    pub async fn close(mut self) -> Result<()> {
        self.process.send_line("close").await?;
        self.process.lines_until("CLOSED", self.reply_timeout).await?;
        let status = self.process.wait(self.reply_timeout).await?;
        if status.success() {
            Ok(())
        } else {
            Err(io_error(
                format!(
                    "the Curator discovery driver exited with {status}; last stderr lines:\n{}",
                    self.process.log_tail(LOG_TAIL_LINES)
                ),
                std::io::Error::other("non-zero exit"),
            ))
        }
    }

    /// Sends `line`, waits for the line starting with `prefix`; returns the rest of it.
    async fn request(&mut self, line: &str, prefix: &str) -> Result<String> {
        self.process.send_line(line).await?;
        let (_, answer) = self.process.lines_until(prefix, self.reply_timeout).await?;
        Ok(answer[prefix.len()..].to_owned())
    }

    /// Sends `line`, reads until `end`; returns the lines before it starting with `prefix`,
    /// without it.
    async fn list(&mut self, line: &str, prefix: &str, end: &str) -> Result<Vec<String>> {
        self.process.send_line(line).await?;
        let (before, _) = self.process.lines_until(end, self.reply_timeout).await?;
        Ok(with_prefix(before, prefix))
    }
}

/// The lines starting with `prefix`, without it.
fn with_prefix(lines: Vec<String>, prefix: &str) -> Vec<String> {
    lines.into_iter().filter_map(|line| line.strip_prefix(prefix).map(str::to_owned)).collect()
}

/// `text` as one word of the line protocol (no whitespace, not empty).
fn word(text: &str) -> Result<&str> {
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        Err(TestingError::InvalidArgument(format!(
            "{text:?}: the Curator discovery driver takes names and ids without whitespace"
        )))
    } else {
        Ok(text)
    }
}

/// An I/O error of the driver, with what it was doing.
pub(crate) fn io_error(context: impl Into<String>, source: std::io::Error) -> TestingError {
    TestingError::Io { context: context.into(), source }
}

pub(crate) fn unexpected(process: &CuratorProcess, expected: &str, line: &str) -> TestingError {
    io_error(
        format!(
            "the Curator discovery driver printed {line:?} where {expected} was due; last stderr lines:\n{}",
            process.log_tail(LOG_TAIL_LINES)
        ),
        std::io::Error::from(std::io::ErrorKind::InvalidData),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_have_no_whitespace() {
        assert_eq!(word("orders-1").expect("a word"), "orders-1");
        for bad in ["", "two words", "tab\there", "line\n"] {
            assert!(matches!(word(bad), Err(TestingError::InvalidArgument(_))), "{bad:?}");
        }
    }
}
