"""The work queue: a key runs once at a time and again after a change made meanwhile, each
worker takes a key once, by priority then in the order keys came; delayed keys (backoffs) are
work once due, planned wake-ups are not; its length counts each key waiting or in process once,
and each backoff."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from annex.workqueue import KeyQueue
from tests.helpers import until


def test_the_work_queue_never_runs_a_key_twice_at_once_and_reruns_it_after() -> None:
    queue = KeyQueue(base_delay=0.01)

    async def scenario() -> None:
        queue.add("a")
        queue.add("a")
        assert queue.take() == "a" and queue.take() is None  # queued once
        queue.add("a")  # changed while being processed
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # not handed out while processing
        queue.done("a")
        assert await asyncio.wait_for(waiting, 5) == "a"
        queue.done("a")
        assert queue.retry("b") == 0.01
        assert queue.retry("b") == 0.02
        assert await asyncio.wait_for(queue.get(), 5) == "b"  # once its backoff is over
        queue.shutdown()
        assert await queue.get() is None

    asyncio.run(scenario())


def test_workers_take_each_key_once_and_wake_for_a_delayed_one() -> None:
    queue = KeyQueue(base_delay=0.01)
    taken: list[Any] = []

    async def worker() -> None:
        while (key := await queue.get()) is not None:
            taken.append(key)
            await asyncio.sleep(0)
            queue.done(key)

    async def scenario() -> None:
        workers = [asyncio.create_task(worker()) for _ in range(4)]
        await asyncio.sleep(0.01)  # all of them waiting, nothing queued
        for i in range(500):
            queue.add(i)
            if i % 50 == 0:
                await asyncio.sleep(0)
        queue.retry("late")  # a delayed key: due after the waiters went to sleep
        await until(lambda: len(taken) == 501, "501 keys taken")
        queue.shutdown()  # wakes every waiter
        await asyncio.wait_for(asyncio.gather(*workers), 10)

    asyncio.run(scenario())
    assert sorted(map(str, taken)) == sorted(map(str, [*range(500), "late"]))


def test_a_waiter_cancelled_after_its_wake_up_passes_the_key_on() -> None:
    queue = KeyQueue()

    async def scenario() -> Any:
        leaving = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        staying = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        queue.add("a")  # wakes the first waiter...
        leaving.cancel()  # ...which leaves without taking it
        return await asyncio.wait_for(staying, 5)

    assert asyncio.run(scenario()) == "a"


def _drain(queue: KeyQueue) -> list[Any]:
    taken = []
    while (key := queue.take()) is not None:
        queue.done(key)
        taken.append(key)
    return taken


def test_keys_are_taken_by_priority_then_in_the_order_they_came() -> None:
    queue = KeyQueue()
    for key in ("new-1", "new-2", "new-3"):
        queue.add(key)
    queue.add("news-1", priority=1)
    queue.add("new-4")
    queue.add("news-2", priority=1)
    assert len(queue) == 6 and queue.pending()
    assert _drain(queue) == ["news-1", "news-2", "new-1", "new-2", "new-3", "new-4"]
    assert len(queue) == 0 and not queue.pending()


def test_a_key_added_again_with_a_higher_priority_moves_up_never_down() -> None:
    queue = KeyQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", priority=1)  # moves up, once
    queue.add("a", priority=-1)  # stays where it is
    queue.add("c")  # stays up
    assert len(queue) == 3
    assert _drain(queue) == ["c", "a", "b"]
    assert len(queue) == 0 and not queue.pending()  # the stale entry of "c" counts for nothing


def test_a_key_in_process_added_with_a_higher_priority_runs_again_from_that_lane() -> None:
    queue = KeyQueue()
    queue.add("a")
    assert queue.take() == "a"
    queue.add("b")
    queue.add("a")
    queue.add("a", priority=1)  # changed again, with news, while being processed
    assert queue.take() == "b"  # not "a": it is being processed
    queue.done("b")
    queue.add("c")
    queue.done("a")  # back in line, ahead of "c"
    assert _drain(queue) == ["a", "c"]


def test_a_key_moved_up_is_not_taken_again_from_its_old_lane_while_in_process() -> None:
    queue = KeyQueue()
    queue.add("a")
    queue.add("a", priority=1)  # its first entry, in lane 0, stays behind
    assert queue.take() == "a"
    queue.add("a")  # changed while being processed: waits in lane 0 again
    queue.add("b")
    assert queue.take() == "b"  # not "a", whose old entry comes first: it is in process
    assert queue.take() is None
    queue.done("b")
    queue.done("a")
    assert _drain(queue) == ["a"]
    assert len(queue) == 0 and queue.take() is None


def test_a_planned_wake_up_is_not_pending_work_but_a_backoff_is() -> None:
    queue = KeyQueue()
    queue.add_after(("app", "web"), 3600, planned=True)  # a token's refresh time
    assert len(queue) == 0
    queue.retry(("app", "db"))  # a failure backing off
    assert len(queue) == 1


def test_delayed_keys_count_as_work_from_when_they_are_due_until_done() -> None:
    queue = KeyQueue(base_delay=0.0)
    queue.add_after("planned", 0.0, planned=True)
    queue.retry("failed")  # due at once
    queue.add("waiting")
    assert len(queue) == 2  # the planned look is no work until it comes
    taken = [queue.take() for _ in range(3)]
    assert sorted(taken) == ["failed", "planned", "waiting"]  # type: ignore[type-var]
    assert len(queue) == 3 and queue.timers() == 0  # all three in process
    queue.add("failed")  # changed while in process: counted once
    assert len(queue) == 3
    for key in taken:
        queue.done(key)
    assert len(queue) == 1
    assert _drain(queue) == ["failed"] and len(queue) == 0


_OPERATIONS = st.lists(st.tuples(st.sampled_from(["add", "take", "done", "retry", "plan"]),
                                 st.sampled_from("abcd"), st.integers(0, 2)), max_size=60)


@given(_OPERATIONS)
@settings(max_examples=300, deadline=None)
def test_the_length_counts_each_key_waiting_or_in_process_once_and_each_backoff(
        operations: list[tuple[str, str, int]]) -> None:
    """Against a model of what the queue holds: the keys waiting, those in process (taken, not
    done), the backoffs not yet taken (due at once here: they join the waiting keys at the
    next take); a planned wake-up (in an hour) is no work."""
    queue = KeyQueue(base_delay=0.0)
    waiting: set[str] = set()
    in_process: list[str] = []
    backoffs: list[str] = []
    for operation, key, priority in operations:
        if operation == "add":
            queue.add(key, priority)
            waiting.add(key)
        elif operation == "take":
            waiting.update(backoffs)
            backoffs.clear()
            taken = queue.take()
            takeable = waiting - set(in_process)
            if taken is None:
                assert not takeable
            else:
                assert taken in takeable
                waiting.discard(str(taken))
                in_process.append(str(taken))
        elif operation == "done" and in_process:
            queue.done(in_process.pop(priority % len(in_process)))
        elif operation == "retry":
            queue.retry(key)
            backoffs.append(key)
        elif operation == "plan":
            queue.add_after(key, 3600, planned=True)
        assert len(queue) == len(waiting | set(in_process)) + len(backoffs)
