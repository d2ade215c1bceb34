"""The agent's remote credentials: following the home Secret that holds them, and renewing them.

The remote kubeconfig lives in a home Secret: the VirtualNode's `kubeconfigSecretRef` (in the
VirtualNode's namespace), else `--remote-kubeconfig-secret`. The agent watches that one Secret;
a changed kubeconfig replaces the remote connection at once (`annex.kube.LiveConnection`: new
requests use it, watches are re-established with it), without a restart. `--remote-kubeconfig`
is what the agent starts with, until the Secret is read.

When the credentials are a service-account token that expires (what `annexctl peer` mints), the
agent renews it before it expires, with a TokenRequest for its own ServiceAccount (the consumer
identity may do that for itself and for no other account: shared.tenancy), uses the new token at
once and writes it back into the Secret, so that a restart uses it too.

The pure functions come first; `RemoteCredentials` does the reading and writing.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import copy
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from annex.api_errors import ApiError, error_message
from annex.api_paths import core_path
from annex.events import EventRecorder
from annex.kube import connection_from_kubeconfig
from annex.kubeapi import ClusterApi
from annex.listwatch import list_and_watch
from annex.tokens import token_claims
from home_agent.config import AgentConfig
from shared.api.builtin import SECRETS
from shared.api.virtual_node import VirtualNode

log = logging.getLogger(__name__)

KUBECONFIG_KEY = "kubeconfig"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
MIN_TOKEN_SECONDS = 600
"""The shortest lifetime a TokenRequest may ask for (ValidateTokenRequest)."""
RETRY_LIMIT = 60.0
"""Seconds between renewal attempts at most, while they fail."""

SecretRef = tuple[str, str]
"""(namespace, name) of a home Secret."""


# --- pure ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceAccountToken:
    """What the agent needs of a service-account JWT to renew it (read, not verified: the
    provider's API server verifies it; the agent only schedules and repeats the request)."""

    namespace: str
    service_account: str
    issued_at: float
    expires_at: float
    audiences: tuple[str, ...]

    @property
    def lifetime(self) -> float:
        return self.expires_at - self.issued_at

    def renewal_time(self, fraction: float) -> float:
        """When to renew: once `fraction` of the lifetime has passed."""
        return self.issued_at + fraction * self.lifetime

    def request(self) -> dict[str, Any]:
        """The TokenRequest for a token like this one: same audiences and lifetime."""
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": list(self.audiences),
                         "expirationSeconds": max(MIN_TOKEN_SECONDS, round(self.lifetime))}}


def service_account_token(token: str | None) -> ServiceAccountToken | None:
    """The claims of a service-account token that expires; None for anything else (a static
    token, a client certificate, a token without expiry: nothing to renew)."""
    claims = token_claims(token)
    if claims is None:
        return None
    subject = str(claims.get("sub") or "")
    namespace, _, name = subject.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
    expires, issued = claims.get("exp"), claims.get("iat", claims.get("nbf"))
    if (not subject.startswith(SERVICE_ACCOUNT_PREFIX) or not namespace or not name
            or not isinstance(expires, int | float) or not isinstance(issued, int | float)
            or expires <= issued):
        return None
    audiences = claims.get("aud") or ()
    if isinstance(audiences, str):
        audiences = (audiences,)
    return ServiceAccountToken(namespace, name, float(issued), float(expires),
                               tuple(str(a) for a in audiences))


def secret_kubeconfig(secret: Mapping[str, Any]) -> dict[str, Any]:
    """The kubeconfig a Secret holds under `kubeconfig`; ValueError saying what is wrong."""
    encoded = (secret.get("data") or {}).get(KUBECONFIG_KEY)
    if not encoded:
        raise ValueError(f"no {KUBECONFIG_KEY!r} key")
    try:
        kubeconfig = yaml.safe_load(base64.b64decode(encoded, validate=True))
    except (ValueError, binascii.Error, yaml.YAMLError) as error:
        raise ValueError(f"{KUBECONFIG_KEY!r} is not a kubeconfig: {error}") from None
    if not isinstance(kubeconfig, dict):
        raise ValueError(f"{KUBECONFIG_KEY!r} is not a kubeconfig")
    return kubeconfig


def with_token(kubeconfig: Mapping[str, Any], token: str) -> dict[str, Any]:
    """The kubeconfig with `token` for the user of its current context (all else kept)."""
    renewed = copy.deepcopy(dict(kubeconfig))
    current = renewed.get("current-context")
    context = next((entry.get("context") or {} for entry in renewed.get("contexts") or []
                    if entry.get("name") == current), None)
    if context is None:
        raise ValueError(f"the kubeconfig has no current context {current!r}")
    for entry in renewed.get("users") or []:
        if entry.get("name") == context.get("user"):
            entry["user"] = {**(entry.get("user") or {}), "token": token}
            return renewed
    raise ValueError(f"the kubeconfig has no user {context.get('user')!r}")


def secret_data(kubeconfig: Mapping[str, Any]) -> dict[str, str]:
    return {KUBECONFIG_KEY: base64.b64encode(yaml.safe_dump(dict(kubeconfig)).encode()).decode()}


def followed_secret(config: AgentConfig, virtual_node: VirtualNode | None) -> SecretRef | None:
    """The Secret holding the remote kubeconfig: the VirtualNode's, else the flag's."""
    if virtual_node is not None and virtual_node.spec.kubeconfig_secret_ref is not None:
        return (str(virtual_node.metadata.namespace),
                virtual_node.spec.kubeconfig_secret_ref.name)
    return config.remote_kubeconfig_secret


# --- runtime ---------------------------------------------------------------------------------


class RemoteCredentials:
    """Follows the kubeconfig Secret (read with `home`, chosen by `config` and the
    VirtualNode as it is now) and renews the token (requested with `remote`, whose live
    credentials it replaces), on the controller's loop; what goes wrong is recorded on the
    Secret with `events`."""

    def __init__(self, config: AgentConfig, home: ClusterApi, remote: ClusterApi,
                 events: EventRecorder, virtual_node: Callable[[], VirtualNode | None]) -> None:
        self.config = config
        self.home = home
        self.remote = remote
        self.live = remote.live
        self.events = events
        self.virtual_node = virtual_node
        self.followed: SecretRef | None = None
        self._secret: dict[str, Any] | None = None
        """The followed Secret as last seen."""
        self._wake = asyncio.Event()
        self._reconsider = asyncio.Event()
        self._renew_now = False
        self._listed = False
        """Set once VirtualNodes are listed: the Secret is chosen from them."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.leading: Callable[[], bool] = lambda: True
        """Whether this replica leads: a standby logs what it finds but posts no Event (the
        leader, which follows the same Secret, does)."""

    def virtual_node_changed(self) -> None:
        """VirtualNodes are listed, or one changed (the home watch's route, on the loop)."""
        self._listed = True
        self._reconsider.set()

    async def run(self) -> None:
        """Follow the Secret (every replica: a standby's watches need the current credentials
        too). The renewal, which writes, is `renew_loop`, run by the leader only."""
        watch: asyncio.Task[None] | None = None
        try:
            if not self._listed:
                await self._reconsider.wait()
            while True:
                self._reconsider.clear()
                wanted = followed_secret(self.config, self.virtual_node())
                if wanted != self.followed:
                    if watch is not None:
                        watch.cancel()
                        await asyncio.gather(watch, return_exceptions=True)
                    self.followed, self._secret, watch = wanted, None, None
                    if wanted is not None:
                        log.info("following the remote kubeconfig in Secret %s/%s", *wanted)
                        watch = asyncio.create_task(self._follow(wanted))
                await self._reconsider.wait()
        finally:
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)

    async def _follow(self, ref: SecretRef) -> None:
        namespace, name = ref
        await list_and_watch(self.home, core_path("secrets", namespace),
                             lambda event_type, obj: self._on_secret(ref, event_type, obj),
                             query={"fieldSelector": f"metadata.name={name}"},
                             name="remote-kubeconfig")

    def _on_secret(self, ref: SecretRef, event_type: str, secret: dict[str, Any]) -> None:
        if ref != self.followed:
            return
        where = "Secret {}/{}".format(*ref)
        if event_type == "DELETED":
            self._secret = None
            log.warning("%s holding the remote kubeconfig was deleted: the current credentials "
                        "stay in use", where)
            return
        self._secret = secret
        try:
            kubeconfig = secret_kubeconfig(secret)
            connection = connection_from_kubeconfig(kubeconfig,
                                                    limits=self.config.remote_limits)
        except ValueError as error:
            self._report(secret, "InvalidKubeconfig",
                         f"{where}: the remote kubeconfig is not usable ({error}): the current "
                         "credentials stay in use")
            return
        token = service_account_token(connection.token)
        current = service_account_token(self.live.current.token)
        if token is not None and token.expires_at <= time.time() and (
                current is None or current.expires_at > time.time()):
            # An old copy put back (e.g. by a Helm upgrade): keep the valid token, and write a
            # fresh one back.
            self._report(secret, "ExpiredKubeconfig",
                         f"{where}: the remote token expired at {_when(token.expires_at)}: "
                         "the current credentials stay in use and are renewed into it")
            self._renew_now = True
        elif self.live.replace(connection):
            log.info("remote credentials reloaded from %s", where)
        self._wake.set()

    def _report(self, secret: dict[str, Any], reason: str, message: str) -> None:
        log.warning("%s", message)
        if not self.leading():
            return
        task = asyncio.get_running_loop().create_task(
            self.events.record({**SECRETS.type_meta(), **secret}, reason, message))
        self._tasks.add(task)  # kept until done: the loop holds tasks weakly
        task.add_done_callback(self._tasks.discard)

    async def renew_loop(self) -> None:
        delay = 1.0
        while True:
            token = service_account_token(self.live.current.token)
            wait: float | None = None
            if token is not None and not self._renew_now:
                wait = token.renewal_time(self.config.remote_token_refresh_fraction) - (
                    time.time())
            if token is None or (wait is not None and wait > 0):
                await self._sleep(wait)
                continue
            try:
                await self.renew(token)
                self._renew_now, delay = False, 1.0
            except Exception as error:  # noqa: BLE001 - retried until it works
                log.warning("renewing the remote token of %s/%s failed (retry in %.0fs; it "
                            "expires at %s): %s", token.namespace, token.service_account, delay,
                            _when(token.expires_at), error_message(error))
                await self._sleep(delay)
                delay = min(delay * 2, RETRY_LIMIT)

    async def _sleep(self, seconds: float | None) -> None:
        """Until `seconds` pass (forever when None) or the credentials change."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def renew(self, token: ServiceAccountToken) -> None:
        """A new token for the same ServiceAccount, used at once and written to the Secret."""
        old = self.live.current
        answer = await self.remote.create(
            core_path("serviceaccounts", token.namespace, token.service_account, "token"),
            token.request())
        new_token = str(((answer or {}).get("status") or {}).get("token") or "")
        if not new_token:
            raise ValueError("the TokenRequest returned no token")
        if new_token == old.token:
            # Before Kubernetes 1.29 two requests in the same second return the same token.
            raise ValueError("the API server returned the same token (issued within the same "
                             "second): asking again")
        kubeconfig = None
        if self._secret is not None:
            try:
                kubeconfig = with_token(secret_kubeconfig(self._secret), new_token)
            except ValueError:
                kubeconfig = None  # reported when read; the new token is kept in memory
        renewed = (connection_from_kubeconfig(kubeconfig, limits=old.limits)
                   if kubeconfig is not None else replace(old, token=new_token))
        if self.live.current is old:  # not replaced from the Secret meanwhile
            self.live.replace(renewed)
        expires = service_account_token(new_token)
        log.info("remote token of %s/%s renewed (valid until %s)", token.namespace,
                 token.service_account, _when(expires.expires_at) if expires else "?")
        if kubeconfig is None or self._secret is None:
            log.info("no kubeconfig Secret is followed: the renewed token is kept in memory "
                     "only (a restart uses %s)", self.config.remote_kubeconfig)
            return
        await self._write(self._secret, kubeconfig)

    async def _write(self, secret: dict[str, Any], kubeconfig: dict[str, Any]) -> None:
        metadata = secret.get("metadata") or {}
        where = f"Secret {metadata.get('namespace')}/{metadata.get('name')}"
        try:
            # The resourceVersion makes it conditional: a Secret replaced meanwhile (by a user
            # or `annexctl peer`) is theirs, and the watch brings it.
            await self.home.patch(
                core_path("secrets", str(metadata.get("namespace")), str(metadata.get("name"))),
                {"metadata": {"resourceVersion": metadata.get("resourceVersion")},
                 "data": secret_data(kubeconfig)})
            log.info("renewed remote token written to %s", where)
        except ApiError as error:
            if error.status == 409:
                log.info("%s changed meanwhile: the renewed token was not written", where)
                return
            self._report(secret, "KubeconfigNotWritten",
                         f"{where}: the renewed remote token could not be written "
                         f"({error_message(error)}); a restart would use the older token")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
