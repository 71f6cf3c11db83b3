/*
 * The Curator driver's commands for service discovery (curator-x-discovery 5.4: ServiceDiscovery
 * with JsonInstanceSerializer, ServiceCache, ServiceProvider), for the discovery interop tests.
 * crates/testing/src/curator_discovery.rs drives them with typed methods (CuratorDiscovery).
 * Helpers (start, out, arg, ...) are CuratorDriver's.
 *
 * An instance is given as one line of JSON, a spec that ServiceInstance.builder() is filled from.
 * Only "name" is required; a key left out (or null) keeps the builder's default (a random UUID id,
 * the first non-loopback local address, now as the registration time, DYNAMIC, enabled):
 *   {"name": <string>, "id": <string>, "address": <string>, "port": <int>, "sslPort": <int>,
 *    "payload": <any JSON>, "serviceType": "DYNAMIC" | "DYNAMIC_SEQUENTIAL" | "STATIC" | "PERMANENT",
 *    "uriSpec": <UriSpec template, e.g. "{scheme}://{address}:{port}">,
 *    "registrationTimeUTC": <epoch millis>, "enabled": <bool>}
 * The payload is what Jackson reads the JSON as (an object: a LinkedHashMap, an array: an
 * ArrayList, a string, a number, a boolean), except that an object with "@class" becomes an
 * instance of that class, converted from the object's other keys: e.g. "java.util.TreeMap", or
 * "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance" (ZookeeperInstance.java, a
 * stand-in for Spring Cloud Zookeeper's payload: "id", "name", "metadata").
 *
 * Instances are printed one per line as JSON, UTF-8, exactly as Curator's JsonInstanceSerializer
 * serializes them: for an instance registered or updated here, the bytes the discovery writes
 * into its node; for an instance read back (queries, caches, providers), the instance as Curator
 * deserialized it, serialized again (so a Map payload read from a node carries "@class" then).
 *
 * Commands:
 *   discovery-defaults
 *       DEFAULT-INSTANCE <json> of ServiceInstance.builder().name("defaults").build(): Curator's
 *       default id, address, registration time, service type and (null) ports and payload
 *   discovery <connect> <base-path> [watch-instances] [enabled-field]
 *       ServiceDiscoveryBuilder.builder(Object.class).basePath(base-path) with the serializer
 *       JsonInstanceSerializer(Object.class) (compatible mode, Curator's default: no "enabled"
 *       field), or JsonInstanceSerializer(Object.class, false) with enabled-field; watchInstances
 *       (true) with watch-instances. Prints SESSION <hex id> timeout-ms=<ms>, then STARTED, then
 *       answers these lines on stdin:
 *         register <spec>         registerService: REGISTERED <json>
 *         update <spec>           updateService (an instance registered here, same id):
 *                                 UPDATED <json>
 *         unregister <name> <id>  unregisterService: UNREGISTERED <name> <id>
 *         names                   queryForNames: NAME <name> per service (sorted), NAMES-END
 *         instances <name>        queryForInstances: INSTANCE <json> per instance (sorted by id),
 *                                 INSTANCES-END
 *         instance <name> <id>    queryForInstance: INSTANCE <json> if there is one, INSTANCES-END
 *         cache-start <name>      a ServiceCache of the service, started (its first load done),
 *                                 with a listener counting cacheChanged calls: CACHE-STARTED <name>
 *         cache <name>            its getInstances(): CACHED <json> per instance (sorted by id),
 *                                 CACHE-END changes=<cacheChanged calls so far>
 *         cache-watch <name>      as cache-start, for a benchmark: the heap in use (after full GCs)
 *                                 before building the cache and after its first load, then a
 *                                 listener that, on each cacheChanged, diffs getInstances() against
 *                                 what it last saw (by object: Curator reads a new ServiceInstance
 *                                 per node change) and records <epoch-micros at the call> <id> for
 *                                 each instance added or re-read (Curator's listener does not say
 *                                 which): CACHE-WATCHING <name> heap_bytes=<after-before> instances=<n>
 *         arrivals <name>         what that listener recorded since the last call (then forgotten):
 *                                 ARRIVED <epoch-micros> <id> per arrival, ARRIVALS-END <count>
 *         cache-close <name>      CACHE-CLOSED <name>
 *         provider-start <name> <round-robin|random|sticky> [down-timeout-ms [down-errors]]
 *                                 a ServiceProvider with RoundRobinStrategy, RandomStrategy or
 *                                 StickyStrategy(RoundRobinStrategy), and DownInstancePolicy(
 *                                 down-timeout-ms, default 30000, down-errors, default 2), started:
 *                                 PROVIDER-STARTED <name>
 *         provide <name>          getInstance(): PROVIDED <json>, or PROVIDED - when it has none
 *         note-error <name> <id>  noteError(the provider's instance with that id): NOTED <name> <id>
 *         provider-close <name>   PROVIDER-CLOSED <name>
 *         close                   closes the providers, the caches, the discovery (Curator then
 *                                 deletes the nodes of what it registered) and the client: CLOSED,
 *                                 exit 0
 *       One cache and one provider per service name at a time. A failing line ends the driver
 *       (ERROR <message>, exit 1), as every command of the driver does.
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.describeSession;
import static zkrecipes.interop.CuratorDriver.out;
import static zkrecipes.interop.CuratorDriver.start;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.time.Instant;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.x.discovery.DownInstancePolicy;
import org.apache.curator.x.discovery.ProviderStrategy;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceInstanceBuilder;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.apache.curator.x.discovery.strategies.RandomStrategy;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;
import org.apache.curator.x.discovery.strategies.StickyStrategy;

final class CuratorDiscovery {
    /** Reads instance specs and converts payloads (not Curator's mapper: that one is the serializer's). */
    private static final ObjectMapper SPECS = new ObjectMapper();
    private static final Comparator<ServiceInstance<Object>> BY_ID = Comparator.comparing(ServiceInstance::getId);

    private CuratorDiscovery() {}

    static Integer run(String command, List<String> args) throws Exception {
        switch (command) {
            case "discovery-defaults":
                return defaults();
            case "discovery":
                return discovery(args);
            default:
                return null;
        }
    }

    private static int defaults() throws Exception {
        ServiceInstance<Object> instance = ServiceInstance.builder().name("defaults").build();
        outJson("DEFAULT-INSTANCE ", new JsonInstanceSerializer<>(Object.class).serialize(instance));
        return 0;
    }

    /** A cache and the number of cacheChanged calls its listener saw. */
    private static final class WatchedCache {
        final ServiceCache<Object> cache;
        final AtomicLong changes = new AtomicLong();

        WatchedCache(ServiceCache<Object> cache) {
            this.cache = cache;
        }
    }

    /** cache-watch's listener: which instances each cacheChanged brought, with when. */
    private static final class Arrivals implements ServiceCacheListener {
        private final ServiceCache<Object> cache;
        /** By id, the instance object last seen. */
        private final Map<String, ServiceInstance<Object>> seen = new HashMap<>();
        private final List<String> recorded = new ArrayList<>();

        Arrivals(ServiceCache<Object> cache) {
            this.cache = cache;
            for (ServiceInstance<Object> instance : cache.getInstances()) {
                seen.put(instance.getId(), instance);
            }
        }

        @Override
        public synchronized void cacheChanged() {
            Instant now = Instant.now();
            long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
            for (ServiceInstance<Object> instance : cache.getInstances()) {
                if (seen.put(instance.getId(), instance) != instance) {
                    recorded.add(micros + " " + instance.getId());
                }
            }
        }

        @Override
        public void stateChanged(CuratorFramework changed, ConnectionState state) {
            // Only the instances matter here.
        }

        synchronized List<String> drain() {
            List<String> drained = new ArrayList<>(recorded);
            recorded.clear();
            return drained;
        }
    }

    /** Heap in use after full collections. */
    private static long usedHeap() {
        Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }

    private static int discovery(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String basePath = arg(args, 1, "base-path");
        boolean watchInstances = false;
        boolean enabledField = false;
        for (String option : args.subList(2, args.size())) {
            switch (option) {
                case "watch-instances":
                    watchInstances = true;
                    break;
                case "enabled-field":
                    enabledField = true;
                    break;
                default:
                    throw new IllegalArgumentException("unknown discovery option " + option);
            }
        }
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        JsonInstanceSerializer<Object> serializer = enabledField
                ? new JsonInstanceSerializer<>(Object.class, false)
                : new JsonInstanceSerializer<>(Object.class);
        ServiceDiscovery<Object> discovery = ServiceDiscoveryBuilder.builder(Object.class)
                .client(client)
                .basePath(basePath)
                .serializer(serializer)
                .watchInstances(watchInstances)
                .build();
        discovery.start();
        Map<String, WatchedCache> caches = new TreeMap<>();
        Map<String, ServiceProvider<Object>> providers = new TreeMap<>();
        Map<String, Arrivals> watches = new TreeMap<>();
        out("STARTED");
        while (true) {
            String line = CuratorDriver.INPUT.take();
            int space = line.indexOf(' ');
            String verb = space < 0 ? line : line.substring(0, space);
            String rest = space < 0 ? "" : line.substring(space + 1).trim();
            List<String> words = rest.isEmpty() ? List.of() : Arrays.asList(rest.split("\\s+"));
            switch (verb) {
                case "register": {
                    ServiceInstance<Object> instance = instance(rest);
                    discovery.registerService(instance);
                    outJson("REGISTERED ", serializer.serialize(instance));
                    break;
                }
                case "update": {
                    ServiceInstance<Object> instance = instance(rest);
                    discovery.updateService(instance);
                    outJson("UPDATED ", serializer.serialize(instance));
                    break;
                }
                case "unregister": {
                    String name = arg(words, 0, "name");
                    String id = arg(words, 1, "id");
                    discovery.unregisterService(ServiceInstance.builder().name(name).id(id).build());
                    out("UNREGISTERED " + name + " " + id);
                    break;
                }
                case "names":
                    for (String name : new TreeSet<>(discovery.queryForNames())) {
                        out("NAME " + name);
                    }
                    out("NAMES-END");
                    break;
                case "instances":
                    printInstances("INSTANCE ", serializer, discovery.queryForInstances(arg(words, 0, "name")));
                    out("INSTANCES-END");
                    break;
                case "instance": {
                    ServiceInstance<Object> found =
                            discovery.queryForInstance(arg(words, 0, "name"), arg(words, 1, "id"));
                    if (found != null) {
                        outJson("INSTANCE ", serializer.serialize(found));
                    }
                    out("INSTANCES-END");
                    break;
                }
                case "cache-start": {
                    String name = arg(words, 0, "name");
                    if (caches.containsKey(name)) {
                        throw new IllegalStateException("a cache of " + name + " is already started");
                    }
                    WatchedCache watched = new WatchedCache(discovery.serviceCacheBuilder().name(name).build());
                    watched.cache.addListener(new ServiceCacheListener() {
                        @Override
                        public void cacheChanged() {
                            watched.changes.incrementAndGet();
                        }

                        @Override
                        public void stateChanged(CuratorFramework changed, ConnectionState state) {
                            // Only the instances matter here.
                        }
                    });
                    watched.cache.start();
                    caches.put(name, watched);
                    out("CACHE-STARTED " + name);
                    break;
                }
                case "cache": {
                    WatchedCache watched = existing(caches, arg(words, 0, "name"), "cache");
                    printInstances("CACHED ", serializer, watched.cache.getInstances());
                    out("CACHE-END changes=" + watched.changes.get());
                    break;
                }
                case "cache-watch": {
                    String name = arg(words, 0, "name");
                    if (caches.containsKey(name)) {
                        throw new IllegalStateException("a cache of " + name + " is already started");
                    }
                    long before = usedHeap();
                    WatchedCache watched = new WatchedCache(discovery.serviceCacheBuilder().name(name).build());
                    watched.cache.start();
                    long after = usedHeap();
                    Arrivals arrivals = new Arrivals(watched.cache);
                    watched.cache.addListener(arrivals);
                    caches.put(name, watched);
                    watches.put(name, arrivals);
                    out("CACHE-WATCHING " + name + " heap_bytes=" + (after - before)
                            + " instances=" + watched.cache.getInstances().size());
                    break;
                }
                case "arrivals": {
                    List<String> drained = existing(watches, arg(words, 0, "name"), "watched cache").drain();
                    StringBuilder lines = new StringBuilder();
                    for (String arrival : drained) {
                        lines.append("ARRIVED ").append(arrival).append('\n');
                    }
                    synchronized (System.out) {
                        System.out.print(lines);
                        System.out.flush();
                    }
                    out("ARRIVALS-END " + drained.size());
                    break;
                }
                case "cache-close": {
                    String name = arg(words, 0, "name");
                    existing(caches, name, "cache").cache.close();
                    caches.remove(name);
                    watches.remove(name);
                    out("CACHE-CLOSED " + name);
                    break;
                }
                case "provider-start": {
                    String name = arg(words, 0, "name");
                    if (providers.containsKey(name)) {
                        throw new IllegalStateException("a provider of " + name + " is already started");
                    }
                    ProviderStrategy<Object> strategy = strategy(arg(words, 1, "strategy"));
                    long downTimeoutMs = words.size() > 2 ? Long.parseLong(words.get(2)) : 30_000;
                    int downErrors = words.size() > 3 ? Integer.parseInt(words.get(3)) : 2;
                    ServiceProvider<Object> provider = discovery.serviceProviderBuilder()
                            .serviceName(name)
                            .providerStrategy(strategy)
                            .downInstancePolicy(
                                    new DownInstancePolicy(downTimeoutMs, TimeUnit.MILLISECONDS, downErrors))
                            .build();
                    provider.start();
                    providers.put(name, provider);
                    out("PROVIDER-STARTED " + name);
                    break;
                }
                case "provide": {
                    ServiceInstance<Object> chosen = existing(providers, arg(words, 0, "name"), "provider").getInstance();
                    if (chosen == null) {
                        out("PROVIDED -");
                    } else {
                        outJson("PROVIDED ", serializer.serialize(chosen));
                    }
                    break;
                }
                case "note-error": {
                    String name = arg(words, 0, "name");
                    String id = arg(words, 1, "id");
                    ServiceProvider<Object> provider = existing(providers, name, "provider");
                    ServiceInstance<Object> erring = null;
                    for (ServiceInstance<Object> candidate : provider.getAllInstances()) {
                        if (candidate.getId().equals(id)) {
                            erring = candidate;
                        }
                    }
                    if (erring == null) {
                        throw new IllegalArgumentException("the provider of " + name + " has no instance " + id);
                    }
                    provider.noteError(erring);
                    out("NOTED " + name + " " + id);
                    break;
                }
                case "provider-close": {
                    String name = arg(words, 0, "name");
                    existing(providers, name, "provider").close();
                    providers.remove(name);
                    out("PROVIDER-CLOSED " + name);
                    break;
                }
                case "close":
                    for (ServiceProvider<Object> provider : providers.values()) {
                        provider.close();
                    }
                    for (WatchedCache watched : caches.values()) {
                        watched.cache.close();
                    }
                    discovery.close();
                    client.close();
                    out("CLOSED");
                    return 0;
                default:
                    throw new IllegalArgumentException("unknown discovery line: " + line);
            }
        }
    }

    /** A ServiceInstance built from a spec (see the header). */
    private static ServiceInstance<Object> instance(String spec) throws Exception {
        JsonNode fields = SPECS.readTree(spec);
        if (fields == null || !fields.isObject()) {
            throw new IllegalArgumentException("an instance spec is a JSON object, not: " + spec);
        }
        ServiceInstanceBuilder<Object> builder = ServiceInstance.builder();
        Iterator<Map.Entry<String, JsonNode>> entries = fields.fields();
        while (entries.hasNext()) {
            Map.Entry<String, JsonNode> entry = entries.next();
            JsonNode value = entry.getValue();
            if (value.isNull()) {
                continue;
            }
            switch (entry.getKey()) {
                case "name":
                    builder.name(text(entry));
                    break;
                case "id":
                    builder.id(text(entry));
                    break;
                case "address":
                    builder.address(text(entry));
                    break;
                case "port":
                    builder.port(integer(entry));
                    break;
                case "sslPort":
                    builder.sslPort(integer(entry));
                    break;
                case "payload":
                    builder.payload(payload(value));
                    break;
                case "serviceType":
                    builder.serviceType(ServiceType.valueOf(text(entry)));
                    break;
                case "uriSpec":
                    builder.uriSpec(new UriSpec(text(entry)));
                    break;
                case "registrationTimeUTC":
                    if (!value.canConvertToLong()) {
                        throw new IllegalArgumentException("registrationTimeUTC is not a long: " + value);
                    }
                    builder.registrationTimeUTC(value.longValue());
                    break;
                case "enabled":
                    if (!value.isBoolean()) {
                        throw new IllegalArgumentException("enabled is not a boolean: " + value);
                    }
                    builder.enabled(value.booleanValue());
                    break;
                default:
                    throw new IllegalArgumentException("unknown key in an instance spec: " + entry.getKey());
            }
        }
        if (!fields.hasNonNull("name")) {
            throw new IllegalArgumentException("an instance spec needs a name: " + spec);
        }
        return builder.build();
    }

    /** The payload a spec's JSON stands for: an object with "@class" becomes that class. */
    private static Object payload(JsonNode value) throws ClassNotFoundException {
        if (value.isObject() && value.has("@class")) {
            ObjectNode fields = ((ObjectNode) value).deepCopy();
            String className = fields.remove("@class").asText();
            return SPECS.convertValue(fields, Class.forName(className));
        }
        return SPECS.convertValue(value, Object.class);
    }

    private static String text(Map.Entry<String, JsonNode> entry) {
        if (!entry.getValue().isTextual()) {
            throw new IllegalArgumentException(entry.getKey() + " is not a string: " + entry.getValue());
        }
        return entry.getValue().textValue();
    }

    private static int integer(Map.Entry<String, JsonNode> entry) {
        if (!entry.getValue().canConvertToInt() || !entry.getValue().isIntegralNumber()) {
            throw new IllegalArgumentException(entry.getKey() + " is not an int: " + entry.getValue());
        }
        return entry.getValue().intValue();
    }

    private static ProviderStrategy<Object> strategy(String name) {
        switch (name) {
            case "round-robin":
                return new RoundRobinStrategy<>();
            case "random":
                return new RandomStrategy<>();
            case "sticky":
                return new StickyStrategy<>(new RoundRobinStrategy<>());
            default:
                throw new IllegalArgumentException("unknown provider strategy " + name
                        + " (round-robin, random or sticky)");
        }
    }

    private static <V> V existing(Map<String, V> started, String name, String what) {
        V value = started.get(name);
        if (value == null) {
            throw new IllegalStateException("no " + what + " of " + name + " is started");
        }
        return value;
    }

    private static void printInstances(String prefix, JsonInstanceSerializer<Object> serializer,
            Collection<ServiceInstance<Object>> instances) throws Exception {
        List<ServiceInstance<Object>> sorted = new ArrayList<>(instances);
        sorted.sort(BY_ID);
        for (ServiceInstance<Object> instance : sorted) {
            outJson(prefix, serializer.serialize(instance));
        }
    }

    /** One stdout line: an ASCII prefix, then JSON as the serializer's UTF-8 bytes, unchanged. */
    private static void outJson(String prefix, byte[] json) {
        synchronized (System.out) {
            System.out.print(prefix);
            System.out.write(json, 0, json.length);
            System.out.println();
            System.out.flush();
        }
    }
}
