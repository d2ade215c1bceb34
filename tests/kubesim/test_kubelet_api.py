"""pods/log, pods/exec and pods/portforward through the API server to the node's kubelet, with
the kubernetes Python client and the stock kubectl — against kubesim, or unchanged against a
real cluster (busybox does what kubesim's containers do)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward, stream

from tests.conftest import ClusterHandle
from tests.finish import finish, finishing_container
from tests.helpers import wait_for

SCRIPT = "echo one; echo two; echo three; echo oops >&2; sleep 3600"


def busybox(name: str, command: list[str], ports: tuple[int, ...] = ()) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox:1.36", "command": command}
    if ports:
        container["ports"] = [{"containerPort": port} for port in ports]
    return {"metadata": {"name": name}, "spec": {
        "containers": [container], "terminationGracePeriodSeconds": 0}}


def started(home: ClusterHandle, namespace: str, manifest: dict[str, Any]) -> str:
    name = manifest["metadata"]["name"]
    home.core.create_namespaced_pod(namespace, manifest)

    def running() -> bool:
        pod = home.core.read_namespaced_pod(name, namespace)
        return pod.status.phase == "Running"

    wait_for(running, timeout=120, message=f"pod {name} runs")
    return name


@pytest.fixture
def chatty(home: ClusterHandle, namespace: str) -> str:
    name = started(home, namespace, busybox("chatty", ["sh", "-c", SCRIPT]))
    wait_for(lambda: "three" in home.core.read_namespaced_pod_log(name, namespace),
             timeout=60, message="the container printed its lines")
    return name


def test_logs_tail_limit_and_timestamps(home: ClusterHandle, namespace: str, chatty: str) -> None:
    log = home.core.read_namespaced_pod_log(chatty, namespace)
    assert log == "one\ntwo\nthree\noops\n"  # stdout and stderr interleaved, as the runtime logs
    assert home.core.read_namespaced_pod_log(chatty, namespace, tail_lines=2) == "three\noops\n"
    assert home.core.read_namespaced_pod_log(chatty, namespace, limit_bytes=6) == "one\ntw"
    stamped = home.core.read_namespaced_pod_log(chatty, namespace, timestamps=True)
    first = stamped.splitlines()[0]
    assert first.endswith("Z one") and first[4] == "-" and first[10] == "T"
    assert home.core.read_namespaced_pod_log(chatty, namespace, since_seconds=3600) == log


def test_logs_refuse_what_the_api_server_refuses(home: ClusterHandle, namespace: str,
                                                 chatty: str) -> None:
    with pytest.raises(ApiException) as caught:
        home.core.read_namespaced_pod_log(chatty, namespace, container="nosuch")
    assert caught.value.status == 400
    assert "container nosuch is not valid for pod chatty" in caught.value.body
    with pytest.raises(ApiException) as caught:
        home.core.read_namespaced_pod_log(chatty, namespace, tail_lines=-1)
    assert caught.value.status == 422


def test_the_log_of_a_previous_container_that_never_was_is_refused(
        home: ClusterHandle, namespace: str, chatty: str) -> None:
    """The kubelet's 400 for a container that never restarted, as the API server's
    BadRequest Status keeping the kubelet's sentence (GenericHttpResponseChecker)."""
    with pytest.raises(ApiException) as caught:
        home.core.read_namespaced_pod_log(chatty, namespace, previous=True)
    assert caught.value.status == 400
    status = yaml.safe_load(caught.value.body)
    assert status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert status["message"] == 'previous terminated container "main" in pod "chatty" not found'


def test_follow_streams_until_the_reader_stops(home: ClusterHandle, namespace: str) -> None:
    name = started(home, namespace, busybox(
        "follower", ["sh", "-c", "echo first; sleep 2; echo second; sleep 3600"]))
    response = home.core.read_namespaced_pod_log(name, namespace, follow=True,
                                                 _preload_content=False)
    seen = b""
    try:
        for chunk in response.stream(amt=64, decode_content=False):
            seen += chunk
            if b"second\n" in seen:
                break
    finally:
        response.release_conn()
    assert seen == b"first\nsecond\n"


def test_exec_stdout_stderr_stdin_and_exit_codes(home: ClusterHandle, namespace: str,
                                                chatty: str) -> None:
    api = home.core.connect_get_namespaced_pod_exec
    out = stream(api, chatty, namespace, command=["echo", "hello", "world"], stderr=True,
                 stdin=False, stdout=True, tty=False)
    assert out == "hello world\n"
    client = stream(api, chatty, namespace, command=["sh", "-c", "echo out; echo err >&2; exit 3"],
                    stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    client.run_forever(timeout=60)
    assert client.read_stdout() == "out\n"
    assert client.read_stderr() == "err\n"
    assert client.returncode == 3
    client = stream(api, chatty, namespace, command=["cat"], stderr=True, stdin=True,
                    stdout=True, tty=False, _preload_content=False)
    client.write_stdin("from stdin\n")
    got = wait_for(lambda: client.update(timeout=1) or client.peek_stdout(), timeout=60)
    assert got == "from stdin\n"
    client.close()


def test_exec_of_an_unknown_program_fails(home: ClusterHandle, namespace: str,
                                          chatty: str) -> None:
    client = stream(home.core.connect_get_namespaced_pod_exec, chatty, namespace,
                    command=["no-such-program"], stderr=True, stdin=False, stdout=True,
                    tty=False, _preload_content=False)
    client.run_forever(timeout=60)
    # the runtime cannot start it: an InternalError status, no exit code
    status = yaml.safe_load(client.read_channel(3))
    assert status["status"] == "Failure" and status["reason"] == "InternalError"
    assert '"no-such-program": executable file not found in $PATH' in status["message"]


def test_port_forward_reaches_the_container_port(home: ClusterHandle, namespace: str) -> None:
    name = started(home, namespace, busybox(
        "echoer", ["sh", "-c", "nc -lk -p 8080 -e cat"], ports=(8080,)))
    forward = portforward(home.core.connect_get_namespaced_pod_portforward, name, namespace,
                          ports="8080")
    connection = forward.socket(8080)
    connection.setblocking(True)
    connection.settimeout(60)
    try:
        connection.sendall(b"echo me\n")
        assert wait_for(lambda: connection.recv(64), timeout=60) == b"echo me\n"
    finally:
        connection.close()
        forward.close()


@pytest.fixture
def kubectl(home: ClusterHandle) -> Iterator[list[str]]:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("no kubectl on PATH")
    yield [binary, "--kubeconfig", str(home.kubeconfig), "--request-timeout", "60s"]


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          **kwargs)


def test_kubectl_logs_exec_and_port_forward(kubectl: list[str], home: ClusterHandle,
                                            namespace: str, chatty: str) -> None:
    result = run([*kubectl, "-n", namespace, "logs", chatty, "--tail=1"])
    assert (result.returncode, result.stdout) == (0, "oops\n"), result.stderr
    # WebSocket (v5.channel.k8s.io, kubectl's default) and SPDY
    for websockets in ("true", "false"):
        env = {**os.environ, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": websockets}
        result = run([*kubectl, "-n", namespace, "exec", "-i", chatty, "--", "cat"],
                     input="piped\n", env=env)
        assert (result.returncode, result.stdout) == (0, "piped\n"), result.stderr
        result = run([*kubectl, "-n", namespace, "exec", chatty, "--", "sh", "-c",
                      "echo bad >&2; exit 7"], env=env)
        assert result.returncode == 7 and result.stderr.startswith("bad\n"), result.stderr


def test_kubectl_port_forward(kubectl: list[str], home: ClusterHandle, namespace: str) -> None:
    name = started(home, namespace, busybox(
        "kecho", ["sh", "-c", "nc -lk -p 8080 -e cat"], ports=(8080,)))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = probe.getsockname()[1]
    forwarding = subprocess.Popen([*kubectl, "-n", namespace, "port-forward", f"pod/{name}",
                                   f"{local}:8080"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    try:
        assert forwarding.stdout is not None
        line = forwarding.stdout.readline()
        assert "Forwarding from" in line, forwarding.stderr.read() if forwarding.stderr else ""
        payload = f"hello {uuid.uuid4().hex}\n".encode()
        with socket.create_connection(("127.0.0.1", local), timeout=60) as connection:
            connection.sendall(payload)
            received = b""
            while len(received) < len(payload):
                chunk = connection.recv(64)
                if not chunk:
                    break
                received += chunk
        assert received == payload
    finally:
        forwarding.terminate()
        forwarding.wait(30)


@pytest.mark.kubesim_only(reason="switches the API server's preferred kubelet address types "
                                 "(sim.kubelet_client), a kube-apiserver start flag")
def test_the_node_address_follows_the_preferred_address_types(home: ClusterHandle,
                                                               namespace: str) -> None:
    """A Hostname nothing resolves fails as on kube-apiserver (its default preference starts
    with Hostname); preferring InternalIP dials that address instead."""
    node = f"ghost-{uuid.uuid4().hex[:6]}"
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    home.core.create_node({"metadata": {"name": node}})
    home.core.patch_node_status(node, {"status": {
        "addresses": [{"type": "Hostname", "address": f"{node}.invalid"},
                      {"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": closed_port}}}})
    pod = busybox("placed", ["sleep", "3600"])
    pod["spec"]["nodeName"] = node
    home.core.create_namespaced_pod(namespace, pod)
    client_settings = home.sim.kubelet_client
    try:
        with pytest.raises(ApiException) as caught:
            home.core.read_namespaced_pod_log("placed", namespace)
        assert caught.value.status == 500
        assert f"dial tcp: lookup {node}.invalid" in caught.value.body
        assert "no such host" in caught.value.body
        client_settings.preferred_address_types = ("InternalIP", "Hostname")
        with pytest.raises(ApiException) as caught:
            home.core.read_namespaced_pod_log("placed", namespace)
        assert caught.value.status == 500
        assert f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused" in (
            caught.value.body)
    finally:
        client_settings.preferred_address_types = (
            "Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
        home.core.delete_namespaced_pod("placed", namespace, grace_period_seconds=0)
        home.core.delete_node(node)


def test_log_and_exec_need_their_rbac_verbs(home: ClusterHandle, namespace: str,
                                            chatty: str) -> None:
    """pods/log is `get`; exec over WebSocket is a GET, so `get pods/exec` (SPDY's POST would be
    `create`): a ServiceAccount with neither is refused both."""
    from kubernetes import client as k8s

    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = home.core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    configuration = k8s.Configuration()
    configuration.host = home.api_client.configuration.host
    configuration.ssl_ca_cert = home.api_client.configuration.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    nobody = k8s.CoreV1Api(k8s.ApiClient(configuration))
    with pytest.raises(ApiException) as caught:
        nobody.read_namespaced_pod_log(chatty, namespace)
    assert caught.value.status == 403 and "pods/log" in caught.value.body
    with pytest.raises(ApiException) as caught:
        stream(nobody.connect_get_namespaced_pod_exec, chatty, namespace, command=["true"],
               stderr=True, stdin=False, stdout=True, tty=False)
    assert "Handshake status 403" in str(caught.value)  # the WebSocket upgrade is refused


def test_a_terminal_takes_the_size_the_client_sets(home: ClusterHandle, namespace: str,
                                                   chatty: str) -> None:
    api = home.core.connect_get_namespaced_pod_exec
    client = stream(api, chatty, namespace, command=["stty", "size"], stderr=True, stdin=False,
                    stdout=True, tty=False, _preload_content=False)
    client.run_forever(timeout=60)
    assert client.read_stderr() == "stty: standard input: Not a tty\n"
    assert client.returncode == 1
    client = stream(api, chatty, namespace, command=["sh"], stderr=False, stdin=True,
                    stdout=True, tty=True, _preload_content=False)
    try:
        client.write_channel(4, '{"Width": 120, "Height": 40}')
        output = ""

        def sized() -> bool:
            nonlocal output
            # the resize and the input travel apart: ask again until the size shows
            client.write_stdin("stty size\n")
            client.update(timeout=1)
            output += client.read_stdout()
            return "40 120" in output
        wait_for(sized, timeout=60, message="stty size shows the size the client set")
    finally:
        client.close()


def test_the_end_of_the_first_attach_ends_a_stdin_once_containers_input(
        home: ClusterHandle, namespace: str) -> None:
    """The client leaves: the API server's copy of its input ends and closes the kubelet's
    stdin stream, and the runtime closes the container's input; `cat` then exits."""
    manifest = busybox("once", [])
    manifest["spec"]["containers"] = [finishing_container(exit_code=4)]
    manifest["spec"]["restartPolicy"] = "Never"
    name = started(home, namespace, manifest)
    finish(home.core, namespace, name)
    wait_for(lambda: home.core.read_namespaced_pod(name, namespace).status.phase == "Failed",
             timeout=60, message="the container exits once its input ends")
    [status] = home.core.read_namespaced_pod(name, namespace).status.container_statuses
    assert status.state.terminated.exit_code == 4


def test_attach_talks_to_the_running_container(home: ClusterHandle, namespace: str) -> None:
    manifest = busybox("cat", ["cat"])
    manifest["spec"]["containers"][0]["stdin"] = True
    name = started(home, namespace, manifest)
    client = stream(home.core.connect_get_namespaced_pod_attach, name, namespace,
                    container="main", stdin=True, stdout=True, stderr=False, tty=False,
                    _preload_content=False)
    try:
        client.write_stdin("hello\n")
        output = ""

        def echoed() -> bool:
            nonlocal output
            client.update(timeout=1)
            output += client.read_stdout()
            return "hello\n" in output
        wait_for(echoed, timeout=60, message="the container echoes what attach writes")
    finally:
        client.close()
