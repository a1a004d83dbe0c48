"""The tutorial "A first gang" (docs/getting-started/first-gang.md) as a reader runs it: on the demo
cluster `scripts/demo` leaves running, from a shell that has nothing on PATH but the system's, each
numbered step's commands run in order and print what the page shows (ages, durations and pod name
suffixes aside). When the product's output changes on purpose, `YUNIPLACE_DOCS=record scripts/test
tests/e2e/test_docs_first_gang.py` writes the page's outputs anew from a run (review the diff)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import walkthrough
from tests.e2e.conftest import skip_without_go
from yuniplace.localcluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started" / "first-gang.md"
RECORD = os.environ.get("YUNIPLACE_DOCS") == "record"
# A reader's shell before the page's first step: the system's folders only, no KUBECONFIG.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def demo() -> Iterator[str]:
    """The demo cluster, as `scripts/demo` leaves it (yuniplace installed with its chart, the Spark demo's
    pods running), under a name of its own: the name of the cluster."""
    skip_without_go()
    name = f"first-gang-{uuid.uuid4().hex[:6]}"
    try:
        started = subprocess.run(
            [sys.executable, "-m", "yuniplace.localcluster.demo", "--name", name],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert started.returncode == 0, f"scripts/demo failed:\n{started.stdout}\n{started.stderr}"
        yield name
    finally:
        LocalCluster(name).down(quiet=True)


def test_a_first_gang_runs_as_the_page_shows(demo: str) -> None:
    assert shutil.which("yuniplace", path=SYSTEM_PATH) is None, "the page's step 1 must put yuniplace on PATH"
    env = {key: value for key, value in os.environ.items() if key not in ("PATH", "KUBECONFIG", "VIRTUAL_ENV")}
    env["PATH"] = SYSTEM_PATH
    page = PAGE.read_text()
    found = walkthrough.blocks(page)
    run = walkthrough.Run(ROOT, env, words={"--name demo": f"--name {demo}", "'demo'": f"'{demo}'"})
    drifted = []
    for block in found:
        printed = run.run(block)
        if difference := walkthrough.differences(block, printed):
            drifted.append(difference)
    if RECORD:
        PAGE.write_text(walkthrough.rewritten(page, found, run))
        return
    assert not drifted, (
        "the page shows another output than its commands print now; if the change is meant, "
        "YUNIPLACE_DOCS=record scripts/test tests/e2e/test_docs_first_gang.py writes it anew:\n\n"
        + "\n\n".join(drifted)
    )
