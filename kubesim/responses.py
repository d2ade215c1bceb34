"""What kubesim's HTTP handlers share (the API's router, the kubelet proxy, the metrics server,
the reviews, fault injection): JSON answers, a `StatusError` answered as kube-apiserver writes
it, and what the middlewares leave on a request (the authenticated user, a watch's write gate).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kubesim.apiserver import User
from kubesim.errors import StatusError
from kubesim.store import dumps

JSON = "application/json"
USER_KEY = web.RequestKey("kubesim.user", User)
# a middleware may store an awaitable factory here: the watch writer awaits it before each write
# and before ending the stream (fault injection holds a black-holed stream's bytes back)
WriteGate = Callable[[], Awaitable[None]]
WRITE_GATE_KEY: web.RequestKey[WriteGate] = web.RequestKey("kubesim.write_gate")


def json_response(body: bytes | dict[str, Any], status: int = 200) -> web.Response:
    raw = body if isinstance(body, bytes) else dumps(body)
    return web.Response(body=raw, status=status, content_type=JSON)


def status_response(error: StatusError) -> web.Response:
    """The Status, with Retry-After when a 429 or 5xx asks for a wait (responsewriters'
    ErrorNegotiated: details.retryAfterSeconds)."""
    response = json_response(error.to_status(), error.code)
    seconds = (error.details or {}).get("retryAfterSeconds")
    if (error.code == 429 or error.code >= 500) and isinstance(seconds, int) and seconds > 0:
        response.headers["Retry-After"] = str(seconds)
    return response
