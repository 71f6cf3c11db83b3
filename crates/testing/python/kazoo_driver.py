"""kazoo (2.11) on the other side of zk-recipes' interop tests (tests/interop_kazoo.rs).

Driven like the Curator driver: machine-readable lines on stdout, commands ("go") on stdin, logs on
stderr; exits as soon as its stdin closes, so a test that dies leaves no Python behind.

Usage: kazoo_driver.py [--session-timeout S] <command> <args...>

Commands:
  contend <connect> <lock-path> <iterations> <marker-dir> <counter-path> <clients> <lock|rw> [write-percent]
      `clients` KazooClients (one session and one thread each) take the lock `iterations` times each:
      lock: kazoo's Lock; rw: kazoo's WriteLock with probability write-percent % (random.Random seeded
      1000 + client index), else its ReadLock. Inside a hold:
        exclusive (Lock, WriteLock): create the EPHEMERAL <marker-dir>/writer (NodeExists: a
          violation), find no other marker (else a violation), add 1 to the counter (decimal text)
          with a versioned set (BadVersion: a violation; retried), delete the marker;
        shared (ReadLock): create an EPHEMERAL_SEQUENTIAL <marker-dir>/reader-, find no writer marker
          (else a violation), add 1 to the counter (BadVersion: another reader; retried), delete it.
      READY once connected, then waits for "go"; finally
      DONE acquisitions=N violations=M reads=R writes=W
  election <connect> <path> <id> <marker-path> <rounds>
      kazoo's Election(path, id), run `rounds` times. As leader: create the EPHEMERAL <marker-path>
      with data <id> (NodeExists: VIOLATION <data of the existing marker>), print LEADING <id>,
      wait for a "next" line, print CONTENDERS <comma-separated election.contenders()>, delete
      the marker, give up leadership. READY first (then waits for "go"); finally
      FINISHED leaderships=N violations=M
  hold <connect> <path> <id> [lock|read|write]
      kazoo's Lock (default), ReadLock or WriteLock (path, id): SESSION <hex id>, then
      HELD <node name> once acquired; holds until killed (or stdin closes).
"""

import argparse
import os
import queue
import random
import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

LINES = queue.Queue()
OUT = threading.Lock()


def out(line):
    with OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def log(message):
    sys.stderr.write("[kazoo_driver] %s\n" % message)
    sys.stderr.flush()


def watch_stdin():
    for line in sys.stdin:
        LINES.put(line.strip())
    # stdin closed: the test is gone.
    os._exit(0)


def await_line(expected):
    while True:
        line = LINES.get()
        if line == expected:
            return
        log("ignoring %r while waiting for %r" % (line, expected))


def start(connect, session_timeout):
    client = KazooClient(hosts=connect, timeout=session_timeout)
    client.start(timeout=20)
    return client


def increment(client, counter_path, conflicts_are_violations):
    violations = 0
    while True:
        data, stat = client.get(counter_path)
        try:
            client.set(counter_path, str(int(data.decode().strip()) + 1).encode(), version=stat.version)
            return violations
        except BadVersionError:
            if conflicts_are_violations:
                violations += 1


def exclusive_section(client, marker_dir, counter_path):
    violations = 0
    writer = marker_dir + "/writer"
    try:
        client.create(writer, b"", ephemeral=True)
    except NodeExistsError:
        violations += 1
    if len(client.get_children(marker_dir)) > 1:
        violations += 1
    violations += increment(client, counter_path, True)
    try:
        client.delete(writer)
    except NoNodeError:
        pass
    return violations


def shared_section(client, marker_dir, counter_path):
    violations = 0
    reader = client.create(marker_dir + "/reader-", b"", ephemeral=True, sequence=True)
    if client.exists(marker_dir + "/writer") is not None:
        violations += 1
    increment(client, counter_path, False)
    client.delete(reader)
    return violations


def contend(args, session_timeout):
    connect, lock_path, iterations, marker_dir, counter_path, clients, kind = args[:7]
    iterations, clients = int(iterations), int(clients)
    write_percent = int(args[7]) if len(args) > 7 else 100
    if kind not in ("lock", "rw"):
        raise ValueError("kind must be lock or rw, not %r" % kind)
    sessions = [start(connect, session_timeout) for _ in range(clients)]
    client_ids = ["kazoo-%d" % index for index in range(clients)]
    out("READY")
    await_line("go")
    totals = []

    def run(index, client):
        rng = random.Random(1000 + index)
        acquisitions = violations = reads = writes = 0
        for _ in range(iterations):
            write = kind == "lock" or rng.randrange(100) < write_percent
            if kind == "lock":
                lock = client.Lock(lock_path, client_ids[index])
            elif write:
                lock = client.WriteLock(lock_path, client_ids[index])
            else:
                lock = client.ReadLock(lock_path, client_ids[index])
            with lock:
                if write:
                    violations += exclusive_section(client, marker_dir, counter_path)
                    writes += 1
                else:
                    violations += shared_section(client, marker_dir, counter_path)
                    reads += 1
            acquisitions += 1
        totals.append((acquisitions, violations, reads, writes))

    threads = [threading.Thread(target=run, args=(index, client)) for index, client in enumerate(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(totals) != clients:
        raise RuntimeError("a contender thread failed")
    out(
        "DONE acquisitions=%d violations=%d reads=%d writes=%d"
        % tuple(sum(total[field] for total in totals) for field in range(4))
    )
    for client in sessions:
        client.stop()
        client.close()


def election(args, session_timeout):
    connect, path, identifier, marker_path, rounds = args[:5]
    client = start(connect, session_timeout)
    out("READY")
    await_line("go")
    tally = {"leaderships": 0, "violations": 0}

    def lead(election):
        tally["leaderships"] += 1
        try:
            client.create(marker_path, identifier.encode(), ephemeral=True)
        except NodeExistsError:
            data, _ = client.get(marker_path)
            tally["violations"] += 1
            out("VIOLATION %s" % data.decode())
        out("LEADING %s" % identifier)
        await_line("next")
        out("CONTENDERS %s" % ",".join(election.contenders()))
        client.delete(marker_path)

    for _ in range(int(rounds)):
        election = client.Election(path, identifier)
        election.run(lead, election)
    out("FINISHED leaderships=%d violations=%d" % (tally["leaderships"], tally["violations"]))
    client.stop()
    client.close()


def hold(args, session_timeout):
    connect, path, identifier = args[:3]
    kind = args[3] if len(args) > 3 else "lock"
    client = start(connect, session_timeout)
    out("SESSION %x" % client.client_id[0])
    locks = {"lock": client.Lock, "read": client.ReadLock, "write": client.WriteLock}
    lock = locks[kind](path, identifier)
    lock.acquire()
    out("HELD %s" % lock.node)
    threading.Event().wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("command")
    parser.add_argument("args", nargs="*")
    options = parser.parse_args()
    threading.Thread(target=watch_stdin, daemon=True).start()
    commands = {"contend": contend, "election": election, "hold": hold}
    try:
        commands[options.command](options.args, options.session_timeout)
    except Exception as error:  # noqa: BLE001 - report anything, exit non-zero
        out("ERROR %r" % (error,))
        log("failed: %r" % (error,))
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
