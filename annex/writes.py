"""The writes of a controller that shares a namespace with objects it does not own: each
tolerates exactly the answers that mean "someone got there first", so that no caller spells the
same status checks again.

- `create_or_refuse`: a create whose 409 is looked at: our own object (the watch lags) or a
  foreign one, which is never touched;
- `replace_or_create`: a replace whose 404 (deleted meanwhile: the mirror lagged) becomes a
  create;
- `delete_owned`: a delete of the object of one uid (a precondition): gone already (404) or
  replaced by another of that name (409) is done;
- `confirmed_gone`: the API server, not a mirror that may have missed an event, says an object
  is gone before anything is deleted for it (Liqo #2748).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from annex.api_errors import is_not_found, status_of
from annex.kubeapi import ClusterApi


class Foreign(Exception):
    """The name is taken by an object we do not own: left alone."""

    def __init__(self, existing: Mapping[str, Any]) -> None:
        self.existing = existing
        metadata = existing.get("metadata") or {}
        super().__init__(f"{metadata.get('namespace')}/{metadata.get('name')} is not ours")


async def create_or_refuse(api: ClusterApi, collection: str, path: str, body: dict[str, Any],
                           owned: Callable[[Mapping[str, Any]], bool]) -> tuple[Any, bool]:
    """Create `body` in `collection`: (the created object, True), or (the object at `path`,
    False) when it exists already and is `owned`; `Foreign` when it is not."""
    try:
        return await api.create(collection, body), True
    except Exception as error:
        if status_of(error) != 409:
            raise
    existing = await api.get(path)
    if not owned(existing):
        raise Foreign(existing)
    return existing, False


async def replace_or_create(api: ClusterApi, path: str, body: dict[str, Any],
                            create: Callable[[], Awaitable[Any]]) -> Any:
    """Replace the object at `path` with `body`; `create()` when it is gone."""
    try:
        return await api.replace(path, body)
    except Exception as error:
        if not is_not_found(error):
            raise
    return await create()


async def delete_owned(api: ClusterApi, path: str, uid: str | None,
                       options: Mapping[str, Any] | None = None) -> None:
    """Delete the object at `path` if it is still the one of `uid` (any, without a uid)."""
    body = {**(options or {}), **({"preconditions": {"uid": uid}} if uid else {})}
    try:
        await api.delete(path, body or None)
    except Exception as error:
        if not is_not_found(error) and status_of(error) != 409:
            raise


async def confirmed_gone(api: ClusterApi, path: str) -> bool:
    """True when the API server finds nothing at `path`."""
    try:
        await api.get(path)
    except Exception as error:
        if is_not_found(error):
            return True
        raise
    return False
