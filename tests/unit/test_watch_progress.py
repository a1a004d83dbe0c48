"""WatchProgress: a worker waiting for the pod watch to bring a version back is woken when it does."""

from __future__ import annotations

import threading

from yuniplace.controller.seatcheck import WatchProgress


def test_a_version_already_brought_is_reached_at_once() -> None:
    progress = WatchProgress()
    progress.saw(7)
    assert progress.reached(7, timeout_s=0)
    assert progress.reached(3, timeout_s=0)


def test_a_version_not_brought_is_not_reached_and_leaves_no_waiter_behind() -> None:
    progress = WatchProgress()
    progress.saw(5)
    assert not progress.reached(6, timeout_s=0.01)
    assert not progress._waiters


def test_waiters_are_woken_when_their_own_version_comes_and_not_before() -> None:
    progress = WatchProgress()
    results: dict[int, bool] = {}
    registered = threading.Barrier(3)

    def wait_for(version: int) -> None:
        registered.wait()
        results[version] = progress.reached(version, timeout_s=60)

    threads = [threading.Thread(target=wait_for, args=(version,)) for version in (10, 20)]
    for thread in threads:
        thread.start()
    registered.wait()
    progress.saw(15)
    threads[0].join(timeout=20)  # woken by the version, long before its own timeout
    assert not threads[0].is_alive()
    assert results == {10: True}
    assert [wanted for wanted, _ in progress._waiters] in ([20], [])  # the second waits on, unless not yet registered
    progress.saw(25)
    threads[1].join(timeout=20)
    assert not threads[1].is_alive()
    assert results == {10: True, 20: True}
    assert not progress._waiters


def test_an_older_version_never_moves_the_watch_back() -> None:
    progress = WatchProgress()
    progress.saw(9)
    progress.saw(4)
    assert progress.reached(9, timeout_s=0)


def test_a_wake_is_called_once_when_its_version_comes_or_at_once_if_it_has() -> None:
    progress = WatchProgress()
    woken: list[str] = []
    progress.saw(5)
    progress.when_reached(5, lambda: woken.append("now"))
    progress.when_reached(8, lambda: woken.append("later"))
    assert woken == ["now"]
    progress.saw(7)
    assert woken == ["now"]
    progress.saw(8)
    progress.saw(9)
    assert woken == ["now", "later"]
