/*
 * A small command-line program on Apache Curator 5.4, driven by zk-recipes' interop tests
 * (crates/testing/src/curator.rs compiles and runs it; tests/interop_*.rs use it).
 *
 * Usage: CuratorDriver [--session-timeout-ms N] <command> <args...>
 *
 * Every command prints machine-readable lines to stdout, logs to stderr, exits 0 on success and
 * non-zero on an error (after printing "ERROR <message>"). The program exits as soon as its stdin
 * closes, so a test that dies never leaves a JVM behind. Lines read from stdin are commands to a
 * running command ("release", "go").
 *
 * Commands:
 *   local-address
 *       ADDRESS <CuratorFrameworkFactory.getLocalAddress() as text>
 *   hold <mutex|semaphore|semaphore-mutex> <connect> <path> [data|-] [max-leases]
 *       SESSION <hex id> timeout-ms=<negotiated>, NODE <path> (one per held node), HELD <epoch-micros>;
 *       waits for "release", then RELEASED
 *   revocable-hold <connect> <path>
 *       InterProcessMutex made revocable: SESSION, NODE <path>, HELD; on a revocation request
 *       REVOKE-REQUESTED, then the owning thread releases: RELEASED ("release" on stdin also ends it)
 *   revoke <connect> <node-path>
 *       Revoker.attemptRevoke: REVOKED
 *   contend <kind> <connect> <path> <iterations> <hold-ms> <marker-dir> <counter-path>
 *           <locking:on|off> [max-leases] [clients]
 *       `clients` CuratorFrameworks (one session each, one thread each) run the critical-section
 *       protocol `iterations` times each. READY once all are connected, then waits for "go".
 *       Finally: T <client> <acquired-epoch-micros> <released-epoch-micros> per acquisition,
 *       DONE acquisitions=N violations=M conflicts=K max-markers=X
 *   golden <connect> <base> <data>
 *       SESSION <hex id> timeout-ms=<ms>, WAITER-SESSION (likewise, the semaphore waiter's),
 *       one node of each kind under <base>, then HELD; waits for "release", then RELEASED:
 *       NODE mutex <path>            InterProcessMutex at <base>/mutex with data <data>
 *       NODE mutex-default <path>    InterProcessMutex at <base>/mutex-default (default data)
 *       NODE revocable <path>        revocable InterProcessMutex at <base>/revocable
 *       NODE semaphore <path>        InterProcessSemaphoreV2(max 1) at <base>/semaphore, data <data>;
 *                                    a second acquirer waits, holding the internal lock
 *                                    (<base>/semaphore/locks) with its lease node created
 *       NODE semaphore-mutex <path>  InterProcessSemaphoreMutex at <base>/semaphore-mutex
 *   hold <read|write> <connect> <path> [data|-]
 *       InterProcessReadWriteLock at <path> (its read or write half): SESSION, then (once acquired,
 *       so a queued writer prints nothing yet) NODE <path>, HELD <epoch-micros>; waits for
 *       "release", then RELEASED <epoch-micros>
 *   contend-rw <connect> <path> <iterations> <hold-ms> <marker-dir> <write-percent> <locking:on|off>
 *           [clients]
 *       `clients` CuratorFrameworks (one session, one thread and one InterProcessReadWriteLock
 *       each) run `iterations` acquisitions each, each a write with probability write-percent %
 *       (java.util.Random seeded 1000 + client index), else a read; never a downgrade. Inside:
 *       a writer creates the EPHEMERAL marker <marker-dir>/writer (NodeExists: a violation) and
 *       must find no other marker; a reader creates an EPHEMERAL_SEQUENTIAL <marker-dir>/reader-
 *       and must find no writer marker; both look again after the hold, then delete their marker
 *       (at most one violation per acquisition). READY once connected, then waits for "go".
 *       Finally T <client> <acquired-epoch-micros> <released-epoch-micros> <R|W> per acquisition,
 *       DONE acquisitions=N violations=M reads=R writes=W max-readers=X
 *   golden-rw <connect> <base> <data>
 *       SESSION, then one node of each kind (HELD after the last); waits for "release", RELEASED:
 *       NODE write <path>            write lock of InterProcessReadWriteLock(<base>/write, <data>)
 *       NODE read <path>             read lock of InterProcessReadWriteLock(<base>/read, <data>)
 *       NODE read-default <path>     read lock at <base>/read-default, default data
 *       NODE downgrade-write <path>  write lock at <base>/downgrade, then its read lock taken by the
 *       NODE downgrade-read <path>   same thread (Curator 5.4's downgrade: a new sequential node),
 *                                    then the write lock released
 *   latch <connect> <path> <id> [marker-path|-]
 *       LeaderLatch (CloseMode.NOTIFY_LEADER) with a listener (on its own thread) printing
 *       LEADER <epoch-micros> / NOT-LEADER <epoch-micros>; SESSION, then STARTED. With a marker
 *       path, as leader it creates that EPHEMERAL node with data <id> (MARKED <micros>; if it
 *       exists: VIOLATION <data of the existing marker>), and deletes it when leadership ends
 *       or before closing (UNMARKED <micros>). Stdin: "participants" prints
 *       PARTICIPANT <id> <isLeader> lines then PARTICIPANTS-END; "node" prints NODE <our path>;
 *       "close" deletes the marker, closes the latch, prints CLOSED <epoch-micros> and exits 0;
 *       "rejoin" does the same but then joins again with a new LeaderLatch (STARTED).
 *   selector <connect> <path> <id> <hold-ms> [rounds] [marker-path|-]
 *       LeaderSelector (setId(id), autoRequeue). SESSION, READY, waits for "go", starts.
 *       takeLeadership: LEADING <id> <epoch-micros>, the marker protocol as for `latch` (VIOLATION
 *       <data>), sleeps hold-ms, deletes the marker, DONE-LEADING <id> <epoch-micros>. After
 *       `rounds` leaderships (default 10) the last one waits until the selector is closed, then
 *       FINISHED leaderships=N violations=M once its node is gone.
 *   participants <connect> <path> [latch|selector]
 *       Curator's view (LeaderLatch or LeaderSelector getParticipants, default latch):
 *       PARTICIPANT <id> <isLeader> lines, then PARTICIPANTS-END
 *   leader <connect> <path> [latch|selector]
 *       Curator's getLeader() (LeaderLatch or LeaderSelector, default latch): LEADER-ID <id>
 *       (the rest of the line, possibly empty), then LEADER-IS <isLeader> (false: no leader)
 *   bench-cycles <connect> <path> <cycles> [warm-up-cycles]
 *       one client, one InterProcessMutex: warm-up cycles (default 100), then <cycles> timed
 *       acquire+release cycles: RESULT ops=<cycles/s> p50_us=<..> p99_us=<..>
 *   bench-contended <connect> <path> <sessions> <millis> [warm-up-millis]
 *       <sessions> clients, one thread each, looping acquire+release on one path; counted for
 *       <millis> after the warm-up (default 0): RESULT ops=<acquisitions/s> handoff_p50_us=<..>
 *       handoff_p99_us=<..> handoffs=<n>, where a hand-off is from one holder's release()
 *       returning to the next holder's acquire() returning (System.nanoTime, one JVM)
 *   bench-distinct <connect> <base> <locks> <cycles-each> [max-threads] [warm-up-cycles-each]
 *       one client, a thread per lock (at most max-threads, default: one per lock), each cycling
 *       its own InterProcessMutex at <base>/lock-<i>, warm-up-cycles-each times untimed (default
 *       0: the pool's threads start, the locks' directories are made and the JIT compiles), then
 *       <cycles-each> times timed: RESULT ops=<cycles/s> threads=<pool size>
 *   bench-rw <connect> <path> <sessions> <millis> <write-percent> [warm-up-millis]
 *       <sessions> clients, one thread and one InterProcessReadWriteLock each, looping acquire +
 *       release, each a write with probability write-percent % (java.util.Random seeded 1000 +
 *       client index), else a read; counted for <millis> after the warm-up (default 0):
 *       RESULT ops=<acquisitions/s> reads=R writes=W
 *   bench-latch <connect> <path> <hand-overs> [warm-up-hand-overs]
 *       two clients, each a LeaderLatch (ids a and b, CloseMode.SILENT, listener called on the
 *       event thread). Once one leads, warm-up (default 0) + <hand-overs> times: close the
 *       leader's latch (t0), wait for the other's isLeader callback (t1), start a new latch for
 *       the closed side and wait until its node exists. Timed over the last <hand-overs>:
 *       RESULT count=N p50_us=<t1-t0> p90_us=<..> max_us=<..>
 *
 * Queue commands (QueueBuilder with putInBackground(false) unless said otherwise; items are UTF-8
 * strings; <kind> is queue|priority|delay|id|simple, for DistributedQueue,
 * DistributedPriorityQueue, DistributedDelayQueue, DistributedIdQueue, SimpleDistributedQueue):
 *   queue-golden <connect> <base>
 *       SESSION, then (producer-only queues, in this order):
 *         <base>/queue (lockPath <base>/queue-locks): put "one", putMulti "two","three"
 *         <base>/priority: put "p5"@5, "m3"@-3, "max"@Integer.MAX_VALUE, "min"@Integer.MIN_VALUE,
 *                          "zero"@0
 *         <base>/delay: put "d1" due 0x18F00000000, "d2" due 1 (epoch ms, both past)
 *         <base>/id: put "i1" id "job-1", "i2" id "a/b|c"
 *         <base>/simple: offer "s1", offer bytes {0, 1, 2, 0xff}
 *       PUT-DONE; then a consumer of <base>/locked (lockPath <base>/locked-locks) takes the item
 *       "held" (put first) and, inside consumeMessage, prints NODE lock <lock node path>, then
 *       HELD <epoch-micros>; waits for "release", returns, waits until Curator deleted the item
 *       and the lock node, RELEASED
 *   queue-put <connect> <kind> <path> <lock-path|-> <item[@arg]>...
 *       one put per argument: arg is the priority (priority), the delay in ms from now (delay;
 *       default 0), the id (id). Items joined by ',' go in one node (putMulti; not simple).
 *       PUT <items> [due=<epoch-ms>] per node, then DONE puts=N
 *   queue-produce <connect> <path> <items> <producers> <prefix> [foreground|background]
 *       DistributedQueue producers, one client each (connected before timing): producer i puts
 *       <prefix><n> for n = i, i + producers, ... < items, one put per item, in order
 *       (background: Curator's default putInBackground(true), then flushPuts).
 *       RESULT ops=<items/s> elapsed_ms=<..>
 *   queue-consume <connect> <kind> <path> <lock-path|-> <expected> <consumers> <print|quiet>
 *           [linger-ms]
 *       <consumers> clients, each its own queue and QueueConsumer (simple: a thread polling);
 *       STARTED once all run. ITEM <consumer> <epoch-ms> <item> per item (print). Once
 *       <expected> items were consumed: RESULT ops=<items/s> elapsed_ms=<..> (timed from just
 *       before the queues start, after the clients connected); with <expected> 0, no
 *       RESULT: it consumes until "stop" on stdin. Then waits until no queue-/qn- item and no
 *       lock node is left, lingers linger-ms (default 0) for extra deliveries, closes the
 *       queues: DONE items=<all consumed>
 *   queue-remove-id <connect> <path> <lock-path|-> <id>
 *       DistributedIdQueue.remove(id): REMOVED <count>
 */
package zkrecipes.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.DistributedIdQueue;
import org.apache.curator.framework.recipes.queue.DistributedPriorityQueue;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.MultiItem;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorDriver {
    /** Lines read from stdin, for the command that waits for them. */
    static final BlockingQueue<String> INPUT = new LinkedBlockingQueue<>();
    /** Every client started, closed (best effort) when stdin closes. */
    private static final List<CuratorFramework> CLIENTS = new CopyOnWriteArrayList<>();
    /** How long one acquire may take before the command fails. */
    private static final long ACQUIRE_TIMEOUT_MS = 120_000;

    static int sessionTimeoutMs = 10_000;

    private CuratorDriver() {}

    public static void main(String[] argv) {
        Thread stdin = new Thread(CuratorDriver::watchStdin, "stdin-watcher");
        stdin.setDaemon(true);
        stdin.start();
        int code;
        try {
            code = run(new ArrayList<>(Arrays.asList(argv)));
        } catch (Throwable error) {
            log("failed: " + error);
            error.printStackTrace(System.err);
            out("ERROR " + String.valueOf(error).replace('\n', ' '));
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        System.exit(code);
    }

    /** Queues stdin lines; on EOF closes the clients (so their sessions end now) and exits. */
    private static void watchStdin() {
        try (BufferedReader reader =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                INPUT.add(line.trim());
            }
        } catch (IOException error) {
            log("reading stdin: " + error);
        }
        log("stdin closed: exiting");
        for (CuratorFramework client : CLIENTS) {
            try {
                client.close();
            } catch (RuntimeException ignored) {
                // Exiting anyway.
            }
        }
        System.out.flush();
        Runtime.getRuntime().halt(3);
    }

    private static int run(List<String> args) throws Exception {
        while (!args.isEmpty() && args.get(0).startsWith("--")) {
            String option = args.remove(0);
            if (option.equals("--session-timeout-ms") && !args.isEmpty()) {
                sessionTimeoutMs = Integer.parseInt(args.remove(0));
            } else {
                throw new IllegalArgumentException("unknown option " + option);
            }
        }
        if (args.isEmpty()) {
            throw new IllegalArgumentException("no command");
        }
        String command = args.remove(0);
        switch (command) {
            case "local-address":
                out("ADDRESS " + new String(CuratorFrameworkFactory.getLocalAddress(), StandardCharsets.UTF_8));
                return 0;
            case "hold":
                return hold(args);
            case "revocable-hold":
                return revocableHold(args);
            case "revoke":
                return revoke(args);
            case "contend":
                return contend(args);
            case "golden":
                return golden(args);
            case "contend-rw":
                return contendReadWrite(args);
            case "golden-rw":
                return goldenReadWrite(args);
            case "latch":
                return latch(args);
            case "selector":
                return selector(args);
            case "participants":
                return participants(args);
            case "leader":
                return leader(args);
            case "bench-cycles":
                return benchCycles(args);
            case "bench-contended":
                return benchContended(args);
            case "bench-distinct":
                return benchDistinct(args);
            case "bench-rw":
                return benchReadWrite(args);
            case "bench-latch":
                return benchLatch(args);
            case "queue-golden":
                return queueGolden(args);
            case "queue-put":
                return queuePut(args);
            case "queue-produce":
                return queueProduce(args);
            case "queue-consume":
                return queueConsume(args);
            case "queue-remove-id":
                return queueRemoveId(args);
            default:
                for (Extension extension : EXTENSIONS) {
                    Integer code = extension.run(command, args);
                    if (code != null) {
                        return code;
                    }
                }
                throw new IllegalArgumentException("unknown command " + command);
        }
    }

    /** Commands kept in other files of the driver (each a class in this package). */
    interface Extension {
        /** The command's exit code, or null when it is not one of this extension's commands. */
        Integer run(String command, List<String> args) throws Exception;
    }

    /** Every extension, tried in order for a command this class does not know. */
    private static final Extension[] EXTENSIONS = {
        CuratorNodes::run,
        CuratorCounters::run,
        CuratorBarriers::run,
        ZkRecipeLocks::run,
        CuratorChaos::run,
        CuratorDiscovery::run,
    };

    // ---------------------------------------------------------------------------------------
    // Commands

    private static int hold(List<String> args) throws Exception {
        String kind = arg(args, 0, "kind");
        String connect = arg(args, 1, "connect");
        String path = arg(args, 2, "path");
        byte[] data = optionalData(args, 3);
        int maxLeases = args.size() > 4 ? Integer.parseInt(args.get(4)) : 1;
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        Holder holder = holder(kind, client, path, data, maxLeases);
        holder.acquire();
        for (String node : holder.nodes()) {
            out("NODE " + node);
        }
        out("HELD " + epochMicros());
        awaitLine("release");
        holder.release();
        out("RELEASED " + epochMicros());
        client.close();
        return 0;
    }

    private static int revocableHold(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        PathMutex mutex = new PathMutex(client, path, null);
        CountDownLatch revoked = new CountDownLatch(1);
        // The listener runs on a Curator thread; InterProcessMutex must be released by the
        // thread that acquired it, so it only wakes the main thread.
        mutex.makeRevocable(forLock -> {
            out("REVOKE-REQUESTED");
            revoked.countDown();
        });
        if (!mutex.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("could not acquire " + path);
        }
        out("NODE " + mutex.heldPath());
        out("HELD " + epochMicros());
        while (!revoked.await(20, TimeUnit.MILLISECONDS)) {
            if ("release".equals(INPUT.poll())) {
                break;
            }
        }
        mutex.release();
        out("RELEASED");
        client.close();
        return 0;
    }

    private static int revoke(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String nodePath = arg(args, 1, "node-path");
        CuratorFramework client = start(connect);
        Revoker.attemptRevoke(client, nodePath);
        out("REVOKED");
        client.close();
        return 0;
    }

    private static int contend(List<String> args) throws Exception {
        String kind = arg(args, 0, "kind");
        String connect = arg(args, 1, "connect");
        String path = arg(args, 2, "path");
        int iterations = Integer.parseInt(arg(args, 3, "iterations"));
        long holdMs = Long.parseLong(arg(args, 4, "hold-ms"));
        String markerDir = arg(args, 5, "marker-dir");
        String counterPath = arg(args, 6, "counter-path");
        String lockingArg = arg(args, 7, "locking");
        if (!lockingArg.equals("on") && !lockingArg.equals("off")) {
            throw new IllegalArgumentException("locking must be on or off, not " + lockingArg);
        }
        boolean locking = lockingArg.equals("on");
        int maxLeases = args.size() > 8 ? Integer.parseInt(args.get(8)) : 1;
        int clients = args.size() > 9 ? Integer.parseInt(args.get(9)) : 1;
        int allowedHolders = kind.equals("semaphore") ? maxLeases : 1;

        List<Contender> contenders = new ArrayList<>();
        for (int index = 0; index < clients; index++) {
            CuratorFramework client = start(connect);
            Holder holder = holder(kind, client, path, null, maxLeases);
            contenders.add(new Contender(index, client, holder, locking, iterations, holdMs, markerDir,
                    counterPath, allowedHolders));
        }
        out("READY");
        awaitLine("go");
        ExecutorService pool = Executors.newFixedThreadPool(clients);
        List<Future<Contender>> running = new ArrayList<>();
        for (Contender contender : contenders) {
            running.add(pool.submit(contender::call));
        }
        long acquisitions = 0;
        long violations = 0;
        long conflicts = 0;
        int maxMarkers = 0;
        for (Future<Contender> future : running) {
            Contender done = future.get();
            for (long[] hold : done.holds) {
                out("T " + done.index + " " + hold[0] + " " + hold[1]);
            }
            acquisitions += done.holds.size();
            violations += done.violations;
            conflicts += done.conflicts;
            maxMarkers = Math.max(maxMarkers, done.maxMarkers);
        }
        pool.shutdown();
        out("DONE acquisitions=" + acquisitions + " violations=" + violations + " conflicts=" + conflicts
                + " max-markers=" + maxMarkers);
        for (Contender contender : contenders) {
            contender.client.close();
        }
        return 0;
    }

    private static int golden(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        byte[] data = arg(args, 2, "data").getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));

        PathMutex mutex = new PathMutex(client, base + "/mutex", data);
        mutex.acquire();
        out("NODE mutex " + mutex.heldPath());

        PathMutex defaultMutex = new PathMutex(client, base + "/mutex-default", null);
        defaultMutex.acquire();
        out("NODE mutex-default " + defaultMutex.heldPath());

        PathMutex revocable = new PathMutex(client, base + "/revocable", null);
        revocable.makeRevocable(forLock -> log("revocation requested (ignored)"));
        revocable.acquire();
        out("NODE revocable " + revocable.heldPath());

        String semaphorePath = base + "/semaphore";
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, semaphorePath, 1);
        semaphore.setNodeData(data);
        Lease lease = semaphore.acquire();
        out("NODE semaphore " + semaphorePath + "/leases/" + lease.getNodeName());
        // A second acquirer (its own session) queues: it holds the internal lock and its lease
        // node exists while it waits for ours to go.
        CuratorFramework waiterClient = start(connect);
        InterProcessSemaphoreV2 waiterSemaphore = new InterProcessSemaphoreV2(waiterClient, semaphorePath, 1);
        waiterSemaphore.setNodeData(data);
        ExecutorService waiterThread = Executors.newSingleThreadExecutor();
        Future<Lease> waiter =
                waiterThread.submit(() -> waiterSemaphore.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS));
        out("WAITER-SESSION " + describeSession(waiterClient));

        InterProcessSemaphoreMutex semaphoreMutex = new InterProcessSemaphoreMutex(client, base + "/semaphore-mutex");
        semaphoreMutex.acquire();
        for (String node : ownedChildren(client, base + "/semaphore-mutex/leases")) {
            out("NODE semaphore-mutex " + node);
        }
        out("HELD " + epochMicros());

        awaitLine("release");
        mutex.release();
        defaultMutex.release();
        revocable.release();
        lease.close();
        Lease waiterLease = waiter.get(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        if (waiterLease == null) {
            throw new IllegalStateException("the semaphore waiter timed out");
        }
        waiterLease.close();
        waiterThread.shutdown();
        semaphoreMutex.release();
        out("RELEASED");
        waiterClient.close();
        client.close();
        return 0;
    }

    // ---------------------------------------------------------------------------------------
    // Read-write lock commands

    private static int contendReadWrite(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int iterations = Integer.parseInt(arg(args, 2, "iterations"));
        long holdMs = Long.parseLong(arg(args, 3, "hold-ms"));
        String markerDir = arg(args, 4, "marker-dir");
        int writePercent = Integer.parseInt(arg(args, 5, "write-percent"));
        String lockingArg = arg(args, 6, "locking");
        if (!lockingArg.equals("on") && !lockingArg.equals("off")) {
            throw new IllegalArgumentException("locking must be on or off, not " + lockingArg);
        }
        boolean locking = lockingArg.equals("on");
        int clients = args.size() > 7 ? Integer.parseInt(args.get(7)) : 1;

        List<ReadWriteContender> contenders = new ArrayList<>();
        for (int index = 0; index < clients; index++) {
            CuratorFramework client = start(connect);
            contenders.add(new ReadWriteContender(index, client, new RwWriteLock(client, path, null), locking,
                    iterations, holdMs, markerDir, writePercent));
        }
        out("READY");
        awaitLine("go");
        ExecutorService pool = Executors.newFixedThreadPool(clients);
        List<Future<ReadWriteContender>> running = new ArrayList<>();
        for (ReadWriteContender contender : contenders) {
            running.add(pool.submit(contender::call));
        }
        long acquisitions = 0;
        long violations = 0;
        long reads = 0;
        long writes = 0;
        int maxReaders = 0;
        for (Future<ReadWriteContender> future : running) {
            ReadWriteContender done = future.get();
            for (long[] hold : done.holds) {
                out("T " + done.index + " " + hold[0] + " " + hold[1] + " " + (hold[2] == 1 ? "W" : "R"));
                if (hold[2] == 1) {
                    writes++;
                } else {
                    reads++;
                }
            }
            acquisitions += done.holds.size();
            violations += done.violations;
            maxReaders = Math.max(maxReaders, done.maxReaders);
        }
        pool.shutdown();
        out("DONE acquisitions=" + acquisitions + " violations=" + violations + " reads=" + reads + " writes="
                + writes + " max-readers=" + maxReaders);
        for (ReadWriteContender contender : contenders) {
            contender.client.close();
        }
        return 0;
    }

    /** One read-write contender: the marker protocol of `contend-rw` (see the header). */
    private static final class ReadWriteContender {
        final int index;
        final CuratorFramework client;
        final RwWriteLock lock;
        final boolean locking;
        final int iterations;
        final long holdMs;
        final String markerDir;
        final int writePercent;
        final Random random;
        /** {acquired, released, 1 for a write / 0 for a read}. */
        final List<long[]> holds = new ArrayList<>();
        long violations;
        int maxReaders;

        ReadWriteContender(int index, CuratorFramework client, RwWriteLock lock, boolean locking, int iterations,
                long holdMs, String markerDir, int writePercent) {
            this.index = index;
            this.client = client;
            this.lock = lock;
            this.locking = locking;
            this.iterations = iterations;
            this.holdMs = holdMs;
            this.markerDir = markerDir;
            this.writePercent = writePercent;
            this.random = new Random(1000 + index);
        }

        ReadWriteContender call() throws Exception {
            for (int iteration = 0; iteration < iterations; iteration++) {
                boolean write = random.nextInt(100) < writePercent;
                InterProcessMutex mutex = write ? lock : lock.readLock;
                if (locking && !mutex.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("timed out acquiring the " + (write ? "write" : "read") + " lock");
                }
                long acquired = epochMicros();
                String marker = null;
                boolean violated = false;
                if (write) {
                    try {
                        marker = client.create().withMode(CreateMode.EPHEMERAL).forPath(markerDir + "/writer");
                    } catch (KeeperException.NodeExistsException anotherWriter) {
                        violated = true;
                    }
                } else {
                    marker = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(markerDir + "/reader-");
                }
                violated |= !alone(write, marker);
                Thread.sleep(holdMs);
                violated |= !alone(write, marker);
                if (marker != null) {
                    client.delete().forPath(marker);
                }
                long released = epochMicros();
                if (locking) {
                    mutex.release();
                }
                if (violated) {
                    violations++;
                }
                holds.add(new long[] {acquired, released, write ? 1 : 0});
            }
            return this;
        }

        /** A writer finds no marker but its own, a reader no writer marker. */
        private boolean alone(boolean write, String ourMarker) throws Exception {
            List<String> markers = client.getChildren().forPath(markerDir);
            int readers = 0;
            boolean ok = true;
            for (String name : markers) {
                boolean ours = ourMarker != null && ourMarker.endsWith("/" + name);
                if (name.startsWith("reader-")) {
                    readers++;
                }
                if (write ? !ours : name.equals("writer")) {
                    ok = false;
                }
            }
            maxReaders = Math.max(maxReaders, readers);
            return ok;
        }
    }

    private static int goldenReadWrite(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        byte[] data = arg(args, 2, "data").getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));

        RwWriteLock write = new RwWriteLock(client, base + "/write", data);
        write.acquire();
        out("NODE write " + write.heldPath());
        RwWriteLock read = new RwWriteLock(client, base + "/read", data);
        read.readLock.acquire();
        out("NODE read " + read.readLock.heldPath());
        RwWriteLock readDefault = new RwWriteLock(client, base + "/read-default", null);
        readDefault.readLock.acquire();
        out("NODE read-default " + readDefault.readLock.heldPath());
        RwWriteLock downgrade = new RwWriteLock(client, base + "/downgrade", data);
        downgrade.acquire();
        out("NODE downgrade-write " + downgrade.heldPath());
        downgrade.readLock.acquire();
        out("NODE downgrade-read " + downgrade.readLock.heldPath());
        downgrade.release();
        out("HELD " + epochMicros());

        awaitLine("release");
        write.release();
        read.readLock.release();
        readDefault.readLock.release();
        downgrade.readLock.release();
        out("RELEASED");
        client.close();
        return 0;
    }

    // ---------------------------------------------------------------------------------------
    // Leader election commands

    /** The marker protocol of `latch` and `selector`: one EPHEMERAL node, held by the leader. */
    private static final class LeaderMarker {
        final CuratorFramework client;
        final String path;
        final byte[] id;
        boolean held;
        long violations;

        LeaderMarker(CuratorFramework client, String path, String id) {
            this.client = client;
            this.path = path;
            this.id = id.getBytes(StandardCharsets.UTF_8);
        }

        void mark() throws Exception {
            if (path == null || held) {
                return;
            }
            try {
                client.create().withMode(CreateMode.EPHEMERAL).forPath(path, id);
                held = true;
                out("MARKED " + epochMicros());
            } catch (KeeperException.NodeExistsException anotherLeader) {
                violations++;
                String holder;
                try {
                    holder = new String(client.getData().forPath(path), StandardCharsets.UTF_8);
                } catch (KeeperException.NoNodeException gone) {
                    holder = "(gone)";
                }
                out("VIOLATION " + holder);
            }
        }

        void unmark() throws Exception {
            if (path == null || !held) {
                return;
            }
            held = false;
            try {
                client.delete().forPath(path);
            } catch (KeeperException.NoNodeException gone) {
                log("our marker " + path + " was already gone");
            }
            out("UNMARKED " + epochMicros());
        }
    }

    private static int latch(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String id = arg(args, 2, "id");
        String markerPath = args.size() > 3 && !args.get(3).equals("-") ? args.get(3) : null;
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        LeaderMarker marker = new LeaderMarker(client, markerPath, id);
        // The listener and the marker run on one thread, in order; the ZooKeeper event thread only
        // hands over.
        ExecutorService events = Executors.newSingleThreadExecutor();
        LeaderLatch latch = startLatch(client, path, id, marker, events);
        while (true) {
            String line = INPUT.take();
            switch (line) {
                case "participants":
                    printParticipants(latch.getParticipants());
                    break;
                case "node":
                    out("NODE " + latch.getOurPath());
                    break;
                case "close":
                case "rejoin":
                    LeaderLatch closing = latch;
                    events.submit(() -> {
                        marker.unmark();
                        closing.close();
                        return null;
                    }).get(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    // The listener's NOT-LEADER (queued by close) comes first.
                    events.submit(() -> null).get(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    out("CLOSED " + epochMicros());
                    if (line.equals("rejoin")) {
                        latch = startLatch(client, path, id, marker, events);
                        break;
                    }
                    events.shutdown();
                    client.close();
                    return 0;
                default:
                    log("ignoring stdin line '" + line + "'");
            }
        }
    }

    /** Starts a LeaderLatch whose listener prints and runs the marker protocol on `events`. */
    private static LeaderLatch startLatch(CuratorFramework client, String path, String id, LeaderMarker marker,
            ExecutorService events) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id, LeaderLatch.CloseMode.NOTIFY_LEADER);
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() {
                out("LEADER " + epochMicros());
                try {
                    if (latch.hasLeadership()) {
                        marker.mark();
                    }
                } catch (Exception error) {
                    log("marking: " + error);
                }
            }

            public void notLeader() {
                // Too late to be safe, but the marker must not outlive a leadership either.
                out("NOT-LEADER " + epochMicros());
                try {
                    marker.unmark();
                } catch (Exception error) {
                    log("unmarking: " + error);
                }
            }
        }, events);
        latch.start();
        out("STARTED");
        return latch;
    }

    private static int selector(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String id = arg(args, 2, "id");
        long holdMs = Long.parseLong(arg(args, 3, "hold-ms"));
        int rounds = args.size() > 4 ? Integer.parseInt(args.get(4)) : 10;
        String markerPath = args.size() > 5 && !args.get(5).equals("-") ? args.get(5) : null;
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        LeaderMarker marker = new LeaderMarker(client, markerPath, id);
        AtomicInteger leaderships = new AtomicInteger();
        CountDownLatch lastRound = new CountDownLatch(1);
        LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            public void takeLeadership(CuratorFramework leaderClient) throws Exception {
                int round = leaderships.incrementAndGet();
                out("LEADING " + id + " " + epochMicros());
                try {
                    marker.mark();
                    Thread.sleep(holdMs);
                } finally {
                    marker.unmark();
                    out("DONE-LEADING " + id + " " + epochMicros());
                }
                if (round >= rounds) {
                    // Hold on (the election waits) until main closes the selector, which
                    // interrupts us: no further round is queued.
                    lastRound.countDown();
                    Thread.sleep(Long.MAX_VALUE);
                }
            }
        });
        selector.setId(id);
        selector.autoRequeue();
        out("READY");
        awaitLine("go");
        selector.start();
        if (!lastRound.await(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("only " + leaderships.get() + " of " + rounds + " leaderships");
        }
        selector.close();
        long deadline = System.currentTimeMillis() + ACQUIRE_TIMEOUT_MS;
        while (!ownedChildren(client, path).isEmpty()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the selector's node outlived close");
            }
            Thread.sleep(5);
        }
        out("FINISHED leaderships=" + leaderships.get() + " violations=" + marker.violations);
        client.close();
        return 0;
    }

    private static int participants(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String kind = args.size() > 2 ? args.get(2) : "latch";
        CuratorFramework client = start(connect);
        switch (kind) {
            case "latch":
                printParticipants(new LeaderLatch(client, path).getParticipants());
                break;
            case "selector":
                LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                    public void takeLeadership(CuratorFramework unused) {}
                });
                printParticipants(selector.getParticipants());
                break;
            default:
                throw new IllegalArgumentException("unknown election kind " + kind);
        }
        client.close();
        return 0;
    }

    private static int leader(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String kind = args.size() > 2 ? args.get(2) : "latch";
        CuratorFramework client = start(connect);
        Participant leader;
        switch (kind) {
            case "latch":
                leader = new LeaderLatch(client, path).getLeader();
                break;
            case "selector":
                leader = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                    public void takeLeadership(CuratorFramework unused) {}
                }).getLeader();
                break;
            default:
                throw new IllegalArgumentException("unknown election kind " + kind);
        }
        synchronized (System.out) {
            out("LEADER-ID " + leader.getId());
            out("LEADER-IS " + leader.isLeader());
        }
        client.close();
        return 0;
    }

    private static void printParticipants(Collection<Participant> participants) {
        synchronized (System.out) {
            for (Participant participant : participants) {
                out("PARTICIPANT " + participant.getId() + " " + participant.isLeader());
            }
            out("PARTICIPANTS-END");
        }
    }

    // ---------------------------------------------------------------------------------------
    // The critical-section protocol shared with the Rust side

    private static final class Contender {
        final int index;
        final CuratorFramework client;
        final Holder holder;
        final boolean locking;
        final int iterations;
        final long holdMs;
        final String markerDir;
        final String counterPath;
        final int allowedHolders;
        final List<long[]> holds = new ArrayList<>();
        long violations;
        long conflicts;
        int maxMarkers;

        Contender(int index, CuratorFramework client, Holder holder, boolean locking, int iterations,
                long holdMs, String markerDir, String counterPath, int allowedHolders) {
            this.index = index;
            this.client = client;
            this.holder = holder;
            this.locking = locking;
            this.iterations = iterations;
            this.holdMs = holdMs;
            this.markerDir = markerDir;
            this.counterPath = counterPath;
            this.allowedHolders = allowedHolders;
        }

        Contender call() throws Exception {
            for (int iteration = 0; iteration < iterations; iteration++) {
                if (locking) {
                    holder.acquire();
                }
                long acquired = epochMicros();
                String marker = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(markerDir + "/m-");
                int markers = client.getChildren().forPath(markerDir).size();
                maxMarkers = Math.max(maxMarkers, markers);
                if (markers > allowedHolders) {
                    violations++;
                }
                // Read-modify-write with the version read: a BadVersion means someone else wrote
                // in between; retry, so each acquisition adds exactly one.
                while (true) {
                    Stat stat = new Stat();
                    byte[] bytes = client.getData().storingStatIn(stat).forPath(counterPath);
                    long value = Long.parseLong(new String(bytes, StandardCharsets.UTF_8).trim());
                    Thread.sleep(holdMs);
                    try {
                        client.setData()
                                .withVersion(stat.getVersion())
                                .forPath(counterPath, Long.toString(value + 1).getBytes(StandardCharsets.UTF_8));
                        break;
                    } catch (KeeperException.BadVersionException concurrentWrite) {
                        conflicts++;
                        if (allowedHolders == 1) {
                            violations++;
                        }
                    }
                }
                client.delete().forPath(marker);
                long released = epochMicros();
                if (locking) {
                    holder.release();
                }
                holds.add(new long[] {acquired, released});
            }
            return this;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Lock kinds

    /** One lock of some kind, acquired and released by the same thread. */
    private interface Holder {
        void acquire() throws Exception;

        /** Full paths of the held nodes. */
        List<String> nodes() throws Exception;

        void release() throws Exception;
    }

    private static Holder holder(String kind, CuratorFramework client, String path, byte[] data, int maxLeases) {
        switch (kind) {
            case "mutex":
                return mutexHolder(new PathMutex(client, path, data), path);
            case "semaphore":
                return semaphoreHolder(client, path, data, maxLeases);
            case "read":
                return readWriteHolder(new RwWriteLock(client, path, data).readLock, path);
            case "write":
                return readWriteHolder(new RwWriteLock(client, path, data), path);
            case "semaphore-mutex":
                if (data != null) {
                    throw new IllegalArgumentException("InterProcessSemaphoreMutex takes no node data");
                }
                return semaphoreMutexHolder(client, path);
            default:
                throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    private static Holder mutexHolder(PathMutex mutex, String path) {
        return new Holder() {
            public void acquire() throws Exception {
                if (!mutex.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("timed out acquiring the mutex " + path);
                }
            }

            public List<String> nodes() {
                return Collections.singletonList(mutex.heldPath());
            }

            public void release() throws Exception {
                mutex.release();
            }
        };
    }

    private static Holder semaphoreHolder(CuratorFramework client, String path, byte[] data, int maxLeases) {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, maxLeases);
        if (data != null) {
            semaphore.setNodeData(data);
        }
        return new Holder() {
            private Lease lease;

            public void acquire() throws Exception {
                lease = semaphore.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                if (lease == null) {
                    throw new IllegalStateException("timed out acquiring a lease of " + path);
                }
            }

            public List<String> nodes() {
                return Collections.singletonList(path + "/leases/" + lease.getNodeName());
            }

            public void release() throws Exception {
                semaphore.returnLease(lease);
                lease = null;
            }
        };
    }

    private static Holder semaphoreMutexHolder(CuratorFramework client, String path) {
        InterProcessSemaphoreMutex mutex = new InterProcessSemaphoreMutex(client, path);
        return new Holder() {
            public void acquire() throws Exception {
                if (!mutex.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("timed out acquiring the semaphore mutex " + path);
                }
            }

            public List<String> nodes() throws Exception {
                // The lease is private: our node is the lease owned by our session.
                return ownedChildren(client, path + "/leases");
            }

            public void release() throws Exception {
                mutex.release();
            }
        };
    }

    private static Holder readWriteHolder(RwHalf lock, String path) {
        return new Holder() {
            public void acquire() throws Exception {
                if (!lock.mutex().acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("timed out acquiring the read-write lock " + path);
                }
            }

            public List<String> nodes() {
                return Collections.singletonList(lock.heldPath());
            }

            public void release() throws Exception {
                lock.mutex().release();
            }
        };
    }

    /** A half of an InterProcessReadWriteLock that tells its node path. */
    private interface RwHalf {
        InterProcessMutex mutex();

        /** The node this thread holds (null if it holds none). */
        String heldPath();
    }

    /**
     * The write half of InterProcessReadWriteLock(client, path, data), with its read half
     * ({@link #readLock}): the same classes and node names as Curator's, their node paths exposed.
     */
    private static final class RwWriteLock extends InterProcessReadWriteLock.WriteLock implements RwHalf {
        final RwReadLock readLock;

        RwWriteLock(CuratorFramework client, String path, byte[] data) {
            super(client, path, data);
            this.readLock = new RwReadLock(client, path, data, this);
        }

        public InterProcessMutex mutex() {
            return this;
        }

        public String heldPath() {
            return getLockPath();
        }
    }

    private static final class RwReadLock extends InterProcessReadWriteLock.ReadLock implements RwHalf {
        RwReadLock(CuratorFramework client, String path, byte[] data, RwWriteLock writeLock) {
            super(client, path, data, writeLock);
        }

        public InterProcessMutex mutex() {
            return this;
        }

        public String heldPath() {
            return getLockPath();
        }
    }

    /** InterProcessMutex with explicit node data (null: Curator's default) and its node path. */
    private static final class PathMutex extends InterProcessMutex {
        private final byte[] data;

        PathMutex(CuratorFramework client, String path, byte[] data) {
            super(client, path);
            this.data = data;
        }

        @Override
        protected byte[] getLockNodeBytes() {
            return data;
        }

        /** The node this thread holds (null if it holds none). */
        String heldPath() {
            return getLockPath();
        }
    }

    // ---------------------------------------------------------------------------------------
    // Helpers

    // ---------------------------------------------------------------------------------------
    // Benchmarks (benches/locks.rs runs them beside the same scenarios in Rust)

    private static int benchCycles(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int cycles = Integer.parseInt(arg(args, 2, "cycles"));
        int warmUp = args.size() > 3 ? Integer.parseInt(args.get(3)) : 100;
        CuratorFramework client = start(connect);
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        for (int i = 0; i < warmUp; i++) {
            mutex.acquire();
            mutex.release();
        }
        long[] nanos = new long[cycles];
        long started = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            long cycle = System.nanoTime();
            mutex.acquire();
            mutex.release();
            nanos[i] = System.nanoTime() - cycle;
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        Arrays.sort(nanos);
        out(String.format("RESULT ops=%.1f p50_us=%.1f p99_us=%.1f", cycles / seconds,
                nanos[(int) Math.round((cycles - 1) * 0.5)] / 1e3, nanos[(int) Math.round((cycles - 1) * 0.99)] / 1e3));
        client.close();
        return 0;
    }

    private static int benchContended(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int sessions = Integer.parseInt(arg(args, 2, "sessions"));
        long millis = Long.parseLong(arg(args, 3, "millis"));
        long warmUpMillis = args.size() > 4 ? Long.parseLong(args.get(4)) : 0;
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            clients.add(start(connect));
        }
        AtomicLong count = new AtomicLong();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicBoolean timing = new java.util.concurrent.atomic.AtomicBoolean();
        // Holds in the order they happened (the lock serializes them): the k-th hold's acquire
        // and release return times, recorded by its holder while the window is open.
        AtomicLong holds = new AtomicLong();
        List<long[]> recorded = new CopyOnWriteArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(sessions);
        List<Future<?>> running = new ArrayList<>();
        for (CuratorFramework client : clients) {
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            running.add(pool.submit(() -> {
                List<long[]> mine = new ArrayList<>();
                while (!stop.get()) {
                    mutex.acquire();
                    long acquired = System.nanoTime();
                    long hold = holds.getAndIncrement();
                    boolean timed = timing.get();
                    mutex.release();
                    long released = System.nanoTime();
                    count.incrementAndGet();
                    if (timed) {
                        mine.add(new long[] {hold, acquired, released});
                    }
                }
                recorded.addAll(mine);
                return null;
            }));
        }
        Thread.sleep(warmUpMillis);
        timing.set(true);
        long countedFrom = count.get();
        long started = System.nanoTime();
        Thread.sleep(millis);
        long counted = count.get() - countedFrom;
        double seconds = (System.nanoTime() - started) / 1e9;
        timing.set(false);
        stop.set(true);
        for (Future<?> future : running) {
            future.get();
        }
        pool.shutdown();
        java.util.Map<Long, long[]> byHold = new java.util.HashMap<>();
        for (long[] hold : recorded) {
            byHold.put(hold[0], hold);
        }
        List<Long> handOffs = new ArrayList<>();
        for (long[] hold : recorded) {
            long[] previous = byHold.get(hold[0] - 1);
            if (previous != null) {
                handOffs.add(hold[1] - previous[2]);
            }
        }
        Collections.sort(handOffs);
        String handOff = handOffs.isEmpty() ? "" : String.format(" handoff_p50_us=%.1f handoff_p99_us=%.1f handoffs=%d",
                handOffs.get((int) Math.round((handOffs.size() - 1) * 0.5)) / 1e3,
                handOffs.get((int) Math.round((handOffs.size() - 1) * 0.99)) / 1e3, handOffs.size());
        out(String.format("RESULT ops=%.1f", counted / seconds) + handOff);
        for (CuratorFramework client : clients) {
            client.close();
        }
        return 0;
    }

    private static int benchDistinct(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        int locks = Integer.parseInt(arg(args, 2, "locks"));
        int cycles = Integer.parseInt(arg(args, 3, "cycles-each"));
        int threads = args.size() > 4 ? Math.min(locks, Integer.parseInt(args.get(4))) : locks;
        int warmUp = args.size() > 5 ? Integer.parseInt(args.get(5)) : 0;
        CuratorFramework client = start(connect);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<InterProcessMutex> mutexes = new ArrayList<>();
        for (int i = 0; i < locks; i++) {
            mutexes.add(new InterProcessMutex(client, base + "/lock-" + i));
        }
        cycleDistinct(pool, mutexes, warmUp);
        long started = System.nanoTime();
        cycleDistinct(pool, mutexes, cycles);
        double seconds = (System.nanoTime() - started) / 1e9;
        pool.shutdown();
        out(String.format("RESULT ops=%.1f threads=%d", (double) locks * cycles / seconds, threads));
        client.close();
        return 0;
    }

    /** Each mutex cycled {@code cycles} times on the pool, all at once; returns when all are done. */
    private static void cycleDistinct(ExecutorService pool, List<InterProcessMutex> mutexes, int cycles)
            throws Exception {
        List<Future<?>> running = new ArrayList<>();
        for (InterProcessMutex mutex : mutexes) {
            running.add(pool.submit(() -> {
                for (int c = 0; c < cycles; c++) {
                    mutex.acquire();
                    mutex.release();
                }
                return null;
            }));
        }
        for (Future<?> future : running) {
            future.get();
        }
    }

    private static int benchReadWrite(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int sessions = Integer.parseInt(arg(args, 2, "sessions"));
        long millis = Long.parseLong(arg(args, 3, "millis"));
        int writePercent = Integer.parseInt(arg(args, 4, "write-percent"));
        long warmUpMillis = args.size() > 5 ? Long.parseLong(args.get(5)) : 0;
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            clients.add(start(connect));
        }
        AtomicLong reads = new AtomicLong();
        AtomicLong writes = new AtomicLong();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        ExecutorService pool = Executors.newFixedThreadPool(sessions);
        List<Future<?>> running = new ArrayList<>();
        for (int index = 0; index < sessions; index++) {
            InterProcessReadWriteLock lock = new InterProcessReadWriteLock(clients.get(index), path);
            Random random = new Random(1000 + index);
            running.add(pool.submit(() -> {
                while (!stop.get()) {
                    boolean write = random.nextInt(100) < writePercent;
                    InterProcessMutex mutex = write ? lock.writeLock() : lock.readLock();
                    mutex.acquire();
                    mutex.release();
                    (write ? writes : reads).incrementAndGet();
                }
                return null;
            }));
        }
        Thread.sleep(warmUpMillis);
        long readsFrom = reads.get();
        long writesFrom = writes.get();
        long started = System.nanoTime();
        Thread.sleep(millis);
        long countedReads = reads.get() - readsFrom;
        long countedWrites = writes.get() - writesFrom;
        double seconds = (System.nanoTime() - started) / 1e9;
        stop.set(true);
        for (Future<?> future : running) {
            future.get();
        }
        pool.shutdown();
        out(String.format("RESULT ops=%.1f reads=%d writes=%d", (countedReads + countedWrites) / seconds,
                countedReads, countedWrites));
        for (CuratorFramework client : clients) {
            client.close();
        }
        return 0;
    }

    private static int benchLatch(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int handOvers = Integer.parseInt(arg(args, 2, "hand-overs"));
        int warmUp = args.size() > 3 ? Integer.parseInt(args.get(3)) : 0;
        CuratorFramework[] clients = {start(connect), start(connect)};
        String[] ids = {"a", "b"};
        // When each side last became leader (System.nanoTime, taken in its callback), 0 before.
        AtomicLong[] ledAt = {new AtomicLong(), new AtomicLong()};
        LeaderLatch[] latches = new LeaderLatch[2];
        for (int side = 0; side < 2; side++) {
            latches[side] = benchLatchJoin(clients[side], path, ids[side], ledAt, side);
        }
        long[] nanos = new long[handOvers];
        long deadline = System.currentTimeMillis() + ACQUIRE_TIMEOUT_MS;
        for (int round = -warmUp; round < handOvers; round++) {
            int leader = -1;
            while (leader < 0) {
                for (int side = 0; side < 2; side++) {
                    if (latches[side].hasLeadership() && ledAt[side].get() != 0) {
                        leader = side;
                    }
                }
                if (leader < 0) {
                    checkDeadline(deadline, "a leader");
                    Thread.sleep(0, 200_000);
                }
            }
            int other = 1 - leader;
            ledAt[other].set(0);
            long closing = System.nanoTime();
            latches[leader].close();
            long led;
            synchronized (ledAt) {
                while ((led = ledAt[other].get()) == 0) {
                    checkDeadline(deadline, "the hand-over");
                    ledAt.wait(10);
                }
            }
            if (round >= 0) {
                nanos[round] = led - closing;
            }
            ledAt[leader].set(0);
            latches[leader] = benchLatchJoin(clients[leader], path, ids[leader], ledAt, leader);
            while (latches[leader].getOurPath() == null) {
                checkDeadline(deadline, "the rejoined latch's node");
                Thread.sleep(0, 200_000);
            }
        }
        for (LeaderLatch latch : latches) {
            latch.close();
        }
        Arrays.sort(nanos);
        out(String.format("RESULT count=%d p50_us=%.1f p90_us=%.1f max_us=%.1f", handOvers,
                nanos[(int) Math.round((handOvers - 1) * 0.5)] / 1e3,
                nanos[(int) Math.round((handOvers - 1) * 0.9)] / 1e3, nanos[handOvers - 1] / 1e3));
        for (CuratorFramework client : clients) {
            client.close();
        }
        return 0;
    }

    /** A started latch whose isLeader callback stores the time in ledAt[side] and wakes ledAt's waiters. */
    private static LeaderLatch benchLatchJoin(CuratorFramework client, String path, String id, AtomicLong[] ledAt,
            int side) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() {
                long now = System.nanoTime();
                synchronized (ledAt) {
                    ledAt[side].set(now);
                    ledAt.notifyAll();
                }
            }

            public void notLeader() {}
        });
        latch.start();
        return latch;
    }

    private static void checkDeadline(long deadlineMillis, String what) {
        if (System.currentTimeMillis() > deadlineMillis) {
            throw new IllegalStateException("timed out waiting for " + what);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Queue commands (tests/interop_queue.rs, benches/queues.rs)

    /** Items are UTF-8 strings (our Utf8Serializer). */
    private static final QueueSerializer<String> UTF8 = new QueueSerializer<String>() {
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        public String deserialize(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
    };

    private static MultiItem<String> multi(String... items) {
        Iterator<String> iterator = Arrays.asList(items).iterator();
        return () -> iterator.hasNext() ? iterator.next() : null;
    }

    private static QueueBuilder<String> queueBuilder(CuratorFramework client, QueueConsumer<String> consumer,
            String path, String lockPath) {
        QueueBuilder<String> builder = QueueBuilder.builder(client, consumer, UTF8, path).putInBackground(false);
        return lockPath == null ? builder : builder.lockPath(lockPath);
    }

    private static String optionalPath(List<String> args, int index, String name) {
        String value = arg(args, index, name);
        return value.equals("-") ? null : value;
    }

    /** One queue of any kind, started, behind one interface. */
    static final class AnyQueue implements java.io.Closeable {
        final String kind;
        final java.io.Closeable queue;

        AnyQueue(String kind, CuratorFramework client, QueueConsumer<String> consumer, String path, String lockPath)
                throws Exception {
            this.kind = kind;
            QueueBuilder<String> builder = queueBuilder(client, consumer, path, lockPath);
            switch (kind) {
                case "queue":
                    DistributedQueue<String> plain = builder.buildQueue();
                    plain.start();
                    queue = plain;
                    break;
                case "priority":
                    DistributedPriorityQueue<String> priority = builder.buildPriorityQueue(0);
                    priority.start();
                    queue = priority;
                    break;
                case "delay":
                    DistributedDelayQueue<String> delay = builder.buildDelayQueue();
                    delay.start();
                    queue = delay;
                    break;
                case "id":
                    DistributedIdQueue<String> id = builder.buildIdQueue();
                    id.start();
                    queue = id;
                    break;
                default:
                    throw new IllegalArgumentException("unknown queue kind " + kind);
            }
        }

        /** Puts one node; returns its due time for a delay queue, else 0. */
        @SuppressWarnings("unchecked")
        long put(String[] items, String arg) throws Exception {
            switch (kind) {
                case "queue":
                    if (items.length == 1) {
                        ((DistributedQueue<String>) queue).put(items[0]);
                    } else {
                        ((DistributedQueue<String>) queue).putMulti(multi(items));
                    }
                    return 0;
                case "priority":
                    int priority = Integer.parseInt(arg == null ? "0" : arg);
                    if (items.length == 1) {
                        ((DistributedPriorityQueue<String>) queue).put(items[0], priority);
                    } else {
                        ((DistributedPriorityQueue<String>) queue).putMulti(multi(items), priority);
                    }
                    return 0;
                case "delay":
                    long due = System.currentTimeMillis() + Long.parseLong(arg == null ? "0" : arg);
                    if (items.length == 1) {
                        ((DistributedDelayQueue<String>) queue).put(items[0], due);
                    } else {
                        ((DistributedDelayQueue<String>) queue).putMulti(multi(items), due);
                    }
                    return due;
                case "id":
                    if (items.length != 1 || arg == null) {
                        throw new IllegalArgumentException("an id queue puts one item with an id");
                    }
                    ((DistributedIdQueue<String>) queue).put(items[0], arg);
                    return 0;
                default:
                    throw new IllegalArgumentException("unknown queue kind " + kind);
            }
        }

        public void close() throws IOException {
            queue.close();
        }
    }

    private static int queueGolden(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));

        DistributedQueue<String> plain = queueBuilder(client, null, base + "/queue", base + "/queue-locks").buildQueue();
        plain.start();
        plain.put("one");
        plain.putMulti(multi("two", "three"));
        plain.close();

        DistributedPriorityQueue<String> priority = queueBuilder(client, null, base + "/priority", null)
                .buildPriorityQueue(0);
        priority.start();
        priority.put("p5", 5);
        priority.put("m3", -3);
        priority.put("max", Integer.MAX_VALUE);
        priority.put("min", Integer.MIN_VALUE);
        priority.put("zero", 0);
        priority.close();

        DistributedDelayQueue<String> delay = queueBuilder(client, null, base + "/delay", null).buildDelayQueue();
        delay.start();
        delay.put("d1", 0x18F00000000L);
        delay.put("d2", 1L);
        delay.close();

        DistributedIdQueue<String> id = queueBuilder(client, null, base + "/id", null).buildIdQueue();
        id.start();
        id.put("i1", "job-1");
        id.put("i2", "a/b|c");
        id.close();

        SimpleDistributedQueue simple = new SimpleDistributedQueue(client, base + "/simple");
        simple.offer("s1".getBytes(StandardCharsets.UTF_8));
        simple.offer(new byte[] {0, 1, 2, (byte) 0xff});
        out("PUT-DONE");

        String lockedPath = base + "/locked";
        String lockedLocks = base + "/locked-locks";
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        QueueConsumer<String> holder = new QueueConsumer<String>() {
            public void consumeMessage(String message) throws Exception {
                for (String node : ownedChildren(client, lockedLocks)) {
                    out("NODE lock " + node);
                }
                out("CONSUMING " + message);
                inside.countDown();
                if (!release.await(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("never released");
                }
            }

            public void stateChanged(CuratorFramework unused, ConnectionState state) {}
        };
        // The item goes in first (a producer-only queue), so the consumer takes it at once.
        DistributedQueue<String> lockedProducer = queueBuilder(client, null, lockedPath, lockedLocks).buildQueue();
        lockedProducer.start();
        lockedProducer.put("held");
        lockedProducer.close();
        DistributedQueue<String> locked = queueBuilder(client, holder, lockedPath, lockedLocks).buildQueue();
        locked.start();
        if (!inside.await(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("the consumer never took the item");
        }
        out("HELD " + epochMicros());
        awaitLine("release");
        release.countDown();
        awaitDrained(client, lockedPath, lockedLocks, "queue-");
        locked.close();
        out("RELEASED");
        client.close();
        return 0;
    }

    /** Waits until `path` has no children starting with `prefix` and `lockPath` (if any) none. */
    private static void awaitDrained(CuratorFramework client, String path, String lockPath, String prefix)
            throws Exception {
        long deadline = System.currentTimeMillis() + ACQUIRE_TIMEOUT_MS;
        while (true) {
            boolean drained = true;
            for (String child : childrenOrEmpty(client, path)) {
                drained &= !child.startsWith(prefix);
            }
            if (lockPath != null) {
                drained &= childrenOrEmpty(client, lockPath).isEmpty();
            }
            if (drained) {
                return;
            }
            checkDeadline(deadline, "the queue " + path + " to drain");
            Thread.sleep(5);
        }
    }

    private static List<String> childrenOrEmpty(CuratorFramework client, String path) throws Exception {
        try {
            return client.getChildren().forPath(path);
        } catch (KeeperException.NoNodeException gone) {
            return Collections.emptyList();
        }
    }

    private static int queuePut(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String kind = arg(args, 1, "kind");
        String path = arg(args, 2, "path");
        String lockPath = optionalPath(args, 3, "lock-path");
        CuratorFramework client = start(connect);
        SimpleDistributedQueue simple = kind.equals("simple") ? new SimpleDistributedQueue(client, path) : null;
        AnyQueue queue = simple == null ? new AnyQueue(kind, client, null, path, lockPath) : null;
        int puts = 0;
        for (String spec : args.subList(4, args.size())) {
            int at = spec.indexOf('@');
            String items = at < 0 ? spec : spec.substring(0, at);
            String itemArg = at < 0 ? null : spec.substring(at + 1);
            if (simple != null) {
                simple.offer(items.getBytes(StandardCharsets.UTF_8));
                out("PUT " + items);
            } else {
                long due = queue.put(items.split(","), itemArg);
                out("PUT " + items + (kind.equals("delay") ? " due=" + due : ""));
            }
            puts++;
        }
        if (queue != null) {
            queue.close();
        }
        out("DONE puts=" + puts);
        client.close();
        return 0;
    }

    private static int queueProduce(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int items = Integer.parseInt(arg(args, 2, "items"));
        int producers = Integer.parseInt(arg(args, 3, "producers"));
        String prefix = arg(args, 4, "prefix");
        boolean background = args.size() > 5 && args.get(5).equals("background");
        List<DistributedQueue<String>> queues = new ArrayList<>();
        for (int index = 0; index < producers; index++) {
            CuratorFramework client = start(connect);
            DistributedQueue<String> queue = QueueBuilder.builder(client, null, UTF8, path)
                    .putInBackground(background)
                    .buildQueue();
            queue.start();
            queues.add(queue);
        }
        ExecutorService pool = Executors.newFixedThreadPool(producers);
        List<Future<?>> running = new ArrayList<>();
        long started = System.nanoTime();
        for (int index = 0; index < producers; index++) {
            DistributedQueue<String> queue = queues.get(index);
            int first = index;
            running.add(pool.submit(() -> {
                for (int item = first; item < items; item += producers) {
                    queue.put(prefix + item);
                }
                if (!queue.flushPuts(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("background puts did not finish");
                }
                return null;
            }));
        }
        for (Future<?> future : running) {
            future.get();
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        pool.shutdown();
        out(String.format("RESULT ops=%.1f elapsed_ms=%.1f", items / seconds, seconds * 1e3));
        for (DistributedQueue<String> queue : queues) {
            queue.close();
        }
        for (CuratorFramework client : CLIENTS) {
            client.close();
        }
        return 0;
    }

    private static int queueConsume(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String kind = arg(args, 1, "kind");
        String path = arg(args, 2, "path");
        String lockPath = optionalPath(args, 3, "lock-path");
        int expected = Integer.parseInt(arg(args, 4, "expected"));
        int consumers = Integer.parseInt(arg(args, 5, "consumers"));
        boolean print = arg(args, 6, "print|quiet").equals("print");
        long lingerMs = args.size() > 7 ? Long.parseLong(args.get(7)) : 0;
        List<CuratorFramework> clients = new ArrayList<>();
        for (int index = 0; index < consumers; index++) {
            clients.add(start(connect));
        }
        AtomicInteger consumed = new AtomicInteger();
        CountDownLatch enough = new CountDownLatch(1);
        List<java.io.Closeable> queues = new ArrayList<>();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        List<Thread> pollers = new ArrayList<>();
        long started = System.nanoTime();
        for (int index = 0; index < consumers; index++) {
            int consumer = index;
            if (kind.equals("simple")) {
                SimpleDistributedQueue simple = new SimpleDistributedQueue(clients.get(index), path);
                Thread poller = new Thread(() -> {
                    try {
                        while (!stop.get()) {
                            byte[] bytes = simple.poll(50, TimeUnit.MILLISECONDS);
                            if (bytes != null) {
                                consumed(consumer, new String(bytes, StandardCharsets.UTF_8), print, consumed, expected,
                                        enough);
                            }
                        }
                    } catch (Exception error) {
                        if (!stop.get()) {
                            log("simple queue poller: " + error);
                        }
                    }
                }, "poller-" + index);
                poller.start();
                pollers.add(poller);
                continue;
            }
            QueueConsumer<String> handler = new QueueConsumer<String>() {
                public void consumeMessage(String message) {
                    consumed(consumer, message, print, consumed, expected, enough);
                }

                public void stateChanged(CuratorFramework unused, ConnectionState state) {}
            };
            queues.add(new AnyQueue(kind, clients.get(index), handler, path, lockPath));
        }
        out("STARTED");
        if (expected <= 0) {
            awaitLine("stop");
        } else if (!enough.await(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("only " + consumed.get() + " of " + expected + " items consumed");
        } else {
            double seconds = (System.nanoTime() - started) / 1e9;
            out(String.format("RESULT ops=%.1f elapsed_ms=%.1f", expected / seconds, seconds * 1e3));
        }
        awaitDrained(clients.get(0), path, lockPath, kind.equals("simple") ? "qn-" : "queue-");
        Thread.sleep(lingerMs);
        stop.set(true);
        for (Thread poller : pollers) {
            poller.join(ACQUIRE_TIMEOUT_MS);
        }
        for (java.io.Closeable queue : queues) {
            queue.close();
        }
        out("DONE items=" + consumed.get());
        for (CuratorFramework client : clients) {
            client.close();
        }
        return 0;
    }

    private static void consumed(int consumer, String item, boolean print, AtomicInteger consumed, int expected,
            CountDownLatch enough) {
        if (print) {
            out("ITEM " + consumer + " " + System.currentTimeMillis() + " " + item);
        }
        if (consumed.incrementAndGet() >= expected) {
            enough.countDown();
        }
    }

    private static int queueRemoveId(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String lockPath = optionalPath(args, 2, "lock-path");
        String id = arg(args, 3, "id");
        CuratorFramework client = start(connect);
        DistributedIdQueue<String> queue = queueBuilder(client, null, path, lockPath).buildIdQueue();
        queue.start();
        out("REMOVED " + queue.remove(id));
        queue.close();
        client.close();
        return 0;
    }

    static CuratorFramework start(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new ExponentialBackoffRetry(50, 10))
                .build();
        CLIENTS.add(client);
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + connect);
        }
        return client;
    }

    static long sessionId(CuratorFramework client) throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    /** "<hex session id> timeout-ms=<negotiated session timeout>". */
    static String describeSession(CuratorFramework client) throws Exception {
        org.apache.zookeeper.ZooKeeper zooKeeper = client.getZookeeperClient().getZooKeeper();
        return Long.toHexString(zooKeeper.getSessionId()) + " timeout-ms=" + zooKeeper.getSessionTimeout();
    }

    /** Children of `dir` (full paths) whose ephemeral owner is this client's session. */
    static List<String> ownedChildren(CuratorFramework client, String dir) throws Exception {
        long session = sessionId(client);
        List<String> owned = new ArrayList<>();
        for (String child : client.getChildren().forPath(dir)) {
            Stat stat = client.checkExists().forPath(dir + "/" + child);
            if (stat != null && stat.getEphemeralOwner() == session) {
                owned.add(dir + "/" + child);
            }
        }
        return owned;
    }

    static String arg(List<String> args, int index, String name) {
        if (index >= args.size()) {
            throw new IllegalArgumentException("missing argument <" + name + ">");
        }
        return args.get(index);
    }

    static byte[] optionalData(List<String> args, int index) {
        if (index >= args.size() || args.get(index).equals("-")) {
            return null;
        }
        return args.get(index).getBytes(StandardCharsets.UTF_8);
    }

    /** Blocks until stdin delivers `expected` (other lines are logged and skipped). */
    static void awaitLine(String expected) throws InterruptedException {
        while (true) {
            String line = INPUT.take();
            if (line.equals(expected)) {
                return;
            }
            log("ignoring stdin line '" + line + "' while waiting for '" + expected + "'");
        }
    }

    static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static void out(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static void log(String message) {
        System.err.println("[CuratorDriver " + Instant.now() + "] " + message);
        System.err.flush();
    }
}
