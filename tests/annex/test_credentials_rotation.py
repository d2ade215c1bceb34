"""Credentials that rotate while a component runs: a projected service-account token file or a
kubeconfig's tokenFile read again (once a minute, and at once after a 401), an exec plugin run
again when its credential expires or is refused, as client-go does."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client
from kubernetes.config import incluster_config

from annex.api_errors import ApiError
from annex.api_paths import core_path
from annex.kube import Connection, load_connection
from annex.kubeapi import ClusterApi
from annex.request_metrics import RequestMetrics
from annex.tokens import ExecToken, FileToken


@dataclasses.dataclass
class Account:
    """A ServiceAccount allowed to read and write ConfigMaps in its namespace; its tokens are
    bound to Secrets, so that deleting a Secret revokes its token (on any API server)."""

    remote: Any
    namespace: str
    name: str = "rotating"

    def token(self) -> str:
        """A new token, bound to a Secret of its own (`revoke` takes it back)."""
        secret = f"binding-{uuid.uuid4().hex[:8]}"
        self.remote.core.create_namespaced_secret(
            self.namespace, {"metadata": {"name": secret}})
        answer = self.remote.core.create_namespaced_service_account_token(
            self.name, self.namespace, client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(
                    audiences=[], expiration_seconds=3600,
                    bound_object_ref=client.V1BoundObjectReference(
                        api_version="v1", kind="Secret", name=secret))))
        token = str(answer.status.token)
        self._bindings[token] = secret
        return token

    def revoke(self, token: str) -> None:
        self.remote.core.delete_namespaced_secret(self._bindings.pop(token), self.namespace)

    def connection(self, **changes: Any) -> Connection:
        """The cluster's connection, authenticated by a token only."""
        base = load_connection(str(self.remote.kubeconfig))
        return dataclasses.replace(base, token=None, certificate_path=None,
                                   private_key_path=None, **changes)

    def __post_init__(self) -> None:
        self._bindings: dict[str, str] = {}


@pytest.fixture(scope="module")
def account(remote: Any) -> Iterator[Account]:
    namespace = f"rotation-{uuid.uuid4().hex[:8]}"
    remote.core.create_namespace({"metadata": {"name": namespace}})
    made = Account(remote, namespace)
    remote.core.create_namespaced_service_account(namespace, {"metadata": {"name": made.name}})
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    role: dict[str, Any] = {
        "metadata": {"name": made.name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "create"]}]}
    binding: dict[str, Any] = {
        "metadata": {"name": made.name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": made.name},
        "subjects": [{"kind": "ServiceAccount", "name": made.name, "namespace": namespace}]}
    rbac.create_namespaced_role(namespace, role)  # type: ignore[arg-type]
    rbac.create_namespaced_role_binding(namespace, binding)  # type: ignore[arg-type]
    yield made
    remote.core.delete_namespace(namespace)


class CountingFileToken(FileToken):
    reads = 0

    def _fetch(self) -> tuple[str, float]:
        self.reads += 1
        return super()._fetch()


def _list_configmaps(connection: Connection, account: Account, times: int = 1,
                     metrics: RequestMetrics | None = None,
                     between: Any = None) -> int:
    """How many of `times` lists of the account's ConfigMaps were answered (`between` run
    between them); ApiError when one was refused."""
    async def main() -> int:
        api = ClusterApi(connection, metrics=metrics)
        answers = []
        try:
            for attempt in range(times):
                if attempt and between is not None:
                    between()
                answers.append(await api.list(core_path("configmaps", account.namespace)))
        finally:
            await api.close()
        return len(answers)
    return asyncio.run(main())


def test_a_client_keeps_working_when_its_token_file_is_replaced_and_the_old_token_revoked(
        account: Account, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    first, second = account.token(), account.token()
    token_file.write_text(first)
    connection = account.connection(token_source=FileToken(str(token_file)))

    def rotate() -> None:  # as kubelet does, the old token then revoked
        token_file.write_text(second)
        account.revoke(first)

    assert _list_configmaps(connection, account, times=2, between=rotate) == 2


def test_a_401_reads_the_token_file_once_more_and_sends_the_request_again_only_if_it_changed(
        account: Account, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    revoked = account.token()
    token_file.write_text(revoked)
    source = CountingFileToken(str(token_file))
    source.read()
    account.revoke(revoked)
    metrics = RequestMetrics()

    with pytest.raises(ApiError) as refused:
        _list_configmaps(dataclasses.replace(account.connection(), token_source=source),
                         account, metrics=metrics)

    assert refused.value.status == 401
    assert source.reads == 2  # the first, and one after the 401: no more
    assert sum(n for key, n in metrics.snapshot().items() if key[0] == "401") == 1


def test_a_token_file_is_read_again_once_a_minute_without_waiting_for_a_401(
        tmp_path: Path) -> None:
    now = [1000.0]
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    source = FileToken(str(token_file), clock=lambda: now[0])
    assert source.renew_if_stale() == "first"
    token_file.write_text("second")
    now[0] += 59
    assert not source.stale() and source.renew_if_stale() == "first"
    now[0] += 1
    assert source.stale() and source.renew_if_stale() == "second"


def test_a_token_file_that_cannot_be_read_keeps_the_token_there_was(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    source = FileToken(str(token_file), max_age=0)
    assert source.read() == "first"
    token_file.write_text("")  # kubelet's write is atomic, but an empty file says nothing
    assert source.read() == "first"
    token_file.unlink()
    assert source.read() == "first"


def test_the_in_cluster_token_is_read_again_when_kubelet_rotates_it(
        account: Account, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = yaml.safe_load(account.remote.kubeconfig.read_text())
    cluster = contents["clusters"][0]["cluster"]
    authority = tmp_path / "ca.crt"
    if cluster.get("certificate-authority-data"):
        authority.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    elif cluster.get("certificate-authority"):
        authority.write_bytes((account.remote.kubeconfig.parent
                               / cluster["certificate-authority"]).read_bytes())
    else:
        pytest.skip("the cluster's kubeconfig names no certificate authority")
    server = urlsplit(cluster["server"])
    token_file = tmp_path / "token"
    first, second = account.token(), account.token()
    token_file.write_text(first)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port or 443))
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token_file))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(authority))

    connection = load_connection(None)  # as in a pod

    def rotate() -> None:
        token_file.write_text(second)
        account.revoke(first)

    assert connection.token_source == FileToken(str(token_file))
    assert _list_configmaps(connection, account, times=2, between=rotate) == 2


def _exec_kubeconfig(account: Account, tmp_path: Path, expires: str) -> Path:
    """A kubeconfig whose user's token comes from an exec plugin printing the token in the file
    `plugin-token` (and counting its runs in `plugin-runs`)."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, sys\n"
        f"here = pathlib.Path({str(tmp_path)!r})\n"
        "runs = here / 'plugin-runs'\n"
        "runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else '1')\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',\n"
        "  'kind': 'ExecCredential', 'status': {\n"
        "  'token': (here / 'plugin-token').read_text(),\n"
        f"  'expirationTimestamp': {expires!r}}}}}))\n")
    contents = yaml.safe_load(account.remote.kubeconfig.read_text())
    context = next(c for c in contents["contexts"]
                   if c["name"] == contents["current-context"])["context"]
    for user in contents["users"]:
        if user["name"] == context["user"]:
            user["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                     "command": sys.executable, "args": [str(plugin)],
                                     "interactiveMode": "Never"}}
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(contents))
    return path


def test_an_exec_plugin_runs_again_when_the_server_refuses_its_credential(
        account: Account, tmp_path: Path) -> None:
    first, second = account.token(), account.token()
    (tmp_path / "plugin-token").write_text(first)
    kubeconfig = _exec_kubeconfig(account, tmp_path, "2999-01-01T00:00:00Z")
    connection = load_connection(str(kubeconfig))
    assert isinstance(connection.token_source, ExecToken)
    assert connection.token == first

    # Revoked before its first use: an API server that caches successful authentications
    # (kube-apiserver, 10 s) refuses it at once too.
    (tmp_path / "plugin-token").write_text(second)
    account.revoke(first)

    assert _list_configmaps(connection, account) == 1
    assert (tmp_path / "plugin-runs").read_text() == "2"  # loaded, then after the 401


def test_an_exec_plugin_runs_again_once_its_credential_expires(
        account: Account, tmp_path: Path) -> None:
    (tmp_path / "plugin-token").write_text("first")
    kubeconfig = _exec_kubeconfig(account, tmp_path, "2030-01-01T00:00:00Z")
    exec_config = yaml.safe_load(kubeconfig.read_text())
    user = next(u for u in exec_config["users"] if "exec" in u["user"])["user"]["exec"]
    now = [1893455000.0]  # 2029-12-31T23:43:20Z
    source = ExecToken(user, str(tmp_path), clock=lambda: now[0])
    assert source.renew_if_stale() == "first"
    (tmp_path / "plugin-token").write_text("second")
    assert source.renew_if_stale() == "first"
    now[0] = 1893456000.0 - 5  # within the skew of its expiry
    assert source.renew_if_stale() == "second"
    assert (tmp_path / "plugin-runs").read_text() == "2"


def test_a_kubeconfig_token_file_is_followed_relative_to_the_kubeconfig(
        account: Account, tmp_path: Path) -> None:
    contents = yaml.safe_load(account.remote.kubeconfig.read_text())
    for user in contents["users"]:
        user["user"] = {"tokenFile": "token"}
    (tmp_path / "token").write_text(account.token())
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(contents))

    connection = load_connection(str(path))

    assert connection.token_source == FileToken(str(tmp_path / "token"))
    assert _list_configmaps(connection, account) == 1


def test_a_watch_refused_with_401_starts_again_with_the_rotated_token(
        account: Account, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    first, second = account.token(), account.token()
    token_file.write_text(first)
    source = FileToken(str(token_file))
    source.read()  # the component started with the first token
    connection = account.connection(token_source=source)
    path = core_path("configmaps", account.namespace)
    version = account.remote.core.list_namespaced_config_map(
        account.namespace).metadata.resource_version

    async def scenario() -> tuple[int, str]:
        api = ClusterApi(connection)
        try:
            # Revoked before its first use: an API server that caches successful
            # authentications (kube-apiserver, 10 s) refuses it at once too.
            token_file.write_text(second)
            account.revoke(first)
            with pytest.raises(ApiError) as refused:
                async for _ in api.watch(path, version, timeout_seconds=1):
                    pass
            async for event in api.watch(path, version, timeout_seconds=1):  # the caller's retry
                return refused.value.status, str(event["type"])
            return refused.value.status, "ended"
        finally:
            await api.close()

    status, _ = asyncio.run(scenario())
    assert status == 401
