"""kopf's requests counted with ClusterApi's (`annex.kubeapi.RequestMetrics`): kopf talks to the
API server through an aiohttp session of its own, which the request counters never see. Its
login hands kopf a session built as kopf builds its own from the same credentials, with an
aiohttp trace that counts each request when its answer comes (or it fails) and times it, as
client-go counts and times a component's requests. Watches are counted, not timed (their answer
is a stream), as ClusterApi's."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

import aiohttp
from yarl import URL

from annex.kubeapi import RequestMetrics

if TYPE_CHECKING:  # kopf is imported by who uses it: the agent does not, and it costs memory
    import kopf


def _host(url: URL) -> str:
    """host[:port] as the kubeconfig's server names it (ClusterApi's `host` label)."""
    port = url.explicit_port
    return f"{url.raw_host}:{port}" if port else str(url.raw_host or "")


def _watch(url: URL) -> bool:
    return url.query.get("watch", "").lower() in ("true", "1")


def request_trace(requests: RequestMetrics) -> aiohttp.TraceConfig:
    """An aiohttp trace that counts a session's requests into `requests`."""
    trace = aiohttp.TraceConfig()

    async def started(_: aiohttp.ClientSession, context: SimpleNamespace,
                      params: aiohttp.TraceRequestStartParams) -> None:
        context.started = time.monotonic()

    def counted(context: SimpleNamespace, method: str, url: URL, code: str) -> None:
        watch = _watch(url)
        requests.count(_host(url), method, url.path, code, watch=watch)
        if not watch:
            requests.observe(_host(url), method, time.monotonic() - context.started)

    async def answered(_: aiohttp.ClientSession, context: SimpleNamespace,
                       params: aiohttp.TraceRequestEndParams) -> None:
        counted(context, params.method, params.url, str(params.response.status))

    async def failed(_: aiohttp.ClientSession, context: SimpleNamespace,
                     params: aiohttp.TraceRequestExceptionParams) -> None:
        counted(context, params.method, params.url, "<error>")

    trace.on_request_start.append(started)
    trace.on_request_end.append(answered)
    trace.on_request_exception.append(failed)
    trace.freeze()
    return trace


def counted_session(info: kopf.ConnectionInfo, requests: RequestMetrics) -> kopf.AiohttpSession:
    """What a kopf login returns instead of `info`: a session as kopf would open for it (its
    APIContext's), whose requests are counted. kopf closes it when it logs in again (a 401) or
    stops. Call it on kopf's event loop (an async login handler)."""
    import kopf  # noqa: PLC0415

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(), auth=info.as_aiohttp_basic_auth(),
        proxy=info.proxy_url, trust_env=info.trust_env, trace_configs=[request_trace(requests)])
    return kopf.AiohttpSession(server=info.server, default_namespace=info.default_namespace,
                               priority=info.priority, expiration=info.expiration,
                               aiohttp_session=session)
