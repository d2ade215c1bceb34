"""The generic reflector's rules, one reconcile at a time, against a recording fake of the
remote API (the watches are played by feeding the mirrors). The end-to-end behaviour with real
processes is in tests/e2e/test_reflection.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from annex.api_errors import ApiError
from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent
from home_agent.assembly import COMPANIONS, agent_figures, agent_routes, peering_of, reflection_for
from home_agent.config import REFLECTED_KINDS, AgentConfig, parse_config
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.kinds import KINDS
from home_agent.reflection.reflector import Reflector
from home_agent.reflection.secret import SECRET_RULES
from home_agent.routes import declare_agent, declare_reflection, declare_reflector
from home_agent.watches import OFFLOADED_WATCH, TWINS_WATCH
from shared.api.builtin import CONFIGMAPS, SECRETS
from shared.reflection_policy import ReflectionType
from shared.wellknown import DESTINATION_CLUSTER_LABEL, ORIGIN_CLUSTER_LABEL

HOME, REMOTE = "home-1", "remote-1"
OURS = {ORIGIN_CLUSTER_LABEL: HOME, DESTINATION_CLUSTER_LABEL: REMOTE}
TWIN = "app-home-1"


def _api_error(status: int) -> ApiError:
    return ApiError(status, {"message": f"status {status}", "reason": "Failure"})


class FakeApi:
    """Remote objects by path; every write recorded as (verb, path)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.failing: set[str] = set()

    def _check(self, verb: str, path: str) -> None:
        self.calls.append((verb, path))
        if path in self.failing:
            raise _api_error(500)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        full = f"{path}/{body['metadata']['name']}"
        self._check("create", full)
        if full in self.objects:
            raise _api_error(409)
        self.objects[full] = copy.deepcopy(body)
        return body

    async def get(self, path: str) -> Any:
        if path not in self.objects:
            raise _api_error(404)
        return copy.deepcopy(self.objects[path])

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        self._check("replace", path)
        self.objects[path] = copy.deepcopy(body)
        return body

    async def delete(self, path: str, options: Any = None) -> Any:
        self._check("delete", path)
        self.objects.pop(path, None)

    def writes(self) -> list[tuple[str, str]]:
        return [call for call in self.calls if call[0] != "event"]


class FakeHome(FakeApi):
    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("event", body["reason"] + ":" + body["involvedObject"]["name"]))
        return body


def _agent(**config: Any) -> tuple[Agent, FakeApi, FakeHome]:
    remote, home = FakeApi(), FakeHome()
    return agent_with(remote, home, **config), remote, home


def agent_with(remote: Any, home: Any, **config: Any) -> Agent:
    """An agent on these fake API servers, namespace `app` extended to TWIN."""
    agent = Agent(AgentConfig(HOME, REMOTE, "unused", **config), home, remote)
    agent.mirrors.namespace_maps.apply("ADDED", {
        "metadata": {"namespace": agent.tenant_namespace, "name": agent.namespace_map_name},
        "spec": {"desiredMapping": {"app": TWIN}},
        "status": {"currentMapping": {"app": {"remoteNamespace": TWIN, "phase": "Accepted"}}}})
    agent.offloaded.follow("app")  # its home objects watched and listed
    agent.offloaded.listed("app")
    return agent


def queued_keys(agent: Agent) -> list[Any]:
    """The agent's pod queue taken to the end, in the order its keys come out."""
    keys = []
    while (key := agent.queue.take()) is not None:
        agent.queue.done(key)
        keys.append(key)
    return keys


def listed(agent: Agent) -> Agent:
    """Both sides' mirrors listed: the controllers reconcile their keys."""
    for synced in (agent.home_synced, agent.tenant_synced, agent.twins_synced):
        synced.set()
    return agent


def _reflector(agent: Agent, policy: ReflectionType = ReflectionType.DENY_LIST,
               rules: Any = CONFIGMAP_RULES) -> Reflector:
    """A reflector, its routes declared (as the runner does)."""
    reflector = Reflector(peering_of(agent), rules, 1, policy,
                          agent.informers.mirror(HOME_SIDE, rules.plural),
                          agent.informers.mirror(REMOTE_SIDE, rules.plural))
    declare_reflector(agent.informers, reflector)
    return reflector


def _home(agent: Agent, reflector: Reflector, event_type: str, obj: dict[str, Any]) -> None:
    """A home watch event of the reflector's kind."""
    agent.informers.dispatch(HOME_SIDE, reflector.rules.plural, event_type, obj)


def _remote(agent: Agent, reflector: Reflector, event_type: str, obj: dict[str, Any]) -> None:
    agent.informers.dispatch(REMOTE_SIDE, reflector.rules.plural, event_type, obj)


def _configmap(name: str = "settings", namespace: str = "app", **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "resourceVersion": "1", **metadata},
            "data": {"mode": "blue"}}


def _remote_path(name: str = "settings", kind: str = "configmaps") -> str:
    return f"/api/v1/namespaces/{TWIN}/{kind}/{name}"


def _reconcile(reflector: Reflector, name: str = "settings", namespace: str = "app") -> None:
    asyncio.run(reflector.reconcile((namespace, name)))


def _observe_remote(agent: Agent, reflector: Reflector, remote: FakeApi) -> None:
    """The remote watch catches up with what the fake server holds."""
    for obj in remote.objects.values():
        _remote(agent, reflector, "ADDED", {**obj, "metadata": {**obj["metadata"],
                                                                "resourceVersion": "9"}})


def test_a_home_object_in_an_extended_namespace_is_created_remotely_with_our_labels() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    copy_ = remote.objects[_remote_path()]
    assert copy_["data"] == {"mode": "blue"}
    assert copy_["metadata"]["namespace"] == TWIN
    assert OURS.items() <= copy_["metadata"]["labels"].items()


def test_an_unchanged_copy_is_not_written_again() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    remote.calls.clear()
    _reconcile(reflector)
    assert remote.writes() == []


def test_remote_drift_is_overwritten_keeping_the_remote_resource_version() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    remote.objects[_remote_path()]["data"] = {"mode": "hacked"}
    _observe_remote(agent, reflector, remote)
    _reconcile(reflector)
    assert remote.objects[_remote_path()]["data"] == {"mode": "blue"}
    assert remote.objects[_remote_path()]["metadata"]["resourceVersion"] == "9"


def test_an_immutable_copy_whose_content_changed_is_recreated() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", {**_configmap(), "immutable": True})
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    _home(agent, reflector, "MODIFIED", {**_configmap(), "immutable": True,
                                         "data": {"mode": "green"}})
    remote.calls.clear()
    _reconcile(reflector)
    assert remote.writes() == [("delete", _remote_path()),
                               ("create", _remote_path())]
    assert remote.objects[_remote_path()]["data"] == {"mode": "green"}


def test_the_copy_is_deleted_when_the_home_object_goes() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    _home(agent, reflector, "DELETED", _configmap())
    _reconcile(reflector)
    assert _remote_path() not in remote.objects


@pytest.mark.parametrize(("policy", "annotations", "reflected"), [
    (ReflectionType.DENY_LIST, {}, True),
    (ReflectionType.DENY_LIST, {"liqo.io/skip-reflection": "true"}, False),
    (ReflectionType.ALLOW_LIST, {}, False),
    (ReflectionType.ALLOW_LIST, {"liqo.io/allow-reflection": "true"}, True),
])
def test_the_policy_and_the_annotations_decide(policy: ReflectionType,
                                               annotations: dict[str, str],
                                               reflected: bool) -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent, policy)
    _home(agent, reflector, "ADDED", _configmap(annotations=annotations))
    _reconcile(reflector)
    assert (_remote_path() in remote.objects) is reflected


def test_a_copy_whose_home_object_turned_skipped_is_deleted() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    _home(agent, reflector, "MODIFIED", _configmap(
        annotations={"liqo.io/skip-reflection": "true"}))
    _reconcile(reflector)
    assert _remote_path() not in remote.objects


def test_a_foreign_remote_object_is_never_touched_and_the_home_object_gets_an_event() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": "someone"},
               "metadata": {"name": "settings", "namespace": TWIN}}
    remote.objects[_remote_path()] = foreign
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)  # the remote watch has not shown it yet: the create finds it
    _observe_remote(agent, reflector, remote)
    kept = reflector.remote.get((TWIN, "settings"))
    assert kept is not None and set(kept) == {"metadata"}  # its content is never kept
    _reconcile(reflector)
    _home(agent, reflector, "DELETED", _configmap())
    _reconcile(reflector)
    assert remote.objects[_remote_path()]["data"] == {"owner": "someone"}
    assert [c for c in remote.writes() if c[0] != "create"] == []
    assert ("event", "FailedReflection:settings") in home.calls


def test_nothing_is_reflected_into_a_namespace_whose_mapping_is_not_accepted() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap(namespace="elsewhere"))
    _reconcile(reflector, namespace="elsewhere")
    assert remote.calls == []


def test_the_home_root_ca_is_reflected_under_another_name() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap("kube-root-ca.crt"))
    _reconcile(reflector, "kube-root-ca.crt")
    assert set(remote.objects) == {_remote_path("kube-root-ca.crt.annex")}
    # The remote cluster's own root CA maps back to the home one's key, and is not ours.
    _remote(agent, reflector, "ADDED", {"metadata": {"name": "kube-root-ca.crt",
                                                     "namespace": TWIN}})
    assert reflector.controller.queue.take() == ("app", "kube-root-ca.crt")


def test_service_account_token_secrets_are_not_reflected() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent, rules=SECRET_RULES)
    _home(agent, reflector, "ADDED", {"metadata": {"name": "token", "namespace": "app"},
                                      "type": "kubernetes.io/service-account-token"})
    _reconcile(reflector, "token")
    assert remote.calls == []


def test_the_virtual_nodes_skip_lists_apply_without_a_restart() -> None:
    agent, remote, _ = _agent(labels_not_reflected=("flag-skipped",))
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap(labels={"flag-skipped": "x", "team": "a"}))
    _reconcile(reflector)
    assert "flag-skipped" not in remote.objects[_remote_path()]["metadata"]["labels"]
    assert remote.objects[_remote_path()]["metadata"]["labels"]["team"] == "a"
    _observe_remote(agent, reflector, remote)
    agent.mirrors.virtual_nodes.apply("ADDED", {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": "vn", "namespace": "x"},
        "spec": {"clusterId": REMOTE,
                 "offloadingPatch": {"labelsNotReflected": ["team"]}}})
    _reconcile(reflector)
    assert "team" not in remote.objects[_remote_path()]["metadata"]["labels"]


def test_a_failing_object_does_not_block_the_others_and_is_reported_on_it() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(listed(agent))
    remote.failing.add(_remote_path("broken"))
    _home(agent, reflector, "ADDED", _configmap("broken"))
    _home(agent, reflector, "ADDED", _configmap("fine"))

    async def run_until_fine_is_reflected() -> None:
        workers = asyncio.create_task(reflector.controller.run())
        for _ in range(500):
            if _remote_path("fine") in remote.objects:
                break
            await asyncio.sleep(0.01)
        reflector.controller.stop()
        await workers

    asyncio.run(run_until_fine_is_reflected())
    assert _remote_path("fine") in remote.objects
    assert ("create", _remote_path("broken")) in remote.calls
    assert ("event", "FailedReflection:broken") in home.calls


def test_flags_set_workers_and_policy_per_kind_and_zero_disables_a_kind() -> None:
    config = parse_config(["--remote-kubeconfig", "k", "--cluster-id", HOME,
                           "--remote-cluster-id", REMOTE, "--secret-reflection-workers", "0",
                           "--configmap-reflection-type", "AllowList"])
    agent = Agent(config, FakeHome(), FakeApi())  # type: ignore[arg-type]
    reflection = reflection_for(agent, KINDS)
    declare_reflection(agent_routes(agent), reflection)
    assert "secrets" not in reflection.reflectors  # not even watched
    for side, watch in ((HOME_SIDE, OFFLOADED_WATCH), (REMOTE_SIDE, TWINS_WATCH)):
        assert SECRETS.resource not in agent.informers.watched(side, watch)
        assert CONFIGMAPS.resource in agent.informers.watched(side, watch)
    assert reflection.reflectors["configmaps"].policy is ReflectionType.ALLOW_LIST


def test_every_kind_with_flags_is_reflected_by_its_rules_in_the_flags_order() -> None:
    assert [rules.flag for rules in KINDS] == list(REFLECTED_KINDS)


def test_a_copy_deleted_while_no_twins_watch_ran_is_created_again_after_the_relist() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    del remote.objects[_remote_path()]  # no DELETED event: the watch was being replaced
    agent.informers.start_relist(REMOTE_SIDE, ["configmaps"])
    agent.informers.finish_relist(REMOTE_SIDE, ["configmaps"])  # the listing did not show it
    _reconcile(reflector)
    assert _remote_path() in remote.objects


def test_a_copy_is_kept_while_the_home_api_server_still_has_the_object() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _home(agent, reflector, "ADDED", _configmap())
    _reconcile(reflector)
    _observe_remote(agent, reflector, remote)
    home.objects["/api/v1/namespaces/app/configmaps/settings"] = _configmap()
    reflector.home.apply("DELETED", _configmap())  # a mirror that missed it
    _reconcile(reflector)
    assert _remote_path() in remote.objects


def test_a_namespace_accepted_later_gets_its_existing_objects_reflected() -> None:
    agent, remote, _ = _agent(reflection_workers={"configmap": 1})
    reflection = reflection_for(agent, [CONFIGMAP_RULES])
    declare_agent(agent_routes(agent))
    declare_reflection(agent_routes(agent), reflection)
    reflector = reflection.reflectors["configmaps"]
    agent.offloaded.follow("later")  # offloaded here: watched before the provider accepts it
    agent.offloaded.listed("later")
    _home(agent, reflector, "ADDED", _configmap(namespace="later"))
    assert reflector.controller.queue.take() == ("later", "settings")
    _reconcile(reflector, namespace="later")
    reflector.controller.queue.done(("later", "settings"))
    assert remote.calls == []
    agent.informers.dispatch(REMOTE_SIDE, "namespacemaps", "MODIFIED", {
        "metadata": {"namespace": agent.tenant_namespace, "name": agent.namespace_map_name},
        "spec": {"desiredMapping": {"later": TWIN}},
        "status": {"currentMapping": {"later": {"remoteNamespace": TWIN, "phase": "Accepted"}}}})
    assert reflector.controller.queue.take() == ("later", "settings")
    _reconcile(reflector, namespace="later")
    assert _remote_path() in remote.objects


def test_a_namespace_map_write_that_leaves_the_mapping_as_it_was_requeues_nothing() -> None:
    """The enforcer's kopf records (annotations) and label edits change no mapping: no
    namespace, pod or reflected object is looked at again, where a mapping change still
    requeues them (the test above)."""
    agent, _, _ = _agent(reflection_workers={"configmap": 1})
    reflection = reflection_for(agent, [CONFIGMAP_RULES])
    declare_agent(agent_routes(agent))
    declare_reflection(agent_routes(agent), reflection)
    reflector = reflection.reflectors["configmaps"]
    current = agent.mirrors.namespace_maps.values()[0]
    _home(agent, reflector, "ADDED", _configmap())
    assert reflector.controller.queue.take() == ("app", "settings")
    reflector.controller.queue.done(("app", "settings"))
    annotated = copy.deepcopy(current)
    annotated["metadata"]["annotations"] = {"enforcer.annex.io/last-handled-configuration": "{}"}
    agent.informers.dispatch(REMOTE_SIDE, "namespacemaps", "MODIFIED", annotated)
    assert len(agent.queue) == 0 and len(reflector.controller) == 0
    remapped = copy.deepcopy(annotated)
    remapped["status"]["currentMapping"]["app"]["phase"] = "CreationLoopBackOff"
    agent.informers.dispatch(REMOTE_SIDE, "namespacemaps", "MODIFIED", remapped)
    assert len(agent.queue) > 0 and len(reflector.controller) == 1


def test_metrics_show_each_reflection_parts_waiting_keys_until_it_converged() -> None:
    from prometheus_client import generate_latest

    from home_agent.metrics import Metrics
    from tests.helpers import metric_samples, sample

    agent, _, _ = _agent(reflection_workers={"configmap": 1, "event": 1})
    reflection = reflection_for(agent, KINDS, COMPANIONS)
    declare_reflection(agent_routes(agent), reflection)
    metrics = Metrics()
    metrics.controllers = reflection.controllers()
    agent.informers.dispatch(HOME_SIDE, "configmaps", "ADDED", {
        "metadata": {"namespace": "app", "name": "settings"}})
    found = metric_samples(generate_latest(metrics.registry(agent_figures(agent))).decode())
    assert sample(found, "annex_home_agent_controller_queued_keys", controller="configmaps") == 1
    assert sample(found, "annex_home_agent_controller_queued_keys", controller="events") == 0


def test_a_namespace_offloaded_here_is_decided_on_once_listed_and_looked_at_again_then() -> None:
    """A copy left remotely while the agent was down, its home object gone: its key comes from
    the remote listing, before the agent has listed the home namespace. It waits (a missing
    home object must not read as gone, nor a present one be missed), and once the namespace is
    listed the key is looked at again: the copy goes."""
    agent, remote, _ = _agent()
    listed(agent)
    reflector = _reflector(agent)
    agent.offloaded.forget("app")  # a restart: not watched yet
    agent.mirrors.offloadings.apply("ADDED", {
        "metadata": {"namespace": "app", "name": "offloading"}, "spec": {}})
    assert agent.selected_namespaces() == {"app"}
    stale = {**_configmap(), "metadata": {**_configmap()["metadata"], "namespace": TWIN,
                                          "labels": OURS}}
    remote.objects[_remote_path()] = stale
    _remote(agent, reflector, "ADDED", stale)

    async def process_queued() -> None:
        while (key := reflector.controller.queue.take()) is not None:
            await reflector.controller.process(key)

    asyncio.run(process_queued())
    assert len(reflector.controller) == 1  # parked, nothing decided
    assert _remote_path() in remote.objects
    agent.offloaded.follow("app")
    agent.offloaded.listed("app")  # nothing of it at home
    reflector.controller.release_parked()
    asyncio.run(process_queued())
    assert _remote_path() not in remote.objects
    assert len(reflector.controller) == 0


def test_what_was_decided_before_a_namespace_was_offloaded_here_is_looked_at_once_listed() -> None:
    agent, remote, _ = _agent(reflection_workers={"configmap": 1})
    listed(agent)
    reflection = reflection_for(agent, [CONFIGMAP_RULES])
    declare_agent(agent_routes(agent))
    declare_reflection(agent_routes(agent), reflection)
    reflector = reflection.reflectors["configmaps"]
    agent.offloaded.forget("app")
    stale = {**_configmap(), "metadata": {**_configmap()["metadata"], "namespace": TWIN,
                                          "labels": OURS}}
    remote.objects[_remote_path()] = stale
    _remote(agent, reflector, "ADDED", stale)
    assert reflector.controller.queue.take() == ("app", "settings")
    _reconcile(reflector)  # not offloaded here: nothing decided, the key done
    reflector.controller.queue.done(("app", "settings"))
    assert _remote_path() in remote.objects
    agent.offloaded.follow("app")
    agent.offloaded.listed("app")
    assert reflector.controller.queue.take() == ("app", "settings")  # looked at again
    _reconcile(reflector)
    assert _remote_path() not in remote.objects
