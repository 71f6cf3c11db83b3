"""Delays and drops the IPv4 packets of one cluster member's links in user space: what
`tc netem` does, for kernels built without it. Run by zk-recipes-testing as root:

    python3 -c SCRIPT DELAY_S JITTER_S LOSS SEED MEMBER_TUN PEER_TUN=ADDRESS...

It opens one tun device per name (in the caller's network namespace; the caller then moves each
into its own), prints `ready`, and relays: a packet read from MEMBER_TUN goes out of the peer tun
whose ADDRESS is its destination, a packet read from a peer tun goes out of MEMBER_TUN, each after
DELAY_S +- JITTER_S seconds (uniform; packets never overtake each other on one tun) unless it is
dropped with probability LOSS. It exits when its stdin closes; the tun devices, and the routes
through them, vanish with it.
"""

import fcntl
import heapq
import os
import random
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def main(argv):
    delay, jitter, loss, seed = float(argv[1]), float(argv[2]), float(argv[3]), int(argv[4])
    rng = random.Random(seed)
    member = open_tun(argv[5])
    peer_by_address = {}
    for spec in argv[6:]:
        name, address = spec.split("=")
        peer_by_address[bytes(int(part) for part in address.split("."))] = open_tun(name)
    print("ready", flush=True)
    watched = [0, member] + list(peer_by_address.values())
    queue = []  # (due, sequence, out fd, packet)
    last_due = {}
    sequence = 0
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else None
        readable, _, _ = select.select(watched, [], [], timeout)
        for fd in readable:
            if fd == 0:
                if not os.read(0, 4096):
                    return
                continue
            while True:
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(packet) < 20 or packet[0] >> 4 != 4:
                    continue
                out = peer_by_address.get(packet[16:20]) if fd == member else member
                if out is None or rng.random() < loss:
                    continue
                due = time.monotonic() + delay + rng.uniform(-jitter, jitter)
                due = max(due, last_due.get(out, 0.0))
                last_due[out] = due
                sequence += 1
                heapq.heappush(queue, (due, sequence, out, packet))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, out, packet = heapq.heappop(queue)
            try:
                os.write(out, packet)
            except OSError:
                pass


if __name__ == "__main__":
    main(sys.argv)
