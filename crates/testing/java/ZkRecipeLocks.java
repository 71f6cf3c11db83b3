/*
 * The Curator driver's commands for ZooKeeper's own lock recipe (WriteLock in
 * zookeeper-recipes-lock), for tests/interop_layouts.rs. The recipe's jar is not in Debian, so this
 * is a small client of its protocol on the plain ZooKeeper API, written from the recipe's
 * documentation, with its two known defects fixed (as zk-recipes' ZooKeeperRecipe layout):
 *
 *   - node DIR/x-<session id>-<seq>, EPHEMERAL_SEQUENTIAL, OPEN_ACL_UNSAFE, data {0x12, 0x34};
 *     after a connection loss during the create, our node is found again by "x-<session id>-";
 *   - the owner is the node with the smallest sequence; contenders are ordered by the sequence
 *     alone (ZOOKEEPER-2931: not by the text before it, which holds the session id);
 *   - a waiter watches the next lower node with exists(); if exists() finds it gone, the waiter
 *     lists again instead of waiting for a notification that never comes (the lost wake-up).
 *
 * Commands:
 *   recipe-contend <connect> <path> <iterations> <guard-path> <counter-path> [clients]
 *       `clients` ZooKeeper sessions (one thread each) take the lock `iterations` times each.
 *       Inside each hold: create the EPHEMERAL node <guard-path> (NodeExists: a violation), add 1
 *       to the counter at <counter-path> (decimal text) with a versioned setData (BadVersion: a
 *       violation, then retried so each acquisition adds exactly one), delete the guard.
 *       READY once all are connected, then waits for "go"; finally
 *       DONE acquisitions=N violations=M
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.awaitLine;
import static zkrecipes.interop.CuratorDriver.out;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

final class ZkRecipeLocks {
    private ZkRecipeLocks() {}

    /** The data the recipe writes to its nodes. */
    private static final byte[] NODE_DATA = {0x12, 0x34};

    static Integer run(String command, List<String> args) throws Exception {
        switch (command) {
            case "recipe-contend":
                return contend(args);
            default:
                return null;
        }
    }

    private static int contend(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int iterations = Integer.parseInt(arg(args, 2, "iterations"));
        String guardPath = arg(args, 3, "guard-path");
        String counterPath = arg(args, 4, "counter-path");
        int clients = args.size() > 5 ? Integer.parseInt(args.get(5)) : 1;

        List<ZooKeeper> sessions = new ArrayList<>();
        for (int index = 0; index < clients; index++) {
            sessions.add(connect(connect));
        }
        out("READY");
        awaitLine("go");
        ExecutorService pool = Executors.newFixedThreadPool(clients);
        List<Future<long[]>> running = new ArrayList<>();
        for (ZooKeeper zooKeeper : sessions) {
            running.add(pool.submit(() -> contendOnce(zooKeeper, path, iterations, guardPath, counterPath)));
        }
        long acquisitions = 0;
        long violations = 0;
        for (Future<long[]> future : running) {
            long[] done = future.get();
            acquisitions += done[0];
            violations += done[1];
        }
        pool.shutdown();
        out("DONE acquisitions=" + acquisitions + " violations=" + violations);
        for (ZooKeeper zooKeeper : sessions) {
            zooKeeper.close();
        }
        return 0;
    }

    /** {acquisitions, violations} of one session's run. */
    private static long[] contendOnce(ZooKeeper zooKeeper, String path, int iterations, String guardPath,
            String counterPath) throws Exception {
        RecipeLock lock = new RecipeLock(zooKeeper, path);
        long violations = 0;
        for (int iteration = 0; iteration < iterations; iteration++) {
            lock.lock();
            try {
                zooKeeper.create(guardPath, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            } catch (KeeperException.NodeExistsException twoHolders) {
                violations++;
            }
            while (true) {
                Stat stat = new Stat();
                byte[] bytes = zooKeeper.getData(counterPath, false, stat);
                long value = Long.parseLong(new String(bytes, StandardCharsets.UTF_8).trim());
                try {
                    zooKeeper.setData(counterPath, Long.toString(value + 1).getBytes(StandardCharsets.UTF_8),
                            stat.getVersion());
                    break;
                } catch (KeeperException.BadVersionException concurrentWrite) {
                    violations++;
                }
            }
            try {
                zooKeeper.delete(guardPath, -1);
            } catch (KeeperException.NoNodeException alreadyGone) {
                // The other holder (a violation already counted) deleted it.
            }
            lock.unlock();
        }
        return new long[] {iterations, violations};
    }

    private static ZooKeeper connect(String connect) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zooKeeper = new ZooKeeper(connect, CuratorDriver.sessionTimeoutMs, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + connect);
        }
        return zooKeeper;
    }

    /** ZooKeeper's lock recipe, with the ordering and wake-up fixed; blocking lock(). */
    static final class RecipeLock {
        private final ZooKeeper zooKeeper;
        private final String dir;
        private String ourName;

        RecipeLock(ZooKeeper zooKeeper, String dir) {
            this.zooKeeper = zooKeeper;
            this.dir = dir;
        }

        void lock() throws Exception {
            ensureDir();
            String prefix = "x-" + zooKeeper.getSessionId() + "-";
            ourName = null;
            for (String child : zooKeeper.getChildren(dir, false)) {
                if (child.startsWith(prefix)) {
                    ourName = child;
                }
            }
            if (ourName == null) {
                String created = zooKeeper.create(dir + "/" + prefix, NODE_DATA, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                        CreateMode.EPHEMERAL_SEQUENTIAL);
                ourName = created.substring(dir.length() + 1);
            }
            while (true) {
                List<String> names = new ArrayList<>(zooKeeper.getChildren(dir, false));
                names.sort(Comparator.comparingLong(RecipeLock::sequence));
                int index = names.indexOf(ourName);
                if (index < 0) {
                    throw new IllegalStateException("our node " + ourName + " is gone");
                }
                if (index == 0) {
                    return;
                }
                CountDownLatch changed = new CountDownLatch(1);
                Stat stat = zooKeeper.exists(dir + "/" + names.get(index - 1), event -> changed.countDown());
                if (stat != null) {
                    changed.await();
                }
                // stat == null: the predecessor went between the listing and exists(): list again.
            }
        }

        void unlock() throws Exception {
            try {
                zooKeeper.delete(dir + "/" + ourName, -1);
            } catch (KeeperException.NoNodeException alreadyGone) {
                // Our session's node went with it.
            }
            ourName = null;
        }

        private void ensureDir() throws Exception {
            StringBuilder prefix = new StringBuilder();
            for (String part : dir.substring(1).split("/")) {
                prefix.append('/').append(part);
                try {
                    zooKeeper.create(prefix.toString(), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                } catch (KeeperException.NodeExistsException exists) {
                    // Already there.
                }
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
}
