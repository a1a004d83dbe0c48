"""A tutorial page as a script: its numbered steps' commands, each with the output the page shows, run in
a shell and held to that output, as `docsgen --check` holds the reference pages to the code.

A step is a `## N. ...` section. In it, a ```sh block is run (its `eval` and `export` lines carry over to
later blocks, as a reader's shell keeps them), and the ```text block right after it is what it must
print, stdout and stderr together, as a terminal shows them. What legitimately varies from run to run is
left out of the comparison: ages and durations, the random suffixes of pod names, runs of blanks (kubectl
aligns its columns to what they hold). A pod the page names in a command is, in the run, the first pod
of that name's prefix the run printed (a Job's pods are named anew each run). A block that only reads (`kubectl get`, `yuniplace status`, ...) is run
again until it prints what the page shows or its deadline passes, as a reader runs it a moment later;
a watch (`--watch`) is read until it has printed as many lines as the page shows, then stopped.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from yuniplace.localcluster import wait_until

STEP = re.compile(r"^## (\d+)\. ")
FENCE = re.compile(r"^```(\w*)\s*$")
# Kubernetes' random name suffixes: five of these characters (no vowels, no 0, 1, 3), as
# k8s.io/apimachinery's rand.String makes them.
SUFFIXED = re.compile(r"\b([a-z0-9][a-z0-9-]*)-([bcdfghjklmnpqrstvwxz2456789]{5})\b")
DURATION = re.compile(r"\b(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+\b")
CARRIED = re.compile(r"^\s*(?:eval|export)\s")
READ_ONLY = ("kubectl get ", "yuniplace status", "yuniplace explain", "yuniplace validate", "kubectl yuniplace ")
WATCH = re.compile(r"(?:\s--watch\b|\s-w\b)")
RETRY_S = 30.0
WATCH_S = 60.0


@dataclass
class Block:
    """One command block of a step and the output the page shows after it (None: the page shows none,
    and it must print nothing)."""

    step: int
    commands: str
    output: str | None
    # Where the two sit in the page's lines, for writing the page anew.
    command_lines: tuple[int, int]
    output_lines: tuple[int, int] | None

    @property
    def read_only(self) -> bool:
        joined = self.commands.replace("\\\n", " ")
        lines = [line.strip() for line in joined.splitlines() if line.strip() and not CARRIED.match(line)]
        return bool(lines) and all(line.startswith(READ_ONLY) for line in lines)

    @property
    def watches(self) -> bool:
        return bool(WATCH.search(self.commands))


def blocks(page: str) -> list[Block]:
    """The command blocks of the page's numbered steps, in order."""
    lines = page.splitlines()
    found: list[Block] = []
    step = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        if match := STEP.match(line):
            step = int(match.group(1))
        elif line.startswith("## "):
            step = 0
        fence = FENCE.match(line)
        if not fence:
            index += 1
            continue
        end = _closing(lines, index)
        if step and fence.group(1) == "sh":
            commands = (index + 1, end)
            after = end + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            output_at: tuple[int, int] | None = None
            if after < len(lines) and lines[after].strip() == "```text":
                output_at = (after + 1, _closing(lines, after))
            found.append(
                Block(
                    step,
                    "\n".join(lines[commands[0] : commands[1]]),
                    None if output_at is None else "\n".join(lines[output_at[0] : output_at[1]]),
                    commands,
                    output_at,
                )
            )
            if output_at is not None:
                end = output_at[1]
        index = end + 1
    return found


def _closing(lines: list[str], opening: int) -> int:
    for index in range(opening + 1, len(lines)):
        if lines[index].strip() == "```":
            return index
    raise ValueError(f"the code block opened on line {opening + 1} is never closed")


def normalised(output: str) -> list[str]:
    """The output as compared: durations and pod name suffixes masked, blanks collapsed, empty lines
    dropped."""
    found = []
    for line in output.splitlines():
        line = DURATION.sub("<t>", SUFFIXED.sub(r"\1-<id>", line))
        line = " ".join(line.split())
        if line:
            found.append(line)
    return found


@dataclass
class Run:
    """A run of a page's blocks in a shell. `words`: the page's words for what this run names otherwise
    (the cluster's name), swapped in its commands and back in what they print. The pods the run makes
    in place of those the page shows are named in later commands by the names the run printed."""

    cwd: Path
    env: Mapping[str, str]
    words: Mapping[str, str] = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)  # the suffixed pod names the run printed, in order
    carried: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def page_commands(self, block: Block) -> str:
        """The block's commands as the page would show them for this run: a pod the page names is the
        first pod of that name's prefix the run has printed (the run's pods are named otherwise)."""

        def run_pod(match: re.Match[str]) -> str:
            if match.group(0) in self.printed:
                return match.group(0)
            return next((name for name in self.printed if name.startswith(match.group(1) + "-")), match.group(0))

        return SUFFIXED.sub(run_pod, block.commands)

    def _command_text(self, block: Block) -> str:
        text = self.page_commands(block)
        for page_word, run_word in self.words.items():
            text = text.replace(page_word, run_word)
        return text

    def _back(self, output: str) -> str:
        for page_word, run_word in self.words.items():
            output = output.replace(run_word, page_word)
        return output

    def _shell(self, commands: str) -> str:
        return "set -e\n" + "\n".join([*self.carried, commands])

    def run(self, block: Block) -> str:
        """Run one block and return what it printed, in the page's words."""
        commands = self._command_text(block)
        expected = normalised(block.output or "")
        if block.watches:
            printed = self._watch(commands, len(expected))
        else:
            printed = self._until(commands, expected) if block.read_only else self._once(commands)
        self.carried += [line for line in commands.splitlines() if CARRIED.match(line)]
        self.printed += [name for name in _names(printed) if name not in self.printed]
        self.outputs.append(printed)
        return printed

    def _once(self, commands: str) -> str:
        done = subprocess.run(
            ["bash", "-c", self._shell(commands)],
            cwd=self.cwd,
            env=dict(self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"`{commands}` failed with exit {done.returncode}:\n{done.stdout}")
        return self._back(done.stdout)

    def _until(self, commands: str, expected: list[str]) -> str:
        """Run it until it prints what the page shows; what it printed last either way."""
        last = [""]

        def shows_it() -> bool:
            last[0] = self._once(commands)
            return normalised(last[0]) == expected

        with contextlib.suppress(TimeoutError):
            wait_until(shows_it, RETRY_S, interval_s=0.5)
        return last[0]

    def _watch(self, commands: str, lines: int) -> str:
        """Read a watch until it printed `lines` non-empty lines, each whole (a read can end within a
        line: kubectl's columns may come in two writes), or its deadline passed; then stop it."""
        process = subprocess.Popen(
            ["bash", "-c", self._shell(commands)],
            cwd=self.cwd,
            env=dict(self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        printed = b""
        deadline = time.monotonic() + WATCH_S
        try:
            while sum(1 for line in printed.split(b"\n")[:-1] if line.strip()) < lines:
                ready, _, _ = select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(descriptor, 65536) if ready else b""
                if not chunk:
                    break
                printed += chunk
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
            process.stdout.close()
        return self._back(printed.decode())


def _names(text: str) -> Iterator[str]:
    for match in SUFFIXED.finditer(text):
        yield match.group(0)


def differences(block: Block, printed: str) -> str | None:
    """What the page shows after the block against what the run printed, as a diff (both normalised),
    or None when they agree."""
    expected, got = normalised(block.output or ""), normalised(printed)
    if expected == got:
        return None
    diff = difflib.unified_diff(expected, got, "the page shows", "the run printed", lineterm="", n=1)
    return f"step {block.step}, `{' '.join(block.commands.split())}`:\n" + "\n".join(diff)


def rewritten(page: str, found: list[Block], run: Run) -> str:
    """The page with each block's output replaced by what the run printed, and its commands naming the
    run's pods: what `YUNIPLACE_DOCS=record` writes."""
    lines = page.splitlines()
    for block, printed in sorted(zip(found, run.outputs, strict=True), key=lambda pair: -pair[0].command_lines[0]):
        if block.output_lines is not None:
            start, end = block.output_lines
            lines[start:end] = printed.rstrip("\n").splitlines()
        start, end = block.command_lines
        lines[start:end] = run.page_commands(block).splitlines()
    return "\n".join(lines) + "\n"
