"""The DNS-SD records a provider is announced with (RFC 6763), the same on the LAN
(mDNS, `_annex._tcp.local.`) and in ordinary DNS (`_annex._tcp.<domain>.`):

    _annex._tcp.<domain>.            PTR  <instance>._annex._tcp.<domain>.
    <instance>._annex._tcp.<domain>. SRV  0 0 <port> <api host>.
    <instance>._annex._tcp.<domain>. TXT  "cluster-id=<provider id>" "api=https://<host>:<port>"

The TXT record names the cluster and its API server; without `api`, the SRV target and port
stand for it (https). Pure: what a record says in, what it announces out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

SERVICE = "_annex._tcp"
MDNS_SERVICE_TYPE = f"{SERVICE}.local."
CLUSTER_ID_KEY = "cluster-id"
API_KEY = "api"
TXT_VERSION_KEY = "txtvers"
TXT_VERSION = "1"


@dataclass(frozen=True)
class Announcement:
    """What one service instance says about its cluster."""

    cluster_id: str
    api_server_url: str


def service_type(domain: str) -> str:
    """The browse name under `domain` ("local" for mDNS), fully qualified."""
    return f"{SERVICE}.{domain.strip('.')}."


def instance_name(instance: str, domain: str) -> str:
    return f"{instance}.{service_type(domain)}"


def txt_properties(announcement: Announcement) -> dict[str, str]:
    return {TXT_VERSION_KEY: TXT_VERSION, CLUSTER_ID_KEY: announcement.cluster_id,
            API_KEY: announcement.api_server_url}


def decoded(properties: Mapping[bytes, bytes | None]) -> dict[str, str]:
    """A TXT record's pairs as zeroconf gives them (bytes; None for a key without "=")."""
    return {key.decode("utf-8", "replace").lower(): (value or b"").decode("utf-8", "replace")
            for key, value in properties.items()}


def announcement_from(properties: Mapping[str, str],
                      target: str | None = None, port: int | None = None
                      ) -> Announcement | None:
    """The announcement of a TXT record's key=value pairs (and its SRV `target`:`port` when the
    TXT names no API server); None when it names no cluster or no address can be made."""
    text = {key.lower(): value for key, value in properties.items()}
    cluster_id = text.get(CLUSTER_ID_KEY, "").strip()
    api = text.get(API_KEY, "").strip()
    if not api and target and port:
        api = f"https://{target.rstrip('.')}:{port}"
    if not cluster_id or not api or urlsplit(api).scheme not in ("http", "https"):
        return None
    return Announcement(cluster_id, api)


def properties_from_strings(strings: list[bytes]) -> dict[str, str]:
    """A TXT record's character-strings back into key=value pairs (RFC 6763 section 6.3: a
    key without "=" is a boolean present; the first occurrence of a key wins)."""
    properties: dict[str, str] = {}
    for raw in strings:
        key, _, value = raw.decode("utf-8", "replace").partition("=")
        properties.setdefault(key.lower(), value)
    return properties
