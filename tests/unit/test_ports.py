"""Ports handed out for local components: never the same one to two processes while the first has
not bound it yet (two pytest workers start their clusters at the same moment)."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from yuniplace.localcluster import ports


def _ask(root: str, count: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import os

    os.environ["YUNIPLACE_CLUSTERS_DIR"] = root
    out.put(ports.free_ports(count))


def test_processes_asking_at_once_are_never_given_the_same_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A range of 40 ports for 8 processes asking 5 each: without the ledger, collisions are all but certain.
    monkeypatch.setattr(ports, "_port_range", lambda: range(41000, 41040))
    # The ledger is under test, not the kernel: those ports lie in its ephemeral range, where any outgoing
    # connection on the machine may hold one for a while.
    monkeypatch.setattr(ports, "_bindable", lambda _port: True)
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    asking = [context.Process(target=_ask, args=(str(tmp_path), 5, out)) for _ in range(8)]
    for process in asking:
        process.start()
    given = [port for _ in asking for port in out.get(timeout=30)]
    for process in asking:
        process.join(timeout=30)
    assert len(given) == len(set(given)) == 40, sorted(given)
    assert all(41000 <= port < 41040 for port in given)


def test_a_reservation_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUNIPLACE_CLUSTERS_DIR", str(tmp_path))
    monkeypatch.setattr(ports, "_port_range", lambda: range(41100, 41101))  # one port to hand out
    monkeypatch.setattr(ports, "_bindable", lambda _port: True)  # the ledger's expiry under test (see above)
    (port,) = ports.free_ports(1)
    ledger = json.loads((tmp_path / "ports.json").read_text())
    assert ledger[str(port)] > time.time()
    (tmp_path / "ports.json").write_text(json.dumps({str(port): time.time() - 1}))  # its time is up
    assert ports.free_ports(1) == [port]
    with pytest.raises(OSError, match="no 1 free ports"):  # reserved again: none left
        ports.free_ports(1)
