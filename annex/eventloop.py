"""Both components' event loops are uvloop's: every loop they run (one per watch thread in the
agent) serves many HTTPS connections, and asyncio's own TLS transport and loop were the largest
share of the components' CPU after their own work (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio

import uvloop


def install() -> None:
    """Make `asyncio.run` and `asyncio.new_event_loop` create uvloop loops, in every thread."""
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
