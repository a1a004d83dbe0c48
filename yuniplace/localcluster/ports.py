"""Loopback ports for the local clusters' components, the controllers and the peers the tests and the
bench start, chosen so that no two processes of this machine are given the same one.

A port found free is not yet taken: a component binds it seconds later (kwok only after etcd and the
API server are up), and meanwhile another process choosing ports (the other pytest worker starting its
cluster) finds it free too. So each port handed out is also written, for RESERVED_S, in a ledger that
every process reads and writes under one file lock, and no port in it is handed out again until it
expires; by then its component holds it, which binding it to test shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PORT_RANGE_START = 20000
RESERVED_S = 300.0


def _ledger() -> Path:
    root = Path(os.environ.get("YUNIPLACE_CLUSTERS_DIR", Path(tempfile.gettempdir()) / "yuniplace-clusters"))
    root.mkdir(parents=True, exist_ok=True)
    return root / "ports.json"


@contextlib.contextmanager
def _locked(ledger: Path) -> Iterator[dict[str, float]]:
    """The ports reserved and not expired, read and written back under an exclusive lock."""
    with open(ledger.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            try:
                kept = json.loads(ledger.read_text())
            except (OSError, ValueError):
                kept = {}
            now = time.time()
            reserved = {port: until for port, until in kept.items() if isinstance(until, float) and until > now}
            yield reserved
            temporary = ledger.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(reserved))
            temporary.replace(ledger)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_range() -> range:
    """From PORT_RANGE_START to the kernel's ephemeral range (a thousand ports at least)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(PORT_RANGE_START, max(PORT_RANGE_START + 1000, low))


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now and reserved for the caller, chosen below the kernel's ephemeral
    range: a port the kernel hands out as ephemeral (bind to port 0) can be taken by any outgoing
    connection before the component binds it, which with an API server opening many etcd
    connections happens quickly."""
    candidates = _port_range()
    ports: list[int] = []
    with _locked(_ledger()) as reserved:
        for port in random.sample(candidates, len(candidates)):
            if str(port) not in reserved and _bindable(port):
                ports.append(port)
            if len(ports) == count:
                break
        else:
            raise OSError(f"no {count} free ports on 127.0.0.1 from {candidates.start} to {candidates.stop - 1}")
        until = time.time() + RESERVED_S
        reserved.update({str(port): until for port in ports})
    return ports
