"""shared.forge.pod_inputs: what the decision on a pod reads, and the restart cache's fingerprint
of it: every input joins it unless it says it does not, an object by its resourceVersion, the
same in any process."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from shared.forge.pod import PodForgeConfig
from shared.forge.pod_inputs import Fingerprint, OffloadingInputs, PodInputs, fingerprint
from shared.forge.pod_status import StatusForgeConfig
from tests.shared.forge.test_pod_plan import (
    NODE,
    NOW,
    TWIN,
    a_claim,
    a_pod,
    inputs,
    its_shadow,
    offloading,
)


def _changed(value: Any) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, dict) and "metadata" in value:
        changed = copy.deepcopy(value)
        changed["metadata"]["resourceVersion"] = "99"
        return changed
    if isinstance(value, PodForgeConfig):
        return value.model_copy(update={"home_apiserver_host": "10.0.0.1"})
    if isinstance(value, StatusForgeConfig):
        return value.model_copy(update={"node_ip": "192.0.2.99"})
    if isinstance(value, OffloadingInputs):
        return dataclasses.replace(value, webhook_serves=not value.webhook_serves)
    if isinstance(value, tuple):
        return (*value, ("configmaps", TWIN, "other"))
    if isinstance(value, dict):
        return {**value, "other": None}
    if isinstance(value, frozenset):
        return value | {"other"}
    if isinstance(value, float):
        return value + 1
    if isinstance(value, datetime):
        return value.replace(year=2027)
    if value is None:
        return "something"
    raise AssertionError(f"no other value for {value!r}")


def _fields(obj: Any) -> list[tuple[str, Fingerprint]]:
    return [(each.name, each.metadata.get("fingerprint", Fingerprint.VALUE))
            for each in dataclasses.fields(obj)]


@pytest.mark.parametrize(("name", "form"), _fields(PodInputs))
def test_every_input_joins_the_fingerprint_unless_it_says_it_does_not(
        name: str, form: Fingerprint) -> None:
    base = inputs(shadow=its_shadow(a_pod()))
    base = dataclasses.replace(base, offloading=offloading())  # every input set
    other = dataclasses.replace(base, **{name: _changed(getattr(base, name))})
    assert (fingerprint(other) != fingerprint(base)) is (form is not Fingerprint.NONE)


@pytest.mark.parametrize(("name", "form"), _fields(OffloadingInputs))
def test_every_offloading_input_joins_the_fingerprint_unless_it_says_it_does_not(
        name: str, form: Fingerprint) -> None:
    base = offloading(returned_since=NOW, waiting_since=100.0, node={"metadata": {
        "name": NODE, "resourceVersion": "5"}}, claims={"data": a_claim("pv")})
    other = dataclasses.replace(base, **{name: _changed(getattr(base, name))})
    assert (fingerprint(inputs(offloading=other)) != fingerprint(inputs(offloading=base))) is (
        form is not Fingerprint.NONE)


def test_an_object_joins_the_fingerprint_by_its_resource_version_only() -> None:
    pod = a_pod()
    moved = a_pod(status={"phase": "Running"})  # what a watch never shows under one version
    assert fingerprint(inputs(pod)) == fingerprint(inputs(moved))


FINGERPRINT_OF_SKIP_LISTS = """
from shared.forge.metadata import ReflectionConfig
from shared.forge.pod_inputs import fingerprint
from tests.shared.forge.test_pod_plan import FORGE, inputs
skipping = ReflectionConfig(home_cluster_id="home", remote_cluster_id="remote",
                            labels_not_reflected=frozenset("abcdefgh"))
print(fingerprint(inputs(forge=FORGE.model_copy(update={"reflection": skipping}))))
"""


def test_the_fingerprint_is_the_same_in_another_process() -> None:
    """A restarted agent computes the same: sets are ordered by their content, not by the
    process's string hashes."""
    root = Path(__file__).resolve().parents[3]
    digests = {subprocess.run([sys.executable, "-c", FINGERPRINT_OF_SKIP_LISTS], cwd=root,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True,
                              capture_output=True, text=True).stdout
               for seed in ("1", "2", "3")}
    assert len(digests) == 1 and len(digests.pop().strip()) == 32
