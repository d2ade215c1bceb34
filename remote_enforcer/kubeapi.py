"""A small async REST client for the enforcer's reads and writes (aiohttp, JSON), throttled by
the client QPS/burst limiter. kopf does the watching; this does the fetching and writing."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import aiohttp
import kopf

from annex.kube import RateLimiter

log = logging.getLogger(__name__)
T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body.get('message', body)}")
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", ""))


def path(group: str, version: str, plural: str, namespace: str = "", name: str = "",
         subresource: str = "") -> str:
    """The REST path of a collection or object (`group` "" is the core API)."""
    parts = ["/api/v1" if not group else f"/apis/{group}/{version}"]
    if namespace:
        parts.append(f"namespaces/{quote(namespace)}")
    parts.append(plural)
    if name:
        parts.append(quote(name))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


class KubeApi:
    def __init__(self, login: kopf.ConnectionInfo, limiter: RateLimiter) -> None:
        self._server = login.server.rstrip("/")
        self._headers = {**login.as_http_headers(), "Accept": "application/json"}
        self._ssl = login.as_ssl_context()
        self._limiter = limiter
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeApi:
        self._session = aiohttp.ClientSession(
            headers=self._headers, connector=aiohttp.TCPConnector(ssl=self._ssl, limit=100))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, url_path: str, body: Any = None,
                      content_type: str = "application/json",
                      query: dict[str, str] | None = None) -> dict[str, Any]:
        assert self._session is not None, "use `async with KubeApi(...)`"
        if method != "GET":
            await self._limiter.acquire()
        url = self._server + url_path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body)
        async with self._session.request(method, url, data=data,
                                         headers={"Content-Type": content_type}) as response:
            payload = await response.json(content_type=None)
            if response.status >= 400:
                raise ApiError(response.status, payload if isinstance(payload, dict) else {})
            return payload if isinstance(payload, dict) else {}

    async def get(self, url_path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self.request("GET", url_path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def list(self, url_path: str, label_selector: str = "") -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else None
        return list((await self.request("GET", url_path, query=query)).get("items") or [])

    async def create(self, url_path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", url_path, body)

    async def patch(self, url_path: str, body: Any,
                    content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return await self.request("PATCH", url_path, body, content_type)

    async def delete(self, url_path: str) -> bool:
        """Delete; False when it was already gone."""
        try:
            await self.request("DELETE", url_path)
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            raise


RETRIED_STATUSES = frozenset({409, 429, 500, 502, 503, 504})


async def retrying(action: Callable[[], Awaitable[T]], attempts: int = 6,
                   first_delay: float = 0.05) -> T:
    """Run `action` again (from a fresh read: it must re-fetch) after conflicts, throttling and
    server errors, with exponential backoff. kopf does not retry event handlers, so a
    reconcile that lost a race must retry itself."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            return await action()
        except (ApiError, aiohttp.ClientError) as error:
            retried = not isinstance(error, ApiError) or error.status in RETRIED_STATUSES
            if not retried or attempt == attempts - 1:
                raise
            log.debug("retrying after %s", error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


async def watch_lines(api: KubeApi, url_path: str, resource_version: str,
                      timeout_seconds: int = 300) -> AsyncIterator[dict[str, Any]]:
    """The events of one watch request from `resource_version`, bookmarks included."""
    assert api._session is not None  # noqa: SLF001 - same module
    query = urlencode({"watch": "true", "resourceVersion": resource_version,
                       "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)})
    async with api._session.get(f"{api._server}{url_path}?{query}",  # noqa: SLF001
                                timeout=aiohttp.ClientTimeout(total=None,
                                                              sock_read=timeout_seconds + 30),
                                ) as response:
        if response.status == 410:
            raise WatchExpired()
        if response.status >= 400:
            payload = await response.json(content_type=None)
            raise ApiError(response.status, payload if isinstance(payload, dict) else {})
        async for line in response.content:
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                if (event.get("object") or {}).get("code") == 410:
                    raise WatchExpired()
                raise ApiError(int((event.get("object") or {}).get("code") or 500),
                               event.get("object") or {})
            yield event
