"""Remote Events back home, one reconcile at a time: which remote Events come home, onto which
home object, under which name, and when the copy is written, rewritten or deleted. The watches
are played by feeding the sinks; the home API is a recording fake. The end-to-end behaviour with
real processes is in tests/e2e/test_reflection_events.py."""

from __future__ import annotations

import asyncio
import copy
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from annex.kubeapi import JSON, METADATA_LIST
from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent
from home_agent.assembly import agent_routes, event_reflector, reflection_for
from home_agent.config import parse_config
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES
from home_agent.reflection.event import EventReflector
from home_agent.reflection.ingress import INGRESS_RULES
from home_agent.reflection.manager import Reflection
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.service import SERVICE_RULES
from home_agent.routes import declare_agent, declare_reflection
from home_agent.watches import OFFLOADED_WATCH, TWINS_WATCH, declared_watch
from shared.api.builtin import EVENTS
from shared.forge.event import home_event_name
from shared.wellknown import COPY_DIGEST_ANNOTATION
from tests.conftest import ClusterHandle
from tests.helpers import until, wait_for
from tests.home_agent.play import bound_pod, extend
from tests.home_agent.test_reflection import (
    HOME,
    OURS,
    REMOTE,
    TWIN,
    FakeApi,
    _api_error,
    agent_with,
    listed,
)

NODE = f"liqo-{REMOTE}"
TEST_COMPONENT = "test-controller"
"""The source component of the Events tests write in a twin namespace."""
WORKERS = {"configmap": 1, "event": 1}


class EventHome(FakeApi):
    """The home API server of the copies: its answers carry a uid and a resourceVersion, a
    replace over another version conflicts, and the copies can be listed."""

    def __init__(self) -> None:
        super().__init__()
        self.revision = 0
        self.listings: list[dict[str, str]] = []

    def _store(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        uid = (self.objects.get(path) or {}).get("metadata", {}).get("uid")
        self.objects[path] = {**copy.deepcopy(body), "metadata": {
            **body["metadata"], "uid": uid or f"copy-uid-{self.revision}",
            "resourceVersion": str(self.revision)}}
        return copy.deepcopy(self.objects[path])

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        full = f"{path}/{body['metadata']['name']}"
        self._check("create", full)
        if full in self.objects:
            raise _api_error(409)
        return self._store(full, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        self._check("replace", path)
        if path not in self.objects:
            raise _api_error(404)
        if body["metadata"].get("resourceVersion") != (
                self.objects[path]["metadata"]["resourceVersion"]):
            raise _api_error(409)
        return self._store(path, body)

    async def find(self, path: str) -> Any:
        return copy.deepcopy(self.objects.get(path))

    async def request(self, method: str, path: str, body: Any = None, *,
                      query: dict[str, str] | None = None, accept: str = JSON,
                      **_: Any) -> Any:
        """A list of one namespace's Events (the agent may list no other), as the API server
        answers it: metadata only when asked so."""
        assert method == "GET" and path.startswith("/api/v1/namespaces/")
        assert path.endswith("/events")
        self.listings.append({**(query or {}), "accept": accept})
        copies = [copy.deepcopy(obj) for each, obj in self.objects.items()
                  if each.startswith(f"{path}/")]
        if accept == METADATA_LIST:
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": "9"},
                    "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": obj["metadata"]} for obj in copies]}
        return {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
                "items": copies}


def _setup(kinds: list[KindRules] | None = None, home: FakeApi | None = None
           ) -> tuple[Agent, Reflection, EventHome]:
    """The agent on fakes of both API servers (`home`: a new EventHome unless given), with the
    Event reflection of `kinds`, routes declared as the runner does."""
    home, remote = home or EventHome(), FakeApi()
    kinds = kinds or [CONFIGMAP_RULES]
    workers = {**WORKERS, **{rules.flag: 1 for rules in kinds}}
    agent = agent_with(remote, home, reflection_workers=workers)
    declare_agent(agent_routes(agent))
    reflection = reflection_for(agent, kinds, [event_reflector])
    declare_reflection(agent_routes(agent), reflection)
    return agent, reflection, home  # type: ignore[return-value]


def _see_home(agent: Agent, plural: str, event: str | None, obj: dict[str, Any]) -> None:
    """A home watch event, through the agent's informers."""
    agent.informers.dispatch(HOME_SIDE, plural, event, obj)


def _see_remote(agent: Agent, plural: str, event: str | None, obj: dict[str, Any]) -> None:
    agent.informers.dispatch(REMOTE_SIDE, plural, event, obj)


def _home_pod(name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "app", "uid": f"home-uid-{name}"},
            "spec": {"nodeName": NODE}}


def _remote_event(about: dict[str, Any], name: str = "web.17a0c3b2d4e5f601", count: int = 1,
                  **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": TWIN, "uid": f"remote-{name}", **metadata},
            "involvedObject": {"namespace": TWIN, **about},
            "reason": "Started", "message": "Started container app", "type": "Normal",
            "source": {"component": "kubelet", "host": "remote-node"}, "count": count,
            "firstTimestamp": "2026-11-21T20:00:00Z", "lastTimestamp": "2026-11-21T20:00:00Z"}


POD = {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "remote-pod-uid",
       "fieldPath": "spec.containers{app}"}


def _home_path(remote_name: str = "web.17a0c3b2d4e5f601") -> str:
    return f"/api/v1/namespaces/app/events/{home_event_name(remote_name, REMOTE)}"


def _reconcile_all(reflection: Reflection) -> None:
    """Run every queued key once (what the workers would do)."""
    events = reflection.companion(EventReflector)
    assert events is not None

    async def drain() -> None:
        while events.controller.queue.pending():
            key = events.controller.queue.take()
            assert isinstance(key, tuple)
            await events.reconcile(key)
            events.controller.queue.done(key)

    asyncio.run(drain())


def _events(reflection: Reflection) -> EventReflector:
    events = reflection.companion(EventReflector)
    assert events is not None
    return events


def test_a_remote_pod_event_is_copied_onto_the_home_pod() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)
    copy = home.objects[_home_path()]
    assert copy["metadata"]["namespace"] == "app"
    assert OURS.items() <= copy["metadata"]["labels"].items()
    assert copy["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "app",
                                      "name": "web", "uid": "home-uid-web",
                                      "fieldPath": "spec.containers{app}"}
    assert copy["source"] == {"component": "kubelet (remote)", "host": "remote-node"}
    assert (copy["reason"], copy["count"]) == ("Started", 1)


def test_a_copy_names_the_home_pod_of_that_name_as_it_is_now() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_home(agent, "pods", "DELETED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)
    assert home.writes() == []  # no home pod of that name: the Event stays remote

    _see_home(agent, "pods", "ADDED", {**_home_pod(), "metadata": {
        **_home_pod()["metadata"], "uid": "home-uid-recreated"}})
    _reconcile_all(reflection)
    assert home.objects[_home_path()]["involvedObject"]["uid"] == "home-uid-recreated"


def test_an_unchanged_copy_is_not_written_and_a_count_change_is() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)
    home.calls.clear()
    _reconcile_all(reflection)
    assert home.writes() == []

    _see_remote(agent, "events", "MODIFIED", _remote_event(POD, count=4))
    _reconcile_all(reflection)
    # Over the version the creation answered: nothing watches the copies.
    assert home.writes() == [("replace", _home_path())]
    assert home.objects[_home_path()]["count"] == 4
    assert home.objects[_home_path()]["metadata"]["resourceVersion"] == "2"


def test_a_copy_that_expired_at_home_is_made_again_by_its_next_update() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)
    del home.objects[_home_path()]  # its hour at home is over
    home.calls.clear()

    _see_remote(agent, "events", "MODIFIED", _remote_event(POD, count=2))
    _reconcile_all(reflection)
    assert home.writes() == [("replace", _home_path()), ("create", _home_path())]
    assert home.objects[_home_path()]["count"] == 2


def test_a_copy_changed_behind_the_agents_back_is_read_again_and_written_over() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)
    home.revision += 1
    home.objects[_home_path()]["message"] = "edited by hand"
    home.objects[_home_path()]["metadata"]["resourceVersion"] = str(home.revision)

    _see_remote(agent, "events", "MODIFIED", _remote_event(POD, count=2))
    key = ("app", home_event_name("web.17a0c3b2d4e5f601", REMOTE))
    with pytest.raises(Exception, match="409"):  # the controller retries it
        asyncio.run(_events(reflection).reconcile(key))
    asyncio.run(_events(reflection).reconcile(key))
    copied = home.objects[_home_path()]
    assert (copied["message"], copied["count"]) == ("Started container app", 2)


def _restart(home: EventHome, *remote_events: dict[str, Any]) -> tuple[Agent, Reflection]:
    """A new agent over `home`'s copies: it lists them, its remote watch shows `remote_events`
    and it reconciles everything (the calls before it forgotten)."""
    restarted_agent, restarted, _ = _setup(home=home)
    _see_home(restarted_agent, "pods", None, _home_pod())
    asyncio.run(_events(restarted).list_copies("app"))
    for remote_event in remote_events:
        _see_remote(restarted_agent, "events", None, remote_event)
    home.calls.clear()
    _reconcile_all(restarted)
    return restarted_agent, restarted


def test_a_restarted_agent_rewrites_nothing_and_drops_copies_of_events_gone_remotely() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _see_remote(agent, "events", "ADDED", _remote_event(POD, name="web.gone"))
    _reconcile_all(reflection)

    _restart(home, _remote_event(POD))  # both copies listed, one remote Event is gone
    assert home.writes() == [("delete", _home_path("web.gone"))]
    assert _home_path() in home.objects


def test_copies_made_before_they_carried_a_digest_are_listed_whole_and_not_rewritten() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _see_remote(agent, "events", "ADDED", _remote_event(POD, name="web.2"))
    _reconcile_all(reflection)
    older = home.objects[_home_path()]  # as an agent before the digest annotation made it
    del older["metadata"]["annotations"][COPY_DIGEST_ANNOTATION]

    restarted_agent, restarted = _restart(home, _remote_event(POD),
                                          _remote_event(POD, name="web.2"))
    assert home.writes() == []  # the older copy judged by its content: unchanged
    assert [listing["accept"] for listing in home.listings] == [METADATA_LIST, JSON]

    _see_remote(restarted_agent, "events", "MODIFIED", _remote_event(POD, count=2))
    _reconcile_all(restarted)  # its next change gives it the digest
    assert COPY_DIGEST_ANNOTATION in home.objects[_home_path()]["metadata"]["annotations"]


def test_the_copy_goes_with_the_remote_event_also_when_only_the_relist_tells() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _see_remote(agent, "events", "ADDED", _remote_event(POD, name="web.second"))
    _reconcile_all(reflection)
    _see_remote(agent, "events", "DELETED", _remote_event(POD))
    agent.informers.start_relist(REMOTE_SIDE, ["events"])
    agent.informers.finish_relist(REMOTE_SIDE, ["events"])  # nor web.second
    _reconcile_all(reflection)
    assert [p for p in home.objects if "/events/" in p] == []


def test_an_event_whose_copy_has_a_shortened_name_comes_and_goes_with_its_remote_event() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    long_name = "web." + "7" * 250  # with the cluster's suffix, over a DNS subdomain's 253
    _see_remote(agent, "events", "ADDED", _remote_event(POD, name=long_name))
    _reconcile_all(reflection)
    assert home.writes() == [("create", _home_path(long_name))]
    _see_remote(agent, "events", "DELETED", _remote_event(POD, name=long_name))
    _reconcile_all(reflection)
    assert [p for p in home.objects if "/events/" in p] == []


@pytest.mark.parametrize("about", [
    {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod", "name": "web"},
    {"apiVersion": "v1", "kind": "Pod", "name": "somebody-elses"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    {"apiVersion": "v1", "kind": "ConfigMap", "name": "foreign"},
    {"apiVersion": "v1", "kind": "ConfigMap", "name": "kube-root-ca.crt"},
    {"apiVersion": "v1", "kind": "Secret", "name": "not-reflected"},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data"},
], ids=lambda about: f"{about['kind']}-{about['name']}")
def test_events_about_objects_we_did_not_reflect_stay_remote(about: dict[str, Any]) -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    # somebody-elses runs on a real node: the watch of the virtual node's pods never shows it
    for name in ("foreign", "kube-root-ca.crt"):
        _see_home(agent, "configmaps", "ADDED", _configmap(name))
        _see_remote(agent, "configmaps", "ADDED", _configmap(name, TWIN))  # not ours
    _see_remote(agent, "events", "ADDED", _remote_event(about, name="x.1"))
    _reconcile_all(reflection)
    assert home.writes() == []


def test_an_event_that_is_itself_a_reflected_copy_is_never_reflected_again() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(
        POD, labels={"offloading.liqo.io/origin": "elsewhere",
                     "offloading.liqo.io/destination": "here"}))
    _reconcile_all(reflection)
    assert home.writes() == []


def _configmap(name: str, namespace: str = "app", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                         "labels": labels}}


def test_events_about_the_renamed_root_ca_copy_show_on_the_home_kube_root_ca() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "configmaps", "ADDED", _configmap("kube-root-ca.crt"))
    _see_remote(agent, "configmaps", "ADDED", _configmap("kube-root-ca.crt.annex", TWIN,
                                                         **OURS))
    _see_remote(agent, "events", "ADDED", _remote_event(
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "kube-root-ca.crt.annex",
         "uid": f"{TWIN}-kube-root-ca.crt.annex"}, name="ca.1"))
    _reconcile_all(reflection)
    involved = home.objects[_home_path("ca.1")]["involvedObject"]
    assert (involved["name"], involved["uid"]) == ("kube-root-ca.crt", "app-kube-root-ca.crt")


@pytest.mark.parametrize(("rules", "api_version"), [
    (SERVICE_RULES, "v1"),
    (ENDPOINTSLICE_RULES, "discovery.k8s.io/v1"),
    (INGRESS_RULES, "networking.k8s.io/v1"),
], ids=lambda value: getattr(value, "kind", value))
def test_events_about_our_copies_of_other_kinds_show_on_their_home_objects(
        rules: KindRules, api_version: str) -> None:
    def web(namespace: str, **labels: str) -> dict[str, Any]:
        return {"metadata": {"name": "web", "namespace": namespace, "uid": f"{namespace}-web",
                             "labels": labels}}

    agent, reflection, home = _setup([rules])
    _see_home(agent, rules.plural, "ADDED", web("app"))
    _see_remote(agent, rules.plural, "ADDED", web(TWIN, **OURS))
    _see_remote(agent, "events", "ADDED", _remote_event(
        {"apiVersion": api_version, "kind": rules.kind, "name": "web", "uid": f"{TWIN}-web"},
        name="web.1"))
    _reconcile_all(reflection)
    assert home.objects[_home_path("web.1")]["involvedObject"] == {
        "apiVersion": api_version, "kind": rules.kind, "namespace": "app", "name": "web",
        "uid": "app-web"}


def test_an_event_about_an_earlier_object_of_the_same_name_stays_remote() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "configmaps", "ADDED", _configmap("settings"))
    _see_remote(agent, "configmaps", "ADDED", _configmap("settings", TWIN, **OURS))
    _see_remote(agent, "events", "ADDED", _remote_event(
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "older"}))
    _reconcile_all(reflection)
    assert home.writes() == []


def test_an_event_that_came_before_its_object_is_reflected_when_the_object_shows_up() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "configmaps", "ADDED", _configmap("settings"))
    about = {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings",
             "uid": f"{TWIN}-settings"}
    _see_remote(agent, "events", "ADDED", _remote_event(about, name="settings.1"))
    _reconcile_all(reflection)
    assert home.writes() == []  # the copy's watch event has not come yet
    _see_remote(agent, "configmaps", "ADDED", _configmap("settings", TWIN, **OURS))
    _reconcile_all(reflection)
    assert home.writes() == [("create", _home_path("settings.1"))]


def test_events_in_namespaces_that_are_not_extended_stay_remote() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", {
        **_remote_event(POD), "metadata": {"name": "web.1", "namespace": "other-twin"}})
    _reconcile_all(reflection)
    assert home.writes() == []


class RefusingHome(FakeApi):
    """A home API server that will never take the copy (an invalid remote Event)."""

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("create", path))
        raise _api_error(422)


def test_a_copy_the_home_api_server_refuses_is_not_retried() -> None:
    home = RefusingHome()
    agent, reflection, _ = _setup(home=home)
    listed(agent)
    events = reflection.companion(EventReflector)
    assert events is not None
    events.listed.add("app")  # its copies listed: none
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))

    async def process_queued() -> None:
        while events.controller.queue.pending():
            key = events.controller.queue.take()
            assert isinstance(key, tuple)
            await events.controller.process(key)

    asyncio.run(process_queued())
    assert home.calls == [("create", "/api/v1/namespaces/app/events")]
    assert events.controller.outcomes() == {"refused": 1}
    assert len(events.controller) == 0  # no backoff: the remote Event's next change tries again


def test_the_flag_sets_the_workers_and_zero_disables_event_reflection() -> None:
    flags = ["--remote-kubeconfig", "k", "--cluster-id", HOME, "--remote-cluster-id", REMOTE]

    def reflection(*extra: str) -> tuple[Agent, Reflection]:
        agent = Agent(parse_config([*flags, *extra]), FakeApi(), FakeApi())  # type: ignore[arg-type]
        made = reflection_for(agent, [CONFIGMAP_RULES], [event_reflector])
        declare_reflection(agent_routes(agent), made)
        return agent, made

    enabled_agent, enabled = reflection()
    events = enabled.companion(EventReflector)
    assert events is not None and events.controller.workers == 3
    twins_watch = declared_watch(enabled_agent.informers, REMOTE_SIDE, TWINS_WATCH)
    assert twins_watch.queries[EVENTS.resource] == {}

    disabled_agent, disabled = reflection("--event-reflection-workers", "0")
    assert disabled.companion(EventReflector) is None
    for side, watch in ((HOME_SIDE, OFFLOADED_WATCH), (REMOTE_SIDE, TWINS_WATCH)):
        assert EVENTS.resource not in disabled_agent.informers.watched(side, watch)  # nor routed


def test_the_copies_at_home_are_listed_when_the_reflector_starts_and_never_watched() -> None:
    agent, reflection, home = _setup()
    _see_home(agent, "pods", "ADDED", _home_pod())
    _see_remote(agent, "events", "ADDED", _remote_event(POD))
    _reconcile_all(reflection)

    restarted_agent, restarted, _ = _setup(home=home)  # a new leader: its reflector starts
    listed(restarted_agent)
    events = _events(restarted)
    _see_home(restarted_agent, "pods", None, _home_pod())
    # the key waits for the listing
    _see_remote(restarted_agent, "events", None, _remote_event(POD))
    home.calls.clear()

    async def start() -> None:
        running = asyncio.create_task(events.run())
        await until(lambda: events.listed and len(events.controller) == 0,
                    "the copies listed and nothing left to do", interval=0.001)
        events.controller.stop()
        await running

    asyncio.run(asyncio.wait_for(start(), 10))
    assert home.writes() == []  # compared with the listed copy: no create to find it with
    assert home.listings == [{"labelSelector": (  # only our copies, a page at a time
        f"offloading.liqo.io/destination={REMOTE},offloading.liqo.io/origin={HOME}"),
        "limit": "500", "accept": METADATA_LIST}]  # their metadata only
    home_watch = declared_watch(restarted_agent.informers, HOME_SIDE, OFFLOADED_WATCH)
    assert EVENTS.resource not in home_watch.queries  # no watch echoes our own writes back


# --- the agent process ----------------------------------------------------------------------

def write_remote_event(remote: ClusterHandle, twin: str, about: dict[str, Any],
                       reason: str, **fields: Any) -> str:
    """An Event in the twin namespace about `about` (apiVersion, kind, name, uid), as a remote
    component would record it; returns its name."""
    name = f"{about['name']}.{uuid.uuid4().hex[:16]}"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    remote.core.create_namespaced_event(twin, {
        "metadata": {"name": name},
        "involvedObject": {**about, "namespace": twin},
        "reason": reason, "message": f"{reason} (written by a test)", "type": "Normal",
        "source": {"component": TEST_COMPONENT}, "count": 1,
        "firstTimestamp": now, "lastTimestamp": now, **fields})
    return name


def home_events(home: ClusterHandle, namespace: str, uid: str) -> dict[str, dict[str, Any]]:
    """The home Events attached to the object `uid`, by reason."""
    listed = home.core.list_namespaced_event(namespace)
    events = home.api_client.sanitize_for_serialization(listed)["items"]
    return {event["reason"]: event for event in events
            if (event.get("involvedObject") or {}).get("uid") == uid}


def test_a_restarted_agent_neither_duplicates_nor_rewrites_copies_and_drops_stale_ones(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    pod = bound_pod(home, namespace, "web", agent.node_name)
    uid = pod["metadata"]["uid"]
    about = {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": str(uuid.uuid4())}
    write_remote_event(remote, twin, about, "Kept")
    gone = write_remote_event(remote, twin, about, "Gone")
    copies = wait_for(lambda: (e := home_events(home, namespace, uid)).keys() >= {"Kept", "Gone"}
                      and e, timeout=30, message="both Events on the home pod")
    kept_version = copies["Kept"]["metadata"]["resourceVersion"]

    agent.process.kill()
    remote.core.delete_namespaced_event(gone, twin)  # while no agent watches
    start_agent(home_id=agent.home_id, remote_id=agent.remote_id)
    write_remote_event(remote, twin, about, "AfterRestart")
    wait_for(lambda: home_events(home, namespace, uid).keys() == {"Kept", "AfterRestart"},
             timeout=30, message="the new Event home, the stale copy gone")
    listed = home.core.list_namespaced_event(namespace).items
    assert [e.reason for e in listed if e.involved_object.uid == uid].count("Kept") == 1
    assert home_events(home, namespace, uid)["Kept"]["metadata"]["resourceVersion"] == (
        kept_version)
