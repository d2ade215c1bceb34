"""Containers that finish when a test says so, on any cluster: the container reads its input
until it ends and then exits with the code it was given; the test ends the input by attaching
and detaching, since with `stdinOnce` the kubelet closes a container's input when its first
attach session ends (kubesim's kubelet as a real one)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

IMAGE = "busybox:1.36"


def finishing_container(exit_code: int = 0, name: str = "main") -> dict[str, Any]:
    """A container that runs until `finish` ends its input, then exits with `exit_code`."""
    return {"name": name, "image": IMAGE, "command": ["sh", "-c", f"cat; exit {exit_code}"],
            "stdin": True, "stdinOnce": True}


def finish(core: client.CoreV1Api, namespace: str, pod: str, container: str = "main") -> None:
    """End the input of a running finishing container of `pod`."""
    from kubernetes.stream import stream

    session = stream(core.connect_get_namespaced_pod_attach, pod, namespace,
                     container=container, stdin=True, stdout=False, stderr=False, tty=False,
                     _preload_content=False)
    session.close()
