"""What is worth trying again after a failed API call (`RETRIED_STATUSES`: conflicts,
throttling, server errors), and `retrying`, for what runs outside a controller (a controller's
reconciles are retried by the runtime, with the key's backoff)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from annex.api_errors import ApiError
from annex.transport_errors import TransportError

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRIED_STATUSES = frozenset({409, 429, 500, 502, 503, 504})


async def retrying(action: Callable[[], Awaitable[T]], attempts: int = 6,
                   first_delay: float = 0.05) -> T:
    """Run `action` again (from a fresh read: it must re-fetch) after conflicts, throttling,
    server errors and connection failures, with exponential backoff: for what runs outside a
    controller, whose reconciles are retried by the runtime."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            return await action()
        except (TimeoutError, ApiError, TransportError) as error:
            retried = not isinstance(error, ApiError) or error.status in RETRIED_STATUSES
            if not retried or attempt == attempts - 1:
                raise
            log.debug("retrying after %s", error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")
