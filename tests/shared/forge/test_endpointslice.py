"""shared.forge.endpointslice: a reflected slice never points back at the destination."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from shared.forge.endpointslice import (
    EndpointDestination,
    is_in_destination,
    remote_endpointslice,
)
from shared.forge.metadata import reflection_config
from shared.ipremap import CidrRemap
from shared.wellknown import ENDPOINTSLICE_MANAGED_BY_LABEL
from tests.shared.forge.objects import (
    EXAMPLES,
    HOME,
    REMOTE,
    REMOTE_NS,
    destinations,
    endpointslices,
    remaps,
)


@EXAMPLES
@given(endpointslices(), destinations, remaps)
def test_endpoint_filtering_never_emits_an_endpoint_of_the_destination(
    local: Any, destination: EndpointDestination, remap: CidrRemap | None
) -> None:
    remote = remote_endpointslice(
        local, REMOTE_NS, reflection_config(HOME, REMOTE), destination, remap
    )
    kept = [e for e in local["endpoints"] if not is_in_destination(e, destination)]
    assert len(remote["endpoints"]) == len(kept)
    for home_endpoint, endpoint in zip(kept, remote["endpoints"], strict=True):
        assert not is_in_destination(home_endpoint, destination)
        assert endpoint.get("nodeName") is None and "zone" not in endpoint
        assert "hints" not in endpoint
        expected = [remap.remap(a) if remap else a for a in home_endpoint["addresses"]]
        assert endpoint["addresses"] == expected
    labels = remote["metadata"]["labels"]
    assert labels[ENDPOINTSLICE_MANAGED_BY_LABEL] == "endpointslice.reflection.liqo.io"
