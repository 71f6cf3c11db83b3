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
 *   "O ... <r>" before leave, "X ... <r> ok|timeout|err" after it.
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
 *   Prints READY once every client is connected; "stop" on stdin ends the loops, closes the clients
 *   and prints DONE (exit 0); EOF exits at once (3).
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
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorMixChaos {
    private static final long PACE_MS = 20;
    private static final long BACKOFF_MS = 100;

    private static volatile boolean stopping;
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
        boolean barrier = args.size() == 8 && args.get(0).equals("contend-barrier");
        if (!barrier && (args.size() != 7 || !args.get(0).equals("contend-counters"))) {
            System.out.println("usage: contend-counters <connect> <clients> <tag> <log> <check-root> <session-timeout-ms>\n"
                    + "       contend-barrier <connect> <clients> <tag> <log> <root> <member-count> <session-timeout-ms>");
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
        for (int client = 0; client < clients; client++) {
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
            String holder = tag + "-" + client;
            Thread thread = barrier
                    ? new Thread(() -> barrierLoop(framework, holder, checkRoot, memberCount), holder)
                    : new Thread(() -> loop(framework, stateChanges, holder, checkRoot), holder);
            threads.add(thread);
        }
        threads.forEach(Thread::start);
        System.out.println("READY");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (true) {
            String input = stdin.readLine();
            if (input == null) {
                Runtime.getRuntime().halt(3);
            }
            if (input.trim().equals("stop")) {
                break;
            }
        }
        stopping = true;
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
            String entered;
            try {
                long wait = Math.max(1, starts + ENTER_WINDOW_MS - System.currentTimeMillis());
                entered = barrier.enter(wait, TimeUnit.MILLISECONDS) ? "ok" : "timeout";
            } catch (Exception error) {
                entered = "err " + error.getClass().getSimpleName();
            }
            line("IN barrier " + holder + " " + micros() + " " + round + " " + entered);
            if (!entered.equals("ok")) {
                continue;
            }
            sleep(20);
            line("O barrier " + holder + " " + micros() + " " + round);
            String left;
            try {
                long wait = Math.max(1, starts + LEAVE_BY_MS - System.currentTimeMillis());
                left = barrier.leave(wait, TimeUnit.MILLISECONDS) ? "ok" : "timeout";
            } catch (Exception error) {
                left = "err " + error.getClass().getSimpleName();
            }
            line("X barrier " + holder + " " + micros() + " " + round + " " + left);
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
