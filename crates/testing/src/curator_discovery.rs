//! Curator's service discovery (`curator-x-discovery` 5.4, Debian's `libcurator-discovery-java`)
//! in a Curator driver JVM, with typed methods: the Java side of the discovery interop tests.
//!
//! [`CuratorDiscovery`] runs the driver's `discovery` command (`java/CuratorDiscovery.java` in this
//! crate): one Curator client and one `ServiceDiscovery<Object>` with Curator's
//! `JsonInstanceSerializer`, driven line by line as every [`CuratorProcess`] is. Instances go in as
//! [`CuratorInstanceSpec`]s and come back as the JSON Curator serializes them, one `String` each.

use std::time::Duration;

use crate::classpath::Jit;
use crate::curator::CuratorProcess;
use crate::error::{Result, TestingError};

/// How long [`CuratorDiscoveryBuilder::start`] waits by default for the JVM to start, connect and
/// start its `ServiceDiscovery` (the first start in a test process also compiles the driver).
pub const DISCOVERY_START: Duration = Duration::from_secs(60);

/// How long each typed call of a [`CuratorDiscovery`] waits by default for Curator's answer.
pub const DISCOVERY_REPLY: Duration = Duration::from_secs(30);

/// stderr lines quoted in errors.
const LOG_TAIL_LINES: usize = 30;

/// Curator's `ServiceType`: which kind of node an instance is registered as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CuratorServiceType {
    /// `DYNAMIC`: an ephemeral node, gone with the session (Curator's default).
    #[default]
    Dynamic,
    /// `DYNAMIC_SEQUENTIAL`: an ephemeral-sequential node (`<id><sequence>`).
    DynamicSequential,
    /// `STATIC`: a persistent node.
    Static,
    /// `PERMANENT`: a persistent node.
    Permanent,
}

impl CuratorServiceType {
    /// The name Curator writes in `serviceType`, e.g. `"DYNAMIC"`.
    ///
    /// ```
    /// use zk_recipes_testing::CuratorServiceType;
    /// assert_eq!(CuratorServiceType::DynamicSequential.as_str(), "DYNAMIC_SEQUENTIAL");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            CuratorServiceType::Dynamic => "DYNAMIC",
            CuratorServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
            CuratorServiceType::Static => "STATIC",
            CuratorServiceType::Permanent => "PERMANENT",
        }
    }
}

/// The `ProviderStrategy` of a Curator `ServiceProvider`
/// ([`CuratorDiscovery::start_provider`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CuratorProviderStrategy {
    /// `RoundRobinStrategy`.
    RoundRobin,
    /// `RandomStrategy`.
    Random,
    /// `StickyStrategy` over a `RoundRobinStrategy`.
    Sticky,
}

impl CuratorProviderStrategy {
    fn as_str(self) -> &'static str {
        match self {
            CuratorProviderStrategy::RoundRobin => "round-robin",
            CuratorProviderStrategy::Random => "random",
            CuratorProviderStrategy::Sticky => "sticky",
        }
    }
}

/// An instance for the Java side to register or update, built with Curator's
/// `ServiceInstance.builder()`: every field left unset keeps Curator's default (a random UUID id,
/// the first non-loopback local address, now as the registration time, [`CuratorServiceType::Dynamic`],
/// no ports, no payload, no URI spec, enabled).
///
/// # Example
/// ```
/// use zk_recipes_testing::{CuratorInstanceSpec, CuratorServiceType};
///
/// let spec = CuratorInstanceSpec::new("orders")
///     .id("orders-1")
///     .address("10.0.0.7")
///     .port(8080)
///     .payload_json(r#"{"zone":"eu-1"}"#)
///     .service_type(CuratorServiceType::Static)
///     .uri_spec("{scheme}://{address}:{port}")
///     .registration_time_utc(1_700_000_000_000);
/// assert_eq!(
///     spec.to_json(),
///     r#"{"name":"orders","id":"orders-1","address":"10.0.0.7","port":8080,"payload":{"zone":"eu-1"},"serviceType":"STATIC","uriSpec":"{scheme}://{address}:{port}","registrationTimeUTC":1700000000000}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorInstanceSpec {
    name: String,
    id: Option<String>,
    address: Option<String>,
    port: Option<u16>,
    ssl_port: Option<u16>,
    payload_json: Option<String>,
    service_type: Option<CuratorServiceType>,
    uri_spec: Option<String>,
    registration_time_utc: Option<i64>,
    enabled: Option<bool>,
}

impl CuratorInstanceSpec {
    /// An instance of the service `name`, every other field Curator's default.
    pub fn new(name: impl Into<String>) -> CuratorInstanceSpec {
        CuratorInstanceSpec {
            name: name.into(),
            id: None,
            address: None,
            port: None,
            ssl_port: None,
            payload_json: None,
            service_type: None,
            uri_spec: None,
            registration_time_utc: None,
            enabled: None,
        }
    }

    /// The instance id (the node's name). Defaults to Curator's random UUID.
    pub fn id(mut self, id: impl Into<String>) -> CuratorInstanceSpec {
        self.id = Some(id.into());
        self
    }

    /// The address. Defaults to Curator's choice: the first non-loopback local address.
    pub fn address(mut self, address: impl Into<String>) -> CuratorInstanceSpec {
        self.address = Some(address.into());
        self
    }

    /// The port. Defaults to none (`null`).
    pub fn port(mut self, port: u16) -> CuratorInstanceSpec {
        self.port = Some(port);
        self
    }

    /// The SSL port. Defaults to none (`null`).
    pub fn ssl_port(mut self, ssl_port: u16) -> CuratorInstanceSpec {
        self.ssl_port = Some(ssl_port);
        self
    }

    /// The payload, as JSON text (sent as is; line breaks become spaces). The Java side reads it
    /// with Jackson: an object becomes a `LinkedHashMap` (written back with
    /// `"@class":"java.util.LinkedHashMap"`), an array an `ArrayList`, a scalar its Java type;
    /// an object with `"@class"` becomes an instance of that class, such as
    /// `org.springframework.cloud.zookeeper.discovery.ZookeeperInstance` (a stand-in the driver
    /// carries, with Spring Cloud Zookeeper's `id`, `name` and `metadata`) or `java.util.TreeMap`.
    /// Defaults to none (`null`).
    pub fn payload_json(mut self, payload_json: impl Into<String>) -> CuratorInstanceSpec {
        self.payload_json = Some(payload_json.into());
        self
    }

    /// The service type. Defaults to [`CuratorServiceType::Dynamic`].
    pub fn service_type(mut self, service_type: CuratorServiceType) -> CuratorInstanceSpec {
        self.service_type = Some(service_type);
        self
    }

    /// The URI spec template, e.g. `{scheme}://{address}:{port}` (Curator's `new UriSpec(...)`).
    /// Defaults to none (`null`).
    pub fn uri_spec(mut self, template: impl Into<String>) -> CuratorInstanceSpec {
        self.uri_spec = Some(template.into());
        self
    }

    /// The registration time, in milliseconds since the epoch: set it to make Curator's bytes
    /// predictable. Defaults to the time the Java side builds the instance.
    pub fn registration_time_utc(mut self, epoch_millis: i64) -> CuratorInstanceSpec {
        self.registration_time_utc = Some(epoch_millis);
        self
    }

    /// Whether the instance is enabled (only written with
    /// [`CuratorDiscoveryBuilder::enabled_field`]). Defaults to `true`.
    pub fn enabled(mut self, enabled: bool) -> CuratorInstanceSpec {
        self.enabled = Some(enabled);
        self
    }

    /// The spec as the one line of JSON the driver reads (its keys are `ServiceInstance`'s field
    /// names; unset fields are left out).
    pub fn to_json(&self) -> String {
        let mut fields = vec![format!("\"name\":{}", json_string(&self.name))];
        let mut text = |key: &str, value: &Option<String>| {
            if let Some(value) = value {
                fields.push(format!("\"{key}\":{}", json_string(value)));
            }
        };
        text("id", &self.id);
        text("address", &self.address);
        if let Some(port) = self.port {
            fields.push(format!("\"port\":{port}"));
        }
        if let Some(ssl_port) = self.ssl_port {
            fields.push(format!("\"sslPort\":{ssl_port}"));
        }
        if let Some(payload) = &self.payload_json {
            fields.push(format!("\"payload\":{}", payload.replace(['\n', '\r'], " ")));
        }
        if let Some(service_type) = self.service_type {
            fields.push(format!("\"serviceType\":\"{}\"", service_type.as_str()));
        }
        if let Some(uri_spec) = &self.uri_spec {
            fields.push(format!("\"uriSpec\":{}", json_string(uri_spec)));
        }
        if let Some(millis) = self.registration_time_utc {
            fields.push(format!("\"registrationTimeUTC\":{millis}"));
        }
        if let Some(enabled) = self.enabled {
            fields.push(format!("\"enabled\":{enabled}"));
        }
        format!("{{{}}}", fields.join(","))
    }
}

/// A JSON string literal for `text`.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            control if u32::from(control) < 0x20 => {
                quoted.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// What a Curator `ServiceCache` holds ([`CuratorDiscovery::cache_instances`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorCachedInstances {
    /// `getInstances()`, each as Curator serializes it, sorted by id.
    pub instances: Vec<String>,
    /// How many times the cache's listener was told `cacheChanged` since the cache started.
    pub changes: u64,
}

/// A Curator `ServiceCache` started for a benchmark ([`CuratorDiscovery::watch_cache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuratorCacheWatch {
    /// Java heap in use after full GCs, after the cache's first load minus before it was built.
    pub heap_bytes: i64,
    /// How many instances it held after its first load.
    pub instances: usize,
}

/// An instance a watched Curator `ServiceCache` got ([`CuratorDiscovery::cache_arrivals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorArrival {
    /// When Curator called the cache's listener, in microseconds since the Unix epoch (the JVM's
    /// clock: this machine's).
    pub epoch_micros: u64,
    /// The id of the instance that was added or re-read.
    pub id: String,
}

/// Settings of a [`CuratorDiscovery`]; [`start`](Self::start) launches it.
///
/// # Example
/// ```no_run
/// # async fn demo(connect: &str) -> zk_recipes_testing::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_testing::CuratorDiscovery;
///
/// let curator = CuratorDiscovery::builder(connect, "/services")
///     .watch_instances(true)
///     .session_timeout(Duration::from_secs(4))
///     .start()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct CuratorDiscoveryBuilder {
    connect: String,
    base_path: String,
    watch_instances: bool,
    enabled_field: bool,
    session_timeout: Option<Duration>,
    start_timeout: Duration,
    reply_timeout: Duration,
    jit: Jit,
}

impl CuratorDiscoveryBuilder {
    /// Curator's `watchInstances`: the discovery watches the nodes of the instances it registered
    /// and re-reads them when they change. Defaults to `false`, as Curator's.
    pub fn watch_instances(mut self, watch_instances: bool) -> CuratorDiscoveryBuilder {
        self.watch_instances = watch_instances;
        self
    }

    /// Serialize with `JsonInstanceSerializer(Object.class, false)`, which also writes
    /// `"enabled"`. Defaults to `false`: Curator's default serializer, in compatible mode, leaves
    /// it out.
    pub fn enabled_field(mut self, enabled_field: bool) -> CuratorDiscoveryBuilder {
        self.enabled_field = enabled_field;
        self
    }

    /// The session timeout the Curator client asks for. Defaults to the driver's 10 s.
    pub fn session_timeout(mut self, session_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.session_timeout = Some(session_timeout);
        self
    }

    /// How long [`start`](Self::start) waits for the discovery to start. Defaults to 60 s
    /// ([`DISCOVERY_START`]).
    pub fn start_timeout(mut self, start_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.start_timeout = start_timeout;
        self
    }

    /// How long each typed call waits for Curator's answer. Defaults to 30 s
    /// ([`DISCOVERY_REPLY`]).
    pub fn reply_timeout(mut self, reply_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.reply_timeout = reply_timeout;
        self
    }

    /// How the JVM compiles its hot code. Defaults to [`Jit::QuickStart`]; a benchmark uses
    /// [`Jit::Full`].
    pub fn jit(mut self, jit: Jit) -> CuratorDiscoveryBuilder {
        self.jit = jit;
        self
    }

    /// Launches the JVM (compiling the driver first if this process has not yet, on a blocking
    /// thread) and waits until its `ServiceDiscovery` has started.
    ///
    /// # Errors
    /// As [`CuratorProcess::spawn`]; [`TestingError::Timeout`] if it has not started within the
    /// start timeout; [`TestingError::Io`] if the driver fails (it cannot connect, say), quoting
    /// its stderr.
    ///
    /// # Cancel safety
    /// Cancelling drops the JVM being started, which is SIGKILLed: its session ends when the
    /// server expires it.
    pub async fn start(self) -> Result<CuratorDiscovery> {
        let mut args = Vec::new();
        if let Some(timeout) = self.session_timeout {
            args.extend(["--session-timeout-ms".to_owned(), timeout.as_millis().to_string()]);
        }
        args.extend(["discovery".to_owned(), self.connect.clone(), self.base_path.clone()]);
        if self.watch_instances {
            args.push("watch-instances".to_owned());
        }
        if self.enabled_field {
            args.push("enabled-field".to_owned());
        }
        let jit = self.jit;
        let mut process = tokio::task::spawn_blocking(move || CuratorProcess::spawn_with_jit(jit, args))
            .await
            .map_err(|join| TestingError::io("starting the Curator driver", std::io::Error::other(join)))??;
        let session = process.expect_line("SESSION ", self.start_timeout).await?;
        let session_id = session
            .split_whitespace()
            .next()
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(|id| id as i64)
            .ok_or_else(|| unexpected(&process, "SESSION <hex id> timeout-ms=<ms>", &session))?;
        process.lines_until("STARTED", self.start_timeout).await?;
        Ok(CuratorDiscovery { process, session_id, reply_timeout: self.reply_timeout })
    }
}

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
/// Every typed call waits at most the reply timeout ([`DISCOVERY_REPLY`] by default). A call that
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
/// # async fn demo(connect: &str) -> zk_recipes_testing::Result<()> {
/// use zk_recipes_testing::{
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
    process: CuratorProcess,
    session_id: i64,
    reply_timeout: Duration,
}

impl CuratorDiscovery {
    /// Settings for a discovery on the server(s) at `connect`, its services under `base_path`.
    pub fn builder(connect: impl Into<String>, base_path: impl Into<String>) -> CuratorDiscoveryBuilder {
        CuratorDiscoveryBuilder {
            connect: connect.into(),
            base_path: base_path.into(),
            watch_instances: false,
            enabled_field: false,
            session_timeout: None,
            start_timeout: DISCOVERY_START,
            reply_timeout: DISCOVERY_REPLY,
            jit: Jit::QuickStart,
        }
    }

    /// A discovery with the builder's defaults ([`builder`](Self::builder)): Curator's own
    /// defaults, a 10 s session.
    ///
    /// # Errors
    /// As [`CuratorDiscoveryBuilder::start`].
    ///
    /// # Cancel safety
    /// As [`CuratorDiscoveryBuilder::start`].
    pub async fn start(connect: &str, base_path: &str) -> Result<CuratorDiscovery> {
        CuratorDiscovery::builder(connect, base_path).start().await
    }

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
    /// # async fn demo() -> zk_recipes_testing::Result<()> {
    /// let json = zk_recipes_testing::CuratorDiscovery::default_instance().await?;
    /// assert!(json.starts_with(r#"{"name":"defaults","id":""#));
    /// # Ok(()) }
    /// ```
    pub async fn default_instance() -> Result<String> {
        let mut process = tokio::task::spawn_blocking(|| CuratorProcess::spawn(["discovery-defaults"]))
            .await
            .map_err(|join| TestingError::io("starting the Curator driver", std::io::Error::other(join)))??;
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
    /// # async fn demo(curator: &mut zk_recipes_testing::CuratorDiscovery) -> zk_recipes_testing::Result<()> {
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
    /// # async fn demo(curator: &mut zk_recipes_testing::CuratorDiscovery) -> zk_recipes_testing::Result<()> {
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
            Err(TestingError::io(
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

fn unexpected(process: &CuratorProcess, expected: &str, line: &str) -> TestingError {
    TestingError::io(
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
    fn specs_are_one_line_of_json_with_curators_keys() {
        let spec = CuratorInstanceSpec::new("a \"quoted\"\nname")
            .ssl_port(8443)
            .payload_json("{\n  \"k\": [1, 2]\n}")
            .enabled(false);
        assert_eq!(
            spec.to_json(),
            r#"{"name":"a \"quoted\"\nname","sslPort":8443,"payload":{   "k": [1, 2] },"enabled":false}"#
        );
        assert!(!spec.to_json().contains('\n'));
        assert_eq!(json_string("tab\tbell\u{7}é"), r#""tab\tbell\u0007é""#);
    }

    #[test]
    fn words_have_no_whitespace() {
        assert_eq!(word("orders-1").expect("a word"), "orders-1");
        for bad in ["", "two words", "tab\there", "line\n"] {
            assert!(matches!(word(bad), Err(TestingError::InvalidArgument(_))), "{bad:?}");
        }
    }

    #[test]
    fn service_types_are_curators_names() {
        let names: Vec<_> = [
            CuratorServiceType::Dynamic,
            CuratorServiceType::DynamicSequential,
            CuratorServiceType::Static,
            CuratorServiceType::Permanent,
        ]
        .iter()
        .map(|kind| kind.as_str())
        .collect();
        assert_eq!(names, ["DYNAMIC", "DYNAMIC_SEQUENTIAL", "STATIC", "PERMANENT"]);
        assert_eq!(CuratorServiceType::default(), CuratorServiceType::Dynamic);
    }

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
