"""What both components' admission webhook servers share."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

# kube-apiserver sends an AdmissionReview holding the object and, for updates, the old object:
# each up to the 3 MiB a request body may be, plus the review's own fields. aiohttp's default
# (1 MiB) would refuse the review of any object over about 1 MiB with 413.
ADMISSION_REVIEW_MAX_BYTES = 2 * 3 * 1024 * 1024 + 64 * 1024


def admission_application(middlewares: Sequence[Middleware] = ()) -> web.Application:
    """An aiohttp application that accepts AdmissionReviews of any object the API server
    stores (`middlewares`: what counts its requests, `annex.metrics.ServedRequests`)."""
    return web.Application(client_max_size=ADMISSION_REVIEW_MAX_BYTES,
                           middlewares=middlewares)


async def admission_request(request: web.Request) -> dict[str, Any]:
    """The `request` of the AdmissionReview posted to a webhook; 400 for anything else (the
    API server never sends that: a client that does is told, and nothing is decided)."""
    try:
        review = await request.json()
    except ValueError:
        review = None
    asked = review.get("request") if isinstance(review, dict) else None
    if not isinstance(asked, dict):
        raise web.HTTPBadRequest(text="expected an AdmissionReview with a request")
    return asked


async def serve_tls(app: web.Application, address: str, cert: str, key: str) -> web.AppRunner:
    """`app` served over TLS (`cert`, `key`: the serving pair the API server checks against the
    webhook's caBundle) on `address` (`host:port`, all interfaces without a host)."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "0.0.0.0", int(port), ssl_context=context).start()
    return runner
