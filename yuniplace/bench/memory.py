"""Resident memory of a set of processes, sampled over a run, because a single reading at the end
misses the peak that decides whether a control plane fits on a machine."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

SAMPLE_INTERVAL_S = 0.25


def rss_bytes(pid: int) -> int:
    """Current resident set size of a process, 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the RSS of named processes in a background thread; use as a context manager."""

    def __init__(self, pids: Mapping[str, int], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._pids = dict(pids)
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_total = 0
        self.peak_by_name: dict[str, int] = dict.fromkeys(self._pids, 0)

    def sample(self) -> None:
        total = 0
        for name, pid in self._pids.items():
            rss = rss_bytes(pid)
            total += rss
            self.peak_by_name[name] = max(self.peak_by_name[name], rss)
        self.peak_total = max(self.peak_total, total)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
