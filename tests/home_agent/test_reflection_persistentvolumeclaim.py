"""The storage fabric's claim reflector as the resizer of the virtual class, one reconcile at a
time against recording fakes of both API servers (the watches are played by feeding the
mirrors): what the remote claim's resize shows on the home claim and volume, and a refused
expansion. The end-to-end behaviour with real processes is in tests/e2e/test_storage.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent
from home_agent.assembly import agent_routes, reflection_for
from home_agent.reflection.persistentvolumeclaim import PERSISTENTVOLUMECLAIM_RULES
from home_agent.reflection.reflector import Reflector
from home_agent.routes import declare_agent, declare_reflection
from shared.forge.persistentvolume import home_volume
from shared.wellknown import (
    SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
    VIRTUAL_STORAGE_PROVISIONER,
)
from tests.home_agent.test_reflection import (
    OURS,
    REMOTE,
    TWIN,
    FakeApi,
    _api_error,
    agent_with,
    listed,
)

NODE = f"liqo-{REMOTE}"
KEY = ("app", "data")
HOME_CLAIM_PATH = "/api/v1/namespaces/app/persistentvolumeclaims/data"
REMOTE_CLAIM_PATH = f"/api/v1/namespaces/{TWIN}/persistentvolumeclaims/data"
QUOTA_REFUSAL = ('admission webhook "claims.enforcer" denied the request: quota exceeded for '
                 'requests.storage: requested 2Gi, used 1Gi, limited 1Gi')


class Cluster(FakeApi):
    """A recording fake that also patches (status merge patches kept by path) and refuses the
    writes of `refused` paths as an admission webhook does (403)."""

    def __init__(self) -> None:
        super().__init__()
        self.patches: list[tuple[str, Any]] = []
        self.refused: set[str] = set()

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Any:
        self.calls.append(("patch", path))
        self.patches.append((path, copy.deepcopy(patch)))
        return patch

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        if path in self.refused:
            self.calls.append(("replace", path))
            error = _api_error(403)
            error.body["message"] = QUOTA_REFUSAL
            raise error
        return await super().replace(path, body)

    def events(self) -> dict[str, dict[str, Any]]:
        return {str(e["reason"]): e for path, e in self.objects.items() if "/events/" in path}


def _setup() -> tuple[Agent, Reflector, Cluster, Cluster]:
    home, remote = Cluster(), Cluster()
    agent = listed(agent_with(remote, home,
                              reflection_workers={PERSISTENTVOLUMECLAIM_RULES.flag: 1}))
    declare_agent(agent_routes(agent))
    reflection = reflection_for(agent, [PERSISTENTVOLUMECLAIM_RULES])
    declare_reflection(agent_routes(agent), reflection)
    return agent, reflection.reflectors["persistentvolumeclaims"], home, remote


REMOTE_BOUND = {"type": "RemoteClaimBound", "status": "True", "reason": "Bound",
                "message": f"remote claim {TWIN}/data is Bound",
                "lastTransitionTime": "2026-11-24T18:00:00Z"}


def _home_claim(request: str, capacity: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    """The home claim of the virtual class, bound by the home PV controller, showing its
    remote claim bound (and `conditions` before that)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "app", "uid": "home-uid",
                         "resourceVersion": "12",
                         "annotations": {STORAGE_PROVISIONER_ANNOTATION:
                                         VIRTUAL_STORAGE_PROVISIONER,
                                         SELECTED_NODE_ANNOTATION: NODE}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "liqo",
                     "volumeMode": "Filesystem", "volumeName": "pvc-home-uid",
                     "resources": {"requests": {"storage": request}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                       "capacity": {"storage": capacity},
                       "conditions": [*conditions, REMOTE_BOUND]}}


def _remote_claim(request: str, capacity: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    """Our copy in the twin namespace, bound by the provider's PV controller."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": TWIN, "uid": "remote-uid",
                         "resourceVersion": "40", "labels": dict(OURS)},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                     "volumeMode": "Filesystem", "volumeName": "pvc-remote-uid",
                     "resources": {"requests": {"storage": request}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                       "capacity": {"storage": capacity}, "conditions": list(conditions)}}


def _see(agent: Agent, home_claim: dict[str, Any], remote_claim: dict[str, Any]) -> None:
    """Both claims as the watches show them, and the home volume the agent provisioned."""
    informers = agent.informers
    informers.dispatch(HOME_SIDE, "persistentvolumeclaims", "ADDED", home_claim)
    informers.dispatch(REMOTE_SIDE, "persistentvolumeclaims", "ADDED", remote_claim)
    volume = home_volume(remote_claim, home_claim, NODE, REMOTE, VIRTUAL_STORAGE_PROVISIONER)
    volume["spec"]["capacity"] = dict(home_claim["status"]["capacity"])
    volume["status"] = {"phase": "Bound"}
    informers.dispatch(HOME_SIDE, "persistentvolumes", "ADDED", volume)


def _reconcile(reflector: Reflector) -> Any:
    return asyncio.run(reflector.reconcile(KEY))


def _status_patches(home: Cluster) -> list[Any]:
    return [patch for path, patch in home.patches if path == HOME_CLAIM_PATH + "/status"]


RESIZING = {"type": "Resizing", "status": "True", "lastTransitionTime": "2026-11-24T19:00:00Z"}


def test_the_remote_resize_shows_on_the_home_claim_then_its_grown_capacity() -> None:
    agent, reflector, home, remote = _setup()
    _see(agent, _home_claim("2Gi", "1Gi"), _remote_claim("2Gi", "1Gi", RESIZING))
    assert _reconcile(reflector) is None
    assert remote.writes() == []  # the expansion was written before
    assert _status_patches(home) == [{"metadata": {"resourceVersion": "12"},
                                      "status": {"conditions": [RESIZING, REMOTE_BOUND]}}]
    assert home.events() == {}
    home.patches.clear()

    _see(agent, _home_claim("2Gi", "1Gi", RESIZING), _remote_claim("2Gi", "2Gi"))
    assert _reconcile(reflector) is None
    volume_path, volume_patch = home.patches[0]  # the volume first, as a resizer writes it
    assert volume_path == "/api/v1/persistentvolumes/pvc-home-uid"
    assert volume_patch == {"spec": {"capacity": {"storage": "2Gi"}}}
    assert _status_patches(home) == [{"metadata": {"resourceVersion": "12"},
                                      "status": {"conditions": [REMOTE_BOUND],
                                                 "capacity": {"storage": "2Gi"}}}]
    assert "VolumeResizeSuccessful" in home.events()


def test_an_expansion_the_provider_refuses_shows_on_the_home_claim_and_nothing_else_breaks(
        ) -> None:
    agent, reflector, home, remote = _setup()
    remote.refused.add(REMOTE_CLAIM_PATH)
    _see(agent, _home_claim("2Gi", "1Gi"), _remote_claim("1Gi", "1Gi"))
    assert _reconcile(reflector) is not None  # retried with backoff
    assert remote.writes() == [("replace", REMOTE_CLAIM_PATH)]
    failed = home.events()["VolumeResizeFailed"]
    assert failed["type"] == "Warning" and "quota exceeded" in failed["message"]
    [patch] = _status_patches(home)
    [condition, remote_bound] = patch["status"]["conditions"]
    assert remote_bound == REMOTE_BOUND
    assert condition["type"] == "ControllerResizeError" and condition["status"] == "True"
    assert "quota exceeded" in condition["message"]
    assert "capacity" not in patch["status"]  # nor phase: the PV controller's
    assert [path for path, _ in home.patches] == [HOME_CLAIM_PATH + "/status"]  # no volume

    # the user goes back to the size the provider holds: the refusal is gone
    home.patches.clear()
    _see(agent, _home_claim("1Gi", "1Gi", condition), _remote_claim("1Gi", "1Gi"))
    assert _reconcile(reflector) is None
    assert _status_patches(home) == [{"metadata": {"resourceVersion": "12"},
                                      "status": {"conditions": [REMOTE_BOUND]}}]


def test_another_refused_update_is_a_failed_reflection_not_a_resize_error() -> None:
    agent, reflector, home, remote = _setup()
    remote.refused.add(REMOTE_CLAIM_PATH)
    labelled = _home_claim("1Gi", "1Gi")
    labelled["metadata"]["labels"] = {"tier": "gold"}
    _see(agent, labelled, _remote_claim("1Gi", "1Gi"))
    assert _reconcile(reflector) is not None
    assert "FailedReflection" in home.events()
    assert "VolumeResizeFailed" not in home.events()
    assert _status_patches(home) == []
