"""End to end: `kubectl debug` on an offloaded pod. The ephemeral container added to the home pod
reaches its ShadowPod and, through the pod's ephemeralcontainers subresource, the remote pod;
its status comes home, and its log is read through the home API server and the virtual node's
kubelet API, as for any container. What the provider's pod policy refuses is refused."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.e2e.test_kubelet_api import reachable, remote_web
from tests.e2e.test_offloading import remote_pods
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl on PATH")

__all__ = ["reachable", "remote_web"]  # fixtures this module's tests use


def kubectl(home: ClusterHandle, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(home.kubeconfig), "-n", namespace,
                           *args], capture_output=True, text=True, timeout=60)


def ephemeral_status(pod: Any, name: str) -> Any:
    return next((s for s in pod.status.ephemeral_container_statuses or [] if s.name == name),
                None)


def test_kubectl_debug_runs_a_container_in_the_remote_pod_and_reports_it_home(
        home: ClusterHandle, remote: ClusterHandle, remote_web: str, namespace: str) -> None:
    debug = kubectl(home, namespace, "debug", "web", "--image=busybox:1.36", "-c", "debugger",
                    "--target=web", "--", "sh", "-c", "echo from the debugger")
    assert debug.returncode == 0, debug.stderr

    def ended_remotely() -> Any:
        pod = remote_pods(remote, remote_web).get("web")
        status = pod and ephemeral_status(pod, "debugger")
        return status if status and status.state.terminated else None

    # its command prints a line and ends, as a kubelet runs it: the container ends with it
    remote_status = wait_for(ended_remotely, timeout=60,
                             message="the debugger run in the remote pod")
    assert remote_status.state.terminated.exit_code == 0
    remote_pod = remote_pods(remote, remote_web)["web"]
    [added] = remote_pod.spec.ephemeral_containers
    assert (added.name, added.image, added.target_container_name) == (
        "debugger", "busybox:1.36", "web")
    status = wait_for(lambda: (s := ephemeral_status(home.core.read_namespaced_pod(
        "web", namespace), "debugger")) and s.state.terminated and s, timeout=60,
        message="its status at home")
    assert status.state.terminated.exit_code == 0
    assert status.ready is False
    assert home.core.read_namespaced_pod("web", namespace).status.phase == "Running"
    logs = wait_for(lambda: (run := kubectl(home, namespace, "logs", "web", "-c", "debugger"))
                    .returncode == 0 and run.stdout, timeout=30,
                    message="its log through the home API server")
    assert logs == "from the debugger\n"


def test_a_debug_container_the_providers_pod_policy_refuses_never_runs(
        home: ClusterHandle, remote: ClusterHandle, remote_web: str, namespace: str) -> None:
    """The consumer's Pod Security level (baseline by default) refuses a privileged debugger:
    the ShadowPod webhook turns its update away, so the home pod shows the container waiting
    and a FailedReflection Event says why; nothing runs remotely."""
    debug = kubectl(home, namespace, "debug", "web", "--image=busybox:1.36", "-c", "root",
                    "--profile=sysadmin", "--", "sleep", "3600")
    assert debug.returncode == 0, debug.stderr

    def refused() -> str | None:
        events = home.core.list_namespaced_event(namespace).items
        return next((e.message for e in events if e.involved_object.name == "web"
                     and e.reason == "FailedReflection" and "privileged" in e.message), None)

    message = wait_for(refused, timeout=60, message="the refusal reported on the home pod")
    assert 'violates PodSecurity "baseline:latest"' in message
    assert not remote_pods(remote, remote_web)["web"].spec.ephemeral_containers


def test_kubectl_debug_interactive_talks_to_the_debugger_in_the_remote_pod(
        home: ClusterHandle, remote_web: str, namespace: str) -> None:
    """`kubectl debug -i` waits for the debugger to run, then attaches to it through the home
    API server and the virtual node's kubelet API: what is typed reaches it, what it prints
    comes back. (`-t` wants a terminal on kubectl's side; the streams are the same.)"""
    import select
    import time

    session = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(home.kubeconfig), "-n", namespace, "debug", "web", "-i",
         "--image=busybox:1.36", "-c", "talker", "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert session.stdin is not None and session.stdout is not None
    try:
        wait_for(lambda: (s := ephemeral_status(home.core.read_namespaced_pod(
            "web", namespace), "talker")) and s.state.running, timeout=60,
            message="the debugger running, as its status at home says")
        output, deadline = "", time.monotonic() + 30
        while "hello from home" not in output and time.monotonic() < deadline:
            session.stdin.write("hello from home\n")
            session.stdin.flush()
            ready, _, _ = select.select([session.stdout], [], [], 1)
            if ready:
                output += session.stdout.readline()
        assert "hello from home" in output, session.stderr.read() if session.poll() else output
    finally:
        session.kill()
        session.wait()
