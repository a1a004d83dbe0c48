"""The bench's peers take turns: each alone with its own processes, in an order turned every repeat, and
its figures reported as medians beside every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yuniplace.bench import peers, pods
from yuniplace.bench.scenarios import Run
from yuniplace.bench.subjects import yunikorn_client


class Process:
    """A peer's process for one turn: says what it was given, and when it ran."""

    def __init__(self, key: str, running: list[str]) -> None:
        self.key, self.running = key, running
        self.given = {"client": {"qps": 1}} if key == "kueue" else {}

    def __enter__(self) -> Process:
        self.running.append(self.key)
        return self

    def __exit__(self, *_: object) -> None:
        self.running.remove(self.key)


def _lineup(running: list[str]) -> list[peers.Peer]:
    def pods(name: str, members: int) -> list[dict[str, Any]]:
        return [{"metadata": {"name": f"{name}-{i}"}} for i in range(members)]

    plain = peers.Peer("baseline", "plain", "plain", pods)
    kueue = peers.Peer("kueue", "Kueue", "kueue", pods, running=lambda: Process("kueue", running))
    yunikorn = peers.Peer("yunikorn", "YuniKorn", "yunikorn", pods, running=lambda: Process("yunikorn", running))
    return [plain, kueue, yunikorn]


Timed = tuple[list[tuple[str, tuple[str, ...]]], list[str]]


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> Timed:
    """Each run's namespace with the processes running meanwhile, and the processes running now. A run
    takes as many seconds as its repeat's number plus one, so medians and ranges can be told apart."""
    runs: list[tuple[str, tuple[str, ...]]] = []
    running: list[str] = []

    def time_to_bound(_cluster: object, namespace: str, *_args: Any, **_kwargs: Any) -> Run:
        runs.append((namespace, tuple(running)))
        return Run(float(namespace.rsplit("-", 1)[1]) + 1, {}, [])

    def arrivals(_cluster: object, namespace: str, *_args: Any, **_kwargs: Any) -> dict[str, float]:
        runs.append((namespace, tuple(running)))
        repeat = float(namespace.rsplit("-", 1)[1])
        return {"p50_s": repeat, "p95_s": 1.0, "p99_s": 2.0, "pods_per_s": 50.0 + repeat}

    monkeypatch.setattr(peers, "time_to_bound", time_to_bound)
    monkeypatch.setattr(peers, "arrivals", arrivals)
    return runs, running


def _measure(running: list[str], sizes: list[int]) -> dict[str, Any]:
    return peers.measure(
        object(),  # type: ignore[arg-type]  # the runs are faked: no cluster is asked
        _lineup(running),
        sizes,
        3,
        peers.Arrivals(apps=5, members=2, rate_per_s=5.0),
    )


def test_each_peer_takes_its_turns_alone_in_an_order_turned_every_repeat(timed: Timed) -> None:
    runs, running = timed
    measured = _measure(running, [10, 100])
    assert measured["orders"] == [
        ["baseline", "kueue", "yunikorn"],
        ["kueue", "yunikorn", "baseline"],
        ["yunikorn", "baseline", "kueue"],
    ]
    # Every run of a peer's turn has its own process, and only its own, running; none outlives its turn.
    for namespace, processes in runs:
        owner = next((key for key in ("kueue", "yunikorn") if key in namespace), None)
        assert processes == ((owner,) if owner else ()), (namespace, processes)
    assert [namespace for namespace, _ in runs[:6]] == [
        "plain-10-0",
        "plain-100-0",
        "arrivals-plain-0",
        "kueue-10-0",
        "kueue-100-0",
        "arrivals-kueue-0",
    ]
    assert len(runs) == 3 * 3 * 3 and not running


def test_figures_are_medians_with_every_run_beside_them(timed: Timed) -> None:
    _, running = timed
    measured = _measure(running, [10])
    [row] = measured["rows"]
    assert row["members"] == 10 and "ratio" not in row  # no yuniplace in this lineup: nothing to divide
    assert (row["kueue_s"], row["runs_kueue_s"]) == (2.0, [1.0, 2.0, 3.0])
    arrivals = measured["arrivals"]
    assert arrivals["repeats"] == 3
    assert arrivals["kueue"] == {"p50_s": 1.0, "p95_s": 1.0, "p99_s": 2.0, "pods_per_s": 51.0}
    assert [run["p50_s"] for run in arrivals["runs"]["yunikorn"]] == [0.0, 1.0, 2.0]
    # What a peer's process was given is kept once.
    assert measured["given"] == {"kueue": {"client": {"qps": 1}}}


def test_no_repeat_starts_with_the_same_peer_while_there_are_others() -> None:
    lineup = _lineup([])
    firsts = [peers.rotated(lineup, repeat)[0].key for repeat in range(3)]
    assert len(set(firsts)) == 3
    assert [peer.key for peer in peers.rotated(lineup, 3)] == [peer.key for peer in lineup]


def test_yunikorns_client_rate_is_read_from_its_module(tmp_path: Path) -> None:
    source = tmp_path / "pkg" / "conf" / "schedulerconf.go"
    source.parent.mkdir(parents=True)
    source.write_text("const (\n\tDefaultKubeQPS                         = 1000\n\tDefaultKubeBurst = 900\n)\n")
    assert yunikorn_client(tmp_path) == {"qps": 1000, "burst": 900}
    source.write_text("const DefaultKubeQPS = 5\n")
    with pytest.raises(RuntimeError, match="no default client burst"):
        yunikorn_client(tmp_path)


def test_a_gangs_phases_say_when_its_pods_were_all_seen_freed_and_bound() -> None:
    story: list[dict[str, Any]] = [
        {"pod": "a", "seen_ms": 0.0, "gated": True, "free_ms": 300.0, "bound_ms": 320.0},
        {"pod": "b", "seen_ms": 40.0, "gated": True, "free_ms": 310.0, "bound_ms": 400.0},
    ]
    assert pods.phases(story) == {
        "all_seen_s": 0.04,
        "first_free_s": 0.3,
        "last_free_s": 0.31,
        "first_bound_s": 0.32,
        "last_bound_s": 0.4,
    }
    # A peer that gates no pod has no gate lifted: its pods' "free" moment is their creation.
    ungated = [{**pod, "gated": False, "free_ms": pod["seen_ms"]} for pod in story]
    assert pods.phases(ungated) == {"all_seen_s": 0.04, "first_bound_s": 0.32, "last_bound_s": 0.4}


def test_each_rows_phases_are_medians_over_the_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    def time_to_bound(_cluster: object, namespace: str, *_args: Any, **_kwargs: Any) -> Run:
        repeat = float(namespace.rsplit("-", 1)[1])
        story = [{"pod": "a", "seen_ms": 0.0, "gated": False, "free_ms": 0.0, "bound_ms": 1000.0 * (repeat + 1)}]
        return Run(repeat + 1, {}, story)

    monkeypatch.setattr(peers, "time_to_bound", time_to_bound)
    measured = peers.measure(object(), _lineup([]), [10], 3)  # type: ignore[arg-type]  # faked runs
    [row] = measured["rows"]
    assert row["phases_kueue"] == {"all_seen_s": 0.0, "first_bound_s": 2.0, "last_bound_s": 2.0}
