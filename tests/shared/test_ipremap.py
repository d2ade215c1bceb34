"""IP remapping between CIDRs: a prefix-preserving bijection that leaves other addresses alone."""

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.ipremap import CidrRemap, remap_address

EXAMPLES = settings(max_examples=3000, deadline=None, database=None)


@st.composite
def remaps(draw: st.DrawFn) -> tuple[CidrRemap, ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A remap between two random CIDRs of one family and prefix length, and its source."""
    version = draw(st.sampled_from([4, 6]))
    bits = 32 if version == 4 else 128
    prefix = draw(st.integers(min_value=1, max_value=bits))
    network = ipaddress.IPv4Network if version == 4 else ipaddress.IPv6Network
    source, target = (
        network((draw(st.integers(0, 2**bits - 1)), prefix), strict=False) for _ in range(2)
    )
    return CidrRemap(str(source), str(target)), source


def _address_in(network: ipaddress.IPv4Network | ipaddress.IPv6Network, offset: int) -> str:
    return str(network.network_address + offset % network.num_addresses)


@EXAMPLES
@given(remaps(), st.integers(min_value=0))
def test_inside_the_source_lands_in_the_target_with_host_bits_kept(
    remap_and_source: tuple[CidrRemap, ipaddress.IPv4Network | ipaddress.IPv6Network], offset: int
) -> None:
    remap, source = remap_and_source
    address = _address_in(source, offset)
    remapped = ipaddress.ip_address(remap.remap(address))
    target = ipaddress.ip_network(remap.target, strict=False)
    assert remapped in target
    assert int(remapped) - int(target.network_address) == offset % source.num_addresses


@EXAMPLES
@given(remaps(), st.integers(min_value=0))
def test_the_opposite_remap_undoes_it_host_bits_are_kept(
    remap_and_source: tuple[CidrRemap, ipaddress.IPv4Network | ipaddress.IPv6Network], offset: int
) -> None:
    remap, source = remap_and_source
    address = _address_in(source, offset)
    back = CidrRemap(source=remap.target, target=remap.source)
    assert back.remap(remap.remap(address)) == address


@EXAMPLES
@given(remaps(), st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_addresses_outside_the_source_are_unchanged(
    remap_and_source: tuple[CidrRemap, ipaddress.IPv4Network | ipaddress.IPv6Network],
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    remap, source = remap_and_source
    if address.version == source.version and address in source:
        return
    assert remap.remap(str(address)) == str(address)


@pytest.mark.parametrize(
    ("source", "target"), [("10.1.2.0/24", "192.168.7.0/24"), ("fd00:1::ff00/120", "fd99::/120")]
)
def test_a_whole_small_cidr_maps_one_to_one_onto_the_target(source: str, target: str) -> None:
    remap = CidrRemap(source, target)
    images = {remap.remap(str(address)) for address in ipaddress.ip_network(source)}
    assert images == {str(address) for address in ipaddress.ip_network(target)}


def test_without_a_remap_addresses_are_unchanged() -> None:
    assert remap_address("10.1.2.3", None) == "10.1.2.3"


def test_not_an_address_is_returned_unchanged() -> None:
    assert CidrRemap("10.0.0.0/8", "11.0.0.0/8").remap("db.example.com") == "db.example.com"


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("10.0.0.0/16", "10.1.0.0/24", "prefix lengths /16 and /24 differ"),
        ("10.0.0.0/16", "fd00::/16", "IPv4 and IPv6 differ"),
        ("not-a-cidr", "10.0.0.0/8", "does not appear to be an IPv4 or IPv6 network"),
    ],
)
def test_mismatched_cidrs_are_refused(source: str, target: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CidrRemap(source, target)
