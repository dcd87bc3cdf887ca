#!/usr/bin/env python3
"""A delay line in user space for kernels without tc netem: holds every packet that iptables sends
to NFQUEUE queue N for a fixed time, then lets it go on (NF_ACCEPT). Standard library only: it
speaks nfnetlink_queue over a raw AF_NETLINK/NETLINK_NETFILTER socket.

    ip netns exec NS delay.py --queue 0 --delay-ms 150 --stats FILE
    ip netns exec NS iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0

It asks for the packets' metadata only (no payload is copied) and never changes a packet. Every
packet is held the same time, so the packets leave in the order they came (FIFO): a packet's
verdict is given once it has been held --delay-ms, counted from when this process read it.

Fail closed: the queue is bound without NFQA_CFG_F_FAIL_OPEN and the rules should not use
--queue-bypass, so if this process dies, or its queue or socket overflows, the queued traffic is
dropped, never let through undelayed. Overflows are counted (`overruns`) in the statistics, and
so are verdicts the kernel refused (`errors`).

--stats FILE gets a JSON document, replaced once a second and at exit: packets held and released,
overruns, the longest queue, and the held time (min, mean, max in ms). The first one is written
once the queue is bound, so its existence says the delayer is ready.

The process exits on SIGTERM or SIGINT, and by itself when its parent goes away (so it never
outlives the test that started it). Packets held at exit are released at once.

`delay.py --probe HOST:PORT [--count N]` measures round trips instead: the time a TCP connect takes
(SYN out, SYN-ACK back), N times; prints the times in ms as JSON. A refused connect is a round
trip too; a timed-out one (a lost SYN, say) is left out and counted.
"""

import argparse
import collections
import errno
import json
import os
import select
import signal
import socket
import statistics
import struct
import sys
import time

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
SO_RCVBUFFORCE = 33
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 0x2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQA_CFG_F_GSO = 0x4  # whole GSO packets, not segmented (nothing here changes a packet)
NF_ACCEPT = 1
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER


def attribute(kind, payload):
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


class Queue:
    """One nfnetlink_queue queue, bound by this socket."""

    def __init__(self, number, maxlen):
        self.number = number
        self.seq = 0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.configure(attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)))
        self.configure(attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_META)))
        self.configure(attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)))
        self.configure(attribute(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO)) + attribute(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO)))
        self.sock.setblocking(False)

    def message(self, kind, attributes, flags=0):
        self.seq += 1
        body = struct.pack("!BBH", socket.AF_UNSPEC, 0, self.number) + attributes
        header = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, NLM_F_REQUEST | flags, self.seq, 0)
        return header + body

    def configure(self, attributes):
        """Sends one configuration message and waits for the kernel's acknowledgement."""
        self.sock.send(self.message(NFQNL_MSG_CONFIG, attributes, NLM_F_ACK))
        seq = self.seq
        self.sock.settimeout(5)
        while True:
            data = self.sock.recv(65536)
            for kind, msg_seq, payload in messages(data):
                if kind == NLMSG_ERROR and msg_seq == seq:
                    code = struct.unpack_from("=i", payload)[0]
                    if code != 0:
                        raise OSError(-code, f"nfnetlink_queue configuration of queue {self.number}: {os.strerror(-code)}")
                    return

    def accept_through(self, packet_id):
        """NF_ACCEPT for every packet of the queue up to and including this id."""
        self.sock.send(self.message(NFQNL_MSG_VERDICT_BATCH, attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))))


def messages(data):
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        yield kind, seq, data[offset + 16 : offset + length]
        offset += (length + 3) & ~3


def packet_id(payload):
    """The id in a NFQNL_MSG_PACKET (after its 4-byte nfgenmsg), or None."""
    offset = 4
    while offset + 4 <= len(payload):
        length, kind = struct.unpack_from("=HH", payload, offset)
        if length < 4:
            return None
        if kind & NLA_TYPE_MASK == NFQA_PACKET_HDR:
            return struct.unpack_from("!I", payload, offset + 4)[0]
        offset += (length + 3) & ~3
    return None


def delay(args):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    parent = os.getppid()
    queue = Queue(args.queue, args.maxlen)
    hold = args.delay_ms / 1000.0
    held = collections.deque()  # (due, id, received), in the order read: ids and dues both increase
    stats = {"queue": args.queue, "delay_ms": args.delay_ms, "pid": os.getpid(), "held": 0, "released": 0, "overruns": 0, "errors": 0, "longest_queue": 0}
    hold_min = hold_max = None
    hold_sum = 0.0
    poller = select.poll()
    poller.register(queue.sock, select.POLLIN)
    next_stats = 0.0

    def write_stats(final=False):
        document = dict(stats, running=not final, updated=time.time())
        if stats["released"]:
            document.update(hold_ms_min=round(hold_min * 1000, 2), hold_ms_mean=round(hold_sum / stats["released"] * 1000, 2), hold_ms_max=round(hold_max * 1000, 2))
        if args.stats:
            with open(args.stats + ".tmp", "w") as f:
                json.dump(document, f)
            os.replace(args.stats + ".tmp", args.stats)
        return document

    write_stats()
    print(f"delay: queue {args.queue} bound; holding each packet {args.delay_ms} ms", flush=True)
    while not stop and os.getppid() == parent:
        now = time.monotonic()
        if held:
            timeout = max(0, int((held[0][0] - now) * 1000) + 1)
        else:
            timeout = 1000
        timeout = min(timeout, max(1, int((next_stats - now) * 1000) + 1))
        try:
            ready = poller.poll(timeout)
        except InterruptedError:
            ready = []
        if ready:
            while True:
                try:
                    data = queue.sock.recv(65536)
                except BlockingIOError:
                    break
                except OSError as error:
                    if error.errno == errno.ENOBUFS:
                        stats["overruns"] += 1  # the kernel dropped what it could not hand over
                        continue
                    raise
                received = time.monotonic()
                for kind, _seq, payload in messages(data):
                    if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                        identity = packet_id(payload)
                        if identity is not None:
                            held.append((received + hold, identity, received))
                            stats["held"] += 1
                    elif kind == NLMSG_ERROR and struct.unpack_from("=i", payload)[0] != 0:
                        stats["errors"] += 1  # a verdict the kernel refused: its packets stay queued
                stats["longest_queue"] = max(stats["longest_queue"], len(held))
        now = time.monotonic()
        last = None
        while held and held[0][0] <= now:
            _due, last, received = held.popleft()
            waited = now - received
            hold_min = waited if hold_min is None else min(hold_min, waited)
            hold_max = waited if hold_max is None else max(hold_max, waited)
            hold_sum += waited
            stats["released"] += 1
        if last is not None:
            queue.accept_through(last)
        if now >= next_stats:
            write_stats()
            next_stats = now + 1.0
    if held:
        queue.accept_through(held[-1][1])
    document = write_stats(final=True)
    reason = "parent gone" if os.getppid() != parent else "stopped"
    print(f"delay: {reason}: " + json.dumps(document), flush=True)
    return 0


def probe(args):
    host, port = args.probe.rsplit(":", 1)
    times, lost = [], 0
    for _ in range(args.count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(args.timeout)
        start = time.monotonic()
        try:
            sock.connect((host, int(port)))
            times.append((time.monotonic() - start) * 1000)
        except ConnectionRefusedError:
            times.append((time.monotonic() - start) * 1000)
        except (socket.timeout, OSError):
            lost += 1
        finally:
            sock.close()
        time.sleep(args.interval)
    result = {"target": args.probe, "rtt_ms": [round(t, 2) for t in times], "lost": lost}
    if times:
        result.update(median_ms=round(statistics.median(times), 2), min_ms=round(min(times), 2), max_ms=round(max(times), 2))
    print(json.dumps(result))
    return 0 if times else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queue", type=int, default=0, help="NFQUEUE queue number (default 0)")
    parser.add_argument("--delay-ms", type=float, default=150, help="how long each packet is held (default 150)")
    parser.add_argument("--maxlen", type=int, default=20000, help="packets the kernel may hold for this queue (default 20000)")
    parser.add_argument("--stats", help="a file for the statistics (JSON)")
    parser.add_argument("--probe", metavar="HOST:PORT", help="measure TCP connect round trips instead")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--timeout", type=float, default=0.9, help="a probe longer than this is lost (a SYN resent after 1 s)")
    args = parser.parse_args()
    return probe(args) if args.probe else delay(args)


if __name__ == "__main__":
    sys.exit(main())
