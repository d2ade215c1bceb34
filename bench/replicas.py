"""Components run as the charts run them for high availability: replicas electing a leader on a
Lease (`--leader-elect`, the charts' durations), read from outside: which one leads (its
/readyz), the writes each sent (its /metrics), the leader killed and its pod started again."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bench.components import BY_RESOURCE, Component, http_get, scrape
from bench.figures import HEARTBEAT_RESOURCES, WRITE_VERBS

LEADER = "ok: leader"
"""What a leading replica's /readyz says (a standby's: "ok: standby (leader: ...)")."""


@dataclass
class Replicas:
    """One component's replicas, each with the port of its /readyz and /metrics."""

    kind: str
    members: list[Component]
    ports: list[int]

    def start(self) -> None:
        for member in self.members:
            member.start()

    def stop(self) -> None:
        """SIGTERM: a leader stops its writes and releases the Lease."""
        for member in self.members:
            member.stop()

    def role(self, index: int) -> str:
        """What its /readyz says ("" while it is not ready)."""
        if not self.members[index].running():
            return ""
        status, text = http_get(f"http://127.0.0.1:{self.ports[index]}/readyz", 2)
        return text if status == 200 else ""

    def leader(self) -> int | None:
        return next((index for index in range(len(self.members))
                     if self.role(index) == LEADER), None)

    def elected(self) -> bool:
        """One replica leads, every other one is ready and stands by."""
        roles = [self.role(index) for index in range(len(self.members))]
        return roles.count(LEADER) == 1 and all(
            role == LEADER or role.startswith("ok: standby") for role in roles)

    def kill(self, index: int) -> None:
        """SIGKILL, as a node or a process dies: nothing released, nothing said."""
        self.members[index].stop(kill=True)

    def writes(self, index: int) -> dict[str, int]:
        """The write requests the replica sent since it started, by `verb resource` (those the
        API server refused: `verb resource code`), but its Leases' (its election's, an agent's
        node heartbeat)."""
        found: Counter[str] = Counter()
        for labels, value in scrape(self.ports[index], BY_RESOURCE):
            if (labels["verb"] in WRITE_VERBS
                    and labels["resource"].split("/")[0] not in HEARTBEAT_RESOURCES):
                refused = "" if labels["code"].startswith("2") else f" {labels['code']}"
                found[f"{labels['verb']} {labels['resource']}{refused}"] += int(value)
        return dict(sorted(found.items()))
