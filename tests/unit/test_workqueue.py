"""The application work queue: dedup, exclusivity, re-queue after processing, delays, shutdown."""

from __future__ import annotations

import threading
from collections import Counter

from yuniplace.runtime.workqueue import WorkQueue


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_queue() -> tuple[WorkQueue[str], FakeClock]:
    clock = FakeClock()
    return WorkQueue(clock=clock), clock


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now, each marked done as soon as it is taken."""
    taken: list[str] = []
    while (key := queue.get(timeout_s=0)) is not None:
        taken.append(key)
        queue.done(key)
    return taken


def test_keys_come_out_in_order() -> None:
    queue, _ = make_queue()
    for key in "abc":
        queue.add(key)
    assert queue.depth() == 3
    assert drain(queue) == ["a", "b", "c"]
    assert queue.depth() == 0


def test_get_on_an_empty_queue_times_out_without_blocking() -> None:
    queue, _ = make_queue()
    assert queue.get(timeout_s=0) is None


def test_a_queued_key_is_queued_once() -> None:
    queue, _ = make_queue()
    for key in ["a", "b", "a", "a", "b"]:
        queue.add(key)
    assert queue.depth() == 2
    assert drain(queue) == ["a", "b"]


def test_a_key_added_while_processing_is_requeued_after_done() -> None:
    queue, _ = make_queue()
    queue.add("a")
    assert queue.get(timeout_s=0) == "a"
    queue.add("a")
    queue.add("a")
    # Not handed out again while it is processed.
    assert queue.depth() == 0
    assert queue.get(timeout_s=0) is None
    queue.done("a")
    assert queue.depth() == 1
    assert queue.get(timeout_s=0) == "a"
    queue.done("a")
    assert queue.get(timeout_s=0) is None


def test_done_without_new_adds_does_not_requeue() -> None:
    queue, _ = make_queue()
    queue.add("a")
    assert queue.get(timeout_s=0) == "a"
    queue.done("a")
    assert queue.get(timeout_s=0) is None


def test_other_keys_are_served_while_one_is_processed() -> None:
    queue, _ = make_queue()
    queue.add("a")
    assert queue.get(timeout_s=0) == "a"
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout_s=0) == "b"
    assert queue.get(timeout_s=0) is None
    queue.done("b")
    queue.done("a")
    assert drain(queue) == ["a"]


def test_done_of_an_unknown_key_is_harmless() -> None:
    queue, _ = make_queue()
    queue.done("nope")
    assert queue.get(timeout_s=0) is None


def test_add_after_waits_for_the_clock() -> None:
    queue, clock = make_queue()
    queue.add_after("a", 5.0)
    assert queue.get(timeout_s=0) is None
    clock.advance(4.999)
    assert queue.get(timeout_s=0) is None
    assert queue.depth() == 0
    clock.advance(0.001)
    assert queue.get(timeout_s=0) == "a"


def test_add_after_without_delay_is_add() -> None:
    queue, _ = make_queue()
    queue.add_after("a", 0)
    queue.add_after("b", -3)
    assert queue.depth() == 2
    assert drain(queue) == ["a", "b"]


def test_delayed_keys_come_out_by_due_time_then_insertion() -> None:
    queue, clock = make_queue()
    queue.add_after("late", 10)
    queue.add_after("early", 1)
    queue.add_after("tie-1", 5)
    queue.add_after("tie-2", 5)
    clock.advance(100)
    assert drain(queue) == ["early", "tie-1", "tie-2", "late"]


def test_a_due_key_already_queued_is_not_queued_twice() -> None:
    queue, clock = make_queue()
    queue.add("a")
    queue.add_after("a", 1)
    queue.add_after("a", 2)
    clock.advance(3)
    assert drain(queue) == ["a"]


def test_a_due_key_being_processed_is_requeued_after_done() -> None:
    queue, clock = make_queue()
    queue.add("a")
    assert queue.get(timeout_s=0) == "a"
    queue.add_after("a", 1)
    clock.advance(1)
    assert queue.get(timeout_s=0) is None  # due, but "a" is being processed
    queue.done("a")
    assert queue.get(timeout_s=0) == "a"


def test_an_early_add_does_not_cancel_a_later_delayed_one() -> None:
    queue, clock = make_queue()
    queue.add_after("a", 10)
    queue.add("a")
    assert drain(queue) == ["a"]
    clock.advance(10)
    assert drain(queue) == ["a"]


def test_shutdown_returns_none_and_ignores_new_work() -> None:
    queue, clock = make_queue()
    queue.add("a")
    queue.shutdown()
    assert queue.get(timeout_s=0) is None
    assert queue.get() is None  # would block forever if shutdown did not answer
    queue.add("b")
    queue.add_after("c", 1)
    clock.advance(2)
    assert queue.get() is None


def test_shutdown_wakes_a_blocked_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    results: list[str | None] = []
    started = threading.Event()

    def worker() -> None:
        started.set()
        results.append(queue.get())

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait(5)
    queue.shutdown()
    thread.join(5)
    assert not thread.is_alive()
    assert results == [None]


def test_add_wakes_a_blocked_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    results: list[str | None] = []
    thread = threading.Thread(target=lambda: results.append(queue.get()))
    thread.start()
    queue.add("a")
    thread.join(5)
    assert not thread.is_alive()
    assert results == ["a"]


def test_a_key_is_never_processed_by_two_workers_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    lock = threading.Lock()
    active: set[str] = set()
    overlaps: list[str] = []
    processed: Counter[str] = Counter()
    keys = [f"k{i}" for i in range(5)]

    def worker() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            # While this key is held, others keep adding it.
            queue.add(key)
            with lock:
                active.discard(key)
                processed[key] += 1
            queue.done(key)
            if processed[key] >= 50:
                with lock:
                    if all(processed[k] >= 50 for k in keys):
                        queue.shutdown()

    for key in keys:
        queue.add(key)
    workers = [threading.Thread(target=worker) for _ in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(10)
    assert not any(thread.is_alive() for thread in workers)
    assert overlaps == []
    assert all(processed[k] >= 50 for k in keys)
