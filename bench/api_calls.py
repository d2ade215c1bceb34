"""The few calls the run makes beyond `ClusterApi`'s own: a create an earlier attempt may have
made, whether a path is served, how many objects a collection holds."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from annex.api_errors import ApiError
from annex.kubeapi import ClusterApi


async def created(call: Awaitable[Any]) -> None:
    """A create whose 409 means an earlier attempt went through (or a run before made it)."""
    try:
        await call
    except ApiError as error:
        if error.status != 409:
            raise


async def readable(api: ClusterApi, path: str) -> bool:
    try:
        await api.get(path)
        return True
    except ApiError:
        return False


async def count_objects(api: ClusterApi, path: str) -> int:
    """How many objects a collection holds, from a list of one (its remainingItemCount)."""
    listed = await api.request("GET", path, query={"limit": 1}) or {}
    return len(listed.get("items") or []) + int(
        (listed.get("metadata") or {}).get("remainingItemCount") or 0)
