/*
 * The Curator driver's commands for nodes and caches (CuratorCache, PersistentNode,
 * PersistentTtlNode, GroupMember), for tests/interop_nodes.rs and benches/cache.rs. Helpers
 * (start, out, arg, awaitLine, ...) are CuratorDriver's.
 *
 * Data is printed as lowercase hex ("-" for none, "" shows as an empty field after the space).
 *
 * Commands:
 *   cache-watch <connect> <path> [single-node] [compressed]
 *       CuratorCache.build(path, options): SESSION, then one line per listener call:
 *       CREATED <path> <hex>, CHANGED <path> <hex old> <hex new>, DELETED <path> <hex>, INITIALIZED.
 *       Stdin: "dump" prints ENTRY <path> <hex> per cached node (sorted), then DUMP-END;
 *       "close" closes the cache and exits 0.
 *   node-ops <connect> <compressed:on|off> <op>...
 *       ops in order, each awaited: create <path> <utf8 data> (creatingParentsIfNeeded),
 *       set <path> <utf8 data>, delete <path>; then DONE ops=N
 *   persistent-node <connect> <mode> <protected:on|off> <path> <utf8 data|->
 *       PersistentNode(CreateMode.<mode>): SESSION, NODE <actual path> once created;
 *       stdin "set <utf8 data>" -> SET, "close" -> CLOSED and exit 0
 *   ttl-node <connect> <path> <ttl-ms> <utf8 data|->
 *       PersistentTtlNode (touch child "touch", every ttl/2): SESSION, NODE <path> once created;
 *       stdin "touched" waits until <path>/touch exists and prints TOUCHED <path>/touch;
 *       "close" -> CLOSED and exit 0
 *   group-member <connect> <path> <id> <utf8 data|->
 *       GroupMember(path, id, data or Curator's default, the local address): STARTED;
 *       stdin "members" prints MEMBER <id> <hex> lines (sorted) then MEMBERS-END;
 *       "set <utf8 data>" -> SET; "close" -> CLOSED and exit 0
 *   bench-cache <connect> <path> <timeout-s> [compressed]
 *       CuratorCache of the subtree: heap used before (after a GC), start, wait for
 *       initialized, heap used after: LOADED ms=<load> nodes=<size> heap_bytes=<after-before>;
 *       if it has not initialized within timeout-s: LOAD-FAILED ms=<waited> nodes=<size>, exit 0.
 *       Then every CHANGED event whose new data starts with "<epoch-micros>:" is timed
 *       (receive time minus that stamp). Stdin: "lag-reset" clears (LAG-RESET), "lag-report"
 *       prints LAG count=N p50_us=<..> p99_us=<..>; "close" exits.
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.awaitLine;
import static zkrecipes.interop.CuratorDriver.describeSession;
import static zkrecipes.interop.CuratorDriver.epochMicros;
import static zkrecipes.interop.CuratorDriver.optionalData;
import static zkrecipes.interop.CuratorDriver.out;
import static zkrecipes.interop.CuratorDriver.start;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.zookeeper.CreateMode;

final class CuratorNodes {
    private CuratorNodes() {}

    static Integer run(String command, List<String> args) throws Exception {
        switch (command) {
            case "cache-watch":
                return cacheWatch(args);
            case "node-ops":
                return nodeOps(args);
            case "persistent-node":
                return persistentNode(args);
            case "ttl-node":
                return ttlNode(args);
            case "group-member":
                return groupMember(args);
            case "bench-cache":
                return benchCache(args);
            default:
                return null;
        }
    }

    private static int cacheWatch(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        List<CuratorCache.Options> options = new ArrayList<>();
        for (String option : args.subList(2, args.size())) {
            switch (option) {
                case "single-node":
                    options.add(CuratorCache.Options.SINGLE_NODE_CACHE);
                    break;
                case "compressed":
                    options.add(CuratorCache.Options.COMPRESSED_DATA);
                    break;
                default:
                    throw new IllegalArgumentException("unknown cache option " + option);
            }
        }
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        CuratorCache cache = CuratorCache.build(client, path, options.toArray(new CuratorCache.Options[0]));
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(node -> out("CREATED " + node.getPath() + " " + hex(node.getData())))
                .forChanges((old, now) -> out("CHANGED " + now.getPath() + " " + hex(old.getData()) + " "
                        + hex(now.getData())))
                .forDeletes(node -> out("DELETED " + node.getPath() + " " + hex(node.getData())))
                .forInitialized(() -> out("INITIALIZED"))
                .build());
        cache.start();
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.equals("dump")) {
                Map<String, byte[]> sorted = new TreeMap<>();
                cache.stream().forEach(node -> sorted.put(node.getPath(), node.getData()));
                for (Map.Entry<String, byte[]> entry : sorted.entrySet()) {
                    out("ENTRY " + entry.getKey() + " " + hex(entry.getValue()));
                }
                out("DUMP-END");
            } else if (line.equals("close")) {
                cache.close();
                client.close();
                return 0;
            }
        }
    }

    private static int nodeOps(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        boolean compressed = arg(args, 1, "compressed").equals("on");
        CuratorFramework client = start(connect);
        int ops = 0;
        int index = 2;
        while (index < args.size()) {
            String op = args.get(index);
            String path = arg(args, index + 1, "path");
            switch (op) {
                case "create": {
                    byte[] data = arg(args, index + 2, "data").getBytes(StandardCharsets.UTF_8);
                    if (compressed) {
                        client.create().compressed().creatingParentsIfNeeded().forPath(path, data);
                    } else {
                        client.create().creatingParentsIfNeeded().forPath(path, data);
                    }
                    index += 3;
                    break;
                }
                case "set": {
                    byte[] data = arg(args, index + 2, "data").getBytes(StandardCharsets.UTF_8);
                    if (compressed) {
                        client.setData().compressed().forPath(path, data);
                    } else {
                        client.setData().forPath(path, data);
                    }
                    index += 3;
                    break;
                }
                case "delete":
                    client.delete().forPath(path);
                    index += 2;
                    break;
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
            ops++;
        }
        out("DONE ops=" + ops);
        client.close();
        return 0;
    }

    private static int persistentNode(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        CreateMode mode = CreateMode.valueOf(arg(args, 1, "mode"));
        boolean protection = arg(args, 2, "protected").equals("on");
        String path = arg(args, 3, "path");
        byte[] data = orEmpty(optionalData(args, 4));
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        PersistentNode node = new PersistentNode(client, mode, protection, path, data);
        node.start();
        if (!node.waitForInitialCreate(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the node was not created within 20 s");
        }
        out("NODE " + node.getActualPath());
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.startsWith("set ")) {
                node.setData(line.substring(4).getBytes(StandardCharsets.UTF_8));
                out("SET");
            } else if (line.equals("close")) {
                node.close();
                out("CLOSED");
                client.close();
                return 0;
            }
        }
    }

    private static int ttlNode(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        long ttlMs = Long.parseLong(arg(args, 2, "ttl-ms"));
        byte[] data = orEmpty(optionalData(args, 3));
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        PersistentTtlNode node = new PersistentTtlNode(client, path, ttlMs, data);
        node.start();
        if (!node.waitForInitialCreate(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the node was not created within 20 s");
        }
        out("NODE " + path);
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.equals("touched")) {
                String touch = path + "/" + PersistentTtlNode.DEFAULT_CHILD_NODE_NAME;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (client.checkExists().forPath(touch) == null) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException(touch + " was not created within 20 s");
                    }
                    Thread.sleep(20);
                }
                out("TOUCHED " + touch);
            } else if (line.equals("close")) {
                node.close();
                out("CLOSED");
                client.close();
                return 0;
            }
        }
    }

    private static int groupMember(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String id = arg(args, 2, "id");
        byte[] data = optionalData(args, 3);
        CuratorFramework client = start(connect);
        GroupMember member = data == null ? new GroupMember(client, path, id) : new GroupMember(client, path, id, data);
        member.start();
        out("STARTED");
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.equals("members")) {
                for (Map.Entry<String, byte[]> entry : new TreeMap<>(member.getCurrentMembers()).entrySet()) {
                    out("MEMBER " + entry.getKey() + " " + hex(entry.getValue()));
                }
                out("MEMBERS-END");
            } else if (line.startsWith("set ")) {
                member.setThisData(line.substring(4).getBytes(StandardCharsets.UTF_8));
                out("SET");
            } else if (line.equals("close")) {
                member.close();
                out("CLOSED");
                client.close();
                return 0;
            }
        }
    }

    private static int benchCache(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        long timeoutS = Long.parseLong(arg(args, 2, "timeout-s"));
        boolean compressed = args.size() > 3 && args.get(3).equals("compressed");
        CuratorFramework client = start(connect);
        List<Long> lags = Collections.synchronizedList(new ArrayList<>());
        long before = usedHeap();
        CuratorCache cache = compressed
                ? CuratorCache.build(client, path, CuratorCache.Options.COMPRESSED_DATA)
                : CuratorCache.build(client, path);
        java.util.concurrent.CountDownLatch initialized = new java.util.concurrent.CountDownLatch(1);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forInitialized(initialized::countDown)
                .forChanges((old, now) -> {
                    long received = epochMicros();
                    byte[] data = now.getData();
                    if (data == null) {
                        return;
                    }
                    String text = new String(data, StandardCharsets.UTF_8);
                    int colon = text.indexOf(':');
                    if (colon > 0) {
                        try {
                            lags.add(received - Long.parseLong(text.substring(0, colon)));
                        } catch (NumberFormatException ignored) {
                            // not a stamped write
                        }
                    }
                })
                .build());
        long started = System.nanoTime();
        cache.start();
        if (!initialized.await(timeoutS, TimeUnit.SECONDS)) {
            out("LOAD-FAILED ms=" + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " nodes="
                    + cache.size());
            cache.close();
            client.close();
            return 0;
        }
        long loadMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        long after = usedHeap();
        out("LOADED ms=" + loadMs + " nodes=" + cache.size() + " heap_bytes=" + (after - before));
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.equals("lag-reset")) {
                lags.clear();
                out("LAG-RESET");
            } else if (line.equals("lag-report")) {
                List<Long> sorted;
                synchronized (lags) {
                    sorted = new ArrayList<>(lags);
                }
                Collections.sort(sorted);
                out("LAG count=" + sorted.size() + " p50_us=" + percentile(sorted, 50) + " p99_us="
                        + percentile(sorted, 99));
            } else if (line.equals("close")) {
                cache.close();
                client.close();
                return 0;
            }
        }
    }

    private static long percentile(List<Long> sorted, int percent) {
        if (sorted.isEmpty()) {
            return 0;
        }
        int index = (int) Math.min(sorted.size() - 1, Math.ceil(sorted.size() * percent / 100.0) - 1);
        return sorted.get(Math.max(0, index));
    }

    /** Heap in use after a full collection. */
    private static long usedHeap() {
        Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }

    private static byte[] orEmpty(byte[] data) {
        return data == null ? new byte[0] : data;
    }

    static String hex(byte[] data) {
        if (data == null) {
            return "-";
        }
        StringBuilder text = new StringBuilder(data.length * 2);
        for (byte b : data) {
            text.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return text.toString();
    }
}
