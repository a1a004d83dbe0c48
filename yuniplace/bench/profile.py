"""Where the controller's CPU goes during one part of a benchmark: py-spy samples the running process
from outside (no change to it, and it is not paused: `--nonblocking`), only the thread holding the
GIL each time (`--gil`: Python's own work, not threads waiting on a socket or a lock), and the samples
are summed per function, by the time spent in the function itself and in it or what it called."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SAMPLES_PER_S = 200
TOP = 15
# py-spy names a frame "function (path/to/file.py:line)"; the line is dropped, so that a function's
# samples add up whichever of its lines they were on.
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^:()]*)(?::\d+)?\)$")


def py_spy() -> str:
    """The py-spy executable beside this Python (installed with the test extras), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError("py-spy is not installed: pip install -e '.[test]' installs it")
    return found


@contextmanager
def sampled(pid: int, path: Path) -> Iterator[None]:
    """Sample process `pid` while the block runs, into `path` (py-spy's raw format: one stack a line,
    then its count)."""
    recorder = subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(SAMPLES_PER_S),
            "--nonblocking",
            "--gil",
            "--format",
            "raw",
            "--output",
            str(path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes what it sampled when interrupted
        recorder.wait(60)


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"]
    package = file.find("yuniplace/")
    where = file[package:] if package >= 0 else Path(file).name
    return f"{match['function']} ({where})"


@dataclass(frozen=True)
class Summary:
    samples: int
    inclusive: list[tuple[str, float]]  # function, share of samples in it or below it
    own: list[tuple[str, float]]  # function, share of samples in the function itself

    def table(self, title: str) -> str:
        lines = [
            f"#### {title}: {self.samples} samples",
            "",
            "| in the function or below | % | in the function itself | % |",
            "| --- | ---: | --- | ---: |",
        ]
        for (inner, inner_share), (own, own_share) in zip(self.inclusive, self.own, strict=False):
            lines.append(f"| `{inner}` | {inner_share:.1%} | `{own}` | {own_share:.1%} |")
        return "\n".join(lines) + "\n"


def summarize(path: Path, top: int = TOP) -> Summary:
    """The functions that took most samples. The frames every thread runs through (threading's
    bootstrap) are left out of the inclusive ranking, which they would lead with 100 %."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(frame) for frame in stack.split(";")]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if "threading.py" not in frame:
                inclusive[frame] += count
    if total == 0:
        return Summary(0, [], [])
    return Summary(
        total,
        [(name, n / total) for name, n in inclusive.most_common(top)],
        [(name, n / total) for name, n in own.most_common(top)],
    )
