/*
 * The Curator driver's chaos contender (crates/chaos runs it beside Rust contenders; see
 * crates/chaos/src/events.rs for the event-log format both write). Helpers (start, arg, out,
 * sessionId, ownedChildren, epochMicros) are CuratorDriver's.
 *
 * Commands:
 *   chaos-contend <connect> <recipes> <clients> <tag> <event-log> <locking:on|off> <lock-root>
 *           <check-root> <hold-ms>
 *       For each recipe in the comma-separated <recipes> (mutex: InterProcessMutex,
 *       semaphore-mutex: InterProcessSemaphoreMutex, semaphore: InterProcessSemaphoreV2 with 2
 *       leases, rwlock: InterProcessReadWriteLock, every fourth acquisition of a client (holder
 *       <tag>-<client>-<n>, n divisible by 4) a write, the others reads: a reader may share with
 *       readers only, and only writers increment the counter; latch: LeaderLatch, selector: LeaderSelector with autoRequeue, whose takeLeadership
 *       hands the leadership to the worker and returns once the worker is done), <clients> CuratorFrameworks (one session and one thread each)
 *       loop on <lock-root>/<recipe>: acquire (20 s), log A with the fencing token (the lock
 *       node's czxid), create the EPHEMERAL marker <check-root>/<recipe>-guard/<holder>, list the
 *       guard dir (more markers than holders allowed: V marker), read the counter
 *       <check-root>/<recipe>-counter ("<count> <token> <holder>"; an exclusive recipe whose last
 *       token is not below ours: V fencing), sleep <hold-ms>, write count+1 with the version read
 *       (W, then I ok|unc|no; BadVersion on an exclusive recipe: V counter), delete the marker,
 *       log R, release. Every write is a transaction that first checks our lock node (with
 *       locking off: no lock, no check). A SUSPENDED or LOST connection state (or notLeader)
 *       while holding logs L at once and ends the hold. Prints READY once every client is
 *       connected; "stop" on stdin ends the loops, closes the clients and prints DONE.
 *       Optional trailing <queues|-> <queue-root> <process-ms>: for each queue kind (queue:
 *       DistributedQueue, priority: DistributedPriorityQueue; lock path <queue-root>/<kind>-locks
 *       when locking) one more client consumes <queue-root>/<kind>: consumeMessage logs
 *       "C <kind> <tag>-q <micros> <item>", sleeps <process-ms>, and logs K the same way as it
 *       returns (Curator then deletes the item and its lock node). The consumer's client logs
 *       "S <kind> <tag>-q <micros> <session id>" when it connects and after every reconnection.
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.epochMicros;
import static zkrecipes.interop.CuratorDriver.log;
import static zkrecipes.interop.CuratorDriver.out;
import static zkrecipes.interop.CuratorDriver.ownedChildren;
import static zkrecipes.interop.CuratorDriver.sessionId;
import static zkrecipes.interop.CuratorDriver.start;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.data.Stat;

final class CuratorChaos {
    private static final long ACQUIRE_MS = 20_000;
    private static final int SEMAPHORE_LEASES = 2;
    private static final int INCREMENT_ATTEMPTS = 20;

    private static volatile boolean stopping;

    private CuratorChaos() {}

    static Integer run(String command, List<String> args) throws Exception {
        if (!command.equals("chaos-contend")) {
            return null;
        }
        String connect = arg(args, 0, "connect");
        List<String> recipes = Arrays.asList(arg(args, 1, "recipes").split(","));
        int clients = Integer.parseInt(arg(args, 2, "clients"));
        String tag = arg(args, 3, "tag");
        EventLog events = new EventLog(arg(args, 4, "event-log"));
        boolean locking = arg(args, 5, "locking").equals("on");
        String lockRoot = arg(args, 6, "lock-root");
        String checkRoot = arg(args, 7, "check-root");
        long holdMs = Long.parseLong(arg(args, 8, "hold-ms"));
        List<String> queueKinds = args.size() > 9 && !args.get(9).equals("-")
                ? Arrays.asList(args.get(9).split(",")) : new ArrayList<>();
        String queueRoot = args.size() > 10 ? args.get(10) : "/chaos-queues";
        long processMs = args.size() > 11 ? Long.parseLong(args.get(11)) : 100;

        List<Worker> workers = new ArrayList<>();
        for (String recipe : recipes) {
            for (int client = 0; client < clients; client++) {
                workers.add(new Worker(recipe, tag + "-" + client, start(connect), events, locking,
                        lockRoot, checkRoot, holdMs));
            }
        }
        List<Thread> threads = new ArrayList<>();
        for (Worker worker : workers) {
            Thread thread = new Thread(worker::loop, "chaos-" + worker.recipe + "-" + worker.prefix);
            thread.start();
            threads.add(thread);
        }
        List<CuratorDriver.AnyQueue> queues = new ArrayList<>();
        List<CuratorFramework> queueClients = new ArrayList<>();
        for (String kind : queueKinds) {
            CuratorFramework client = start(connect);
            queueClients.add(client);
            String consumerName = tag + "-q";
            // The session the consumer's lock nodes belong to, now and after every reconnection,
            // so the run can tell whose session holds the lock of an item nobody takes.
            events.event('S', kind, consumerName, Long.toString(sessionId(client)));
            client.getConnectionStateListenable().addListener((unused, state) -> {
                if (state.isConnected()) {
                    try {
                        events.event('S', kind, consumerName, Long.toString(sessionId(client)));
                    } catch (Exception error) {
                        log("session id: " + error);
                    }
                }
            });
            QueueConsumer<String> consumer = new QueueConsumer<String>() {
                public void consumeMessage(String item) throws Exception {
                    events.event('C', kind, consumerName, item);
                    Thread.sleep(processMs);
                    events.event('K', kind, consumerName, item);
                }

                public void stateChanged(CuratorFramework unused, ConnectionState state) {}
            };
            String path = queueRoot + "/" + kind;
            queues.add(new CuratorDriver.AnyQueue(kind, client, consumer, path, locking ? path + "-locks" : null));
        }
        out("READY");
        CuratorDriver.awaitLine("stop");
        for (CuratorDriver.AnyQueue queue : queues) {
            queue.close();
        }
        for (CuratorFramework client : queueClients) {
            client.close();
        }
        stopping = true;
        for (Thread thread : threads) {
            thread.join(120_000);
        }
        for (Worker worker : workers) {
            if (worker.selector != null) {
                worker.selector.close();
            }
            worker.client.close();
        }
        out("DONE");
        return 0;
    }

    /** Appends whole lines, one write each (a SIGKILL leaves no torn line behind). */
    private static final class EventLog {
        private final FileOutputStream file;

        EventLog(String path) throws IOException {
            file = new FileOutputStream(path, true);
        }

        synchronized void event(char kind, String recipe, String holder, String rest) {
            String line = kind + " " + recipe + " " + holder + " " + epochMicros() + (rest.isEmpty() ? "" : " " + rest)
                    + "\n";
            try {
                file.write(line.getBytes(StandardCharsets.UTF_8));
            } catch (IOException error) {
                log("event log: " + error);
            }
        }
    }

    private enum Outcome { OK, LOST, FAILED, UNKNOWN }

    private static final class Result {
        final Outcome outcome;
        final KeeperException.Code code;
        final String text;

        Result(Outcome outcome, KeeperException.Code code, String text) {
            this.outcome = outcome;
            this.code = code;
            this.text = text;
        }
    }

    /** Raised inside a hold when it can no longer be trusted, or a step's outcome is unknown. */
    private static final class Abort extends Exception {
        final boolean lost;

        Abort(boolean lost, String message) {
            super(message);
            this.lost = lost;
        }
    }

    /** InterProcessMutex with its node path exposed. */
    private static final class ChaosMutex extends InterProcessMutex {
        ChaosMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String heldPath() {
            return getLockPath();
        }
    }

    private static final class Worker {
        final String recipe;
        final String prefix;
        final CuratorFramework client;
        final EventLog events;
        final boolean locking;
        final String lockPath;
        final String guardDir;
        final String counterPath;
        final long holdMs;
        final boolean exclusiveRecipe;
        final int allowed;
        /** The holder whose hold is current, or null. */
        volatile String holding;
        /** Set (once per hold) when the hold was lost; L is logged when it is set. */
        final AtomicBoolean lost = new AtomicBoolean();
        /** SUSPENDED or LOST states seen so far. */
        final AtomicLong connectionLosses = new AtomicLong();

        ChaosMutex mutex;
        InterProcessSemaphoreMutex semaphoreMutex;
        InterProcessSemaphoreV2 semaphore;
        LeaderSelector selector;
        InterProcessReadWriteLock readWriteLock;
        /** The read-write lock's half held now. */
        InterProcessMutex readWriteHalf;
        /** Leaderships handed from the selector's takeLeadership to the worker; counted down when done. */
        final SynchronousQueue<CountDownLatch> turns = new SynchronousQueue<>();

        Worker(String recipe, String prefix, CuratorFramework client, EventLog events, boolean locking,
                String lockRoot, String checkRoot, long holdMs) {
            this.recipe = recipe;
            this.prefix = prefix;
            this.client = client;
            this.events = events;
            this.locking = locking;
            this.lockPath = lockRoot + "/" + recipe;
            this.guardDir = checkRoot + "/" + recipe + "-guard";
            this.counterPath = checkRoot + "/" + recipe + "-counter";
            this.holdMs = holdMs;
            this.allowed = recipe.equals("semaphore") ? SEMAPHORE_LEASES : 1;
            this.exclusiveRecipe = allowed == 1;
            client.getConnectionStateListenable().addListener((c, state) -> {
                if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                    connectionLosses.incrementAndGet();
                    markLost();
                }
            });
            switch (recipe) {
                case "mutex":
                    mutex = new ChaosMutex(client, lockPath);
                    break;
                case "semaphore-mutex":
                    semaphoreMutex = new InterProcessSemaphoreMutex(client, lockPath);
                    break;
                case "semaphore":
                    semaphore = new InterProcessSemaphoreV2(client, lockPath, SEMAPHORE_LEASES);
                    break;
                case "latch":
                    break;
                case "rwlock":
                    readWriteLock = new InterProcessReadWriteLock(client, lockPath);
                    break;
                case "selector":
                    if (locking) {
                        selector = new LeaderSelector(client, lockPath, new LeaderSelectorListenerAdapter() {
                            public void takeLeadership(CuratorFramework leader) throws Exception {
                                CountDownLatch done = new CountDownLatch(1);
                                if (turns.offer(done, ACQUIRE_MS, TimeUnit.MILLISECONDS)) {
                                    done.await();
                                }
                            }
                        });
                        selector.setId(prefix);
                        selector.autoRequeue();
                        selector.start();
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown recipe " + recipe);
            }
        }

        void markLost() {
            String holder = holding;
            if (holder != null && lost.compareAndSet(false, true)) {
                events.event('L', recipe, holder, "");
            }
        }

        void loop() {
            long sequence = 0;
            while (!stopping) {
                sequence++;
                String holder = prefix + "-" + sequence;
                try {
                    once(holder);
                } catch (Exception error) {
                    events.event('E', recipe, holder, String.valueOf(error).replace('\n', ' '));
                    sleepQuietly(100);
                }
            }
        }

        private void once(String holder) throws Exception {
            lost.set(false);
            long lossesBefore = connectionLosses.get();
            String node = null;
            Lease lease = null;
            LeaderLatch latch = null;
            CountDownLatch turn = null;
            if (locking) {
                switch (recipe) {
                    case "mutex":
                        if (!mutex.acquire(ACQUIRE_MS, TimeUnit.MILLISECONDS)) {
                            events.event('E', recipe, holder, "acquire timed out");
                            return;
                        }
                        node = mutex.heldPath();
                        break;
                    case "semaphore-mutex":
                        if (!semaphoreMutex.acquire(ACQUIRE_MS, TimeUnit.MILLISECONDS)) {
                            events.event('E', recipe, holder, "acquire timed out");
                            return;
                        }
                        node = ownNode(lockPath + "/leases");
                        break;
                    case "semaphore":
                        lease = semaphore.acquire(ACQUIRE_MS, TimeUnit.MILLISECONDS);
                        if (lease == null) {
                            events.event('E', recipe, holder, "acquire timed out");
                            return;
                        }
                        node = lockPath + "/leases/" + lease.getNodeName();
                        break;
                    case "rwlock":
                        InterProcessMutex half = isWriter(holder) ? readWriteLock.writeLock() : readWriteLock.readLock();
                        if (!half.acquire(ACQUIRE_MS, TimeUnit.MILLISECONDS)) {
                            events.event('E', recipe, holder, "acquire timed out");
                            return;
                        }
                        readWriteHalf = half;
                        node = ownNode(lockPath);
                        break;
                    case "selector":
                        turn = turns.poll(ACQUIRE_MS, TimeUnit.MILLISECONDS);
                        if (turn == null) {
                            events.event('E', recipe, holder, "leadership timed out");
                            return;
                        }
                        node = ownNode(lockPath);
                        break;
                    default:
                        latch = new LeaderLatch(client, lockPath, holder);
                        latch.addListener(new LeaderLatchListener() {
                            public void isLeader() {}

                            public void notLeader() {
                                markLost();
                            }
                        });
                        latch.start();
                        if (!latch.await(ACQUIRE_MS, TimeUnit.MILLISECONDS)) {
                            latch.close();
                            events.event('E', recipe, holder, "leadership timed out");
                            return;
                        }
                        node = latch.getOurPath();
                        break;
                }
            }
            long token = 0;
            if (node != null) {
                Stat stat = client.checkExists().forPath(node);
                token = stat == null ? 0 : stat.getCzxid();
            }
            holding = holder;
            events.event('A', recipe, holder, Long.toString(token));
            if ((latch != null && !latch.hasLeadership()) || connectionLosses.get() != lossesBefore) {
                // Suspended while acquiring: this hold cannot be trusted from the start.
                markLost();
            }
            String marker = guardDir + "/" + holder;
            try {
                criticalSection(holder, node, marker, token);
                events.event('R', recipe, holder, "");
            } catch (Abort abort) {
                if (!abort.lost) {
                    events.event('E', recipe, holder, abort.getMessage().replace('\n', ' '));
                }
                removeMarker(node, marker);
                if (!abort.lost) {
                    events.event('R', recipe, holder, "");
                }
            } catch (Exception error) {
                // A read failed (connection loss, ...): the hold ends here, marker removed first.
                events.event('E', recipe, holder, String.valueOf(error).replace('\n', ' '));
                removeMarker(node, marker);
                events.event('R', recipe, holder, "");
            } finally {
                holding = null;
                if (turn != null) {
                    turn.countDown();
                }
                release(lease, latch);
            }
        }

        /**
         * The node of `dir` our session owns (a recipe that does not tell us its node: the
         * semaphore mutex, a read-write lock half, the selector); a path that cannot exist if there
         * is none, so that a check of it fails.
         */
        private String ownNode(String dir) throws Exception {
            List<String> owned = ownedChildren(client, dir);
            return owned.isEmpty() ? dir + "/missing" : owned.get(0);
        }

        private void release(Lease lease, LeaderLatch latch) {
            try {
                if (mutex != null && locking) {
                    mutex.release();
                } else if (semaphoreMutex != null && locking) {
                    semaphoreMutex.release();
                } else if (readWriteHalf != null) {
                    InterProcessMutex half = readWriteHalf;
                    readWriteHalf = null;
                    half.release();
                } else if (lease != null) {
                    semaphore.returnLease(lease);
                } else if (latch != null) {
                    latch.close();
                }
            } catch (Exception error) {
                // Expected after an expiry (the node is gone): the checkers judge what happened.
                events.event('E', recipe, prefix, "release: " + String.valueOf(error).replace('\n', ' '));
            }
        }

        private void checkLost() throws Abort {
            if (lost.get()) {
                throw new Abort(true, "lost");
            }
        }

        /** Whether holding at once with the holders of `others` breaks the recipe's rule. */
        private boolean tooMany(String holder, List<String> others) {
            if (!recipe.equals("rwlock")) {
                return others.size() + 1 > allowed;
            }
            for (String other : others) {
                if (isWriter(holder) || isWriter(other)) {
                    return true;
                }
            }
            return false;
        }

        private void criticalSection(String holder, String node, String marker, long token) throws Exception {
            boolean exclusive = recipe.equals("rwlock") ? isWriter(holder) : exclusiveRecipe;
            boolean increments = !recipe.equals("rwlock") || isWriter(holder);
            checkLost();
            Result created = write(node, client.transactionOp().create().withMode(CreateMode.EPHEMERAL).forPath(marker));
            if (created.outcome == Outcome.FAILED && created.code == KeeperException.Code.NODEEXISTS) {
                // Curator retried the transaction after a connection loss: ours if our session owns it.
                Stat stat = client.checkExists().forPath(marker);
                if (stat != null && stat.getEphemeralOwner() == sessionId(client)) {
                    created = new Result(Outcome.OK, null, "");
                }
            }
            expect(created, "marker create");
            List<String> markers = client.getChildren().forPath(guardDir);
            markers.remove(holder);
            if (tooMany(holder, markers)) {
                events.event('V', recipe, holder, "marker others=" + String.join(",", markers));
            }
            if (!increments && holdMs > 0) {
                Thread.sleep(holdMs);
            }
            for (int attempt = 1; increments; attempt++) {
                checkLost();
                Stat stat = new Stat();
                String[] fields = new String(client.getData().storingStatIn(stat).forPath(counterPath),
                        StandardCharsets.UTF_8).trim().split("\\s+");
                long count = fields[0].isEmpty() ? 0 : Long.parseLong(fields[0]);
                long lastToken = fields.length > 1 ? Long.parseLong(fields[1]) : 0;
                String lastHolder = fields.length > 2 ? fields[2] : "";
                if (exclusive && locking && lastToken >= token) {
                    events.event('V', recipe, holder, "fencing last=" + lastToken + " ours=" + token + " by=" + lastHolder);
                    break;
                }
                if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                checkLost();
                byte[] next = ((count + 1) + " " + token + " " + holder).getBytes(StandardCharsets.UTF_8);
                events.event('W', recipe, holder, "");
                long lossesBeforeWrite = connectionLosses.get();
                Result written = write(node, client.transactionOp().setData().withVersion(stat.getVersion())
                        .forPath(counterPath, next));
                if (written.outcome == Outcome.FAILED && written.code == KeeperException.Code.BADVERSION) {
                    // Curator may have retried a write that had committed: ours if it carries our name.
                    String now = new String(client.getData().forPath(counterPath), StandardCharsets.UTF_8);
                    if (now.trim().endsWith(" " + holder)) {
                        written = new Result(Outcome.OK, null, "");
                    }
                }
                if (written.outcome == Outcome.OK) {
                    events.event('I', recipe, holder, "ok");
                    break;
                }
                // Curator retries a transaction after a connection loss: a failure after one may
                // follow a first attempt that committed, so only a failure without one is certain.
                boolean certain = written.outcome != Outcome.UNKNOWN && connectionLosses.get() == lossesBeforeWrite;
                events.event('I', recipe, holder, certain ? "no" : "unc");
                if (written.outcome == Outcome.FAILED && written.code == KeeperException.Code.BADVERSION) {
                    if (exclusive) {
                        events.event('V', recipe, holder, "counter written by another holder during our hold");
                        break;
                    }
                    if (attempt < INCREMENT_ATTEMPTS) {
                        continue;
                    }
                }
                expect(written, "counter write");
            }
            Result deleted = write(node, client.transactionOp().delete().forPath(marker));
            if (deleted.outcome == Outcome.FAILED && deleted.code == KeeperException.Code.NONODE) {
                deleted = new Result(Outcome.OK, null, "");
            }
            expect(deleted, "marker delete");
            checkLost();
        }

        private void expect(Result result, String what) throws Abort {
            switch (result.outcome) {
                case OK:
                    return;
                case LOST:
                    markLost();
                    throw new Abort(true, what + ": our lock node is gone");
                default:
                    throw new Abort(lost.get(), what + ": " + result.text);
            }
        }

        private void removeMarker(String node, String marker) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                try {
                    Result deleted = write(node, client.transactionOp().delete().forPath(marker));
                    if (deleted.outcome == Outcome.OK || deleted.code == KeeperException.Code.NONODE) {
                        return;
                    }
                    if (deleted.outcome == Outcome.LOST) {
                        // Our lock node is gone: with our session (the marker too), or released by
                        // the recipe itself (a cancelled LeaderSelector) while the session lives on.
                        Stat stat = client.checkExists().forPath(marker);
                        if (stat == null || stat.getEphemeralOwner() != sessionId(client)) {
                            return;
                        }
                        client.delete().withVersion(stat.getVersion()).forPath(marker);
                        return;
                    }
                } catch (Exception error) {
                    log("removing " + marker + ": " + error);
                }
                sleepQuietly(100);
            }
            events.event('E', recipe, prefix, "could not remove the marker " + marker);
        }

        /** `op` in one transaction after a check of `node` (when locking). */
        private Result write(String node, CuratorOp op) throws Exception {
            List<CuratorOp> ops = new ArrayList<>();
            if (node != null) {
                ops.add(client.transactionOp().check().forPath(node));
            }
            ops.add(op);
            try {
                client.transaction().forOperations(ops);
                return new Result(Outcome.OK, null, "");
            } catch (KeeperException error) {
                List<OpResult> results = error.getResults();
                if (results != null) {
                    for (int index = 0; index < results.size(); index++) {
                        OpResult result = results.get(index);
                        if (result instanceof OpResult.ErrorResult) {
                            int err = ((OpResult.ErrorResult) result).getErr();
                            if (err != 0 && err != KeeperException.Code.RUNTIMEINCONSISTENCY.intValue()) {
                                if (node != null && index == 0) {
                                    return new Result(Outcome.LOST, KeeperException.Code.get(err), "check failed");
                                }
                                return new Result(Outcome.FAILED, KeeperException.Code.get(err), error.toString());
                            }
                        }
                    }
                }
                KeeperException.Code code = error.code();
                if (code == KeeperException.Code.CONNECTIONLOSS || code == KeeperException.Code.SESSIONEXPIRED
                        || code == KeeperException.Code.OPERATIONTIMEOUT) {
                    return new Result(Outcome.UNKNOWN, code, error.toString());
                }
                if (node != null && code == KeeperException.Code.NONODE && node.equals(error.getPath())) {
                    return new Result(Outcome.LOST, code, "check failed");
                }
                return new Result(Outcome.FAILED, code, error.toString());
            }
        }
    }

    /** A read-write-lock holder <tag>-<client>-<n> writes when n is divisible by 4 (as in Rust). */
    static boolean isWriter(String holder) {
        String n = holder.substring(holder.lastIndexOf('-') + 1);
        try {
            return Long.parseLong(n) % 4 == 0;
        } catch (NumberFormatException notANumber) {
            return false;
        }
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
