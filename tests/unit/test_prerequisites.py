"""What the docs ask a newcomer to bring is what the code needs: the Go that builds every module of
controlplane/, the Python setup.cfg requires, and the Kubernetes releases yuniplace supports, which the
chart's kubeVersion reads too."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import yaml

from yuniplace.kube import versions
from yuniplace.localcluster.build import GO_NEEDED

ROOT = Path(__file__).resolve().parents[2]
BEFORE_YOU_BEGIN = ("docs/index.md", "docs/getting-started/demo.md")


def _go_lines() -> dict[str, tuple[int, ...]]:
    """Each Go module file of controlplane/ and the Go release its `go` line asks for."""
    found = {}
    for path in [*ROOT.glob("controlplane/**/go.mod"), *ROOT.glob("controlplane/kubernetes/*.mod")]:
        match = re.search(r"^go (\d+(?:\.\d+)*)$", path.read_text(), re.MULTILINE)
        assert match, f"{path} has no go line"
        found[str(path.relative_to(ROOT))] = tuple(int(part) for part in match.group(1).split("."))
    return found


def _python_needed() -> str:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    requires = setup["options"]["python_requires"]
    match = re.fullmatch(r">=\s*(\d+\.\d+)", requires)
    assert match, f"setup.cfg's python_requires {requires!r} is not the >=X.Y the docs can say"
    return match.group(1)


def test_go_needed_is_the_highest_go_line_of_the_control_planes_modules() -> None:
    lines = _go_lines()
    assert len(lines) >= 10, lines  # the control plane's per release, kwok, helm, the operators, kind
    highest = max(lines.values())
    assert tuple(int(part) for part in GO_NEEDED.split(".")) == highest, (
        f"GO_NEEDED in yuniplace/localcluster/build.py is {GO_NEEDED}, the go.mod files ask for up to "
        f"{'.'.join(map(str, highest))}: {lines}"
    )


def test_before_you_begin_names_the_go_and_python_the_code_needs() -> None:
    python = _python_needed()
    for page in BEFORE_YOU_BEGIN:
        text = (ROOT / page).read_text()
        assert "## Before you begin" in text or "### Before you begin" in text, f"{page} has no Before you begin"
        assert f"Go {GO_NEEDED} or newer" in text, f"{page} must ask for Go {GO_NEEDED} or newer"
        assert f"Python {python} or newer" in text, f"{page} must ask for Python {python} or newer"
        stale = re.findall(r"\bGo \d+\.\d+(?:\.\d+)?\+?", text)
        assert set(stale) == {f"Go {GO_NEEDED}"}, f"{page} names another Go release: {stale}"


def test_the_chart_installs_on_the_oldest_supported_release_and_no_older() -> None:
    chart = yaml.safe_load((ROOT / "charts/yuniplace/Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={versions.SUPPORTED[0]}.0-0"


def test_the_supported_releases_are_said_where_the_docs_say_them() -> None:
    said = ", ".join(versions.SUPPORTED[:-1]) + f" and {versions.SUPPORTED[-1]}"
    install = (ROOT / "docs/operations/install.md").read_text()
    assert f"yuniplace supports the Kubernetes releases upstream supports: {said}." in install
    chart_readme = (ROOT / "charts/yuniplace/README.md").read_text()
    assert f"Kubernetes {', '.join(versions.SUPPORTED[:-1])} or {versions.SUPPORTED[-1]}" in chart_readme
    assert f'kubeVersion: ">={versions.SUPPORTED[0]}.0-0"' in chart_readme
    for path in ROOT.glob("docs/**/*.md"):
        older = re.findall(r"Kubernetes 1\.(\d+)\+", path.read_text())
        assert not older, f"{path}: 'Kubernetes 1.{older[0]}+': say the supported releases instead"
