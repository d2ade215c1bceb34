"""Helpers shared by every test: waiting on conditions with deadlines (never fixed sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLLING_SHARE = 0.25
"""At most this share of a wait is spent polling: a costly predicate (a listing of hundreds of
objects) is asked less often, as the in-process kubesim that answers it also serves the
components being waited on; a cheap one is asked every `interval`."""

SLOWEST_POLL_INTERVAL = 0.5  # seconds: how late an expensive predicate may see its condition


class WaitTimeout(AssertionError):
    pass


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, message: str = "",
             interval: float = 0.02) -> T:
    """Poll `predicate` until it returns something truthy (returned) or `timeout` passes.

    Exceptions from the predicate count as "not yet"; the last one is chained to the timeout.
    Between polls it waits `interval`, or longer for a predicate that takes long itself (see
    POLLING_SHARE), never past the deadline.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        started = time.monotonic()
        try:
            result = predicate()
            if result:
                return result
        except Exception as error:  # noqa: BLE001 - "not yet" until the deadline
            last_error = error
        now = time.monotonic()
        if now >= deadline:
            raise WaitTimeout(f"not within {timeout}s: {message or described(predicate)}"
                              ) from last_error
        cost = now - started
        pause = max(interval, min(cost * (1 - POLLING_SHARE) / POLLING_SHARE,
                                  SLOWEST_POLL_INTERVAL))
        time.sleep(min(pause, deadline - now))


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0,
                interval: float = 0.005) -> None:
    """Poll `condition` on the event loop until it holds, at most `timeout` seconds; a failure
    names `what` it waited for."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() >= deadline:
            raise WaitTimeout(f"not within {timeout}s: {what}")
        await asyncio.sleep(interval)


def described(predicate: Callable[..., object]) -> str:
    """What a predicate waits for, as its source says it (a lambda's line), for a timeout's
    message."""
    try:
        return " ".join(inspect.getsource(predicate).split())[:300]
    except (OSError, TypeError):
        return getattr(predicate, "__qualname__", repr(predicate))


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now: held open together while picked, as ports
    picked one after another may be the same one twice."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


def free_port() -> int:
    [port] = free_ports(1)
    return port


def refusal(write: Callable[[], object], status: int = 403) -> str:
    """The message of the refusal that `write` (a kubernetes client call) must get: 403
    Forbidden, or `status` (422 Invalid...)."""
    from kubernetes.client.rest import ApiException
    try:
        write()
    except ApiException as error:
        assert error.status == status, error.body
        return str(json.loads(error.body)["message"])
    raise AssertionError("the write was allowed")


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A /metrics exposition's samples, parsed by prometheus_client: (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, /,
           **labels: str) -> float | None:
    """The value of series `name{labels}` among `samples` (None: not exported)."""
    return samples.get((name, frozenset(labels.items())))
