"""shared.api.builtin: every built-in resource annex names is served as the table says it
(group, version, plural, kind, as kube-apiserver serves it and kubesim copies it), and its
objects' apiVersion is the one the API server writes."""

from __future__ import annotations

import pytest

from kubesim.kinds import KindRegistry
from shared.api import builtin
from shared.api.builtin import BuiltinResource

TABLE = [value for value in vars(builtin).values() if isinstance(value, BuiltinResource)]


@pytest.mark.parametrize("resource", TABLE, ids=lambda resource: resource.plural)
def test_the_table_names_each_resource_as_the_api_server_serves_it(
        resource: BuiltinResource) -> None:
    served = KindRegistry().get(*resource.resource)
    assert served is not None and served.kind == resource.kind


def test_the_core_group_s_api_version_is_its_version_alone() -> None:
    assert builtin.PODS.api_version == "v1"
    assert builtin.LEASES.api_version == "coordination.k8s.io/v1"
    assert builtin.PODS.resource == ("", "v1", "pods")
