"""What a run creates, named after the run: runs on the same clusters never meet."""

from __future__ import annotations

from dataclasses import dataclass

from shared.forge.node import pool_node_name

POOLS = ("general", "gpu")
"""The provider's pools in the pools scenario."""


@dataclass(frozen=True)
class Names:
    run: str

    @property
    def home_id(self) -> str:
        return f"bench-home-{self.run}"

    @property
    def provider_id(self) -> str:
        """The remote's cluster id: the enforcer's --cluster-id and the agent's
        --remote-cluster-id (the agent takes the offer the enforcer makes under it)."""
        return f"bench-provider-{self.run}"

    @property
    def bare_consumer(self) -> str:
        return f"bench-bare-{self.run}"

    @property
    def namespace(self) -> str:
        return f"bench-{self.run}"

    @property
    def release(self) -> str:
        """At home, as a release's own namespace (which no agent offloads): the failover
        scenario's election Leases, its agents' kubelet Service, its home controller's
        VirtualNode and agent."""
        return f"bench-annex-{self.run}"

    @property
    def bare_namespace(self) -> str:
        return f"bench-bare-{self.run}"

    @property
    def bare_twin(self) -> str:
        return f"bench-bare-twin-{self.run}"

    @property
    def fragmented(self) -> str:
        """At home, the fragmented scenario's offloaded namespace."""
        return f"bench-frag-{self.run}"

    @property
    def fillers(self) -> str:
        """At the remote, the fragmented scenario's provider pods taking room on its nodes."""
        return f"bench-fillers-{self.run}"

    @property
    def pools(self) -> str:
        """At home, the pools scenario's offloaded namespace."""
        return f"bench-pools-{self.run}"

    @property
    def pod_webhook(self) -> str:
        """At home, the agent's MutatingWebhookConfiguration (the fragmented scenario's)."""
        return f"pods.bench-{self.run}.annex"

    @property
    def tenant(self) -> str:
        return f"annex-tenant-{self.home_id}"

    @property
    def virtual_node(self) -> str:
        return f"liqo-{self.provider_id}"

    @property
    def pool_nodes(self) -> list[str]:
        """The virtual nodes of the pools scenario's pools."""
        return [pool_node_name(self.virtual_node, pool) for pool in POOLS]

    @property
    def bare_node(self) -> str:
        """A Node the bare client's pods are bound to: a controller-manager's pod garbage
        collector deletes pods bound to a node that does not exist."""
        return f"bench-bare-node-{self.run}"

    @property
    def webhook(self) -> str:
        return f"shadowpods.bench-{self.run}.annex"
