"""Defaulting and validation of the kinds reflection and the virtual node write, as
kube-apiserver does it: node allocatable, EndpointSlice addresses, Service node ports."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.kubesim.rest import MERGE, STRATEGIC, call


@pytest.fixture
def node_name(home) -> Iterator[str]:
    name = f"t-node-{uuid.uuid4().hex[:8]}"
    yield name
    call(home, "DELETE", f"/api/v1/nodes/{name}")


def test_a_node_stating_only_its_capacity_gets_it_as_allocatable(home, node_name: str) -> None:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    status, node = call(home, "POST", "/api/v1/nodes",
                        {"metadata": {"name": node_name}, "status": {"capacity": capacity}})
    assert status == 201, node
    assert node["status"]["allocatable"] == capacity
    # a status write that states a new capacity without allocatable: defaulted again
    node["status"] = {"capacity": {"cpu": "8", "pods": "10"}}
    status, node = call(home, "PUT", f"/api/v1/nodes/{node_name}/status", node)
    assert status == 200, node
    assert node["status"]["allocatable"] == {"cpu": "8", "pods": "10"}
    # a patch leaves a stated allocatable alone
    status, node = call(home, "PATCH", f"/api/v1/nodes/{node_name}/status",
                        {"status": {"capacity": {"cpu": "16"}, "allocatable": {"cpu": "15"}}},
                        content_type=STRATEGIC)
    assert node["status"]["allocatable"] == {"cpu": "15", "pods": "10"}
    status, node = call(home, "PATCH", f"/api/v1/nodes/{node_name}/status",
                        {"status": {"capacity": {"cpu": "32"}}}, content_type=MERGE)
    assert node["status"]["allocatable"] == {"cpu": "15", "pods": "10"}
