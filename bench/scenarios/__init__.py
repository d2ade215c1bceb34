"""The scenarios of `python -m bench`, one module each: `run(bench)` measures and returns its
results, `rows(results)` says them in the report, `remote_pods(args)` is what it leaves at the
remote (the run checks the room first)."""

from __future__ import annotations

from typing import Any, Protocol

from bench.figures import Rows
from bench.harness import Bench
from bench.scenarios import (
    agents,
    configmaps,
    enforcer,
    failover,
    fragmented,
    idle,
    latency,
    offloading,
    pools,
    restart,
    storage,
    streams,
)


class Scenario(Protocol):
    async def run(self, bench: Bench) -> dict[str, Any]: ...

    def rows(self, result: dict[str, Any]) -> Rows: ...

    def remote_pods(self, args: Any) -> int: ...


SCENARIOS: dict[str, Scenario] = {
    "latency": latency, "offloading": offloading, "configmaps": configmaps,
    "restart": restart, "idle": idle, "streams": streams,
    "storage": storage, "enforcer": enforcer, "agents": agents, "failover": failover,
    "fragmented": fragmented, "pools": pools}
"""In the order they run (each leaves its objects for the next)."""
DEFAULT = ("latency", "offloading", "configmaps", "restart", "idle", "streams")
"""What a run runs unless told; the others run only when named."""


def remote_pods_needed(chosen: list[str], args: Any) -> dict[str, int]:
    """The pods each chosen scenario leaves at the remote (each keeps its pods for the next)."""
    return {name: SCENARIOS[name].remote_pods(args) for name in chosen}
