"""What decoding a pod watch costs the controller: json.loads then trim, against msgspec's decoder
typed with the fields yuniplace reads, timed on the same watch lines recorded from a real gang's life
(members created and gated, placeholders created, bound, deleted, members released and bound)."""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import urllib3

from yuniplace.gang import pods as p
from yuniplace.gang import watched
from yuniplace.kube import KubeClient
from yuniplace.kube.client import lines_of

REPEATS = 5


@contextmanager
def recorded_lines(client: KubeClient, namespace: str) -> Iterator[list[bytes]]:
    """Every line of a watch of the namespace's pods, as the API server sent it, while the block runs."""
    lines: list[bytes] = []
    response = client.open_stream(f"/api/v1/namespaces/{namespace}/pods", query={"watch": "true"}, timeout_s=600)
    stopped = threading.Event()

    def read() -> None:
        with contextlib.suppress(OSError, urllib3.exceptions.HTTPError):  # shut down: the block is over
            lines.extend(lines_of(response, stopped))

    reader = threading.Thread(target=read, name="decode-recorder", daemon=True)
    reader.start()
    try:
        yield lines
    finally:
        stopped.set()
        response.shutdown()
        reader.join(10)
        response.release_conn()


def _whole(line: bytes) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(line)
    return p.trim(event["object"])


def _typed(line: bytes) -> dict[str, Any]:
    return p.trim(watched.PODS.event(line)["object"])


def _per_event_us(decode: Callable[[bytes], dict[str, Any]], lines: list[bytes]) -> float:
    """The median over REPEATS of decoding every line once, per line, in microseconds."""
    runs = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for line in lines:
            decode(line)
        runs.append((time.perf_counter() - started) / len(lines) * 1e6)
    return statistics.median(runs)


def compare(lines: list[bytes]) -> dict[str, Any]:
    """Both decoders over the same lines; each must give the same trimmed pod, or the typed one would
    lose something a reader needs."""
    if not lines:
        raise RuntimeError("no watch lines were recorded")
    for line in lines:
        if _whole(line) != _typed(line):
            raise RuntimeError(f"the typed decoder reads this event differently from json.loads: {line[:200]!r}")
    whole, typed = _per_event_us(_whole, lines), _per_event_us(_typed, lines)
    return {
        "events": len(lines),
        "mean_event_bytes": round(sum(map(len, lines)) / len(lines)),
        "json_loads_trim_us": round(whole, 1),
        "typed_trim_us": round(typed, 1),
        "speedup": round(whole / typed, 2),
    }
