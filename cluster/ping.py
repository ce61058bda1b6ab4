#!/usr/bin/env python3
"""Round trips between two emulated devices, for `cluster/edge.sh ping` (which runs each side
in its device's namespace):

  ping.py serve PORT                      echo UDP datagrams until told 'bye' (or 60 s idle);
                                          with MB > 0 also take one TCP stream on PORT
  ping.py send ADDR PORT COUNT DILATION MB
                                          COUNT ping-pongs of 64 bytes, then a burst of 200
                                          numbered datagrams whose echoes must come back in order,
                                          then (MB > 0) MB megabytes over TCP

Prints the round trips (min, median, 90th percentile, max) as measured here and divided by the
time dilation (device time), how many of the burst came back out of order or not at all, and
the TCP stream's rate and whether its bytes arrived intact. Exits non-zero if no answer comes
or the stream's bytes differ.
"""
import hashlib
import random
import socket
import threading
import statistics
import struct
import sys
import time


def sink(port):
    """Takes one TCP stream and answers on it with its bytes, seconds from first to last
    byte, and sha256."""
    t = socket.socket()
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("0.0.0.0", port))
    t.listen(1)
    t.settimeout(60)
    c, _ = t.accept()
    h, n, t0 = hashlib.sha256(), 0, None
    while True:
        d = c.recv(1 << 20)
        if not d:
            break
        if t0 is None:
            t0 = time.perf_counter()
        n += len(d)
        h.update(d)
    c.sendall(f"{n} {time.perf_counter() - t0:.6f} {h.hexdigest()}".encode())
    c.close()


def recvfrom_spinning(s, spin_s=0.05):
    """recv, polling for up to spin_s before it sleeps: a process woken from sleep adds this
    VM's wake-up time (about 0.1-0.2 ms on an idle vCPU) to every round trip, which is the
    receiver's, not the link's. MPI polls the same way while it waits."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < spin_s:
        try:
            return s.recvfrom(2048, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
    return s.recvfrom(2048)


def serve(port, mb):
    if mb > 0:
        threading.Thread(target=sink, args=(port,), daemon=True).start()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(60)
    while True:
        try:
            data, peer = recvfrom_spinning(s)
        except socket.timeout:
            return
        if data == b"bye":
            return
        s.sendto(data, peer)


def stream(addr, port, mb):
    """MB megabytes of random bytes over TCP; the sink answers with what it got."""
    data = random.Random(1).randbytes(int(mb * 1e6))
    c = socket.create_connection((addr, port), timeout=120)
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    n, secs, digest = c.recv(256).decode().split()
    c.close()
    ok = int(n) == len(data) and digest == hashlib.sha256(data).hexdigest()
    return ok, int(n), float(secs)


def send(addr, port, count, dilation, mb):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((addr, port))
    # The server starts beside us: knock until it answers (10 s at most).
    s.settimeout(0.2)
    deadline = time.monotonic() + 10
    while True:
        s.send(b"hello")
        try:
            if s.recv(2048) == b"hello":
                break
        except (socket.timeout, ConnectionRefusedError):
            pass
        if time.monotonic() > deadline:
            print(f"ping: no answer from {addr}:{port} in 10 s", file=sys.stderr)
            return 1
    s.settimeout(2)
    rtts = []
    for i in range(count):
        payload = struct.pack("!I", i).ljust(64, b"\0")
        t0 = time.perf_counter()
        s.send(payload)
        while True:
            try:
                data, _ = recvfrom_spinning(s)
            except socket.timeout:
                data = None
                break
            if data == payload:
                break
        if data is not None:
            rtts.append((time.perf_counter() - t0) * 1e3)
    # Burst: 200 numbered datagrams back to back; their echoes keep the order if the links do.
    n = 200
    for i in range(n):
        s.send(struct.pack("!I", 1_000_000 + i).ljust(64, b"\0"))
    got = []
    s.settimeout(2)
    while len(got) < n:
        try:
            data = s.recv(2048)
        except socket.timeout:
            break
        (k,) = struct.unpack("!I", data[:4])
        if k >= 1_000_000:
            got.append(k - 1_000_000)
    stream_result = stream(addr, port, mb) if mb > 0 else None
    s.send(b"bye")
    if not rtts:
        print(f"ping: {count} datagrams to {addr}, no answer", file=sys.stderr)
        return 1
    rtts.sort()
    p90 = rtts[min(len(rtts) - 1, int(0.9 * len(rtts)))]
    out_of_order = sum(1 for a, b in zip(got, got[1:]) if b < a)
    fig = lambda v: f"{v:.3f}"  # noqa: E731
    print(
        f"round trip to {addr}, {len(rtts)} of {count} answered: min {fig(rtts[0])}, median "
        f"{fig(statistics.median(rtts))}, p90 {fig(p90)}, max {fig(rtts[-1])} ms here"
    )
    if dilation != 1:
        med = statistics.median(rtts) / dilation
        print(f"  device time (/ D = {dilation:g}): min {fig(rtts[0] / dilation)}, median {fig(med)} ms")
    print(f"burst of {n}: {n - len(got)} lost, {out_of_order} out of order")
    if stream_result:
        ok, got_bytes, secs = stream_result
        print(
            f"TCP stream of {mb:g} MB: {got_bytes * 8 / secs / 1e6:.1f} Mbit/s here, "
            f"{'intact' if ok else 'CORRUPTED or short'}"
        )
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) == 7 and sys.argv[1] == "send":
        sys.exit(send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])))
    else:
        sys.exit(__doc__)
