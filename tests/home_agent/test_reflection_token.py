"""The token reflector's rules, one reconcile at a time, against recording fakes of both API
servers (the watches are played by feeding the mirrors); then the agent as a real process,
restarted over a fresh token Secret. End to end: tests/e2e/test_reflection_tokens.py."""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from annex.controller import Result
from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent, pod_key
from home_agent.assembly import COMPANIONS, agent_routes, peering_of, pod_offloader, reflection_for
from home_agent.config import TOKEN_REFLECTION, parse_config
from home_agent.reflection.kinds import KINDS
from home_agent.reflection.manager import Reflection
from home_agent.reflection.reflector import Reflector
from home_agent.reflection.secret import SECRET_RULES
from home_agent.reflection.token import TokenReflector
from home_agent.routes import declare_agent, declare_reflection, declare_token_reflector
from home_agent.watches import OFFLOADED_WATCH, TWINS_WATCH
from shared.api.builtin import SECRETS
from shared.forge.pod_tokens import service_account_token_key
from shared.reflection_policy import ReflectionType
from shared.wellknown import (
    DESTINATION_CLUSTER_LABEL,
    ORIGIN_CLUSTER_LABEL,
    TOKEN_SECRET_EXPIRATION_ANNOTATION,
    TOKEN_SECRET_POD_LABEL,
    TOKEN_SECRET_POD_UID_ANNOTATION,
    TOKEN_SECRET_REFRESH_ANNOTATION,
    TOKEN_SECRET_SERVICE_ACCOUNT_LABEL,
)
from tests.conftest import ClusterHandle
from tests.helpers import until, wait_for
from tests.home_agent.play import bound_pod, extend
from tests.home_agent.test_reflection import FakeApi, agent_with, listed, queued_keys
from tests.home_agent.test_reflection import _api_error as _error

HOME, REMOTE = "home-1", "remote-1"
OURS = {ORIGIN_CLUSTER_LABEL: HOME, DESTINATION_CLUSTER_LABEL: REMOTE}
TWIN = "app-home-1"
NODE = f"liqo-{REMOTE}"
SECRET_PATH = f"/api/v1/namespaces/{TWIN}/secrets/web-token"
TOKEN_PATH = "/api/v1/namespaces/app/serviceaccounts/robot/token"
TOKEN_KEY = service_account_token_key("kube-api-access-x7k2p", "token")
VAULT_KEY = service_account_token_key("vault", "vault-token")


class FakeRemote(FakeApi):
    """`FakeApi` stamping resourceVersion and uid as an API server does; replacing a missing
    object is a 404."""

    def __init__(self) -> None:
        super().__init__()
        self.versions = itertools.count(100)

    def _stamped(self, body: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self.versions))
        stored["metadata"].setdefault("uid", "uid-secret")
        return stored

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return copy.deepcopy(await super().create(path, self._stamped(body)))

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        if path not in self.objects:
            self.calls.append(("replace", path))
            raise _error(404)
        return copy.deepcopy(await super().replace(path, self._stamped(body)))


class FakeHome:
    """The home API server: TokenRequests answered with numbered tokens, Events recorded, pods
    that `get` finds."""

    def __init__(self) -> None:
        self.token_requests: list[tuple[str, dict[str, Any]]] = []
        self.events: list[tuple[str, str]] = []
        self.pods: set[str] = set()
        self.refuse_tokens = False
        self.lifetime = 3607

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        if body.get("kind") != "TokenRequest":
            self.events.append((body["reason"], body["message"]))
            return body
        if self.refuse_tokens:
            raise _error(403)
        self.token_requests.append((path, body))
        expires = datetime.now(UTC) + timedelta(seconds=self.lifetime)
        return {**body, "spec": {**body["spec"], "expirationSeconds": self.lifetime},
                "status": {"token": f"token-{len(self.token_requests)}",
                           "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}

    async def get(self, path: str) -> Any:
        if path not in self.pods:
            raise _error(404)
        return {}


def _agent(**config: Any) -> tuple[Agent, FakeRemote, FakeHome]:
    remote, home = FakeRemote(), FakeHome()
    return agent_with(remote, home, **config), remote, home


def _reflector(agent: Agent) -> TokenReflector:
    """A token reflector, its routes declared (as the runner does)."""
    reflector = TokenReflector(peering_of(agent), 1, pods=agent.mirrors.pods,
                               secrets=agent.informers.written(REMOTE_SIDE, "secrets"),
                               enable_apiserver_support=agent.config.enable_apiserver_support,
                               refresh_fraction=agent.config.token_refresh_fraction)
    declare_agent(agent_routes(agent))
    declare_token_reflector(agent_routes(agent), reflector, None)
    return reflector


def _pod(uid: str = "uid-web", audience: str | None = None, **spec: Any) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": "kube-api-access-x7k2p", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "fieldPath": "metadata.namespace"}}]}}]}}]
    if audience:
        volumes.append({"name": "vault", "projected": {"sources": [{"serviceAccountToken": {
            "audience": audience, "expirationSeconds": 7200, "path": "vault-token"}}]}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "app", "uid": uid, "resourceVersion": "1"},
            "spec": {"nodeName": NODE, "serviceAccountName": "robot",
                     "containers": [{"name": "app", "image": "nginx"}], "volumes": volumes,
                     **spec}}


def _see(agent: Agent, event_type: str, pod: dict[str, Any]) -> None:
    """A home pod event, through the agent's informers."""
    agent.informers.dispatch(HOME_SIDE, "pods", event_type, pod)


def _see_secret(agent: Agent, event_type: str, secret: dict[str, Any]) -> None:
    """A remote Secret event, through the agent's informers."""
    agent.informers.dispatch(REMOTE_SIDE, "secrets", event_type, secret)


def _reflected_once() -> tuple[Agent, TokenReflector, FakeRemote, FakeHome]:
    """A pod whose token Secret was written, and the remote watch has shown it."""
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    _observe(agent, remote)
    return agent, reflector, remote, home


def _reconcile(reflector: TokenReflector) -> Result:
    return asyncio.run(reflector.reconcile(("app", "web")))


def _observe(agent: Agent, remote: FakeRemote) -> None:
    """The remote watch catches up with what the fake server holds."""
    for obj in remote.objects.values():
        _see_secret(agent, "MODIFIED", obj)


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_an_offloaded_pod_gets_a_secret_of_home_tokens_bound_to_it_and_its_home_namespace(
) -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod(audience="vault"))
    _reconcile(reflector)
    assert [path for path, _ in home.token_requests] == [TOKEN_PATH, TOKEN_PATH]
    default, vault = (body["spec"] for _, body in home.token_requests)
    assert default["boundObjectRef"] == {"apiVersion": "v1", "kind": "Pod", "name": "web",
                                         "uid": "uid-web"}
    assert default["expirationSeconds"] == 3607 and "audiences" not in default
    assert vault["audiences"] == ["vault"] and vault["expirationSeconds"] == 7200
    secret = remote.objects[SECRET_PATH]
    assert _decoded(secret) == {TOKEN_KEY: "token-1", VAULT_KEY: "token-2", "namespace": "app"}
    assert OURS.items() <= secret["metadata"]["labels"].items()
    annotations = secret["metadata"]["annotations"]
    assert annotations[TOKEN_SECRET_POD_UID_ANNOTATION] == "uid-web"
    expires = datetime.fromisoformat(annotations[TOKEN_SECRET_EXPIRATION_ANNOTATION])
    refresh = datetime.fromisoformat(annotations[TOKEN_SECRET_REFRESH_ANNOTATION])
    # The earliest token rules: refreshed at 80% of its 3607 s, as the kubelet would.
    left = timedelta(seconds=3607 * 0.2)
    assert left <= expires - refresh <= left + timedelta(seconds=1)  # timestamps in seconds


def test_a_fresh_secret_costs_no_token_request_and_no_write() -> None:
    agent, reflector, remote, home = _reflected_once()
    remote.calls.clear()
    for _ in range(3):  # pod status updates
        _see(agent, "MODIFIED", _pod())
        _reconcile(reflector)
    assert len(home.token_requests) == 1
    assert remote.calls == []


def test_after_a_restart_a_fresh_secret_is_reused() -> None:
    agent, remote, home = _agent()
    first = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(first)
    restarted = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _observe(agent, remote)
    remote.calls.clear()
    _reconcile(restarted)
    assert len(home.token_requests) == 1
    assert remote.calls == []


def test_tokens_are_requested_again_when_due_for_a_refresh() -> None:
    agent, remote, home = _agent(token_refresh_fraction=0.0001)
    home.lifetime = 600
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    _observe(agent, remote)
    wait_for(lambda: datetime.fromisoformat(remote.objects[SECRET_PATH]["metadata"][
        "annotations"][TOKEN_SECRET_REFRESH_ANNOTATION]) <= datetime.now(UTC),
        timeout=5, message="refresh time (0.06 s after issue) passed")
    _reconcile(reflector)
    assert len(home.token_requests) == 2
    assert _decoded(remote.objects[SECRET_PATH])[TOKEN_KEY] == "token-2"
    assert remote.calls[-1] == ("replace", SECRET_PATH)


def test_a_fresh_secret_is_looked_at_again_at_its_refresh_time_planned_once() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    planned = _reconcile(reflector).requeue_after
    assert planned is not None and 3607 * 0.8 - 5 < planned <= 3607 * 0.8
    _observe(agent, remote)
    # As pod status changes come: one planned look, not one timer per reconcile.
    assert [_reconcile(reflector).requeue_after for _ in range(5)] == [None] * 5


def test_a_new_pod_of_the_same_name_gets_new_tokens() -> None:
    agent, reflector, remote, home = _reflected_once()
    _see(agent, "DELETED", _pod())
    _see(agent, "ADDED", _pod(uid="uid-web-2"))
    _reconcile(reflector)
    assert home.token_requests[-1][1]["spec"]["boundObjectRef"]["uid"] == "uid-web-2"
    assert remote.objects[SECRET_PATH]["metadata"]["annotations"][
        TOKEN_SECRET_POD_UID_ANNOTATION] == "uid-web-2"


def test_a_secret_changed_remotely_is_rewritten() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    kept = agent.informers.latest(REMOTE_SIDE, SECRETS.plural, (TWIN, "web-token"))
    assert kept is not None and kept["data"][TOKEN_KEY].startswith("sha256:")  # no token kept
    remote.objects[SECRET_PATH]["data"][TOKEN_KEY] = base64.b64encode(b"forged").decode()
    _observe(agent, remote)
    _reconcile(reflector)
    assert _decoded(remote.objects[SECRET_PATH])[TOKEN_KEY] == "token-2"


def test_a_secret_deleted_remotely_is_written_again() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    deleted = remote.objects.pop(SECRET_PATH)
    _see_secret(agent, "DELETED", deleted)
    _reconcile(reflector)
    assert _decoded(remote.objects[SECRET_PATH])[TOKEN_KEY] == "token-2"


def test_a_secret_a_relist_no_longer_shows_is_written_again() -> None:
    agent, reflector, remote, _ = _reflected_once()
    queue = reflector.controller.queue
    queue.done(queue.take())  # nothing left queued
    remote.objects.pop(SECRET_PATH)
    # The agent's list+watch reports it with its key only (no labels to say it is a token's).
    _see_secret(agent, "DELETED", {"metadata": {"namespace": TWIN,
                                                "name": "web-token"}})
    assert agent.informers.mirror(REMOTE_SIDE, "secrets").keys() == []
    assert queue.pending()
    _reconcile(reflector)
    assert _decoded(remote.objects[SECRET_PATH])[TOKEN_KEY] == "token-2"


def test_a_refresh_over_a_secret_the_mirror_still_shows_creates_it() -> None:
    agent, remote, home = _agent(token_refresh_fraction=0.0001)
    home.lifetime = 600
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    due = remote.objects.pop(SECRET_PATH)  # deleted; no watch event yet
    wait_for(lambda: datetime.fromisoformat(due["metadata"]["annotations"][
        TOKEN_SECRET_REFRESH_ANNOTATION]) <= datetime.now(UTC), timeout=5, message="due")
    _reconcile(reflector)
    assert remote.calls[-2:] == [("replace", SECRET_PATH), ("create", f"/api/v1/namespaces/"
                                                                      f"{TWIN}/secrets/web-token")]
    assert SECRET_PATH in remote.objects


def test_the_secret_goes_with_the_pod_once_the_home_api_server_confirms() -> None:
    agent, reflector, remote, home = _reflected_once()
    last_seen = remote.objects[SECRET_PATH]
    _see(agent, "DELETED", _pod())
    home.pods.add("/api/v1/namespaces/app/pods/web")  # the mirror is ahead of the server
    _reconcile(reflector)
    assert SECRET_PATH in remote.objects
    home.pods.clear()
    _reconcile(reflector)
    assert SECRET_PATH not in remote.objects
    _see_secret(agent, "DELETED", last_seen)  # the watch tells
    _reconcile(reflector)
    # nothing brings the pod that is gone back: a resync looks at no key
    queue = reflector.controller.queue
    while (key := queue.take()) is not None:
        queue.done(key)
    reflector.resync()
    assert queue.take() is None and len(queue) == 0


def test_without_apiserver_support_nothing_is_requested_and_our_secret_goes() -> None:
    _, reflector, remote, home = _reflected_once()
    off, _, _ = _agent(enable_apiserver_support=False)
    off.remote, off.home = remote, home  # type: ignore[assignment]
    restarted = _reflector(off)
    _see(off, "ADDED", _pod())
    _observe(off, remote)
    _reconcile(restarted)
    assert len(home.token_requests) == 1
    assert SECRET_PATH not in remote.objects


def test_a_pod_without_projected_tokens_gets_no_secret() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod(volumes=[]))
    _reconcile(reflector)
    assert home.token_requests == [] and remote.objects == {}


def test_a_foreign_secret_of_that_name_is_left_alone_with_an_event() -> None:
    agent, remote, home = _agent()
    remote.objects[SECRET_PATH] = {"metadata": {"name": "web-token", "namespace": TWIN,
                                                "resourceVersion": "5"}, "data": {"x": "eQ=="}}
    reflector = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(reflector)
    assert remote.objects[SECRET_PATH]["data"] == {"x": "eQ=="}
    assert [reason for reason, _ in home.events] == ["FailedReflection"]
    assert "not created by this cluster" in home.events[0][1]


def test_a_namespace_not_extended_gets_nothing() -> None:
    agent, remote, home = _agent()
    reflector = _reflector(agent)
    pod = _pod()
    pod["metadata"]["namespace"] = "elsewhere"
    _see(agent, "ADDED", pod)
    asyncio.run(reflector.reconcile(("elsewhere", "web")))
    assert home.token_requests == [] and remote.calls == []


def test_a_failed_token_request_is_an_event_on_the_pod_and_is_retried_after_a_backoff() -> None:
    agent, remote, home = _agent()
    home.refuse_tokens = True
    reflector = _reflector(listed(agent))
    _see(agent, "ADDED", _pod())

    async def one_failure_then_its_retry() -> None:
        worker = asyncio.create_task(reflector.controller.run())
        await until(lambda: bool(home.events), "an Event of the refused token request")
        assert SECRET_PATH not in remote.objects
        home.refuse_tokens = False  # the key backs off, then is reconciled again
        await until(lambda: SECRET_PATH in remote.objects, "the token Secret, once retried")
        reflector.controller.stop()
        await worker

    asyncio.run(asyncio.wait_for(one_failure_then_its_retry(), timeout=10))
    assert home.events[0][0] == "FailedReflection"
    assert "status 403" in home.events[0][1]
    assert _decoded(remote.objects[SECRET_PATH])[TOKEN_KEY] == "token-1"


def test_the_secret_reflector_leaves_token_secrets_alone() -> None:
    agent, remote, _ = _agent()
    tokens = _reflector(agent)
    _see(agent, "ADDED", _pod())
    _reconcile(tokens)
    secrets = Reflector(peering_of(agent), SECRET_RULES, 1, ReflectionType.DENY_LIST,
                        agent.informers.mirror(HOME_SIDE, "secrets"),
                        agent.informers.mirror(REMOTE_SIDE, "secrets"))
    _see_secret(agent, "ADDED", remote.objects[SECRET_PATH])
    remote.calls.clear()
    asyncio.run(secrets.reconcile(("app", "web-token")))  # no home Secret of that name
    assert remote.calls == []


def _reflection(*flags: str) -> tuple[Agent, Reflection]:
    config = parse_config(["--remote-kubeconfig", "unused", "--cluster-id", HOME,
                           "--remote-cluster-id", REMOTE, *flags])
    agent, _, _ = _agent()
    agent.config = config
    reflection = reflection_for(agent, KINDS, COMPANIONS)
    declare_agent(agent_routes(agent))
    declare_reflection(agent_routes(agent), reflection)
    return agent, reflection


def test_pod_and_secret_events_reach_the_token_reflector_and_stay_the_others() -> None:
    agent, reflection = _reflection()
    tokens = reflection.companion(TokenReflector)
    assert tokens is not None
    informers = agent.informers
    informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod())
    assert tokens.pods is agent.mirrors.pods  # one copy of each pod
    assert tokens.controller.queue.take() == ("app", "web")
    assert agent.queue.take() == ("pod", "app", "web")  # the agent's too
    secret = {"metadata": {"name": "web-token", "namespace": TWIN, "labels": {
        **OURS, TOKEN_SECRET_POD_LABEL: "web", TOKEN_SECRET_SERVICE_ACCOUNT_LABEL: "robot"}}}
    informers.dispatch(REMOTE_SIDE, "secrets", "ADDED", secret)
    # One mirror of them, the Secret reflector's too.
    assert informers.mirror(REMOTE_SIDE, "secrets").keys() == [(TWIN, "web-token")]
    assert tokens.secrets.latest((TWIN, "web-token")) is not None
    assert reflection.reflectors["secrets"].remote.has((TWIN, "web-token"))
    # The Secret reflector has nothing to do with it, unless a home Secret of that name
    # exists (whose copy the name is taken from).
    secrets = reflection.reflectors["secrets"].controller.queue
    assert len(secrets) == 0
    informers.dispatch(HOME_SIDE, "secrets", "ADDED",
                       {"metadata": {"name": "web-token", "namespace": "app"}})
    assert secrets.take() == ("app", "web-token")
    secrets.done(("app", "web-token"))
    informers.dispatch(REMOTE_SIDE, "secrets", "MODIFIED", secret)
    assert secrets.take() == ("app", "web-token")
    # Every Secret offloaded.
    assert informers.watched(HOME_SIDE, OFFLOADED_WATCH)[SECRETS.resource] == ""


def test_without_the_secret_reflector_only_the_remote_secrets_are_watched() -> None:
    informers = _reflection("--secret-reflection-workers", "0")[0].informers
    # The remote token Secrets.
    assert SECRETS.resource in informers.watched(REMOTE_SIDE, TWINS_WATCH)
    assert SECRETS.resource not in informers.watched(HOME_SIDE, OFFLOADED_WATCH)


def test_zero_workers_disable_token_reflection() -> None:
    agent, reflection = _reflection("--serviceaccount-reflection-workers", "0")
    assert reflection.companion(TokenReflector) is None
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod())
    assert len(agent.queue) == 1  # the agent's pod key only


# --- the agent as a process -------------------------------------------------------------------


def _token_secret(remote: ClusterHandle, twin: str, pod: str) -> Any:
    try:
        return remote.core.read_namespaced_secret(f"{pod}-token", twin)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_a_restarted_agent_reuses_the_fresh_token_secret(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)  # the default kube-api-access volume
    secret = wait_for(lambda: _token_secret(remote, twin, "web"), timeout=30,
                      message="token Secret written")
    assert base64.b64decode(secret.data["namespace"]).decode() == namespace

    agent.process.kill()
    again = start_agent(home_id=agent.home_id, remote_id=agent.remote_id)
    # A new pod gets its Secret from the new process: it has listed both sides, worked its queue.
    bound_pod(home, namespace, "probe", again.node_name)
    wait_for(lambda: _token_secret(remote, twin, "probe"), timeout=30,
             message="the restarted agent works")
    after = _token_secret(remote, twin, "web")
    assert after.metadata.resource_version == secret.metadata.resource_version
    assert after.data == secret.data


def _drained(reflector: TokenReflector) -> None:
    queue = reflector.controller.queue
    while (key := queue.take()) is not None:
        queue.done(key)


def test_our_own_write_and_pod_changes_no_token_reads_queue_nothing_anything_else_does() -> None:
    agent, remote, _ = _agent()
    reflector = _reflector(agent)
    queue = reflector.controller.queue
    _see(agent, "ADDED", _pod())
    _drained(reflector)
    _reconcile(reflector)  # writes the Secret, and into the mirror at once
    _observe(agent, remote)  # the watch's echo of that write
    _see(agent, "MODIFIED", {**_pod(), "status": {"phase": "Running"}})
    assert not queue.pending()

    changed = copy.deepcopy(remote.objects[SECRET_PATH])
    changed["metadata"]["resourceVersion"] = "999"  # somebody else's write
    _see_secret(agent, "MODIFIED", changed)
    assert queue.pending()
    _drained(reflector)
    # Since then, the pod's status is looked at again until a reconcile has read the pod.
    _see(agent, "MODIFIED", {**_pod(), "status": {"phase": "Succeeded"}})
    assert queue.pending()
    _drained(reflector)
    _reconcile(reflector)
    _see(agent, "ADDED", _pod())  # a relist
    assert queue.pending()
    _drained(reflector)
    _see(agent, "MODIFIED", _pod(audience="vault"))  # a token more
    assert queue.pending()


def test_a_pods_shadowpod_waits_for_its_token_secret_and_is_made_once_the_secret_is() -> None:
    """A remote pod made before its token Secret would wait in ContainerCreating for the
    kubelet's next mount try (FailedMount); the agent makes the ShadowPod once the Secret is
    there, its event bringing the pod back ahead of pods not looked at yet."""
    agent, remote, _ = _agent(reflection_workers={TOKEN_REFLECTION: 1})
    reflector = _reflector(agent)
    pods = pod_offloader(agent)

    def shadowpods() -> list[str]:
        return [path for path in remote.objects if "/shadowpods/" in path]

    _see(agent, "ADDED", _pod())
    assert queued_keys(agent) == [pod_key("app", "web")]
    asyncio.run(pods.reconcile("app", "web"))
    assert shadowpods() == []  # its token Secret is not made yet
    _reconcile(reflector)  # writes the token Secret
    agent.queue.add(pod_key("app", "other"))  # a pod not looked at yet
    _observe(agent, remote)  # the Secret's event
    assert queued_keys(agent) == [pod_key("app", "web"), pod_key("app", "other")]
    asyncio.run(pods.reconcile("app", "web"))
    assert shadowpods() == [f"/apis/offloading.liqo.io/v1beta1/namespaces/{TWIN}/shadowpods/web"]


def test_a_shadowpods_news_go_before_the_pods_their_token_secrets_unblocked() -> None:
    """A burst of new pods unblocks a pod at every token Secret made: each of those pods is
    then to create its ShadowPod. A ShadowPod's news (the status of a pod already running
    remotely) is taken before them, or every status would wait until the burst is through."""
    agent, remote, _ = _agent(reflection_workers={TOKEN_REFLECTION: 1})
    reflector = _reflector(agent)

    _see(agent, "ADDED", _pod())
    assert queued_keys(agent) == [pod_key("app", "web")]
    _reconcile(reflector)  # writes the token Secret
    agent.queue.add(pod_key("app", "other"))  # a pod not looked at yet
    _observe(agent, remote)  # the Secret's event unblocks web
    running = {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
               "metadata": {"name": "api", "namespace": TWIN, "uid": "uid-shadow-api",
                            "resourceVersion": "7"},
               "status": {"phase": "Running"}}
    agent.informers.dispatch(REMOTE_SIDE, "shadowpods", "MODIFIED", running)  # the enforcer's
    assert queued_keys(agent) == [
        pod_key("app", "api"), pod_key("app", "web"), pod_key("app", "other")]
