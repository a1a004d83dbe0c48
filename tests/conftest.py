"""Hooks of the process that reports the run: with pytest-xdist (`scripts/test` runs two workers, each
with its e2e cluster) the tests run in workers and only what their reports carry reaches the log, so
figures are recorded on the reports (`record_property("figure", ...)`), never printed."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests import goldenplans
from tests.e2e.conftest import kubernetes_version
from yuniplace.localcluster.build import SUPPORTED_KUBERNETES

# Property tests share the machine with e2e clusters under two workers: an example's time says nothing
# of its correctness, so none has a deadline.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")
# The search for inputs that make one of yuniplace's own steps raise (test_internal_steps_property.py):
# a fixed budget, the same examples on every run, so that CI never fails on a draw of its own.
settings.register_profile(
    "internal-steps", settings.get_profile("shared-machine"), max_examples=200, derandomize=True, database=None
)


def pytest_report_header() -> str:
    return (
        f"e2e clusters: Kubernetes {kubernetes_version()} "
        f"(YUNIPLACE_KUBERNETES; supported: {', '.join(SUPPORTED_KUBERNETES)})"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures tests record, in the log of every run: what the e2e tests measured on the way (the
    swap under a flood, the native gangs, contention, the events of a Spark gang), per Kubernetes release;
    and how many plans were held to their golden records."""
    _golden_summary(terminalreporter)
    figures = [
        (report.nodeid.rpartition("::")[2], value)
        for report in terminalreporter.stats.get("passed", [])
        for name, value in report.user_properties
        if name == "figure"
    ]
    if figures:
        terminalreporter.section(f"figures, Kubernetes {kubernetes_version()}")
        for test, text in figures:
            terminalreporter.write_line(f"{test}: {text}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Recording golden plans: the run's parts become the records (in the one process that is no worker)."""
    if goldenplans.mode() == "record" and not hasattr(session.config, "workerinput"):
        goldenplans.merge()


def _golden_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts = {goldenplans.CHECKED: 0, goldenplans.REFUSED: 0}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for name, value in report.user_properties:
                if name in counts:
                    counts[name] += value
    if any(counts.values()):
        terminalreporter.write_line(
            f"golden plans: {counts[goldenplans.CHECKED]} checked against their records, "
            f"{counts[goldenplans.REFUSED]} made by failing tests and not recorded"
        )
