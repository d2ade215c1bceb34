"""Run a component with its API requests, watch events, reconciles and event-loop stalls traced:
what `python -m bench --trace` runs the agent with, to tell where its added latency goes (the
watch, its queue, its own work, the API server's answer).

    python -m bench.trace TRACE_FILE MODULE [ARGS...]   # as python -m MODULE ARGS...

It appends JSON lines to TRACE_FILE, times from time.monotonic() (CLOCK_MONOTONIC: one clock for
every process of the machine, so they compare with the benchmark's own):
- ["request", started, answered, method, path, name]: every ClusterApi request (`name`: the
  created object's, for a POST);
- ["event", received, path, type, namespace, name, phase]: every watch event (`phase`: a pod's,
  or a ShadowPod's pod status phase);
- ["reconcile", started, ended, controller, key]: every key a controller reconciles;
- ["stall", at, seconds, thread]: the event loop ran nothing else for more than STALL seconds
  (a watch event waits that long before it is read).
Only for measurements: it wraps the components' classes at start-up and changes nothing else.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TextIO

STALL = 0.002
"""Seconds past its wake-up time after which the monitor's timer counts the loop as stalled."""
TICK = 0.005
"""The stall monitor's timer: often enough to see stalls, rarely enough to cost little."""


def _phase(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    return str((status.get("podStatus") or status).get("phase") or "")


def install(out: TextIO) -> None:
    from annex.controller import Controller
    from annex.kubeapi import ClusterApi

    lock = threading.Lock()

    def write(*record: Any) -> None:
        line = json.dumps(record)
        with lock:
            out.write(line + "\n")

    request, watch, process = ClusterApi.request, ClusterApi.watch, Controller.process

    async def traced_request(self: ClusterApi, method: str, path: str, body: Any = None,
                             **options: Any) -> Any:
        started = time.monotonic()
        try:
            return await request(self, method, path, body, **options)
        finally:
            name = ((body.get("metadata") or {}).get("name") or ""
                    if isinstance(body, dict) and method == "POST" else "")
            write("request", started, time.monotonic(), method, path, name)

    async def traced_watch(self: ClusterApi, path: str, *args: Any,
                           **options: Any) -> AsyncIterator[dict[str, Any]]:
        async for event in watch(self, path, *args, **options):
            obj = event.get("object") or {}
            metadata = obj.get("metadata") or {}
            write("event", time.monotonic(), path, event.get("type"),
                  metadata.get("namespace"), metadata.get("name"), _phase(obj))
            yield event

    async def traced_process(self: Controller[Any], key: Any) -> None:
        started = time.monotonic()
        try:
            await process(self, key)
        finally:
            write("reconcile", started, time.monotonic(), self.name, repr(key))

    async def stalls() -> None:
        thread = threading.current_thread().name
        while True:
            due = time.monotonic() + TICK
            await asyncio.sleep(TICK)
            late = time.monotonic() - due
            if late > STALL:
                write("stall", due, late, thread)

    run = asyncio.run

    def traced_run(main: Coroutine[Any, Any, Any], **options: Any) -> Any:
        async def watched() -> Any:
            monitor = asyncio.create_task(stalls())
            try:
                return await main
            finally:
                monitor.cancel()
        return run(watched(), **options)

    ClusterApi.request = traced_request  # type: ignore[method-assign]
    ClusterApi.watch = traced_watch  # type: ignore[method-assign]
    Controller.process = traced_process  # type: ignore[method-assign]
    asyncio.run = traced_run


def read(trace: Path) -> list[list[Any]]:
    """The records of a trace file (a line cut short by a killed process is skipped)."""
    records = []
    for line in trace.read_text().splitlines() if trace.exists() else []:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


AGENT_STEPS = (
    "1 watch: bound → the agent reads the pod", "1 agent: read → its reconcile starts",
    "1 agent: reconcile → ShadowPod POST sent", "1 API: ShadowPod POST",
    "1 watch: answered → the benchmark reads it",
    "2 watch: status Running, the agent's read − the benchmark's",
    "2 agent: read → its reconcile starts", "2 agent: reconcile → pods/status PUT sent",
    "2 API: pods/status PUT", "2 watch: answered → the benchmark reads home Running")
"""The agent's path, direction 1 (bound → ShadowPod) then 2 (ShadowPod status Running → home
pod Running), each step's start and end from the agent's trace and the benchmark's watches."""
BARE_STEPS = (
    "1 bound → ShadowPod POST sent", "1 API: ShadowPod POST",
    "1 watch: answered → the benchmark reads it",
    "2 remote pod Running read → pods/status PATCH sent", "2 API: pods/status PATCH",
    "2 watch: answered → the benchmark reads home Running")


def first(found: dict[str, float], name: str, at: float) -> None:
    found.setdefault(name, at)


def breakdown(agent: list[list[Any]], bench: list[list[Any]], paths: dict[str, str],
              times: dict[str, dict[str, float]]) -> dict[str, dict[str, list[float]]]:
    """Per path (agent, bare), per step in order, the seconds each latency pod spent there.

    `paths`: the agent's home namespace and twin, the bare client's (keys namespace, twin,
    bare_namespace, bare_twin); `times`, per latency pod name, from the benchmark's watches:
    created (bound), shadowpod (seen), remote_running (remote pod Running), shadowpod_running
    (ShadowPod status Running), home_running. The agent's steps come from its trace, the bare
    client's from the benchmark's own (its requests are the benchmark's)."""
    added: dict[str, float] = {}
    seen_running: dict[str, float] = {}
    posted: dict[str, tuple[float, float]] = {}
    reconciles: dict[str, list[float]] = {}
    puts: dict[str, list[tuple[float, float]]] = {}
    pods = f"/namespaces/{paths['namespace']}/pods/"
    for record in agent:
        kind = record[0]
        if kind == "event" and record[2].endswith("/pods") and record[3] == "ADDED" and (
                record[4] == paths["namespace"]):
            first(added, record[5], record[1])
        elif kind == "event" and record[2].endswith("/shadowpods") and record[6] == "Running":
            first(seen_running, record[5], record[1])
        elif kind == "request" and record[3] == "POST" and record[4].endswith(
                f"/namespaces/{paths['twin']}/shadowpods"):
            posted.setdefault(record[5], (record[1], record[2]))
        elif kind == "request" and record[3] == "PUT" and pods in record[4] and record[
                4].endswith("/status"):
            puts.setdefault(record[4].split("/")[-2], []).append((record[1], record[2]))
        elif kind == "reconcile" and record[3] == "agent" and record[4].startswith("('pod', "):
            reconciles.setdefault(record[4].split("'")[-2], []).append(record[1])

    def after(moments: list[float], at: float) -> float | None:
        return next((m for m in sorted(moments) if m >= at), None)

    agent_steps: dict[str, list[float]] = {step: [] for step in AGENT_STEPS}

    def step(steps: dict[str, list[float]], name: str, value: float | None) -> None:
        if value is not None:
            steps[name].append(value)

    for name, t in times.items():
        if not name.startswith("lat-agent-") or name not in added or name not in posted:
            continue
        reconcile = after(reconciles.get(name, []), added[name])
        step(agent_steps, "1 watch: bound → the agent reads the pod", added[name] - t["created"])
        if reconcile is not None:
            step(agent_steps, "1 agent: read → its reconcile starts", reconcile - added[name])
            step(agent_steps, "1 agent: reconcile → ShadowPod POST sent",
                 posted[name][0] - reconcile)
        step(agent_steps, "1 API: ShadowPod POST", posted[name][1] - posted[name][0])
        step(agent_steps, "1 watch: answered → the benchmark reads it",
             t["shadowpod"] - posted[name][1])
        if name not in seen_running or "shadowpod_running" not in t:
            continue
        step(agent_steps, "2 watch: status Running, the agent's read − the benchmark's",
             seen_running[name] - t["shadowpod_running"])
        reconcile = after(reconciles.get(name, []), seen_running[name])
        put = next(((s, e) for s, e in sorted(puts.get(name, [])) if s >= seen_running[name]),
                   None)
        if reconcile is not None and put is not None:
            step(agent_steps, "2 agent: read → its reconcile starts",
                 reconcile - seen_running[name])
            step(agent_steps, "2 agent: reconcile → pods/status PUT sent", put[0] - reconcile)
        if put is not None:
            step(agent_steps, "2 API: pods/status PUT", put[1] - put[0])
            step(agent_steps, "2 watch: answered → the benchmark reads home Running",
                 t["home_running"] - put[1])
    bare_posts: dict[str, tuple[float, float]] = {}
    bare_patches: dict[str, tuple[float, float]] = {}
    for record in bench:
        if record[0] != "request":
            continue
        if record[3] == "POST" and record[4].endswith(f"/namespaces/{paths['bare_twin']}/"
                                                      "shadowpods"):
            bare_posts.setdefault(record[5], (record[1], record[2]))
        elif record[3] == "PATCH" and f"/namespaces/{paths['bare_namespace']}/pods/" in record[
                4] and record[4].endswith("/status"):
            bare_patches.setdefault(record[4].split("/")[-2], (record[1], record[2]))
    bare_steps: dict[str, list[float]] = {step: [] for step in BARE_STEPS}
    for name, t in times.items():
        if not name.startswith("lat-bare-") or name not in bare_posts:
            continue
        sent, answered = bare_posts[name]
        step(bare_steps, "1 bound → ShadowPod POST sent", sent - t["created"])
        step(bare_steps, "1 API: ShadowPod POST", answered - sent)
        step(bare_steps, "1 watch: answered → the benchmark reads it", t["shadowpod"] - answered)
        if name in bare_patches and "remote_running" in t:
            sent, answered = bare_patches[name]
            step(bare_steps, "2 remote pod Running read → pods/status PATCH sent",
                 sent - t["remote_running"])
            step(bare_steps, "2 API: pods/status PATCH", answered - sent)
            step(bare_steps, "2 watch: answered → the benchmark reads home Running",
                 t["home_running"] - answered)
    return {"agent": agent_steps, "bare": bare_steps}


def stalls(agent: list[list[Any]], start: float, end: float) -> dict[str, float]:
    """The agent's event-loop stalls between two moments: how many, their seconds in all, the
    longest."""
    found = [record[2] for record in agent if record[0] == "stall" and start <= record[1] <= end]
    return {"count": len(found), "seconds": round(sum(found), 3),
            "longest_ms": round(max(found, default=0.0) * 1000, 1)}


def main() -> None:
    trace, module, *args = sys.argv[1:]
    install(open(trace, "a", buffering=1))  # noqa: SIM115 - open for the process's life
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
