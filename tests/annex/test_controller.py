"""The reconcile runtime both components run on: what a `Result` or an exception makes of a key,
the sync gate, and the counts /metrics shows."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from annex.controller import DONE, RETRY, Controller, Result
from annex.workqueue import KeyQueue
from tests.helpers import until


async def running(controller: Controller[str]) -> asyncio.Task[None]:
    return asyncio.create_task(controller.run())


async def stopped(controller: Controller[str], task: asyncio.Task[None]) -> None:
    controller.stop()
    async with asyncio.timeout(5):
        await task


async def test_a_done_key_leaves_the_queue_empty() -> None:
    seen: list[str] = []

    async def reconcile(key: str) -> Result:
        seen.append(key)
        return DONE

    controller = Controller("t", reconcile, workers=2)
    task = await running(controller)
    controller.add("a")
    controller.add("b")
    await until(lambda: sorted(seen) == ["a", "b"] and len(controller) == 0,
                "a and b reconciled, nothing left")
    assert controller.outcomes() == {"success": 2}
    await stopped(controller, task)


async def test_an_exception_is_retried_after_a_backoff_and_reported() -> None:
    attempts: list[str] = []
    reported: list[tuple[Hashable, str]] = []

    async def reconcile(key: str) -> None:
        attempts.append(key)
        if len(attempts) < 3:
            raise RuntimeError("boom")

    async def on_error(key: str, error: Exception) -> None:
        reported.append((key, str(error)))

    controller = Controller("t", reconcile, workers=1, on_error=on_error,
                            queue=KeyQueue(base_delay=0.01))
    task = await running(controller)
    controller.add("a")
    await until(lambda: len(attempts) == 3 and len(controller) == 0,
                "three attempts, nothing left")
    assert reported == [("a", "boom"), ("a", "boom")]
    assert controller.outcomes() == {"error": 2, "success": 1}
    await stopped(controller, task)


async def test_a_failing_report_does_not_stop_the_worker() -> None:
    attempts: list[str] = []

    async def reconcile(key: str) -> None:
        attempts.append(key)
        if key == "bad" and attempts.count("bad") == 1:
            raise RuntimeError("boom")

    async def on_error(key: str, error: Exception) -> None:
        raise RuntimeError("reporting failed")

    controller = Controller("t", reconcile, workers=1, on_error=on_error,
                            queue=KeyQueue(base_delay=0.01))
    task = await running(controller)
    controller.add("bad")
    controller.add("good")
    await until(lambda: attempts.count("bad") == 2 and "good" in attempts
                and len(controller) == 0, "bad tried twice, good once, nothing left")
    await stopped(controller, task)


async def test_retry_backs_off_and_counts_as_pending_work() -> None:
    attempts: list[str] = []

    async def reconcile(key: str) -> Result:
        attempts.append(key)
        return RETRY if len(attempts) == 1 else DONE

    controller = Controller("t", reconcile, workers=1, queue=KeyQueue(base_delay=0.2))
    task = await running(controller)
    controller.add("a")
    await until(lambda: len(attempts) == 1 and controller.queue.timers() == 1,
                "a first attempt and its backoff")
    assert len(controller) == 1  # backing off is not converged
    await until(lambda: len(attempts) == 2 and len(controller) == 0,
                "a second attempt, nothing left")
    assert controller.outcomes() == {"retry": 1, "success": 1}
    await stopped(controller, task)


async def test_requeue_after_is_a_planned_look_not_pending_work() -> None:
    attempts: list[str] = []

    async def reconcile(key: str) -> Result:
        attempts.append(key)
        return Result(requeue_after=0.1) if len(attempts) == 1 else DONE

    controller = Controller("t", reconcile, workers=1)
    task = await running(controller)
    controller.add("a")
    await until(lambda: len(attempts) == 1 and controller.queue.timers() == 1,
                "a first attempt and its backoff")
    assert len(controller) == 0
    await until(lambda: len(attempts) == 2, "a second attempt")
    await stopped(controller, task)


async def test_a_key_is_held_until_it_is_ready_and_not_reconciled_meanwhile() -> None:
    ready = False
    attempts: list[str] = []

    async def reconcile(key: str) -> None:
        attempts.append(key)

    controller = Controller("t", reconcile, workers=1, ready=lambda key: ready)
    task = await running(controller)
    controller.add("a")
    controller.add("b")
    # both taken from the queue, neither reconciled: parked, still counted
    await until(lambda: not controller.queue.pending() and len(controller) == 2,
                "a and b taken and parked")
    controller.add("a")  # an event while parked: still one key, still in process
    assert attempts == [] and len(controller) == 2
    ready = True
    await until(lambda: sorted(attempts) == ["a", "b"] and len(controller) == 0,
                "a and b reconciled once ready, nothing left")
    await stopped(controller, task)


async def test_a_key_added_while_it_runs_runs_once_more_afterwards() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    attempts: list[str] = []

    async def reconcile(key: str) -> None:
        attempts.append(key)
        if len(attempts) == 1:
            started.set()
            await release.wait()

    controller = Controller("t", reconcile, workers=4)
    task = await running(controller)
    controller.add("a")
    await started.wait()
    controller.add("a")
    controller.add("a")
    await asyncio.sleep(0)  # the other workers may look: "a" is in process, not theirs
    assert attempts == ["a"]
    release.set()
    await until(lambda: len(attempts) == 2 and len(controller) == 0,
                "a run once more, nothing left")
    await stopped(controller, task)


def test_workers_must_be_positive() -> None:
    async def reconcile(key: str) -> None:
        return None

    with pytest.raises(ValueError, match="workers must be at least 1"):
        Controller("t", reconcile, workers=0)


async def test_keys_of_one_gate_are_released_together_asking_ready_once_per_gate() -> None:
    listed: set[str] = set()
    asked: list[str] = []
    attempts: list[tuple[str, int]] = []

    def ready(key: tuple[str, int]) -> bool:
        asked.append(key[0])
        return key[0] in listed

    async def reconcile(key: tuple[str, int]) -> None:
        attempts.append(key)

    controller: Controller[tuple[str, int]] = Controller(
        "t", reconcile, workers=2, ready=ready, gate=lambda key: key[0])
    task = asyncio.create_task(controller.run())
    for number in range(100):
        controller.add(("pod", number))
        controller.add(("node", number))
    await until(lambda: not controller.queue.pending() and len(controller) == 200,
                "200 keys taken and parked")
    asked.clear()
    controller.release_parked()
    assert sorted(asked) == ["node", "pod"]  # once per gate, not once per key
    listed.add("node")
    controller.release_parked()
    await until(lambda: len(attempts) == 100, "the node keys reconciled")
    assert {kind for kind, _ in attempts} == {"node"}
    listed.add("pod")
    await until(lambda: len(attempts) == 200 and len(controller) == 0,
                "the pod keys reconciled too, nothing left")
    controller.stop()
    async with asyncio.timeout(5):
        await task


async def test_no_key_is_taken_until_the_controller_is_synced() -> None:
    synced = False
    asked: list[bool] = []
    attempts: list[str] = []

    def is_synced() -> bool:
        asked.append(synced)
        return synced

    async def reconcile(key: str) -> None:
        attempts.append(key)

    controller = Controller("t", reconcile, workers=2, synced=is_synced)
    for key in ("a", "b", "c"):
        controller.add(key)
    task = await running(controller)
    # each worker looked twice, keys already queued
    await until(lambda: len(asked) >= 4, "both workers asking twice whether synced")
    assert attempts == [] and controller.queue.pending()  # untouched, still in the queue
    synced = True
    await until(lambda: sorted(attempts) == ["a", "b", "c"] and len(controller) == 0,
                "a, b and c reconciled once synced, nothing left")
    await stopped(controller, task)
