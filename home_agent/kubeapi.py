"""The agent's access to one cluster: plain JSON requests through the `kubernetes` client's
connection pool (TLS and credentials from the kubeconfig), behind client-side rate limits, run
off the event loop.

Requests carry dicts as they are: the client's typed models would re-serialise what they touch
(timestamps, unknown fields) and make an unchanged object look changed.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes.client.exceptions import ApiException

from annex.kube import Connection, RateLimiter, api_client
from shared.api.resource import ResourceDefinition

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = 30.0


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a failed API call, or None for connection-level failures."""
    return error.status if isinstance(error, ApiException) else None


def is_not_found(error: BaseException) -> bool:
    return status_of(error) == 404


def _status_body(error: BaseException) -> dict[str, Any]:
    if isinstance(error, ApiException) and error.body:
        try:
            body = json.loads(error.body)
        except (TypeError, ValueError):
            return {}
        return body if isinstance(body, dict) else {}
    return {}


def error_message(error: BaseException) -> str:
    """The apiserver's Status message when there is one (what a user should read)."""
    return str(_status_body(error).get("message") or error)


def error_reason(error: BaseException) -> str:
    return str(_status_body(error).get("reason") or getattr(error, "reason", None)
               or type(error).__name__)


def core_path(plural: str, namespace: str = "", name: str = "", subresource: str = "") -> str:
    return _path("/api/v1", plural, namespace, name, subresource)


def group_path(group: str, version: str, plural: str, namespace: str = "", name: str = "",
               subresource: str = "") -> str:
    return _path(f"/apis/{group}/{version}", plural, namespace, name, subresource)


def custom_path(definition: ResourceDefinition, namespace: str = "", name: str = "",
                subresource: str = "") -> str:
    return group_path(definition.group, definition.version, definition.plural, namespace, name,
                      subresource)


def _path(prefix: str, plural: str, namespace: str, name: str, subresource: str) -> str:
    parts = [prefix]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


class ClusterApi:
    """One cluster. Every request waits for the rate limiter, then runs on the loop's
    executor; a non-2xx answer raises the client's ApiException (with the Status body)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.client = api_client(connection)
        self._limiter = RateLimiter(connection.limits)
        self._headers = {"Accept": JSON}
        if connection.token:
            self._headers["Authorization"] = f"Bearer {connection.token}"

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = JSON, query: dict[str, Any] | None = None,
                      timeout: float = REQUEST_TIMEOUT) -> Any:
        await self._limiter.acquire()
        url = self.connection.server.rstrip("/") + path
        if query:
            url += "?" + urlencode(query)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = content_type
        call = functools.partial(self.client.rest_client.request, method, url, headers=headers,
                                 body=body, _request_timeout=timeout)
        response = await asyncio.get_running_loop().run_in_executor(None, call)
        data = response.read()
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode(errors="replace") if isinstance(data, bytes) else data

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, patch: dict[str, Any],
                    content_type: str = MERGE_PATCH) -> Any:
        return await self.request("PATCH", path, patch, content_type=content_type)

    async def delete(self, path: str, options: dict[str, Any] | None = None) -> Any:
        return await self.request("DELETE", path, options)

    async def healthy(self, timeout: float) -> None:
        """GET /livez; raises on any failure or non-2xx answer."""
        await self.request("GET", "/livez", timeout=timeout)

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]
