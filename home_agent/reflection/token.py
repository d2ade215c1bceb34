"""Service-account tokens, home → twin namespace (forge:
`shared.forge.token`): for every pod bound to the virtual node in an extended namespace that
projects service-account tokens, the Secret its remote copy reads them from
(`service_account_token_secret_name(pod)`), each token requested from the home API server with
a TokenRequest bound to the home pod, refreshed before it expires, and deleted with the pod.

Tokens are per pod, so this is not a `Reflector` of a kind: it reads the agent's mirror of the
home pods bound to the virtual node and the mirror of the twin namespaces' Secrets (the agent's
informers', shared with the Secret reflector), and has its own `Controller` of pod keys
(`--serviceaccount-reflection-workers`), so a failing pod holds back neither another pod nor
another kind.

One reconcile converges one home pod key:
- namespace not extended → nothing (the twin namespace goes with the extension);
- a Secret of that name that is not ours (ownership labels and Liqo's token labels) → never
  touched; a FailedReflection Event on the pod;
- pod gone (confirmed by the home API server), no projected token, or
  `--enable-apiserver-support=false` → our Secret is deleted (nothing is ever requested then);
- our Secret fresh (issued for this pod uid, the pod's keys, the home namespace, refresh time
  not reached, not changed since we wrote it) → nothing but a look again at its refresh time: no
  TokenRequest and no write while nothing changes. After a restart a fresh Secret is reused: its
  refresh time is in an annotation;
- otherwise every token is requested again and the Secret written.
A failure is a FailedReflection Event on the home pod, and the key backs off alone.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from annex.api_errors import error_message
from annex.api_paths import core_path
from annex.controller import DONE, Controller, Result
from annex.informers import Change, Echoes, Written
from annex.mirror import Key, Mirror, key_of
from annex.writes import Foreign, confirmed_gone, create_or_refuse, delete_owned, replace_or_create
from home_agent.reflection.peering import Peering
from shared.api.builtin import PODS
from shared.forge.pod import service_account_name
from shared.forge.pod_tokens import (
    ProjectedToken,
    projected_service_account_tokens,
    service_account_token_secret_name,
)
from shared.forge.token import (
    is_token_secret,
    issued_token,
    refresh_time,
    stale_reason,
    token_request,
    token_secret,
    token_secret_pod_name,
    token_secret_summary,
)
from shared.wellknown import FAILED_REFLECTION_REASON

log = logging.getLogger(__name__)



def _content_digest(secret: Mapping[str, Any]) -> str:
    """What we wrote (of a `token_secret_summary`), to recognise a Secret changed by somebody
    else."""
    metadata = secret.get("metadata") or {}
    content = {"data": secret.get("data") or {}, "labels": metadata.get("labels") or {},
               "annotations": metadata.get("annotations") or {}}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _token_inputs(pod: Mapping[str, Any]) -> tuple[object, ...]:
    """All a reconcile reads of the pod (its key aside): its uid, service account and tokens."""
    spec = pod.get("spec") or {}
    return ((pod.get("metadata") or {}).get("uid"), service_account_name(spec),
            tuple(projected_service_account_tokens(pod)))


@dataclass(frozen=True)
class _WakeUp:
    refresh: datetime
    deadline: float
    """time.monotonic() at which the planned look comes."""


class TokenReflector:
    name = "serviceaccount-tokens"

    def __init__(self, peering: Peering, workers: int, *, pods: Mirror, secrets: Written,
                 enable_apiserver_support: bool, refresh_fraction: float) -> None:
        self.peering = peering
        self.pods = pods
        """Home pods bound to this agent's virtual node: the agent's mirror."""
        self.secrets = secrets
        """The Secrets of the twin namespaces (shared with the Secret reflector); token Secrets
        (Liqo's labels), whoever wrote them, as their `token_secret_summary` (`kept_remote`)."""
        self.enable_apiserver_support = enable_apiserver_support
        """`--enable-apiserver-support`: off, no token is ever requested."""
        self.refresh_fraction = refresh_fraction
        """`--token-refresh-fraction`: how far into a token's life it is requested again."""
        self.controller: Controller[Key] = Controller(
            self.name, self.reconcile, workers=workers, synced=peering.synced,
            on_error=self._report_failure)
        self._pod_of: dict[Key, str] = {}
        """Remote Secret key → the home pod it was written for, while the Secret exists."""
        self._written: dict[Key, str] = {}
        """Remote Secret key → digest of what we last wrote there."""
        self._wake_ups: dict[Key, _WakeUp] = {}
        self._settled: dict[Key, tuple[object, ...]] = {}
        """Pod key → the token inputs (`_token_inputs`) of the pod its last reconcile read (it
        runs, converged, or failed and is retried), until the Secret changes or a resync: a pod
        change that leaves them as they were (its status: most pod events) has nothing to do."""
        self.echoes = Echoes()
        """By Secret key."""

    # --- keyers (declared in `home_agent.routes`) -------------------------------------------

    @staticmethod
    def kept_remote(secret: dict[str, Any]) -> dict[str, Any] | None:
        """What the remote mirror keeps of a token Secret; None for any other Secret."""
        return token_secret_summary(secret) if is_token_secret(secret) else None

    def pod_keys(self, change: Change) -> Iterable[Key]:
        # A relist shows ADDED, and a restart starts with nothing settled: both look again.
        if change.event_type == "MODIFIED" and (
                self._settled.get(change.key) == _token_inputs(change.obj)):
            return ()
        self._settled.pop(change.key, None)
        return (change.key,)

    def secret_keys(self, change: Change) -> Iterable[Key]:
        """A token Secret's pod."""
        # A deletion a relist shows carries only the key: the pod comes from `_pod_of`.
        if not change.deleted and not is_token_secret(change.obj):
            return ()
        if change.deleted:
            pod_name = self._pod_of.pop(change.key, None)
        else:
            pod_name = token_secret_pod_name(change.obj)
            if pod_name is not None:
                self._pod_of[change.key] = pod_name
        if self.echoes.echo(change.key, change):
            return ()
        keys = self._pod_keys(change.key[0], pod_name)
        for key in keys:
            self._settled.pop(key, None)
        return keys

    def _pod_keys(self, remote_namespace: str, pod_name: str | None) -> tuple[Key, ...]:
        home_namespace = self.peering.twins.home_of(remote_namespace)
        if pod_name is None or home_namespace is None:
            return ()
        return ((home_namespace, pod_name),)

    def resync(self, namespace: str | None = None) -> None:
        """Look at every known pod and Secret again (namespace mappings changed), or the pods
        of one home `namespace` (its home objects listed)."""
        if namespace is not None:
            for key in self.pods.keys():
                if key[0] == namespace:
                    self.controller.add(key)
            return
        self._settled.clear()
        self.echoes.forget()
        for key in self.pods.keys():
            self.controller.add(key)
        secrets = list(self._pod_of.items())
        for (remote_namespace, _), pod_name in secrets:
            for key in self._pod_keys(remote_namespace, pod_name):
                self.controller.add(key)

    async def run(self) -> None:
        await self.controller.run()

    # --- reconcile --------------------------------------------------------------------------

    def _owned(self, obj: Mapping[str, Any]) -> bool:
        return self.peering.owns(obj) and is_token_secret(obj)

    def wanted_tokens(self, pod: Mapping[str, Any] | None) -> list[ProjectedToken]:
        """The tokens to keep for `pod`: none when the pod is gone or token support is off."""
        if pod is None or not self.enable_apiserver_support:
            return []
        return projected_service_account_tokens(pod)

    async def reconcile(self, key: Key) -> Result:
        namespace, name = key
        remote_namespace = self.peering.twins.accepted(namespace)
        if remote_namespace is None:
            self._settled.pop(key, None)
            return DONE
        pod = self.pods.get(key)
        if pod is None:
            self._settled.pop(key, None)
        else:
            self._settled[key] = _token_inputs(pod)
        secret_key = (remote_namespace, service_account_token_secret_name(name))
        current = self.secrets.latest(secret_key)
        tokens = self.wanted_tokens(pod)
        if current is not None and not self._owned(current):
            if tokens and pod is not None:
                await self._refuse(pod, secret_key)
            return DONE
        if not tokens or pod is None:
            # A mirror that missed the pod must never cost a running remote pod its tokens:
            # the home API server confirms it is gone.
            if current is not None and (pod is not None or await confirmed_gone(
                    self.peering.home, core_path("pods", *key))):
                await self._delete(current)
            if pod is None and current is None:
                self._forget(key, secret_key)
            return DONE
        now = datetime.now(UTC)
        reason = self._stale(secret_key, current, pod, tokens, now)
        if reason is None:
            assert current is not None
            return self._look_again_at(key, refresh_time(current), now)
        log.debug("requesting service-account tokens for pod %s/%s: %s", namespace, name, reason)
        issued = [issued_token(token.key, await self._request(pod, token),
                               token.expiration_seconds) for token in tokens]
        peering = self.peering
        desired = token_secret(pod, remote_namespace, issued, peering.home_cluster_id,
                               peering.remote_cluster_id, self.refresh_fraction)
        with self.echoes.writing(secret_key):
            written = await self._write(pod, secret_key, current, desired)
            self.echoes.answered(secret_key, written)
        if written is None:
            return DONE
        return self._look_again_at(key, refresh_time(desired), now)

    def _stale(self, secret_key: Key, current: Mapping[str, Any] | None,
               pod: Mapping[str, Any], tokens: list[ProjectedToken], now: datetime) -> str | None:
        if current is None:
            return "no token Secret"
        written = self._written.get(secret_key)
        if written is not None and written != _content_digest(current):
            return "the token Secret was changed remotely"
        return stale_reason(current, pod, [token.key for token in tokens], now)

    def _look_again_at(self, key: Key, refresh: datetime | None, now: datetime) -> Result:
        """A look at the key at its refresh time, planned once (reconciles of a fresh Secret
        come with every pod status change; each must not add a timer)."""
        if refresh is None:
            return DONE
        previous = self._wake_ups.get(key)
        if previous is not None and previous.refresh == refresh and (
                time.monotonic() < previous.deadline):
            return DONE
        delay = max(0.0, (refresh - now).total_seconds())
        self._wake_ups[key] = _WakeUp(refresh, time.monotonic() + delay)
        return Result(requeue_after=delay)

    async def _request(self, pod: Mapping[str, Any], token: ProjectedToken) -> dict[str, Any]:
        metadata = pod.get("metadata") or {}
        account = service_account_name(pod.get("spec") or {})
        path = core_path("serviceaccounts", str(metadata.get("namespace")), account, "token")
        answer = await self.peering.home.create(path, token_request(pod, token))
        if not isinstance(answer, dict):
            raise ValueError(f"unexpected TokenRequest answer for service account {account!r}")
        return answer

    async def _write(self, pod: Mapping[str, Any], secret_key: Key,
                     current: Mapping[str, Any] | None,
                     desired: dict[str, Any]) -> dict[str, Any] | None:
        """Create or overwrite the Secret; the written object, or None when a foreign Secret is
        in the way."""
        remote = self.peering.remote
        collection, path = core_path("secrets", secret_key[0]), core_path("secrets", *secret_key)
        if current is None:
            try:
                written, created = await create_or_refuse(remote, collection, path, desired,
                                                          self._owned)
            except Foreign:
                await self._refuse(pod, secret_key)
                return None
            if not created:
                current = written
        if current is not None:
            body = {**desired, "metadata": {
                **desired["metadata"],
                "resourceVersion": (current.get("metadata") or {}).get("resourceVersion")}}
            written = await replace_or_create(remote, path, body,
                                              lambda: remote.create(collection, desired))
        self.secrets.answered(None if current is None else (
            current.get("metadata") or {}).get("resourceVersion"), written)
        self._written[secret_key] = _content_digest(token_secret_summary(desired))
        return written if isinstance(written, dict) else desired

    async def _delete(self, current: Mapping[str, Any]) -> None:
        await delete_owned(self.peering.remote, core_path("secrets", *key_of(dict(current))),
                           (current.get("metadata") or {}).get("uid"))

    def _forget(self, key: Key, secret_key: Key) -> None:
        """The pod and its Secret are gone: nothing of them is kept."""
        self._written.pop(secret_key, None)
        self.echoes.forget(secret_key)
        self._wake_ups.pop(key, None)

    async def _refuse(self, pod: Mapping[str, Any], secret_key: Key) -> None:
        message = (f"remote Secret {secret_key[0]}/{secret_key[1]} exists and was not created by "
                   f"this cluster: left alone, service-account tokens not reflected")
        log.warning("%s", message)
        await self._report(pod, message)

    async def _report(self, pod: Mapping[str, Any], message: str) -> None:
        await self.peering.events.record({**pod, **PODS.type_meta()},
                                 FAILED_REFLECTION_REASON, message)

    async def _report_failure(self, key: Key, error: Exception) -> None:
        """A failed reconcile (the controller logs it and backs the key off), on its pod."""
        pod = self.pods.get(key)
        if pod is not None:
            await self._report(pod, "service-account token reflection failed (retrying): "
                               f"{error_message(error)}")
