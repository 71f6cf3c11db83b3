/*
 * The Curator driver's commands for barriers (DistributedBarrier, DistributedDoubleBarrier), for
 * tests/interop_barrier.rs. Helpers (start, out, arg, ...) are CuratorDriver's.
 *
 * Commands:
 *   barrier <connect> <path>
 *       DistributedBarrier(path): SESSION <hex> timeout-ms=<ms>, then stdin commands, one at a
 *       time: "set" -> SET (setBarrier); "remove" -> REMOVED (removeBarrier);
 *       "wait <ms>" -> WAITING, then WAITED true|false (waitOnBarrier(ms), false at the timeout);
 *       "close" -> CLOSED and exit 0.
 *   double-barrier <connect> <path> <member-qty> <members> <markers|-> [reuse|fresh]
 *       <members> clients, each with its own session and its own DistributedDoubleBarrier(path,
 *       member-qty): SESSION <i> <hex> timeout-ms=<ms> per member, then
 *       stdin commands, one at a time, every member in its own thread:
 *       "enter <tag>" -> ENTERED <tag> <i> true|false per member (enter(60 s)), then ALL-ENTERED <tag>;
 *       "leave <tag>" -> LEFT <tag> <i> true|false per member (leave(60 s)), then ALL-LEFT <tag>;
 *       "round <r> <late>" -> per member: (member <late> first sleeps 30 ms) create the marker
 *           <markers>/<r>/java-<i>, enter(60 s), count the children of <markers>/<r>:
 *           ENTERED <r> <i> true|false <markers seen>; create <markers>/<r>-out/java-<i>,
 *           leave(60 s), count the children of <markers>/<r>-out: LEFT <r> <i> true|false
 *           <markers seen>; then ROUND-DONE <r>. With "reuse" (the default) each member keeps
 *           one DistributedDoubleBarrier for every round; with "fresh" it makes a new one per
 *           round (Curator 5.4's object reused lets members in early: GH-1290, its
 *           hasBeenNotified flag is never reset and late notifications end the single wait);
 *       "close" -> CLOSED and exit 0.
 *   bench-double-barrier <connect> <path> <members> <rounds>
 *       For benches/barriers.rs: <members> clients, each with its own session and thread, loop
 *       <rounds> rounds of enter(60 s) + leave(60 s) on a new DistributedDoubleBarrier(path,
 *       members) per round (GH-1290), every member starting a round once all left the last one
 *       (an in-process CyclicBarrier). READY once all are connected, then waits for "go"; finally
 *       RESULT ops=<rounds per second> rounds=<rounds> secs=<seconds>, timed from "go".
 */
package zkrecipes.interop;

import static zkrecipes.interop.CuratorDriver.arg;
import static zkrecipes.interop.CuratorDriver.describeSession;
import static zkrecipes.interop.CuratorDriver.out;
import static zkrecipes.interop.CuratorDriver.start;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;

final class CuratorBarriers {
    /** How long one enter or leave may take. */
    private static final long STEP_MS = 60_000;

    private CuratorBarriers() {}

    static Integer run(String command, List<String> args) throws Exception {
        switch (command) {
            case "barrier":
                return barrier(args);
            case "double-barrier":
                return doubleBarrier(args);
            case "bench-double-barrier":
                return benchDoubleBarrier(args);
            default:
                return null;
        }
    }

    private static int barrier(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        CuratorFramework client = start(connect);
        out("SESSION " + describeSession(client));
        DistributedBarrier barrier = new DistributedBarrier(client, path);
        while (true) {
            String line = CuratorDriver.INPUT.take();
            if (line.equals("set")) {
                barrier.setBarrier();
                out("SET");
            } else if (line.equals("remove")) {
                barrier.removeBarrier();
                out("REMOVED");
            } else if (line.startsWith("wait ")) {
                long waitMs = Long.parseLong(line.substring(5).trim());
                out("WAITING");
                out("WAITED " + barrier.waitOnBarrier(waitMs, TimeUnit.MILLISECONDS));
            } else if (line.equals("close")) {
                out("CLOSED");
                client.close();
                return 0;
            }
        }
    }

    private static int benchDoubleBarrier(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int members = Integer.parseInt(arg(args, 2, "members"));
        int rounds = Integer.parseInt(arg(args, 3, "rounds"));
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            clients.add(start(connect));
        }
        out("READY");
        CuratorDriver.awaitLine("go");
        ExecutorService pool = Executors.newFixedThreadPool(members);
        // Every member starts a round once all left the last one (Curator 5.4 deadlocks on a member
        // entering the next round while others still leave).
        java.util.concurrent.CyclicBarrier roundDone = new java.util.concurrent.CyclicBarrier(members);
        long started = System.nanoTime();
        List<Future<Void>> running = new ArrayList<>();
        for (CuratorFramework client : clients) {
            running.add(pool.submit(() -> {
                for (int round = 0; round < rounds; round++) {
                    DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(client, path, members);
                    if (!barrier.enter(STEP_MS, TimeUnit.MILLISECONDS)) {
                        throw new IllegalStateException("enter timed out in round " + round);
                    }
                    if (!barrier.leave(STEP_MS, TimeUnit.MILLISECONDS)) {
                        throw new IllegalStateException("leave timed out in round " + round);
                    }
                    roundDone.await(STEP_MS, TimeUnit.MILLISECONDS);
                }
                return null;
            }));
        }
        // A member that fails breaks `roundDone` for the others: report its failure, not theirs.
        Exception failure = null;
        for (Future<Void> future : running) {
            try {
                future.get();
            } catch (java.util.concurrent.ExecutionException e) {
                boolean broken = e.getCause() instanceof java.util.concurrent.BrokenBarrierException;
                if (failure == null || (!broken && failure.getCause() instanceof java.util.concurrent.BrokenBarrierException)) {
                    failure = e;
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        pool.shutdown();
        out(String.format("RESULT ops=%.3f rounds=%d secs=%.3f", rounds / seconds, rounds, seconds));
        for (CuratorFramework client : clients) {
            client.close();
        }
        return 0;
    }

    private static int doubleBarrier(List<String> args) throws Exception {
        String connect = arg(args, 0, "connect");
        String path = arg(args, 1, "path");
        int memberQty = Integer.parseInt(arg(args, 2, "member-qty"));
        int members = Integer.parseInt(arg(args, 3, "members"));
        String markers = arg(args, 4, "markers");
        boolean fresh = args.size() > 5 && args.get(5).equals("fresh");
        List<CuratorFramework> clients = new ArrayList<>();
        List<DistributedDoubleBarrier> barriers = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            CuratorFramework client = start(connect);
            clients.add(client);
            barriers.add(new DistributedDoubleBarrier(client, path, memberQty));
            out("SESSION " + i + " " + describeSession(client));
        }
        ExecutorService pool = Executors.newFixedThreadPool(members);
        while (true) {
            String[] line = CuratorDriver.INPUT.take().split(" ");
            switch (line[0]) {
                case "enter":
                    everyMember(pool, members, i -> out("ENTERED " + line[1] + " " + i + " "
                            + barriers.get(i).enter(STEP_MS, TimeUnit.MILLISECONDS)));
                    out("ALL-ENTERED " + line[1]);
                    break;
                case "leave":
                    everyMember(pool, members, i -> out("LEFT " + line[1] + " " + i + " "
                            + barriers.get(i).leave(STEP_MS, TimeUnit.MILLISECONDS)));
                    out("ALL-LEFT " + line[1]);
                    break;
                case "round": {
                    String round = line[1];
                    int late = Integer.parseInt(line[2]);
                    everyMember(pool, members, i -> {
                        CuratorFramework client = clients.get(i);
                        DistributedDoubleBarrier barrier =
                                fresh ? new DistributedDoubleBarrier(client, path, memberQty) : barriers.get(i);
                        if (i == late) {
                            Thread.sleep(30);
                        }
                        String in = markers + "/" + round;
                        client.create().creatingParentsIfNeeded().forPath(in + "/java-" + i);
                        boolean entered = barrier.enter(STEP_MS, TimeUnit.MILLISECONDS);
                        out("ENTERED " + round + " " + i + " " + entered + " "
                                + client.getChildren().forPath(in).size());
                        String leaving = markers + "/" + round + "-out";
                        client.create().creatingParentsIfNeeded().forPath(leaving + "/java-" + i);
                        boolean left = barrier.leave(STEP_MS, TimeUnit.MILLISECONDS);
                        out("LEFT " + round + " " + i + " " + left + " "
                                + client.getChildren().forPath(leaving).size());
                    });
                    out("ROUND-DONE " + round);
                    break;
                }
                case "close":
                    pool.shutdownNow();
                    out("CLOSED");
                    for (CuratorFramework client : clients) {
                        client.close();
                    }
                    return 0;
                default:
                    throw new IllegalArgumentException("unknown double-barrier command " + line[0]);
            }
        }
    }

    /** What one member does in its own thread. */
    private interface MemberStep {
        void run(int member) throws Exception;
    }

    /** Runs `step` for every member at once and waits for all (rethrowing the first failure). */
    private static void everyMember(ExecutorService pool, int members, MemberStep step) throws Exception {
        List<Future<Void>> running = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            int member = i;
            Callable<Void> task = () -> {
                step.run(member);
                return null;
            };
            running.add(pool.submit(task));
        }
        for (Future<Void> future : running) {
            future.get();
        }
    }
}
