"""The controller's work queue and the client's token bucket (``incluster/queue.py``,
``kube/ratelimit.py``)."""

from __future__ import annotations

import threading

from lwsflow.controller.incluster.queue import WorkQueue
from lwsflow.controller.kube.ratelimit import TokenBucket


class FakeTime:
    """A monotonic clock the test moves (the queue's delays and the bucket's refill read it)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def test_a_key_added_many_times_is_processed_once() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("ns/a")
    q.add("ns/b")
    assert [q.get(0), q.get(0), q.get(0)] == ["ns/a", "ns/b", None]
    assert q.adds == 6


def test_a_key_is_never_with_two_workers_and_a_readd_while_busy_runs_once_more() -> None:
    q = WorkQueue()
    q.add("ns/a")
    assert q.get(0) == "ns/a"
    q.add("ns/a")  # changed while a worker has it
    q.add("ns/a")
    assert q.get(0) is None  # not handed to a second worker
    q.done("ns/a")
    assert q.get(0) == "ns/a"  # once more, once
    q.done("ns/a")
    assert q.get(0) is None


def test_per_key_backoff_grows_and_forget_resets_it() -> None:
    clock = FakeTime()
    q = WorkQueue(base_s=0.1, max_s=1.0, monotonic=clock)
    assert [q.retry("ns/a") for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    q.forget("ns/a")
    assert q.retry("ns/a") == 0.1
    assert q.retry("ns/b") == 0.1  # per key: b's failures are its own


def test_add_after_is_due_only_after_its_delay() -> None:
    clock = FakeTime()
    q = WorkQueue(monotonic=clock)
    q.add_after("ns/a", 5.0)
    assert q.get(0) is None
    clock.t = 4.9
    assert q.get(0) is None
    clock.t = 5.0
    assert q.get(0) == "ns/a"


def test_get_blocks_until_an_add_from_another_thread() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(5.0)))
    t.start()
    q.add("ns/x")
    t.join(5)
    assert got == ["ns/x"]
    q.shutdown()
    assert q.get(1.0) is None


def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    clock = FakeTime()
    bucket = TokenBucket(10.0, 3, monotonic=clock, sleep=clock.sleep)
    waits = [bucket.take() for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0]  # the burst
    assert [round(w, 3) for w in waits[3:]] == [0.1, 0.1]  # then one per 1/qps
    clock.t += 10
    assert bucket.take() == 0.0  # refilled (up to the burst)
