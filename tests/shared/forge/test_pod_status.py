"""The remote status as the home pod's (shared.forge.pod_status), over generated container
statuses; a refused remote pod as the home pod's condition. (Cases: golden pod_status/; the
fields an API server does not keep: test_pod_status_unkept.py.)"""

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.forge.pod_status import (
    StatusForgeConfig,
    local_pod_status,
    remote_pod_refused_condition,
)

EXAMPLES = settings(max_examples=2000, deadline=None, database=None)
names = st.text(alphabet="abcdefghij-0123", min_size=1, max_size=12)

container_statuses = st.lists(
    st.fixed_dictionaries({"name": names, "ready": st.booleans(),
                           "restartCount": st.integers(0, 10**6)}),
    max_size=4,
)


@EXAMPLES
@given(container_statuses, st.integers(0, 10**4), st.integers(0, 2**16 - 1))
def test_status_restart_arithmetic_and_addresses(
    statuses: list[dict[str, Any]], carried: int, host: int
) -> None:
    config = StatusForgeConfig(
        node_ip="172.18.0.5", pod_cidr="10.244.0.0/16", remapped_pod_cidr="10.71.0.0/16"
    )
    pod_ip = f"10.244.{host >> 8}.{host & 0xFF}"
    remote = {"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
              "hostIP": "192.168.1.20", "containerStatuses": statuses}
    original = copy.deepcopy(remote)
    carried_restarts = {c["name"]: carried for c in statuses}
    status = local_pod_status(remote, carried_restarts, config)
    assert remote == original
    assert status["podIP"] == f"10.71.{host >> 8}.{host & 0xFF}"
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["hostIP"] == "172.18.0.5"
    assert [c["restartCount"] for c in status["containerStatuses"]] == [
        c["restartCount"] + carried for c in statuses
    ]
    # An agent that restarts recomputes from the same remote state: the same figure, no drift.
    assert local_pod_status(remote, carried_restarts, config) == status


def test_a_remote_pod_refusal_reads_as_the_home_pods_remote_creation_failure() -> None:
    refusal = {"type": "PodCreated", "status": "False", "reason": "Forbidden",
               "message": "exceeded quota: compute", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert remote_pod_refused_condition({"conditions": [refusal]}) == {
        "type": "RemoteCreationFailed", "status": "True", "reason": "Forbidden",
        "message": "the remote pod cannot be created: exceeded quota: compute",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert remote_pod_refused_condition({}) is None
    assert remote_pod_refused_condition({"conditions": [{**refusal, "status": "True"}]}) is None
    assert remote_pod_refused_condition({"conditions": [{"type": "Other",
                                                         "status": "False"}]}) is None
