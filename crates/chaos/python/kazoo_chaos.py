"""kazoo 2.11 as a chaos contender, for crates/chaos: it takes kazoo's Lock beside our
Mutex::with_layout(.., LockLayout::Kazoo) on one path of the chaos run and writes the event log
both read back (crates/chaos/src/events.rs).

Usage: kazoo_chaos.py contend <connect> <recipe> <clients> <tag> <event-log> <on|off> <lock-root>
           <check-root> <hold-ms> <session-timeout-ms>

  `clients` KazooClients (one session and one thread each) loop on <lock-root>/<recipe>: a new
  kazoo Lock(path, holder) per acquire (20 s), A with the fencing token (our node's czxid), the
  EPHEMERAL marker <check-root>/<recipe>-guard/<holder> (holder <tag>-<client>-<n>), the guard dir
  listed (another marker: V marker), the counter <check-root>/<recipe>-counter read
  ("<count> <token> <holder>"; a last token not below ours: V fencing), <hold-ms> of sleep, count+1
  written with the version read (W, then I ok|unc|no; BadVersion: V counter), the marker deleted, R,
  release. Every write is one transaction whose first op checks our lock node (locking off: no
  lock, no check). A SUSPENDED or LOST state while holding logs L at once and ends the hold; kazoo
  reconnects by itself, with a new session after an expiry. Prints READY once connected; "stop" on
  stdin ends the loops, closes the clients and prints DONE (exit 0); EOF exits at once (3).
"""

import os
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    CancelledError,
    ConnectionClosedError,
    ConnectionLoss,
    LockTimeout,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)

ACQUIRE_S = 20.0
# How long a release or a marker removal keeps trying.
CLEANUP_S = 30.0
# Pause after a failed step, so a partitioned client does not spin.
BACKOFF_S = 0.1

STOPPING = threading.Event()

OK, LOST, FAILED, UNKNOWN = "ok", "lost", "failed", "unknown"
# What a request whose outcome we cannot know raises.
UNCERTAIN = (ConnectionLoss, ConnectionClosedError, OperationTimeoutError, SessionExpiredError)


class EventLog:
    """Appends whole lines, one write each (a SIGKILL leaves no torn line behind)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.lock = threading.Lock()

    def event(self, kind, recipe, holder, rest=""):
        micros = time.time_ns() // 1000
        line = "%s %s %s %d%s\n" % (kind, recipe, holder, micros, " " + rest if rest else "")
        with self.lock:
            os.write(self.fd, line.encode())


class Abort(Exception):
    """Raised inside a hold when it can no longer be trusted, or a step's outcome is unknown."""

    def __init__(self, lost, message):
        super().__init__(message)
        self.lost = lost


def text(error):
    return repr(error).replace("\n", " ")


class Worker:
    def __init__(self, options, client_index, events):
        self.options = options
        self.recipe = options["recipe"]
        self.prefix = "%s-%d" % (options["tag"], client_index)
        self.events = events
        self.locking = options["locking"]
        self.lock_path = options["lock_root"] + "/" + self.recipe
        self.guard_dir = options["check_root"] + "/" + self.recipe + "-guard"
        self.counter_path = options["check_root"] + "/" + self.recipe + "-counter"
        self.hold_s = options["hold_ms"] / 1000.0
        # SUSPENDED or LOST states seen so far, the current holder and whether its hold was lost,
        # all guarded by state_lock.
        self.state_lock = threading.Lock()
        self.state_losses = 0
        self.holding = None
        self.lost = False
        self.current_lock = None
        self.client = KazooClient(
            hosts=options["connect"],
            timeout=options["session_timeout_ms"] / 1000.0,
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0},
        )
        self.client.add_listener(self.on_state)

    def start(self):
        self.client.start(timeout=30)

    def on_state(self, state):
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            with self.state_lock:
                self.state_losses += 1
                self.mark_lost_locked()
        return False

    def mark_lost_locked(self):
        if self.holding is not None and not self.lost:
            self.lost = True
            self.events.event("L", self.recipe, self.holding)

    def mark_lost(self):
        with self.state_lock:
            self.mark_lost_locked()

    def is_lost(self):
        with self.state_lock:
            return self.lost

    def loop(self):
        sequence = 0
        while not STOPPING.is_set():
            sequence += 1
            holder = "%s-%d" % (self.prefix, sequence)
            try:
                self.once(holder)
            except Exception as error:  # noqa: BLE001 - logged, and the loop goes on
                self.events.event("E", self.recipe, holder, text(error))
                time.sleep(BACKOFF_S)

    def once(self, holder):
        node = None
        token = 0
        with self.state_lock:
            losses = self.state_losses
        if self.locking:
            lock = self.client.Lock(self.lock_path, holder)
            self.current_lock = lock
            try:
                got = lock.acquire(timeout=ACQUIRE_S)
            except LockTimeout:
                self.events.event("E", self.recipe, holder, "acquire timed out")
                return
            except CancelledError:
                return
            finally:
                self.current_lock = None
            if not got:
                self.events.event("E", self.recipe, holder, "acquire returned without the lock")
                return
            node = self.lock_path + "/" + lock.node
            try:
                stat = self.client.exists(node)
            except Exception:
                self.release(node)
                raise
            if stat is None:
                self.events.event("E", self.recipe, holder, "our lock node %s is gone" % node)
                return
            token = stat.czxid
        with self.state_lock:
            self.lost = False
            self.holding = holder
            self.events.event("A", self.recipe, holder, str(token))
            # The connection was lost while acquiring: this hold cannot be trusted from the start.
            if self.state_losses != losses:
                self.mark_lost_locked()
        marker = self.guard_dir + "/" + holder
        try:
            self.critical_section(holder, node, marker, token)
            self.events.event("R", self.recipe, holder)
        except Abort as abort:
            if not abort.lost:
                self.events.event("E", self.recipe, holder, str(abort).replace("\n", " "))
            self.remove_marker(node, marker)
            if not abort.lost:
                self.events.event("R", self.recipe, holder)
        except Exception as error:  # noqa: BLE001 - a read failed: the hold ends here
            self.events.event("E", self.recipe, holder, text(error))
            self.remove_marker(node, marker)
            self.events.event("R", self.recipe, holder)
        finally:
            with self.state_lock:
                self.holding = None
            if node is not None:
                self.release(node)

    def release(self, node):
        """Deletes our lock node: retried until it is gone, or our session is."""
        deadline = time.monotonic() + CLEANUP_S
        while time.monotonic() < deadline:
            try:
                self.client.delete(node)
                return
            except (NoNodeError, SessionExpiredError):
                return
            except Exception:  # noqa: BLE001 - retried
                time.sleep(BACKOFF_S)

    def check_lost(self):
        if self.is_lost():
            raise Abort(True, "lost")

    def write(self, node, add_op):
        """One transaction: a check of our lock node (when locking), then `add_op`'s op."""
        transaction = self.client.transaction()
        if node is not None:
            transaction.check(node, -1)
        add_op(transaction)
        try:
            results = transaction.commit()
        except UNCERTAIN as error:
            return UNKNOWN, None, text(error)
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                if node is not None and index == 0:
                    return LOST, type(result), "check failed"
                return FAILED, type(result), text(result)
        return OK, None, ""

    def expect(self, result, what):
        outcome, _, message = result
        if outcome == OK:
            return
        if outcome == LOST:
            self.mark_lost()
            raise Abort(True, "%s: our lock node is gone" % what)
        raise Abort(self.is_lost(), "%s: %s" % (what, message))

    def critical_section(self, holder, node, marker, token):
        recipe = self.recipe
        self.check_lost()
        self.expect(self.write(node, lambda t: t.create(marker, b"", ephemeral=True)), "marker create")
        others = [name for name in self.client.get_children(self.guard_dir) if name != holder]
        if others:
            self.events.event("V", recipe, holder, "marker others=" + ",".join(others))
        self.check_lost()
        data, stat = self.client.get(self.counter_path)
        fields = data.decode().split()
        count = int(fields[0]) if fields else 0
        last_token = int(fields[1]) if len(fields) > 1 else 0
        last_holder = fields[2] if len(fields) > 2 else ""
        if self.locking and last_token >= token:
            self.events.event("V", recipe, holder, "fencing last=%d ours=%d by=%s" % (last_token, token, last_holder))
        else:
            if self.hold_s > 0:
                time.sleep(self.hold_s)
            self.check_lost()
            value = ("%d %d %s" % (count + 1, token, holder)).encode()
            self.events.event("W", recipe, holder)
            written = self.write(node, lambda t: t.set_data(self.counter_path, value, version=stat.version))
            outcome, error_type, _ = written
            if outcome == OK:
                self.events.event("I", recipe, holder, "ok")
            else:
                self.events.event("I", recipe, holder, "unc" if outcome == UNKNOWN else "no")
                if outcome == FAILED and error_type is BadVersionError:
                    self.events.event("V", recipe, holder, "counter written by another holder during our hold")
                else:
                    self.expect(written, "counter write")
        deleted = self.write(node, lambda t: t.delete(marker))
        if deleted[0] == FAILED and deleted[1] is NoNodeError:
            deleted = (OK, None, "")
        self.expect(deleted, "marker delete")
        self.check_lost()

    def remove_marker(self, node, marker):
        """Makes sure our marker is gone before we release: deleted, or gone with its session."""
        deadline = time.monotonic() + CLEANUP_S
        while time.monotonic() < deadline:
            try:
                outcome, error_type, _ = self.write(node, lambda t: t.delete(marker))
                if outcome == OK or error_type is NoNodeError:
                    return
                if outcome == LOST:
                    # Our lock node is gone, with our session (the marker too): unless the marker
                    # is this session's, there is nothing of ours to delete.
                    stat = self.client.exists(marker)
                    if stat is None or stat.ephemeralOwner != self.client.client_id[0]:
                        return
                    self.client.delete(marker, version=stat.version)
                    return
            except NoNodeError:
                return
            except Exception as error:  # noqa: BLE001 - retried
                sys.stderr.write("removing %s: %r\n" % (marker, error))
            time.sleep(BACKOFF_S)
        self.events.event("E", self.recipe, self.prefix, "could not remove the marker " + marker)

    def stop(self):
        lock = self.current_lock
        if lock is not None:
            lock.cancel()

    def close(self):
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001 - closing anyway
            pass


def contend(args):
    if len(args) < 10:
        raise ValueError("contend needs 10 arguments, got %d" % len(args))
    options = {
        "connect": args[0],
        "recipe": args[1],
        "clients": int(args[2]),
        "tag": args[3],
        "log": args[4],
        "locking": args[5] == "on",
        "lock_root": args[6],
        "check_root": args[7],
        "hold_ms": int(args[8]),
        "session_timeout_ms": int(args[9]),
    }
    events = EventLog(options["log"])
    workers = [Worker(options, index, events) for index in range(options["clients"])]
    for worker in workers:
        worker.start()
    threads = [threading.Thread(target=worker.loop, name="chaos-" + worker.prefix) for worker in workers]
    for thread in threads:
        thread.start()
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    else:
        # The run is gone: die now, as a crashed client would.
        os._exit(3)
    STOPPING.set()
    for worker in workers:
        worker.stop()
    for thread in threads:
        thread.join(120)
    for worker in workers:
        worker.close()
    print("DONE", flush=True)


def main():
    if len(sys.argv) < 2 or sys.argv[1] != "contend":
        sys.stderr.write(__doc__)
        os._exit(2)
    try:
        contend(sys.argv[2:])
    except Exception as error:  # noqa: BLE001 - report anything, exit non-zero
        print("ERROR %r" % (error,), flush=True)
        sys.stderr.write("kazoo_chaos: failed: %r\n" % (error,))
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
