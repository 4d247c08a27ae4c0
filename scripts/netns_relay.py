#!/usr/bin/env python3
"""Forward TCP connections made to 127.0.0.1:PORT inside a network namespace to
127.0.0.1:PORT of the namespace this relay was started in.

Used by scripts/validate_parallel.py: each MPI rank runs in its own network
namespace (its traffic to the other rank goes through a rate-limited veth pair),
but the rank must still reach mpirun's PMIx server, which listens on the host's
loopback only. The relay holds sockets in both namespaces: it connects out from the
original one and, after setns(2), listens inside the rank's. It exits when the
process given by --parent exits.

    netns_relay.py --netns isomer_ns0 --port 34705 [--port ...] --parent PID
"""
import argparse
import ctypes
import os
import socket
import threading
import time

CLONE_NEWNET = 0x40000000


def setns(name):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns({name}) failed")
    os.close(fd)


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener, port, outer_ns_fd):
    while True:
        conn, _ = listener.accept()
        # Connect from the original namespace: a socket belongs to the namespace it
        # was created in, so create it there.
        libc = ctypes.CDLL(None, use_errno=True)
        with lock:
            inner = os.open("/proc/self/ns/net", os.O_RDONLY)
            libc.setns(outer_ns_fd, CLONE_NEWNET)
            out = socket.create_connection(("127.0.0.1", port))
            libc.setns(inner, CLONE_NEWNET)
            os.close(inner)
        for a, b in ((conn, out), (out, conn)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


lock = threading.Lock()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--netns", required=True)
    ap.add_argument("--port", type=int, action="append", required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--ready", help="file to create once listening")
    a = ap.parse_args()
    outer = os.open("/proc/self/ns/net", os.O_RDONLY)
    setns(a.netns)
    for port in sorted(set(a.port)):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        threading.Thread(target=serve, args=(listener, port, outer), daemon=True).start()
    if a.ready:
        open(a.ready, "w").close()
    while True:  # bounded by the rank's life
        try:
            os.kill(a.parent, 0)
        except OSError:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    main()
