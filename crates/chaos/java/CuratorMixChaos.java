/*
 * Curator's side of the chaos mix, for crates/chaos: counters (src/counters.rs) and double
 * barriers (src/barriers.rs), through the run's fault proxies, writing the logs their checkers
 * read. Compiled by the chaos run against the Curator classpath
 * (zk_recipes_testing::curator_classpath), standalone.
 *
 * Usage: CuratorMixChaos contend-barrier <connect> <clients> <tag> <log> <root> <member-count> <session-timeout-ms>
 *   <clients> CuratorFrameworks (one session and one thread each) meet the Rust members in rounds
 *   of 3 s on the wall clock: round r (starting at r * 3000 ms since the epoch) is a fresh
 *   DistributedDoubleBarrier(<root>/round-<r>, member-count) (a reused object lets members in
 *   early: GH-1290), entered 0-300 ms after the round starts with enter(until 1.5 s into it),
 *   left with leave(until 2.8 s into it). Logs, as src/barriers.rs reads them:
 *   "N barrier <holder> <micros> <r>" before enter, "IN ... <r> ok|timeout|err" after it,
 *   "O ... <r>" before leave, "X ... <r> ok|timeout|err" after it; "err stuck" for a call that had
 *   not returned 2 s after its timeout (Curator 5.4's enter can wait forever: see bounded()).
 *
 * Usage: CuratorMixChaos contend-counters <connect> <clients> <tag> <log> <check-root> <session-timeout-ms>
 *   <clients> CuratorFrameworks (one session and one thread each) alternate:
 *     SharedCount(<check-root>/shared-count, seed 0): trySetCount(getVersionedValue(), value + 1);
 *     DistributedAtomicLong(<check-root>/atomic-long, RetryNTimes(3, 10)) promoted to the mutex
 *       <check-root>/atomic-long-lock (PromotedToLock: RetryNTimes(3, 10), 5 s): increment().
 *   Each increment logs "W <counter> <holder> <micros>" before the call and
 *   "I <counter> <holder> <micros> ok <value written>|no|unc" after it (holder <tag>-<client>). A call that threw,
 *   or that returned false while the client's connection state changed (Curator retries a write
 *   after a connection loss, and a retried versioned write that finds its own first try reports
 *   failure), is "unc": it may have been applied.
 *
 * Usage: CuratorMixChaos contend-cache <connect> <clients> <tag> <log> <root> <session-timeout-ms>
 *   The cache (src/caches.rs), Curator's side: one writer CuratorFramework (holder <tag>-w) doing
 *   the Rust writer's random writes on <root> (create with parents, set, delete with children,
 *   re-create, depths 1-3 over the names a, b, c, every 10-60 ms), and <clients> CuratorFrameworks
 *   each following <root> with a CuratorCache (CuratorCache.build(client, root), holder
 *   <tag>-<client>). "freeze" on stdin stops the writer ("F cache <tag>-w <micros> <writes>");
 *   "check <file>" compares each CuratorCache (paths, czxid, mzxid, data; the root itself left out)
 *   with the server's tree the run wrote to <file> ("<path> <czxid> <mzxid> <hex data>" a line),
 *   polling for up to CONVERGE_MS (caches::CONVERGE), and logs
 *   "C cache <holder>/curator <micros> ok <ms> nodes <n>" or
 *   "C cache <holder>/curator <micros> differ <count> <first differences>", as src/caches.rs does.
 *
 * Usage: CuratorMixChaos contend-members <connect> <clients> <tag> <log> <root> <session-timeout-ms>
 *   Persistent nodes and group membership (src/members.rs), Curator's side: each of <clients>
 *   CuratorFrameworks (holder <tag>-<client>) keeps a PersistentNode EPHEMERAL at
 *   <root>/eph/<holder>, a protected EPHEMERAL_SEQUENTIAL PersistentNode at <root>/seq/<holder>-
 *   (Curator names it _c_<uuid>-<holder>-<seq>; after its node is lost, Curator 5.4 makes it again
 *   as a protected EPHEMERAL named after the old sequence: _c_<new uuid>-<holder>-<seq>) and a GroupMember
 *   (<root>/group, id <holder>), and hands all three the data "<holder> <n>" every 300 ms, logging
 *   "D members <holder> <micros> <n>" before; "freeze" on stdin stops the changes
 *   ("F members <holder> <micros> <n>").
 *
 *   Prints READY once every client is connected; "stop" on stdin ends the loops, closes the clients
 *   and prints DONE (exit 0); EOF exits at once (3).
 */
package zkrecipes.chaos;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorMixChaos {
    private static final long PACE_MS = 20;
    private static final long BACKOFF_MS = 100;

    private static volatile boolean stopping;
    private static final CountDownLatch FROZEN = new CountDownLatch(1);
    private static volatile String checkFile;
    private static FileOutputStream log;

    private CuratorMixChaos() {}

    public static void main(String[] argv) {
        try {
            System.exit(run(Arrays.asList(argv)));
        } catch (Throwable error) {
            System.out.println("ERROR " + error);
            error.printStackTrace();
            Runtime.getRuntime().halt(1);
        }
    }

    private static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** One line, one write (a killed process leaves whole lines). */
    private static synchronized void line(String text) {
        try {
            log.write((text + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException ignored) {
            // Lost evidence only widens the checker's bounds' doubt; never counted as success.
        }
    }

    private static int run(List<String> args) throws Exception {
        String mode = args.isEmpty() ? "" : args.get(0);
        boolean barrier = args.size() == 8 && mode.equals("contend-barrier");
        boolean cache = args.size() == 7 && mode.equals("contend-cache");
        boolean members = args.size() == 7 && mode.equals("contend-members");
        if (!barrier && !cache && !members && (args.size() != 7 || !mode.equals("contend-counters"))) {
            System.out.println("usage: contend-counters <connect> <clients> <tag> <log> <check-root> <session-timeout-ms>\n"
                    + "       contend-barrier <connect> <clients> <tag> <log> <root> <member-count> <session-timeout-ms>\n"
                    + "       contend-cache <connect> <clients> <tag> <log> <root> <session-timeout-ms>\n"
                    + "       contend-members <connect> <clients> <tag> <log> <root> <session-timeout-ms>");
            return 2;
        }
        String connect = args.get(1);
        int clients = Integer.parseInt(args.get(2));
        String tag = args.get(3);
        log = new FileOutputStream(args.get(4), true);
        String checkRoot = args.get(5);
        int memberCount = barrier ? Integer.parseInt(args.get(6)) : 0;
        int sessionTimeoutMs = Integer.parseInt(args.get(barrier ? 7 : 6));
        List<Thread> threads = new ArrayList<>();
        List<CuratorFramework> frameworks = new ArrayList<>();
        // The cache's writer is one more session, before the followers.
        for (int client = cache ? -1 : 0; client < clients; client++) {
            CuratorFramework framework = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs(sessionTimeoutMs)
                    .connectionTimeoutMs(5_000)
                    .retryPolicy(new ExponentialBackoffRetry(50, 3))
                    .build();
            AtomicLong stateChanges = new AtomicLong();
            framework.getConnectionStateListenable().addListener((ignored, state) -> stateChanges.incrementAndGet());
            framework.start();
            framework.blockUntilConnected(20, TimeUnit.SECONDS);
            frameworks.add(framework);
            String holder = tag + "-" + (client < 0 ? "w" : String.valueOf(client));
            Runnable body;
            if (barrier) {
                body = () -> barrierLoop(framework, holder, checkRoot, memberCount);
            } else if (cache && client < 0) {
                body = () -> cacheWriter(framework, holder, checkRoot);
            } else if (cache) {
                body = () -> cacheFollower(framework, holder, checkRoot);
            } else if (members) {
                body = () -> member(framework, holder, checkRoot);
            } else {
                body = () -> loop(framework, stateChanges, holder, checkRoot);
            }
            threads.add(new Thread(body, holder));
        }
        threads.forEach(Thread::start);
        System.out.println("READY");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (true) {
            String input = stdin.readLine();
            if (input == null) {
                Runtime.getRuntime().halt(3);
            }
            input = input.trim();
            if (input.equals("stop")) {
                break;
            } else if (input.equals("freeze")) {
                FROZEN.countDown();
            } else if (input.startsWith("check ")) {
                checkFile = input.substring("check ".length()).trim();
            }
        }
        stopping = true;
        FROZEN.countDown();
        for (Thread thread : threads) {
            thread.join(60_000);
        }
        frameworks.forEach(CuratorFramework::close);
        System.out.println("DONE");
        return 0;
    }

    private static void loop(CuratorFramework framework, AtomicLong stateChanges, String holder, String checkRoot) {
        SharedCount count = new SharedCount(framework, checkRoot + "/shared-count", 0);
        while (!stopping) {
            try {
                count.start();
                break;
            } catch (Exception error) {
                line("E shared-count " + holder + " " + micros() + " starting: " + error);
                sleep(BACKOFF_MS);
            }
        }
        DistributedAtomicLong atomic = new DistributedAtomicLong(framework, checkRoot + "/atomic-long",
                new RetryNTimes(3, 10),
                PromotedToLock.builder().lockPath(checkRoot + "/atomic-long-lock")
                        .retryPolicy(new RetryNTimes(3, 10)).timeout(5, TimeUnit.SECONDS).build());
        long turn = 0;
        while (!stopping) {
            turn++;
            String counter = turn % 2 == 0 ? "shared-count" : "atomic-long";
            long before = stateChanges.get();
            String outcome;
            line("W " + counter + " " + holder + " " + micros());
            try {
                boolean applied;
                long value;
                if (turn % 2 == 0) {
                    VersionedValue<Integer> seen = count.getVersionedValue();
                    value = seen.getValue() + 1;
                    applied = count.trySetCount(seen, seen.getValue() + 1);
                } else {
                    AtomicValue<Long> result = atomic.increment();
                    applied = result.succeeded();
                    value = applied ? result.postValue() : 0;
                }
                outcome = applied ? "ok " + value : stateChanges.get() != before ? "unc" : "no";
            } catch (Exception error) {
                outcome = "unc";
            }
            line("I " + counter + " " + holder + " " + micros() + " " + outcome);
            sleep(outcome.equals("unc") ? BACKOFF_MS : PACE_MS);
        }
        try {
            count.close();
        } catch (IOException ignored) {
            // Closing only removes the listener.
        }
    }

    private static final long PERIOD_MS = 3_000;
    private static final long ENTER_WINDOW_MS = 1_500;
    private static final long LEAVE_BY_MS = 2_800;

    /** How long after its own timeout a barrier call is taken for stuck. */
    private static final long STUCK_AFTER_MS = 2_000;
    /** Runs the barrier calls, so that a stuck one can be interrupted (daemon threads). */
    private static final java.util.concurrent.ExecutorService BARRIER_CALLS =
            java.util.concurrent.Executors.newCachedThreadPool(task -> {
                Thread thread = new Thread(task, "barrier-call");
                thread.setDaemon(true);
                return thread;
            });

    /**
     * "ok", "timeout" or "err <exception>" for a barrier call with a timeout of {@code waitMs};
     * "err stuck" if it has not returned {@link #STUCK_AFTER_MS} after that: it is interrupted.
     * Curator 5.4's enter(maxWait) can wait forever: a watcher notification (a Disconnected
     * event, say) that comes before internalEnter sets hasBeenNotified, and internalEnter then
     * takes its untimed wait() (removed upstream with hasBeenNotified, apache/curator#1291).
     */
    private static String bounded(java.util.concurrent.Callable<Boolean> call, long waitMs) {
        java.util.concurrent.Future<Boolean> future = BARRIER_CALLS.submit(call);
        try {
            return future.get(waitMs + STUCK_AFTER_MS, TimeUnit.MILLISECONDS) ? "ok" : "timeout";
        } catch (java.util.concurrent.TimeoutException stuck) {
            future.cancel(true);
            return "err stuck";
        } catch (java.util.concurrent.ExecutionException error) {
            return "err " + error.getCause().getClass().getSimpleName();
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            return "err InterruptedException";
        }
    }

    private static void barrierLoop(CuratorFramework framework, String holder, String root, int memberCount) {
        java.util.Random random = new java.util.Random();
        while (!stopping) {
            long round = System.currentTimeMillis() / PERIOD_MS + 1;
            long starts = round * PERIOD_MS;
            sleep(Math.max(0, starts + random.nextInt(301) - System.currentTimeMillis()));
            if (stopping) {
                break;
            }
            DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(framework, root + "/round-" + round, memberCount);
            line("N barrier " + holder + " " + micros() + " " + round);
            long enterWait = Math.max(1, starts + ENTER_WINDOW_MS - System.currentTimeMillis());
            String entered = bounded(() -> barrier.enter(enterWait, TimeUnit.MILLISECONDS), enterWait);
            line("IN barrier " + holder + " " + micros() + " " + round + " " + entered);
            if (!entered.equals("ok")) {
                continue;
            }
            sleep(20);
            line("O barrier " + holder + " " + micros() + " " + round);
            long leaveWait = Math.max(1, starts + LEAVE_BY_MS - System.currentTimeMillis());
            String left = bounded(() -> barrier.leave(leaveWait, TimeUnit.MILLISECONDS), leaveWait);
            line("X barrier " + holder + " " + micros() + " " + round + " " + left);
        }
    }

    // The cache (src/caches.rs): the same bound, gaps and names.
    private static final long CONVERGE_MS = 15_000;
    private static final long STEP_TIMEOUT_MS = 10_000;
    private static final String[] NAMES = {"a", "b", "c"};

    private static boolean frozen() {
        return FROZEN.getCount() == 0;
    }

    /** Waits up to `millis`, or until frozen (or stopping). */
    private static void pause(long millis) {
        try {
            FROZEN.await(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private static void cacheWriter(CuratorFramework framework, String holder, String root) {
        Random random = new Random();
        long writes = 0;
        while (!stopping && !frozen()) {
            pause(10 + random.nextInt(51));
            if (stopping || frozen()) {
                break;
            }
            int depth = 1 + random.nextInt(3);
            StringBuilder path = new StringBuilder(root);
            for (int level = 0; level < depth; level++) {
                path.append('/').append(NAMES[random.nextInt(NAMES.length)]);
            }
            writes++;
            byte[] data = (holder + " " + writes).getBytes(StandardCharsets.UTF_8);
            // Races with the other writers (NoNode, NodeExists, NotEmpty) are part of the mix.
            try {
                Stat stat = framework.checkExists().forPath(path.toString());
                if (stat != null && random.nextInt(10) < 6) {
                    framework.setData().forPath(path.toString(), data);
                } else if (stat != null) {
                    framework.delete().deletingChildrenIfNeeded().forPath(path.toString());
                } else {
                    framework.create().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT)
                            .forPath(path.toString(), data);
                }
            } catch (Exception error) {
                if (!(error instanceof KeeperException)) {
                    sleep(BACKOFF_MS);
                }
            }
        }
        line("F cache " + holder + " " + micros() + " " + writes);
    }

    private static void cacheFollower(CuratorFramework framework, String holder, String root) {
        CuratorCache cache = CuratorCache.build(framework, root);
        cache.start();
        while (!stopping && checkFile == null) {
            sleep(50);
        }
        String file = checkFile;
        if (file != null) {
            long started = System.nanoTime();
            Map<String, String> server = null;
            try {
                server = new TreeMap<>();
                for (String text : Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8)) {
                    if (text.isEmpty()) {
                        continue;
                    }
                    String[] fields = text.split(" ", -1);
                    server.put(fields[0], fields[1] + " " + fields[2] + " " + (fields.length > 3 ? fields[3] : ""));
                }
            } catch (IOException | RuntimeException error) {
                line("C cache " + holder + "/curator " + micros() + " differ 1 unreadable " + file + ": " + error);
                server = null;
            }
            while (server != null) {
                Map<String, String> held = new TreeMap<>();
                cache.stream().filter(node -> !node.getPath().equals(root))
                        .forEach(node -> held.put(node.getPath(), entry(node)));
                List<String> found = differences(held, server);
                long elapsedMs = (System.nanoTime() - started) / 1_000_000;
                if (found.isEmpty()) {
                    line("C cache " + holder + "/curator " + micros() + " ok " + elapsedMs + " nodes " + server.size());
                    break;
                }
                if (elapsedMs >= CONVERGE_MS) {
                    line("C cache " + holder + "/curator " + micros() + " differ " + found.size() + " "
                            + String.join("; ", found.subList(0, Math.min(3, found.size()))));
                    break;
                }
                sleep(100);
            }
        }
        while (!stopping) {
            sleep(50);
        }
        cache.close();
    }

    /** A node as the run's file spells it: "<czxid> <mzxid> <hex data>". */
    private static String entry(ChildData node) {
        StringBuilder hex = new StringBuilder();
        byte[] data = node.getData() == null ? new byte[0] : node.getData();
        for (byte value : data) {
            hex.append(String.format("%02x", value & 0xff));
        }
        return node.getStat().getCzxid() + " " + node.getStat().getMzxid() + " " + hex;
    }

    /** As src/caches.rs's differences: missing and stale in the server's order, then extra. */
    private static List<String> differences(Map<String, String> held, Map<String, String> server) {
        List<String> found = new ArrayList<>();
        for (Map.Entry<String, String> node : server.entrySet()) {
            String mine = held.get(node.getKey());
            if (mine == null) {
                found.add("missing " + node.getKey());
            } else if (!mine.equals(node.getValue())) {
                String[] ours = mine.split(" ", -1);
                String[] theirs = node.getValue().split(" ", -1);
                found.add(String.format("stale %s (czxid/mzxid %#x/%#x, server %#x/%#x)", node.getKey(),
                        Long.parseLong(ours[0]), Long.parseLong(ours[1]),
                        Long.parseLong(theirs[0]), Long.parseLong(theirs[1])));
            }
        }
        for (String path : held.keySet()) {
            if (!server.containsKey(path)) {
                found.add("extra " + path);
            }
        }
        return found;
    }

    // The members (src/members.rs): the same pace and names.
    private static final long CHANGE_EVERY_MS = 300;

    private static byte[] memberData(String holder, long n) {
        return (holder + " " + n).getBytes(StandardCharsets.UTF_8);
    }

    private static void member(CuratorFramework framework, String holder, String root) {
        byte[] data = memberData(holder, 0);
        PersistentNode ephemeral = new PersistentNode(framework, CreateMode.EPHEMERAL, false, root + "/eph/" + holder, data);
        PersistentNode sequential = new PersistentNode(framework, CreateMode.EPHEMERAL_SEQUENTIAL, true,
                root + "/seq/" + holder + "-", data);
        GroupMember group = new GroupMember(framework, root + "/group", holder, data);
        ephemeral.start();
        sequential.start();
        group.start();
        // PersistentNode.setData throws until the first create was processed (and then keeps the
        // data for every re-create): wait for it, as its docs ask.
        try {
            for (PersistentNode node : new PersistentNode[] {ephemeral, sequential}) {
                while (!stopping && !frozen() && !node.waitForInitialCreate(1, TimeUnit.SECONDS)) {
                    line("E members " + holder + " " + micros() + " waiting for the initial create of " + node.getActualPath());
                }
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
        long n = 0;
        while (!stopping && !frozen()) {
            pause(CHANGE_EVERY_MS);
            if (stopping || frozen()) {
                break;
            }
            n++;
            line("D members " + holder + " " + micros() + " " + n);
            byte[] next = memberData(holder, n);
            try {
                ephemeral.setData(next);
                sequential.setData(next);
                group.setThisData(next);
            } catch (Exception error) {
                line("E members " + holder + " " + micros() + " set " + n + ": " + error);
            }
        }
        line("F members " + holder + " " + micros() + " " + n);
        while (!stopping) {
            sleep(50);
        }
        group.close();
        for (PersistentNode node : new PersistentNode[] {ephemeral, sequential}) {
            try {
                node.close();
            } catch (IOException ignored) {
                // The session's close removes an ephemeral anyway.
            }
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
