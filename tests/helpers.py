"""Helpers shared by every test: waiting on conditions with deadlines (never fixed sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    pass


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, message: str = "",
             interval: float = 0.02) -> T:
    """Poll `predicate` until it returns something truthy (returned) or `timeout` passes.

    Exceptions from the predicate count as "not yet"; the last one is chained to the timeout.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as error:  # noqa: BLE001 - "not yet" until the deadline
            last_error = error
        if time.monotonic() >= deadline:
            raise WaitTimeout(message or f"condition not met within {timeout}s") from last_error
        time.sleep(interval)
