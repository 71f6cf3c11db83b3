/*
 * A chaos contender on ZooKeeper's own lock recipe (WriteLock in zookeeper-recipes-lock), for
 * crates/chaos: it takes the lock beside our Mutex::with_layout(.., LockLayout::ZooKeeperRecipe)
 * on one path of the chaos run and writes the event log both read back (crates/chaos/src/events.rs).
 * Standalone on the plain ZooKeeper API (Debian's ZooKeeper jars; Debian ships no recipes jar):
 * the chaos run compiles it on its own, so it needs nothing of the Curator driver.
 *
 * The recipe's protocol, as crates/testing/java/ZkRecipeLocks.java speaks it (with the recipe's two known
 * defects fixed, as our layout does):
 *   - node DIR/x-<session id>-<seq>, EPHEMERAL_SEQUENTIAL, data {0x12, 0x34}; before creating, and
 *     after a connection loss during the create, our node is found again by "x-<session id>-" (one
 *     acquire per session at a time here, so a node with our prefix is this acquire's);
 *   - the owner is the node with the smallest sequence (ordered by the sequence alone);
 *   - a waiter watches the next lower node with exists(); if it is gone already, it lists again.
 * Missing parents are created as PERSISTENT nodes (as the recipe does): the run deletes the dir
 * once it is empty.
 *
 * Usage: ZkRecipeChaos contend <connect> <recipe> <clients> <tag> <event-log> <on|off>
 *            <lock-root> <check-root> <hold-ms> <session-timeout-ms>
 *   <clients> ZooKeeper sessions (one thread each) loop on <lock-root>/<recipe>: acquire (20 s),
 *   log A with the fencing token (our node's czxid), create the EPHEMERAL marker
 *   <check-root>/<recipe>-guard/<holder> (holder <tag>-<client>-<n>), list the guard dir (another
 *   marker: V marker), read the counter <check-root>/<recipe>-counter ("<count> <token> <holder>";
 *   a last token not below ours: V fencing), sleep <hold-ms>, write count+1 with the version read
 *   (W, then I ok|unc|no; BadVersion: V counter), delete the marker, log R, release. Every write is
 *   one multi whose first op checks our lock node (locking off: no lock, no check). A Disconnected
 *   or Expired state while holding logs L at once and ends the hold. An expired session is
 *   replaced by a new ZooKeeper handle. Prints READY once every session is connected; "stop" on
 *   stdin ends the loops, closes the sessions and prints DONE (exit 0); EOF exits at once (3).
 */
package zkrecipes.chaos;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public final class ZkRecipeChaos {
    private static final long ACQUIRE_MS = 20_000;
    /** How long a release or a marker removal keeps trying. */
    private static final long CLEANUP_MS = 30_000;
    /** Pause after a failed step, so a partitioned client does not spin. */
    private static final long BACKOFF_MS = 100;
    /** Pause before retrying after a connection loss. */
    private static final long RETRY_MS = 50;
    /** A waiter lists again at least this often (a missed notification costs no more). */
    private static final long WAIT_SLICE_MS = 1_000;
    private static final byte[] NODE_DATA = {0x12, 0x34};

    private static volatile boolean stopping;

    private ZkRecipeChaos() {}

    public static void main(String[] argv) {
        try {
            System.exit(run(Arrays.asList(argv)));
        } catch (Throwable error) {
            System.out.println("ERROR " + error);
            error.printStackTrace();
            Runtime.getRuntime().halt(1);
        }
    }

    private static int run(List<String> args) throws Exception {
        if (args.size() < 11 || !args.get(0).equals("contend")) {
            System.err.println("usage: ZkRecipeChaos contend <connect> <recipe> <clients> <tag> <event-log> <on|off>"
                    + " <lock-root> <check-root> <hold-ms> <session-timeout-ms>");
            return 2;
        }
        String connect = args.get(1);
        String recipe = args.get(2);
        int clients = Integer.parseInt(args.get(3));
        String tag = args.get(4);
        EventLog events = new EventLog(args.get(5));
        boolean locking = args.get(6).equals("on");
        String lockRoot = args.get(7);
        String checkRoot = args.get(8);
        long holdMs = Long.parseLong(args.get(9));
        int sessionTimeoutMs = Integer.parseInt(args.get(10));

        List<Worker> workers = new ArrayList<>();
        for (int client = 0; client < clients; client++) {
            workers.add(new Worker(connect, sessionTimeoutMs, recipe, tag + "-" + client, events, locking,
                    lockRoot, checkRoot, holdMs));
        }
        for (Worker worker : workers) {
            worker.awaitConnected();
        }
        List<Thread> threads = new ArrayList<>();
        for (Worker worker : workers) {
            Thread thread = new Thread(worker::loop, "chaos-" + worker.prefix);
            thread.start();
            threads.add(thread);
        }
        System.out.println("READY");
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (true) {
            String line = stdin.readLine();
            if (line == null) {
                // The run is gone: die now, as a crashed client would.
                Runtime.getRuntime().halt(3);
            }
            if (line.trim().equals("stop")) {
                break;
            }
        }
        stopping = true;
        for (Thread thread : threads) {
            thread.join(120_000);
        }
        for (Worker worker : workers) {
            worker.zooKeeper.close();
        }
        System.out.println("DONE");
        System.out.flush();
        return 0;
    }

    /** Appends whole lines, one write each (a SIGKILL leaves no torn line behind). */
    private static final class EventLog {
        private final FileOutputStream file;

        EventLog(String path) throws IOException {
            file = new FileOutputStream(path, true);
        }

        synchronized void event(char kind, String recipe, String holder, String rest) {
            Instant now = Instant.now();
            long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
            String line = kind + " " + recipe + " " + holder + " " + micros + (rest.isEmpty() ? "" : " " + rest) + "\n";
            try {
                file.write(line.getBytes(StandardCharsets.UTF_8));
            } catch (IOException error) {
                System.err.println("event log: " + error);
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

    /** An acquired lock: our node, its czxid, and the state-loss count when it was decided. */
    private static final class Acquired {
        final String node;
        final long token;
        final long losses;

        Acquired(String node, long token, long losses) {
            this.node = node;
            this.token = token;
            this.losses = losses;
        }
    }

    private static final class Worker {
        final String connect;
        final int sessionTimeoutMs;
        final String recipe;
        final String prefix;
        final EventLog events;
        final boolean locking;
        final String lockDir;
        final String guardDir;
        final String counterPath;
        final long holdMs;
        /** The current session's handle; replaced after an expiry. */
        volatile ZooKeeper zooKeeper;
        /** Disconnected or Expired states seen so far. */
        final AtomicLong stateLosses = new AtomicLong();
        /** The holder whose hold is current, or null; with `lost`, guarded by this. */
        private String holding;
        /** Set (once per hold) when the hold was lost; L is logged when it is set. */
        private boolean lost;

        Worker(String connect, int sessionTimeoutMs, String recipe, String prefix, EventLog events, boolean locking,
                String lockRoot, String checkRoot, long holdMs) throws IOException {
            this.connect = connect;
            this.sessionTimeoutMs = sessionTimeoutMs;
            this.recipe = recipe;
            this.prefix = prefix;
            this.events = events;
            this.locking = locking;
            this.lockDir = lockRoot + "/" + recipe;
            this.guardDir = checkRoot + "/" + recipe + "-guard";
            this.counterPath = checkRoot + "/" + recipe + "-counter";
            this.holdMs = holdMs;
            this.zooKeeper = newHandle();
        }

        private ZooKeeper newHandle() throws IOException {
            return new ZooKeeper(connect, sessionTimeoutMs, this::onState);
        }

        private void onState(WatchedEvent event) {
            if (event.getType() != Watcher.Event.EventType.None) {
                return;
            }
            Watcher.Event.KeeperState state = event.getState();
            if (state == Watcher.Event.KeeperState.Disconnected || state == Watcher.Event.KeeperState.Expired) {
                stateLosses.incrementAndGet();
                markLost();
            }
        }

        void awaitConnected() throws Exception {
            long deadline = System.currentTimeMillis() + 30_000;
            while (zooKeeper.getState() != ZooKeeper.States.CONNECTED) {
                if (System.currentTimeMillis() >= deadline) {
                    throw new IllegalStateException("could not connect to " + connect);
                }
                Thread.sleep(20);
            }
        }

        synchronized void markLost() {
            if (holding != null && !lost) {
                lost = true;
                events.event('L', recipe, holding, "");
            }
        }

        synchronized boolean isLost() {
            return lost;
        }

        /** Logs A for `holder`, then L at once if the connection was lost since the decision. */
        synchronized void startHold(String holder, long token, long lossesAtDecision) {
            lost = false;
            holding = holder;
            events.event('A', recipe, holder, Long.toString(token));
            if (stateLosses.get() != lossesAtDecision) {
                markLost();
            }
        }

        synchronized void endHold() {
            holding = null;
        }

        /** A new handle (session) once the current one has expired. */
        private void ensureSession() throws IOException {
            if (!zooKeeper.getState().isAlive()) {
                try {
                    zooKeeper.close();
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                }
                zooKeeper = newHandle();
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
                    events.event('E', recipe, holder, text(error));
                    sleepQuietly(BACKOFF_MS);
                }
            }
        }

        private void once(String holder) throws Exception {
            ensureSession();
            String node = null;
            long token = 0;
            long losses = stateLosses.get();
            if (locking) {
                Acquired acquired = lock(holder);
                if (acquired == null) {
                    return;
                }
                node = acquired.node;
                token = acquired.token;
                losses = acquired.losses;
            }
            startHold(holder, token, losses);
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
                events.event('E', recipe, holder, text(error));
                removeMarker(node, marker);
                events.event('R', recipe, holder, "");
            } finally {
                endHold();
                if (node != null) {
                    release(node);
                }
            }
        }

        /**
         * ZooKeeper's recipe lock(), waiting up to ACQUIRE_MS; null (E logged) when it timed out or
         * the run is stopping, our node deleted.
         */
        private Acquired lock(String holder) throws Exception {
            long deadline = System.currentTimeMillis() + ACQUIRE_MS;
            ZooKeeper handle = zooKeeper;
            String ours = "x-" + handle.getSessionId() + "-";
            String ourName = null;
            long czxid = 0;
            // Look for a node of ours first: the recipe's way, and what keeps a node whose delete
            // failed from blocking this session's next acquire.
            boolean createTried = true;
            while (true) {
                if (stopping || System.currentTimeMillis() >= deadline) {
                    giveUp(handle, ours, ourName);
                    if (!stopping) {
                        events.event('E', recipe, holder, "acquire timed out");
                    }
                    return null;
                }
                if (!handle.getState().isAlive()) {
                    // Expired while acquiring: our node went with the session; start over on a new one.
                    ensureSession();
                    handle = zooKeeper;
                    ours = "x-" + handle.getSessionId() + "-";
                    ourName = null;
                    czxid = 0;
                    createTried = false;
                    continue;
                }
                try {
                    if (ourName == null && createTried) {
                        ourName = findOurs(handle, ours);
                    }
                    if (ourName == null) {
                        createTried = true;
                        Stat stat = new Stat();
                        String created;
                        try {
                            created = handle.create(lockDir + "/" + ours, NODE_DATA, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                                    CreateMode.EPHEMERAL_SEQUENTIAL, stat);
                        } catch (KeeperException.NoNodeException noDir) {
                            // No lock dir (never made, or an empty container reaped): nothing was created.
                            ensureDir(handle);
                            createTried = false;
                            continue;
                        }
                        ourName = created.substring(lockDir.length() + 1);
                        czxid = stat.getCzxid();
                    }
                    if (czxid == 0) {
                        Stat stat = handle.exists(lockDir + "/" + ourName, false);
                        if (stat == null) {
                            events.event('E', recipe, holder, "our lock node " + ourName + " is gone");
                            ourName = null;
                            createTried = false;
                            continue;
                        }
                        czxid = stat.getCzxid();
                    }
                    long losses = stateLosses.get();
                    List<String> names = new ArrayList<>(handle.getChildren(lockDir, false));
                    names.sort(Comparator.comparingLong(Worker::sequence));
                    int index = names.indexOf(ourName);
                    if (index < 0) {
                        events.event('E', recipe, holder, "our lock node " + ourName + " is gone");
                        ourName = null;
                        czxid = 0;
                        createTried = false;
                        continue;
                    }
                    if (index == 0) {
                        return new Acquired(lockDir + "/" + ourName, czxid, losses);
                    }
                    CountDownLatch changed = new CountDownLatch(1);
                    Stat predecessor = handle.exists(lockDir + "/" + names.get(index - 1), event -> changed.countDown());
                    if (predecessor != null) {
                        long left = deadline - System.currentTimeMillis();
                        changed.await(Math.max(1, Math.min(left, WAIT_SLICE_MS)), TimeUnit.MILLISECONDS);
                    }
                } catch (KeeperException.ConnectionLossException | KeeperException.OperationTimeoutException
                        | KeeperException.SessionExpiredException | KeeperException.SessionMovedException retry) {
                    sleepQuietly(RETRY_MS);
                } catch (KeeperException.NoNodeException noDir) {
                    // The dir is gone, and with it any node of ours.
                    ourName = null;
                    czxid = 0;
                    createTried = false;
                    ensureDir(handle);
                }
            }
        }

        private String findOurs(ZooKeeper handle, String ours) throws KeeperException, InterruptedException {
            for (String child : handle.getChildren(lockDir, false)) {
                if (child.startsWith(ours)) {
                    return child;
                }
            }
            return null;
        }

        /** Deletes our node of a given-up acquire (found by our prefix when its name is unknown). */
        private void giveUp(ZooKeeper handle, String ours, String ourName) {
            long deadline = System.currentTimeMillis() + CLEANUP_MS;
            String name = ourName;
            while (System.currentTimeMillis() < deadline && handle.getState().isAlive()) {
                try {
                    if (name == null) {
                        name = findOurs(handle, ours);
                        if (name == null) {
                            return;
                        }
                    }
                    handle.delete(lockDir + "/" + name, -1);
                    return;
                } catch (KeeperException.NoNodeException gone) {
                    return;
                } catch (KeeperException | InterruptedException error) {
                    sleepQuietly(RETRY_MS);
                }
            }
        }

        private void ensureDir(ZooKeeper handle) throws InterruptedException {
            StringBuilder path = new StringBuilder();
            for (String part : lockDir.substring(1).split("/")) {
                path.append('/').append(part);
                try {
                    handle.create(path.toString(), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                } catch (KeeperException.NodeExistsException exists) {
                    // Already there.
                } catch (KeeperException error) {
                    // Retried by the caller's loop.
                    return;
                }
            }
        }

        /** Deletes our lock node: retried until it is gone or our session is. */
        private void release(String node) {
            long deadline = System.currentTimeMillis() + CLEANUP_MS;
            ZooKeeper handle = zooKeeper;
            while (System.currentTimeMillis() < deadline && handle.getState().isAlive()) {
                try {
                    handle.delete(node, -1);
                    return;
                } catch (KeeperException.NoNodeException | KeeperException.SessionExpiredException gone) {
                    return;
                } catch (KeeperException | InterruptedException error) {
                    sleepQuietly(RETRY_MS);
                }
            }
        }

        private void checkLost() throws Abort {
            if (isLost()) {
                throw new Abort(true, "lost");
            }
        }

        private void criticalSection(String holder, String node, String marker, long token) throws Exception {
            checkLost();
            Result created = write(node, Op.create(marker, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL));
            expect(created, "marker create");
            List<String> markers = new ArrayList<>(zooKeeper.getChildren(guardDir, false));
            markers.remove(holder);
            if (!markers.isEmpty()) {
                events.event('V', recipe, holder, "marker others=" + String.join(",", markers));
            }
            checkLost();
            Stat stat = new Stat();
            String[] fields = new String(zooKeeper.getData(counterPath, false, stat), StandardCharsets.UTF_8).trim()
                    .split("\\s+");
            long count = fields[0].isEmpty() ? 0 : Long.parseLong(fields[0]);
            long lastToken = fields.length > 1 ? Long.parseLong(fields[1]) : 0;
            String lastHolder = fields.length > 2 ? fields[2] : "";
            if (locking && lastToken >= token) {
                events.event('V', recipe, holder, "fencing last=" + lastToken + " ours=" + token + " by=" + lastHolder);
            } else {
                if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                checkLost();
                byte[] next = ((count + 1) + " " + token + " " + holder).getBytes(StandardCharsets.UTF_8);
                events.event('W', recipe, holder, "");
                Result written = write(node, Op.setData(counterPath, next, stat.getVersion()));
                if (written.outcome == Outcome.OK) {
                    events.event('I', recipe, holder, "ok");
                } else {
                    events.event('I', recipe, holder, written.outcome == Outcome.UNKNOWN ? "unc" : "no");
                    if (written.outcome == Outcome.FAILED && written.code == KeeperException.Code.BADVERSION) {
                        events.event('V', recipe, holder, "counter written by another holder during our hold");
                    } else {
                        expect(written, "counter write");
                    }
                }
            }
            Result deleted = write(node, Op.delete(marker, -1));
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
                    throw new Abort(isLost(), what + ": " + result.text);
            }
        }

        /** Makes sure our marker is gone before we release: deleted, or gone with its session. */
        private void removeMarker(String node, String marker) {
            long deadline = System.currentTimeMillis() + CLEANUP_MS;
            while (System.currentTimeMillis() < deadline) {
                try {
                    ensureSession();
                    Result deleted = write(node, Op.delete(marker, -1));
                    if (deleted.outcome == Outcome.OK || deleted.code == KeeperException.Code.NONODE) {
                        return;
                    }
                    if (deleted.outcome == Outcome.LOST) {
                        // Our lock node is gone, with our session (the marker too): unless the
                        // marker is this session's, there is nothing of ours to delete.
                        Stat stat = zooKeeper.exists(marker, false);
                        if (stat == null || stat.getEphemeralOwner() != zooKeeper.getSessionId()) {
                            return;
                        }
                        zooKeeper.delete(marker, stat.getVersion());
                        return;
                    }
                } catch (KeeperException.NoNodeException gone) {
                    return;
                } catch (Exception error) {
                    System.err.println("removing " + marker + ": " + error);
                }
                sleepQuietly(BACKOFF_MS);
            }
            events.event('E', recipe, prefix, "could not remove the marker " + marker);
        }

        /** `op` in one multi after a check of `node` (when locking). */
        private Result write(String node, Op op) throws InterruptedException {
            List<Op> ops = new ArrayList<>();
            if (node != null) {
                ops.add(Op.check(node, -1));
            }
            ops.add(op);
            try {
                zooKeeper.multi(ops);
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
                                return new Result(Outcome.FAILED, KeeperException.Code.get(err), text(error));
                            }
                        }
                    }
                }
                KeeperException.Code code = error.code();
                if (code == KeeperException.Code.CONNECTIONLOSS || code == KeeperException.Code.SESSIONEXPIRED
                        || code == KeeperException.Code.OPERATIONTIMEOUT || code == KeeperException.Code.SESSIONMOVED) {
                    return new Result(Outcome.UNKNOWN, code, text(error));
                }
                return new Result(Outcome.FAILED, code, text(error));
            }
        }

        /** The number after the last '-' (the sequence); a name without one sorts first. */
        static long sequence(String name) {
            int index = name.lastIndexOf('-');
            try {
                return Long.parseLong(name.substring(index + 1));
            } catch (NumberFormatException notASequence) {
                return -1;
            }
        }
    }

    private static String text(Throwable error) {
        return String.valueOf(error).replace('\n', ' ');
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
