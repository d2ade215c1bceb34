"""End to end: the virtual node's kubelet API, called as the home API server calls a kubelet
(HTTPS to the node's advertised port, a bearer token reviewed at home) — authentication,
authorization as a kubelet's Webhook mode maps paths, only the pods of this node, logs served
from the twin pod through the remote API server.

The agent runs as a local process here, so the test reaches its kubelet port on loopback on
real clusters too."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from kubernetes import client

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent

# The agent's serving certificate is self-signed, as a kubelet's is by default; kube-apiserver
# does not verify it unless started with --kubelet-certificate-authority.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def kubelet_port(home: ClusterHandle, node_name: str) -> int:
    def advertised() -> int:
        node = home.core.read_node(node_name)
        return int(node.status.daemon_endpoints.kubelet_endpoint.port or 0)
    return wait_for(advertised, timeout=30, message="the virtual node advertises its port")


@pytest.fixture
def callers(home: ClusterHandle, namespace: str) -> Iterator[dict[str, str]]:
    """Bearer tokens of home ServiceAccounts: `admin` may use the kubelet API (as
    system:kubelet-api-admin grants it), `nobody` may not."""
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    name = f"annex-e2e-kubelet-{uuid.uuid4().hex[:8]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["nodes/proxy", "nodes/log", "nodes/stats",
                                          "nodes/metrics"],
         "verbs": ["get", "create"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": namespace}]})
    tokens = {}
    for account in ("admin", "nobody"):
        home.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        tokens[account] = str(home.core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token)
    try:
        yield tokens
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


class Kubelet:
    def __init__(self, port: int) -> None:
        self.base = f"https://127.0.0.1:{port}"

    def get(self, path: str, token: str | None = None, **params: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.get(self.base + path, headers=headers, params=params, verify=False,
                            timeout=30)


LOG_LINES = ["one", "two", "three"]


def echo_pod() -> dict[str, Any]:
    """A pod that logs three lines, then echoes what connects to its port 80 (busybox's nc,
    which kubesim's runtime simulates)."""
    script = "; ".join(f"echo {line}" for line in LOG_LINES) + "; nc -lk -p 80 -e cat"
    return {"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "busybox:1.36",
                                     "command": ["sh", "-c", script],
                                     "ports": [{"containerPort": 80}]}],
                     **REMOTE_STRATEGY}}


@pytest.fixture
def kubelet(home: ClusterHandle, peered: RunningAgent) -> Kubelet:
    return Kubelet(kubelet_port(home, peered.node_name))


@pytest.fixture
def offloaded_pod(home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent,
                  namespace: str) -> tuple[str, str]:
    """A pod running remotely: (its name, the twin namespace)."""
    remote_namespace = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, echo_pod())
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=60, message="the pod runs remotely and says so at home")
    return "web", remote_namespace


def test_anonymous_and_unauthorized_callers_are_refused(kubelet: Kubelet,
                                                        callers: dict[str, str],
                                                        peered: RunningAgent,
                                                        namespace: str) -> None:
    assert kubelet.get("/pods").status_code == 401
    assert kubelet.get("/pods", token="not-a-token").status_code == 401
    refused = kubelet.get("/pods", token=callers["nobody"])
    assert refused.status_code == 403
    assert refused.text.strip() == (
        f"Forbidden (user=system:serviceaccount:{namespace}:nobody, verb=get, "
        "resource=nodes, subresource=proxy)")
    refused = kubelet.get(f"/containerLogs/{namespace}/web/web", token=callers["nobody"])
    assert refused.status_code == 403
    refused = kubelet.get("/stats/summary", token=callers["nobody"])
    assert refused.status_code == 403
    assert "subresource=stats" in refused.text
    assert kubelet.get("/healthz", token=callers["admin"]).text == "ok"


def test_only_the_pods_of_this_node_are_served(home: ClusterHandle, kubelet: Kubelet,
                                               callers: dict[str, str],
                                               offloaded_pod: tuple[str, str],
                                               namespace: str) -> None:
    admin = callers["admin"]
    listed = kubelet.get("/pods", token=admin).json()
    assert listed["kind"] == "PodList"
    assert (namespace, "web") in {(p["metadata"]["namespace"], p["metadata"]["name"])
                                  for p in listed["items"]}
    # A home pod the virtual node does not run: unknown here, whatever runs it.
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "local"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                 "nodeSelector": {"annex-e2e/no-such-node": "true"}}})
    for path in (f"/containerLogs/{namespace}/local/web",
                 f"/containerLogs/{namespace}/absent/web",
                 "/containerLogs/kube-system/web/web"):
        answer = kubelet.get(path, token=admin)
        assert answer.status_code == 404, path
        assert "does not exist" in answer.text, answer.text
    answer = kubelet.get(f"/containerLogs/{namespace}/web/sidecar", token=admin)
    assert answer.status_code == 404
    assert answer.text.strip() == 'container "sidecar" not found in pod "web"'


def remote_log(remote: ClusterHandle, remote_namespace: str, **options: Any) -> str:
    return str(remote.core.read_namespaced_pod_log("web", remote_namespace, container="web",
                                                   **options))


def test_logs_come_from_the_twin_pod(remote: ClusterHandle, kubelet: Kubelet,
                                     callers: dict[str, str],
                                     offloaded_pod: tuple[str, str], namespace: str) -> None:
    _, remote_namespace = offloaded_pod
    admin = callers["admin"]
    wait_for(lambda: remote_log(remote, remote_namespace), timeout=30,
             message="the remote container has written something")
    whole = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin)
    assert whole.status_code == 200, whole.text
    assert whole.text == remote_log(remote, remote_namespace) == "one\ntwo\nthree\n"
    last = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin, tailLines="1")
    assert last.status_code == 200
    assert last.text == "three\n"
    stamped = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin,
                          timestamps="true", limitBytes="200")
    assert [line.split(" ", 1)[1] for line in stamped.text.splitlines()] == LOG_LINES
    # The remote's refusal, relayed with its status and words: no previous container.
    previous = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin, previous="true")
    assert previous.status_code == 400, previous.text
    assert previous.text.strip() == 'previous terminated container "web" in pod "web" not found'


def test_a_followed_log_streams(remote: ClusterHandle, kubelet: Kubelet,
                                callers: dict[str, str], offloaded_pod: tuple[str, str],
                                namespace: str) -> None:
    _, remote_namespace = offloaded_pod
    wait_for(lambda: remote_log(remote, remote_namespace), timeout=30,
             message="the remote container has written something")
    with requests.get(f"{kubelet.base}/containerLogs/{namespace}/web/web",
                      params={"follow": "true", "tailLines": "1"}, verify=False, stream=True,
                      headers={"Authorization": f"Bearer {callers['admin']}"},
                      timeout=30) as followed:
        assert followed.status_code == 200
        # the tail's line arrives while the stream stays open
        assert next(followed.iter_lines()) == b"three"


# --- through the home API server, as kubectl reaches the virtual node -----------------------


def agent_address(home: ClusterHandle) -> str:
    """Where the home API server reaches the agent process of this test: E2E_AGENT_ADDRESS, or
    this machine's address on the route to the home API server (loopback for kubesim)."""
    if os.environ.get("E2E_AGENT_ADDRESS"):
        return os.environ["E2E_AGENT_ADDRESS"]
    host = urlsplit(home.api_client.configuration.host).hostname or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 443))
        return str(probe.getsockname()[0])


@pytest.fixture
def reachable(home: ClusterHandle, peer: Any, tmp_path: Path) -> RunningAgent:
    """An agent whose node address the home API server can dial, trusting the cluster CA for
    the API server's kubelet client certificate (as kubelets of kubeadm clusters do)."""
    ca = home.core.read_namespaced_config_map("kube-root-ca.crt", "kube-system").data["ca.crt"]
    (tmp_path / "home-ca.crt").write_text(ca)
    agent: RunningAgent = peer("--agent-ip", agent_address(home),
                               "--kubelet-client-ca", str(tmp_path / "home-ca.crt"))
    return agent


@pytest.fixture
def remote_web(home: ClusterHandle, reachable: RunningAgent, namespace: str) -> str:
    """A pod of `namespace` running remotely, with port 80 declared; its twin namespace."""
    remote_namespace = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, echo_pod())
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=60, message="the pod runs remotely and says so at home")
    return remote_namespace


def test_logs_through_the_home_api_server(home: ClusterHandle, remote: ClusterHandle,
                                          remote_web: str, namespace: str) -> None:
    wait_for(lambda: remote_log(remote, remote_web), timeout=30,
             message="the remote container has written something")
    text = home.core.read_namespaced_pod_log("web", namespace, container="web")
    assert text == remote_log(remote, remote_web) == "one\ntwo\nthree\n"
    with pytest.raises(client.ApiException) as caught:
        home.core.read_namespaced_pod_log("web", namespace, container="web", previous=True)
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"].strip() == (
        'previous terminated container "web" in pod "web" not found')
    followed = home.core.read_namespaced_pod_log("web", namespace, container="web",
                                                 follow=True, tail_lines=1,
                                                 _preload_content=False)
    try:
        # the tail arrives while the stream stays open
        assert next(followed.stream(64)) == b"three\n"
    finally:
        followed.release_conn()


def test_exec_through_the_home_api_server(home: ClusterHandle, remote_web: str,
                                          namespace: str) -> None:
    from kubernetes.stream import stream

    session = stream(home.core.connect_get_namespaced_pod_exec, "web", namespace,
                     container="web", command=["sh", "-c", "cat; echo oops >&2; exit 3"],
                     stdin=True, stdout=True, stderr=True, tty=False,
                     _preload_content=False)
    session.write_stdin("hello\n")
    session.close_channel(0)  # end of stdin (v5.channel.k8s.io)
    session.run_forever(timeout=30)
    assert session.read_stdout() == "hello\n"
    assert session.read_stderr() == "oops\n"
    assert session.returncode == 3


def test_port_forward_through_the_home_api_server(home: ClusterHandle, remote_web: str,
                                                  namespace: str) -> None:
    from kubernetes.stream import portforward

    forward = portforward(home.core.connect_get_namespaced_pod_portforward, "web", namespace,
                          ports="80")
    connection = forward.socket(80)
    connection.settimeout(30)
    try:
        connection.sendall(b"ping\n")
        assert connection.recv(1024) == b"ping\n"
    finally:
        connection.close()
    assert forward.error(80) is None


async def spdy_exec(port: int, token: str, path: str, query: list[tuple[str, str]],
                    stdin: bytes) -> tuple[bytes, bytes, int | None, str]:
    """exec as kube-apiserver runs it on a kubelet (SPDY, v4.channel.k8s.io): (stdout,
    stderr, exit code, error message)."""
    import ssl
    from urllib.parse import urlencode

    import spdy3
    from spdy3 import channels, upgrade

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    headers = [*upgrade.upgrade_request_headers([upgrade.REMOTECOMMAND_V4]),
               ("Authorization", f"Bearer {token}")]
    writer.write(upgrade.request_bytes("POST", f"{path}?{urlencode(query)}",
                                       f"127.0.0.1:{port}", headers))
    answer = await upgrade.read_response(reader)
    assert answer.status == 101, (answer.status, answer.body)
    assert answer.header(upgrade.HEADER_PROTOCOL_VERSION) == upgrade.REMOTECOMMAND_V4
    connection = spdy3.Connection(reader, writer, server=False)
    try:
        streams = {}
        for kind in (channels.ERROR, channels.STDIN, channels.STDOUT, channels.STDERR):
            streams[kind] = await connection.open_stream({channels.STREAM_TYPE: kind})
        await streams[channels.STDIN].write(stdin)
        await streams[channels.STDIN].close()
        out, err, status = await asyncio.wait_for(asyncio.gather(
            streams[channels.STDOUT].read_all(), streams[channels.STDERR].read_all(),
            streams[channels.ERROR].read_all()), 30)
    finally:
        await connection.close()
    code, message = channels.parse_status(status)
    return out, err, code, message


def test_exec_over_spdy_as_the_api_server_runs_it(kubelet: Kubelet, callers: dict[str, str],
                                                  offloaded_pod: tuple[str, str],
                                                  namespace: str) -> None:
    port = int(kubelet.base.rsplit(":", 1)[1])
    # the kubelet's names, as kube-apiserver's streamParams writes them (strategy.go)
    query = [("command", "sh"), ("command", "-c"), ("command", "cat; echo oops >&2; exit 3"),
             ("error", "1"), ("input", "1"), ("output", "1")]
    out, err, code, message = asyncio.run(spdy_exec(
        port, callers["admin"], f"/exec/{namespace}/web/web", query, b"hello\n"))
    assert (out, err, code) == (b"hello\n", b"oops\n", 3), message
    # The same for a caller who may not: refused before anything reaches the remote.
    with pytest.raises(AssertionError, match="403"):
        asyncio.run(spdy_exec(port, callers["nobody"], f"/exec/{namespace}/web/web", query,
                              b""))


async def websocket_exec(port: int, token: str, path: str, query: list[tuple[str, str]],
                         stdin: bytes) -> tuple[bytes, bytes, int | None]:
    """exec as an API server that proxies a WebSocket client runs it (v5.channel.k8s.io)."""
    import aiohttp

    from spdy3 import channels, upgrade

    output = {channels.CHANNEL_STDOUT: b"", channels.CHANNEL_STDERR: b"",
              channels.CHANNEL_ERROR: b""}
    async with aiohttp.ClientSession() as session, session.ws_connect(
            f"https://127.0.0.1:{port}{path}", params=query, ssl=False,
            protocols=[upgrade.REMOTECOMMAND_V5], headers={"Authorization": f"Bearer {token}"},
    ) as ws:
        assert ws.protocol == upgrade.REMOTECOMMAND_V5
        # a binary message, then a text one: the Python client sends str data as text
        await ws.send_bytes(channels.channel_message(channels.CHANNEL_STDIN, stdin[:1]))
        await ws.send_str(channels.channel_message(channels.CHANNEL_STDIN, stdin[1:]).decode())
        await ws.send_bytes(channels.close_message(channels.CHANNEL_STDIN))
        async for message in ws:
            channel, data = channels.parse_channel_message(message.data)
            output[channel] += data
    code, _ = channels.parse_status(output[channels.CHANNEL_ERROR])
    return output[channels.CHANNEL_STDOUT], output[channels.CHANNEL_STDERR], code


def test_exec_over_websocket_as_an_older_api_server_proxies_it(
        kubelet: Kubelet, callers: dict[str, str], offloaded_pod: tuple[str, str],
        namespace: str) -> None:
    port = int(kubelet.base.rsplit(":", 1)[1])
    query = [("command", "sh"), ("command", "-c"), ("command", "cat; echo oops >&2; exit 4"),
             ("error", "1"), ("input", "1"), ("output", "1")]
    assert asyncio.run(websocket_exec(port, callers["admin"], f"/exec/{namespace}/web/web",
                                      query, b"hi\n")) == (b"hi\n", b"oops\n", 4)


def test_usage_is_served_for_the_offloaded_pods(remote: ClusterHandle, kubelet: Kubelet,
                                                callers: dict[str, str], peered: RunningAgent,
                                                offloaded_pod: tuple[str, str],
                                                namespace: str) -> None:
    """From the remote metrics API where there is one (metrics-server); without one the node
    answers with no pod samples rather than invented zeros."""
    _, remote_namespace = offloaded_pod
    summary = kubelet.get("/stats/summary", token=callers["admin"])
    assert summary.status_code == 200
    assert summary.json()["node"]["nodeName"] == peered.node_name
    metrics = kubelet.get("/metrics/resource", token=callers["admin"])
    assert metrics.status_code == 200
    assert "resource_scrape_error 0" in metrics.text
    try:
        client.CustomObjectsApi(remote.api_client).list_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", remote_namespace, "pods")
    except client.exceptions.ApiException as error:
        assert error.status == 404  # no metrics API on the remote
        assert summary.json()["pods"] == []
        return
    wait_for(lambda: any(p["podRef"]["name"] == "web" for p in kubelet.get(
        "/stats/summary", token=callers["admin"]).json()["pods"]), timeout=120,
        message="the remote metrics API has a sample of the pod")


@pytest.fixture
def metrics_apis(home: ClusterHandle, remote: ClusterHandle) -> Iterator[None]:
    """metrics-server on both clusters: kubesim's stand-in, installed for the test; a real
    cluster's own, or the test is skipped."""
    if home.sim is None:
        for cluster in (home, remote):
            if "metrics.k8s.io" not in [g.name for g in client.ApisApi(
                    cluster.api_client).get_api_versions().groups]:
                pytest.skip(f"no metrics-server on the {cluster.name} cluster")
        yield
        return
    from kubesim.metricsserver import (
        MetricsServerSettings,
        install_metrics_server,
        remove_metrics_server,
    )

    servers = [(cluster, cluster.run(lambda c=cluster: install_metrics_server(
        c.sim, MetricsServerSettings(resolution=1.0), serving=True)))
        for cluster in (home, remote)]
    try:
        yield
    finally:
        for cluster, server in servers:
            cluster.thread.call(remove_metrics_server(cluster.sim, server))


def test_the_home_metrics_api_shows_an_offloaded_pod(home: ClusterHandle, namespace: str,
                                                     metrics_apis: None,
                                                     remote_web: str) -> None:
    """`kubectl top pod` at home: the home metrics-server scrapes the virtual node's
    /metrics/resource, which the agent serves from the remote metrics API."""
    metrics = client.CustomObjectsApi(home.api_client)

    def sample() -> dict[str, Any] | None:
        try:
            return dict(metrics.get_namespaced_custom_object(
                "metrics.k8s.io", "v1beta1", namespace, "pods", "web"))
        except client.exceptions.ApiException as error:
            assert error.status == 404, error.body
            return None

    pod = wait_for(sample, timeout=120, message="the home metrics API has the offloaded pod")
    [container] = pod["containers"]
    assert container["name"] == "web" and container["usage"]["memory"] not in ("", "0")
    if shutil.which("kubectl") is not None:
        top = subprocess.run(["kubectl", "--kubeconfig", str(home.kubeconfig), "top", "pod",
                              "web", "-n", namespace, "--no-headers"],
                             capture_output=True, text=True, timeout=60)
        assert top.returncode == 0, top.stderr
        assert top.stdout.split()[0] == "web"


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_a_cut_ends_a_followed_log_and_refuses_new_requests_at_once(
        remote: ClusterHandle, kubelet: Kubelet, callers: dict[str, str],
        peered: RunningAgent, offloaded_pod: tuple[str, str], namespace: str) -> None:
    from tests.e2e.conftest import consumer_user

    path = f"/containerLogs/{namespace}/web/web"
    faults = remote.sim.faults
    with requests.get(f"{kubelet.base}{path}", params={"follow": "true"}, verify=False,
                      stream=True, headers={"Authorization": f"Bearer {callers['admin']}"},
                      timeout=60) as followed:
        lines = followed.iter_lines()
        assert next(lines) == b"one"
        # Silence, not a refusal: only the agent's health checks can tell the link is gone.
        remote.run(lambda: faults.blackhole(user=consumer_user(peered.home_id)))
        try:
            rest = list(lines)  # ends (a read timeout would raise instead)
        finally:
            remote.run(faults.restore)
    assert rest == [b"two", b"three"]
    remote.run(lambda: faults.refuse(user=consumer_user(peered.home_id)))
    try:
        refusal = wait_for(lambda: (r := kubelet.get(path, token=callers["admin"]))
                           .status_code == 503 and r.text, timeout=30,
                           message="the node is declared unreachable")
        assert "is unreachable" in refusal  # at once: nothing is tried until the link is back
    finally:
        remote.run(faults.restore)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl on PATH")
def test_the_stock_kubectl_reads_logs_and_execs(home: ClusterHandle, remote_web: str,
                                                namespace: str) -> None:
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(home.kubeconfig), "-n", namespace,
                               *args], capture_output=True, text=True, timeout=60)

    logs = kubectl("logs", "web", "--tail=2")
    assert (logs.returncode, logs.stdout) == (0, "two\nthree\n"), logs.stderr
    run = kubectl("exec", "web", "--", "sh", "-c", "echo hi; echo oops >&2; exit 2")
    assert (run.returncode, run.stdout, run.stderr.splitlines()[0]) == (2, "hi\n", "oops"), \
        run.stderr


def test_a_terminal_takes_the_size_the_client_sets(home: ClusterHandle, remote_web: str,
                                                   namespace: str) -> None:
    """exec with a tty: a resize on channel 4 reaches the container's terminal."""
    from kubernetes.stream import stream

    session = stream(home.core.connect_get_namespaced_pod_exec, "web", namespace,
                     container="web", command=["sh"], stdin=True, stdout=True, stderr=False,
                     tty=True, _preload_content=False)
    try:
        session.write_channel(4, json.dumps({"Width": 120, "Height": 40}))
        output = ""

        def sized() -> bool:
            nonlocal output
            # the resize and the input travel apart: ask again until the size shows
            session.write_stdin("stty size\n")
            session.update(timeout=1)
            output += session.read_stdout()
            return "40 120" in output
        wait_for(sized, timeout=30, message="stty size shows the size the client set")
    finally:
        session.close()


def test_attach_talks_to_the_running_container(home: ClusterHandle, reachable: RunningAgent,
                                               namespace: str) -> None:
    """attach to a container that keeps stdin open and runs `cat`: what is written comes back."""
    from kubernetes.stream import stream

    offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "cat"},
        "spec": {"containers": [{"name": "cat", "image": "busybox:1.36", "command": ["cat"],
                                 "stdin": True}],
                 **REMOTE_STRATEGY}})
    wait_for(lambda: home.core.read_namespaced_pod("cat", namespace).status.phase == "Running",
             timeout=60, message="the pod runs remotely and says so at home")
    session = stream(home.core.connect_get_namespaced_pod_attach, "cat", namespace,
                     container="cat", stdin=True, stdout=True, stderr=False, tty=False,
                     _preload_content=False)
    try:
        session.write_stdin("hello\n")
        output = ""

        def echoed() -> bool:
            nonlocal output
            session.update(timeout=1)
            output += session.read_stdout()
            return "hello\n" in output
        wait_for(echoed, timeout=30, message="the container echoes what attach writes")
    finally:
        session.close()
