/*
 * The Curator driver's commands for shared values and atomic counters (SharedCount, SharedValue,
 * DistributedAtomicLong, DistributedAtomicInteger, DistributedAtomicValue, PromotedToLock), for tests/interop_counter.rs.
 * Helpers (start, out, arg, awaitLine, ...) are CuratorDriver's; data is printed as lowercase hex
 * (CuratorNodes.hex: "-" for none).
 *
 * Commands:
 *   count-increment <connect> <shared-count|atomic-long> <path> <per-client> <clients> [lock-path]
 *       `clients` CuratorFrameworks (one session and one thread each) add 1 to the counter
 *       `per-client` times each, every increment retried until it succeeds:
 *         shared-count: SharedCount(path, seed 0), trySetCount(getVersionedValue(), value + 1);
 *         atomic-long:  DistributedAtomicLong(path, RetryNTimes(0, 0)), promoted to the mutex at
 *                       lock-path (PromotedToLock, retry policy RetryNTimes(1000, 2)) if given;
 *                       increment() until succeeded().
 *       READY once all are connected, then waits for "go"; finally
 *       DONE increments=N retries=R promoted=P (P: increments that took the promoted lock)
 *   promoted-try <connect> <path> <lock-path> <max-lock-ms> <clients> <rounds>
 *       `clients` threads on one CuratorFramework, each calling increment() `rounds` times (once
 *       each, no retry loop) on DistributedAtomicLong(path, RetryNTimes(0, 0), PromotedToLock(lock-path,
 *       timeout max-lock-ms, RetryNTimes(0, 0))). READY once connected, then waits for "go"; finally
 *       DONE succeeded=S failed=F promoted=P min-failed-promoted-ms=M (P: results with promoted lock
 *       tries; M: the least promoted time of a failed result, -1 if none failed)
 *   counter-golden-write <connect> <base>
 *       Writes one node of each kind with Curator, then prints each node's bytes as read back:
 *         NODE shared-count <hex>   SharedCount(<base>/shared-count, seed 7), then setCount(-2)
 *         NODE shared-value <hex>   SharedValue(<base>/shared-value, seed "seed"), setValue("curator")
 *         NODE atomic-long <hex>    DistributedAtomicLong(<base>/atomic-long): initialize(0x0102030405060708),
 *                                   then increment()
 *         NODE atomic-value <hex>   DistributedAtomicValue(<base>/atomic-value): trySet("bytes")
 *         NODE atomic-int <hex>     DistributedAtomicInteger(<base>/atomic-int): initialize(0x01020304),
 *                                   then increment()
 *       then DONE
 *   counter-golden-read <connect> <base>
 *       Reads the same four nodes with Curator:
 *         READ shared-count <int> <version>, READ shared-value <hex> <version>,
 *         READ atomic-long <long>, READ atomic-value <hex>, READ atomic-int <int>; then DONE
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.awaitLine;
import static zkrecipes.interop.CuratorDriver.out;
import static zkrecipes.interop.CuratorDriver.start;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicInteger;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicValue;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedValue;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;

final class CuratorCounters {
    private CuratorCounters() {}

    static Integer run(String command, List<String> args) throws Exception {
        switch (command) {
            case "count-increment":
                return countIncrement(args);
            case "promoted-try":
                return promotedTry(args);
            case "counter-golden-write":
                return goldenWrite(args);
            case "counter-golden-read":
                return goldenRead(args);
            default:
                return null;
        }
    }

    /** One client's increments; adds to the shared tallies. */
    private interface Incrementer {
        void run() throws Exception;
    }

    private static int countIncrement(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String kind = arg(args, 1, "kind");
        String path = arg(args, 2, "path");
        int perClient = Integer.parseInt(arg(args, 3, "per-client"));
        int clients = Integer.parseInt(arg(args, 4, "clients"));
        String lockPath = args.size() > 5 ? args.get(5) : null;
        AtomicLong increments = new AtomicLong();
        AtomicLong retries = new AtomicLong();
        AtomicLong promoted = new AtomicLong();
        List<Incrementer> incrementers = new ArrayList<>();
        List<AutoCloseable> closeables = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            CuratorFramework client = start(connect);
            if (kind.equals("shared-count")) {
                SharedCount count = new SharedCount(client, path, 0);
                count.start();
                closeables.add(count);
                incrementers.add(() -> {
                    for (int n = 0; n < perClient; n++) {
                        while (true) {
                            VersionedValue<Integer> seen = count.getVersionedValue();
                            if (count.trySetCount(seen, seen.getValue() + 1)) {
                                break;
                            }
                            retries.incrementAndGet();
                        }
                        increments.incrementAndGet();
                    }
                });
            } else if (kind.equals("atomic-long")) {
                DistributedAtomicLong counter = lockPath == null
                        ? new DistributedAtomicLong(client, path, new RetryNTimes(0, 0))
                        : new DistributedAtomicLong(client, path, new RetryNTimes(0, 0),
                                PromotedToLock.builder().lockPath(lockPath).retryPolicy(new RetryNTimes(1000, 2)).build());
                incrementers.add(() -> {
                    for (int n = 0; n < perClient; n++) {
                        while (true) {
                            AtomicValue<Long> result = counter.increment();
                            if (result.getStats().getPromotedLockTries() > 0) {
                                promoted.incrementAndGet();
                            }
                            if (result.succeeded()) {
                                break;
                            }
                            retries.incrementAndGet();
                        }
                        increments.incrementAndGet();
                    }
                });
            } else {
                throw new IllegalArgumentException("unknown counter kind " + kind);
            }
        }
        out("READY");
        awaitLine("go");
        List<Thread> threads = new ArrayList<>();
        List<Exception> failures = new ArrayList<>();
        for (Incrementer incrementer : incrementers) {
            Thread thread = new Thread(() -> {
                try {
                    incrementer.run();
                } catch (Exception e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        for (AutoCloseable closeable : closeables) {
            closeable.close();
        }
        if (!failures.isEmpty()) {
            throw failures.get(0);
        }
        out("DONE increments=" + increments.get() + " retries=" + retries.get() + " promoted=" + promoted.get());
        return 0;
    }

    private static int promotedTry(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        String lockPath = arg(args, 2, "lock-path");
        long maxLockMs = Long.parseLong(arg(args, 3, "max-lock-ms"));
        int clients = Integer.parseInt(arg(args, 4, "clients"));
        int rounds = Integer.parseInt(arg(args, 5, "rounds"));
        CuratorFramework client = start(connect);
        PromotedToLock promoted = PromotedToLock.builder()
                .lockPath(lockPath)
                .timeout(maxLockMs, TimeUnit.MILLISECONDS)
                .retryPolicy(new RetryNTimes(0, 0))
                .build();
        DistributedAtomicLong counter = new DistributedAtomicLong(client, path, new RetryNTimes(0, 0), promoted);
        AtomicLong succeeded = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong promotedResults = new AtomicLong();
        AtomicLong minFailedPromotedMs = new AtomicLong(Long.MAX_VALUE);
        out("READY");
        awaitLine("go");
        List<Thread> threads = new ArrayList<>();
        List<Exception> failures = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            Thread thread = new Thread(() -> {
                try {
                    for (int n = 0; n < rounds; n++) {
                        AtomicValue<Long> result = counter.increment();
                        if (result.getStats().getPromotedLockTries() > 0) {
                            promotedResults.incrementAndGet();
                        }
                        if (result.succeeded()) {
                            succeeded.incrementAndGet();
                        } else {
                            failed.incrementAndGet();
                            minFailedPromotedMs.accumulateAndGet(result.getStats().getPromotedTimeMs(), Math::min);
                        }
                    }
                } catch (Exception e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        if (!failures.isEmpty()) {
            throw failures.get(0);
        }
        long minFailed = failed.get() == 0 ? -1 : minFailedPromotedMs.get();
        out("DONE succeeded=" + succeeded.get() + " failed=" + failed.get() + " promoted=" + promotedResults.get()
                + " min-failed-promoted-ms=" + minFailed);
        client.close();
        return 0;
    }

    private static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    private static int goldenWrite(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        CuratorFramework client = start(connect);

        SharedCount count = new SharedCount(client, base + "/shared-count", 7);
        count.start();
        count.setCount(-2);
        count.close();
        SharedValue value = new SharedValue(client, base + "/shared-value", utf8("seed"));
        value.start();
        value.setValue(utf8("curator"));
        value.close();
        DistributedAtomicLong atomicLong = new DistributedAtomicLong(client, base + "/atomic-long", new RetryNTimes(3, 10));
        atomicLong.initialize(0x0102030405060708L);
        if (!atomicLong.increment().succeeded()) {
            throw new IllegalStateException("increment failed");
        }
        DistributedAtomicValue atomicValue = new DistributedAtomicValue(client, base + "/atomic-value", new RetryNTimes(3, 10));
        if (!atomicValue.trySet(utf8("bytes")).succeeded()) {
            throw new IllegalStateException("trySet failed");
        }
        DistributedAtomicInteger atomicInt = new DistributedAtomicInteger(client, base + "/atomic-int", new RetryNTimes(3, 10));
        atomicInt.initialize(0x01020304);
        if (!atomicInt.increment().succeeded()) {
            throw new IllegalStateException("int increment failed");
        }
        for (String name : new String[] {"shared-count", "shared-value", "atomic-long", "atomic-value", "atomic-int"}) {
            out("NODE " + name + " " + CuratorNodes.hex(client.getData().forPath(base + "/" + name)));
        }
        out("DONE");
        client.close();
        return 0;
    }

    private static int goldenRead(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String base = arg(args, 1, "base");
        CuratorFramework client = start(connect);

        SharedCount count = new SharedCount(client, base + "/shared-count", 0);
        count.start();
        VersionedValue<Integer> seenCount = count.getVersionedValue();
        out("READ shared-count " + seenCount.getValue() + " " + seenCount.getVersion());
        count.close();
        SharedValue value = new SharedValue(client, base + "/shared-value", new byte[0]);
        value.start();
        VersionedValue<byte[]> seenValue = value.getVersionedValue();
        out("READ shared-value " + CuratorNodes.hex(seenValue.getValue()) + " " + seenValue.getVersion());
        value.close();
        DistributedAtomicLong atomicLong = new DistributedAtomicLong(client, base + "/atomic-long", new RetryNTimes(0, 0));
        out("READ atomic-long " + atomicLong.get().postValue());
        DistributedAtomicValue atomicValue = new DistributedAtomicValue(client, base + "/atomic-value", new RetryNTimes(0, 0));
        out("READ atomic-value " + CuratorNodes.hex(atomicValue.get().postValue()));
        DistributedAtomicInteger atomicInt = new DistributedAtomicInteger(client, base + "/atomic-int", new RetryNTimes(0, 0));
        out("READ atomic-int " + atomicInt.get().postValue());
        out("DONE");
        client.close();
        return 0;
    }
}
