"""Containers that finish when a test says so, on any cluster: the container reads its input
until it ends and then exits with the code it was given; the test ends the input by attaching
and detaching, since with `stdinOnce` the kubelet closes a container's input when its first
attach session ends (kubesim's kubelet as a real one)."""

from __future__ import annotations

import contextlib
from typing import Any

from kubernetes import client

from tests.helpers import WaitTimeout, wait_for

IMAGE = "busybox:1.36"
ATTACHES = 5
ENDING = 10.0  # seconds for the container to end after its input did


def finishing_container(exit_code: int = 0, name: str = "main") -> dict[str, Any]:
    """A container that runs until `finish` ends its input, then exits with `exit_code`."""
    return {"name": name, "image": IMAGE, "command": ["sh", "-c", f"cat; exit {exit_code}"],
            "stdin": True, "stdinOnce": True}


def finish(core: client.CoreV1Api, namespace: str, pod: str, container: str = "main") -> None:
    """End the input of a running finishing container of `pod` and wait until it has ended.
    An attach that goes before the kubelet has set it up is no attach to the runtime, which
    then keeps the input open: the attach is made again until the container ends."""
    from kubernetes.stream import stream

    def ended() -> bool:
        statuses = core.read_namespaced_pod(pod, namespace).status.container_statuses or []
        return any(s.name == container and (s.state.terminated or s.last_state.terminated)
                   for s in statuses)

    for _ in range(ATTACHES):
        session = stream(core.connect_get_namespaced_pod_attach, pod, namespace,
                         container=container, stdin=True, stdout=False, stderr=False,
                         tty=False, _preload_content=False)
        session.close()
        with contextlib.suppress(WaitTimeout):
            wait_for(ended, timeout=ENDING, message=f"{namespace}/{pod}: {container} ended")
            return
    raise WaitTimeout(f"{namespace}/{pod}: {container} did not end after {ATTACHES} attaches")
