"""A component's entry point freezes its imports out of the cyclic collector and makes young
passes rarer (annex.collector). Each case runs in a child process: the test process keeps its
own collector as it is."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

#: Each entry point with its work replaced by a probe of the collector, and the arguments its
#: parser needs.
ENTRY_POINTS = {
    "home_agent": ("run", "lambda config: probe()",
                   ["--remote-kubeconfig", "x", "--cluster-id", "a", "--remote-cluster-id", "b"]),
    "remote_enforcer": ("run", "lambda settings: asyncio.sleep(0, probe())",
                        ["--cluster-id", "a"]),
    "home_controller": ("_until_signalled", "lambda settings: asyncio.sleep(0, probe())", []),
}


def collector_state(code: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.split()


PROBE = """
import asyncio, gc
def probe():
    print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
    return 0
"""


def test_tuning_freezes_the_imports_and_makes_young_passes_rarer() -> None:
    untouched = [str(gc.get_threshold()[0]), "False"]  # CPython's own, as this process has it
    assert collector_state(PROBE + "probe()\nfrom annex import collector\n"
                           "collector.tune()\nprobe()") == [*untouched, "20000", "True"]


@pytest.mark.parametrize("component", list(ENTRY_POINTS))
def test_every_component_tunes_its_collector_before_it_starts_working(component: str) -> None:
    work, replacement, argv = ENTRY_POINTS[component]
    code = (PROBE + f"import {component}.__main__ as entry\n"
            f"entry.{work} = {replacement}\nentry.main({argv!r})")
    assert collector_state(code) == ["20000", "True"]
