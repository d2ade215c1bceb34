"""The agent's access to one cluster: the `kubernetes` client behind client-side rate limits,
run off the event loop, returning plain dicts (no model round-trips: they are slow and lossy)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from annex.kube import Connection, RateLimiter, api_client
from shared.api.resource import ResourceDefinition

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a failed API call, or None for connection-level failures."""
    return error.status if isinstance(error, ApiException) else None


def is_not_found(error: BaseException) -> bool:
    return status_of(error) == 404


def error_message(error: BaseException) -> str:
    """The apiserver's Status message when there is one (what a user should read)."""
    if isinstance(error, ApiException) and error.body:
        try:
            body = json.loads(error.body)
        except (TypeError, ValueError):
            return str(error.body)
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    return str(error)


def error_reason(error: BaseException) -> str:
    if isinstance(error, ApiException) and error.body:
        try:
            body = json.loads(error.body)
        except (TypeError, ValueError):
            return error.reason or "Error"
        if isinstance(body, dict) and body.get("reason"):
            return str(body["reason"])
    return getattr(error, "reason", None) or type(error).__name__


class ClusterApi:
    """One cluster. Every call waits for the rate limiter, then runs on the loop's executor."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.client = api_client(connection)
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        self.coordination = client.CoordinationV1Api(self.client)
        self._limiter = RateLimiter(connection.limits)

    async def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`function(*args, **kwargs)` with the raw JSON response decoded into dicts."""
        await self._limiter.acquire()
        kwargs.setdefault("_preload_content", False)
        bound = functools.partial(function, *args, **kwargs)
        response = await asyncio.get_running_loop().run_in_executor(None, bound)
        data = getattr(response, "data", b"")
        return json.loads(data) if data else None

    # --- custom resources of annex's kinds --------------------------------------------------

    async def create_custom(self, definition: ResourceDefinition, namespace: str,
                            body: dict[str, Any]) -> Any:
        return await self.call(self.custom.create_namespaced_custom_object, definition.group,
                               definition.version, namespace, definition.plural, body)

    async def patch_custom(self, definition: ResourceDefinition, namespace: str, name: str,
                           patch: dict[str, Any], *, status: bool = False) -> Any:
        method = (self.custom.patch_namespaced_custom_object_status if status
                  else self.custom.patch_namespaced_custom_object)
        return await self.call(method, definition.group, definition.version, namespace,
                               definition.plural, name, patch, _content_type=MERGE_PATCH)

    async def get_custom(self, definition: ResourceDefinition, namespace: str, name: str) -> Any:
        return await self.call(self.custom.get_namespaced_custom_object, definition.group,
                               definition.version, namespace, definition.plural, name)

    async def delete_custom(self, definition: ResourceDefinition, namespace: str, name: str,
                            *, uid: str | None = None) -> Any:
        body = {"preconditions": {"uid": uid}} if uid else None
        return await self.call(self.custom.delete_namespaced_custom_object, definition.group,
                               definition.version, namespace, definition.plural, name,
                               body=body)

    async def get_raw(self, path: str, timeout: float) -> None:
        """GET an unstructured path (e.g. /livez); raises on any failure or non-2xx answer."""
        await self._limiter.acquire()
        headers = {"Authorization": f"Bearer {self.connection.token}"} if (
            self.connection.token) else {}
        call = functools.partial(self.client.call_api, "GET", self.connection.server + path,
                                 header_params=headers, _request_timeout=timeout)
        response = await asyncio.get_running_loop().run_in_executor(None, call)
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason)

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]
