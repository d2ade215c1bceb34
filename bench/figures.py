"""The figures made of what a run measured, and how a scenario's rows print them: percentiles
of durations, requests and writes a pod, writes apart from heartbeats."""

from __future__ import annotations

from typing import Any

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
HEARTBEAT_RESOURCES = frozenset({"leases"})
Rows = list[tuple[str, str]]
"""A report's rows: (what, its figures)."""


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of durations in seconds, in milliseconds."""
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)
    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "max_ms": at(1.0)}


def spread(p: dict[str, float]) -> str:
    """`percentiles` as a report prints them."""
    return f"p50 {p.get('p50_ms')} ms, p90 {p.get('p90_ms')} ms, p99 {p.get('p99_ms')} ms"


def _writes(requests: dict[str, Any], heartbeat: bool) -> dict[str, int] | str:
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return {cluster: sum(n for key, n in found["by_verb"].items()
                         if key.split("|")[0] in WRITE_VERBS
                         and (key.split("|")[1].split("/")[0] in HEARTBEAT_RESOURCES) == heartbeat)
            for cluster, found in requests.items()}


def non_heartbeat_writes(requests: dict[str, Any]) -> dict[str, int] | str:
    return _writes(requests, heartbeat=False)


def heartbeat_writes(requests: dict[str, Any]) -> dict[str, int] | str:
    return _writes(requests, heartbeat=True)


def scale(values: dict[str, int] | str, factor: float) -> dict[str, float] | str:
    return values if isinstance(values, str) else {
        k: round(v * factor, 1) for k, v in values.items()}


def per_pod(requests: dict[str, Any], count: int) -> str:
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return " ".join(f"{cluster} {v['requests'] / count:.2f} ({v['writes'] / count:.2f} writes)"
                    for cluster, v in sorted(requests.items()))


def writes_per_object(requests: dict[str, Any], count: int) -> str:
    """Writes per object by cluster, verb and resource (what each object costs)."""
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return "; ".join(f"{cluster} " + ", ".join(
        f"{key} {n / count:.2f}" for key, n in sorted(v["by_verb"].items())
        if key.split("|")[0] in WRITE_VERBS and n >= count / 20)
        for cluster, v in sorted(requests.items()))


def profile_rows(profile: dict[str, Any] | None) -> Rows:
    """A phase's py-spy summary (`bench.profile.Profiler.stop`) as report rows."""
    if not profile:
        return []
    if "error" in profile:
        return [("  agent profile", profile["error"])]
    return [("  agent profile", f"{profile['samples']} samples: {profile['file']}"),
            *((f"  {what} {percent:5.1f} %", frame)
              for what in ("own", "total") for frame, percent in profile[what])]
