"""Prefix-preserving IP remapping between two CIDRs of the same size.

When the provider's pod CIDR overlaps the consumer's, the consumer sees remote pods through a
remapped CIDR: the network bits are swapped, the host bits are kept, so the mapping is a bijection
between the two CIDRs and `inverse()` undoes it. Addresses outside the source CIDR (host IPs,
external endpoints, the other address family) are returned unchanged.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class CidrRemap:
    """Maps `source` onto `target`; both CIDRs must have the same family and prefix length.

    Host bits in the CIDR strings are tolerated (`10.0.0.1/8` means `10.0.0.0/8`), as Liqo's
    network configuration accepts them too.
    """

    source: str
    target: str

    def __post_init__(self) -> None:
        source_net, target_net = self._source_net, self._target_net
        if source_net.version != target_net.version:
            raise ValueError(
                f"cannot remap {self.source} onto {self.target}: "
                f"IPv{source_net.version} and IPv{target_net.version} differ"
            )
        if source_net.prefixlen != target_net.prefixlen:
            raise ValueError(
                f"cannot remap {self.source} onto {self.target}: prefix lengths "
                f"/{source_net.prefixlen} and /{target_net.prefixlen} differ"
            )

    # Parsed once per instance; cached_property writes the instance dict directly, which a
    # frozen dataclass allows, and keeps the parsed forms out of the fields (eq, repr, asdict).
    @cached_property
    def _source_net(self) -> IPNetwork:
        return ipaddress.ip_network(self.source, strict=False)

    @cached_property
    def _target_net(self) -> IPNetwork:
        return ipaddress.ip_network(self.target, strict=False)

    def remap(self, address: str) -> str:
        """`address` with its network bits replaced by the target's, or unchanged if outside."""
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            return address
        if parsed.version != self._source_net.version or parsed not in self._source_net:
            return address
        host_bits = int(parsed) & int(self._source_net.hostmask)
        remapped = int(self._target_net.network_address) | host_bits
        # type(parsed) keeps the family: ip_address(1) would read a small IPv6 value as IPv4.
        return str(type(parsed)(remapped))


def remap_address(address: str, remap: CidrRemap | None) -> str:
    """`address` through `remap`; unchanged when there is no remapping configured."""
    return address if remap is None else remap.remap(address)
