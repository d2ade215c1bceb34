"""A small authoritative DNS server standing for an organisation's DNS zone (the tests, the
demo): UDP on loopback, answering from a zone its user edits (name → record type → rdata texts)
with messages built by dnspython. NXDOMAIN for a name it does not know, an empty NOERROR answer
for a known name without the type asked."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset

Zone = dict[str, dict[str, list[str]]]


class DnsServer:
    def __init__(self) -> None:
        self.zone: Zone = {}
        self.queries: list[tuple[str, str]] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.address = f"127.0.0.1:{self._socket.getsockname()[1]}"
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-server", daemon=True)

    def _answer(self, wire: bytes) -> bytes:
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        question = query.question[0]
        name = question.name.to_text().lower()
        rdtype = dns.rdatatype.to_text(question.rdtype)
        self.queries.append((name, rdtype))
        records = self.zone.get(name)
        if records is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif records.get(rdtype):
            response.answer.append(dns.rrset.from_text_list(
                question.name, 60, "IN", rdtype, records[rdtype]))
        return response.to_wire()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                wire, client = self._socket.recvfrom(4096)
            except TimeoutError:
                continue
            self._socket.sendto(self._answer(wire), client)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._socket.close()


@contextmanager
def dns_server() -> Iterator[DnsServer]:
    server = DnsServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def publish(zone: Zone, domain: str, instance: str, cluster_id: str, api: str | None,
            target: str = "api.provider.test.", port: int = 6443) -> None:
    """The records a provider's admin publishes for one cluster (docs/architecture.md)."""
    service = f"_annex._tcp.{domain}."
    name = f"{instance}.{service}"
    zone.setdefault(service, {}).setdefault("PTR", []).append(name)
    txt = [f'"cluster-id={cluster_id}"'] + ([f'"api={api}"'] if api else [])
    zone[name] = {"SRV": [f"0 0 {port} {target}"], "TXT": [" ".join(txt)]}


def withdraw(zone: Zone, domain: str, instance: str) -> None:
    service = f"_annex._tcp.{domain}."
    name = f"{instance}.{service}"
    zone[service]["PTR"].remove(name)
    zone.pop(name, None)
