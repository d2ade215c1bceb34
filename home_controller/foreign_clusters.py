"""The ForeignCluster controller: one key per provider cluster id, reconciled from what the home
cluster holds (its ForeignCluster, the consumer kubeconfig Secret consent put there, the
VirtualNode serving it), what discovery sees now (`Sightings`) and the provider's offer.

- announced and unknown: a ForeignCluster in phase Discovered (discovery grants nothing);
  consented or served and unknown (the chart's remotes): a ForeignCluster all the same;
- announced no more: one discovery made, that nobody acted on, goes; any other is kept, its
  discovery marked as no longer announced;
- consent (the Secret) moves it to Authenticated; accepted (`spec.accepted`) with consent, the
  controller creates its VirtualNode (Peered), which the agent then serves;
- the status says the phase, the discovery source and the offer, written only when it changes;
- the virtual node (each pool's, for a provider with pools) is cordoned while its provider
  offers nothing, uncordoned when it offers again (only a cordon of ours is lifted).

The offer is read as the consumer identity (the Secret's kubeconfig), one watch of the tenant
namespace's ResourceOffer per consented provider (`OfferWatches`).
"""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime
from typing import Any

import yaml

from annex.api_paths import core_path, custom_path
from annex.controller import DONE, RETRY, Controller, Result
from annex.informers import Change, Informers
from annex.kubeapi import ClusterApi
from annex.writes import Foreign, create_or_refuse
from home_controller.offers import OfferWatches
from home_controller.sightings import Sightings
from shared.api.builtin import NODES, SECRETS
from shared.api.foreign_cluster import FOREIGN_CLUSTER, ForeignCluster
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge import foreign_cluster as rules
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, TYPE_LABEL, TYPE_VIRTUAL_NODE

log = logging.getLogger(__name__)

HOME = "home"
KUBECONFIG_KEY = "kubeconfig"
FOREIGN_CLUSTERS = FOREIGN_CLUSTER.resource
VIRTUAL_NODES = VIRTUAL_NODE.resource


def _cluster_id_of_spec(change: Change) -> list[str]:
    cluster_id = (change.obj.get("spec") or {}).get("clusterId")
    return [cluster_id] if cluster_id else []


def _cluster_id_of_label(change: Change) -> list[str]:
    cluster_id = (change.obj["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL)
    return [cluster_id] if cluster_id else []


def kubeconfig_of(secret: dict[str, Any]) -> dict[str, Any] | None:
    """The kubeconfig a consumer Secret holds, None when it holds none that parses."""
    encoded = (secret.get("data") or {}).get(KUBECONFIG_KEY)
    if not encoded:
        return None
    try:
        kubeconfig = yaml.safe_load(base64.b64decode(encoded))
    except (yaml.YAMLError, ValueError):
        return None
    return kubeconfig if isinstance(kubeconfig, dict) else None


def _server_of(secret: dict[str, Any] | None) -> str | None:
    """The provider's API server as the consumer kubeconfig names it."""
    kubeconfig = kubeconfig_of(secret) if secret is not None else None
    clusters = (kubeconfig or {}).get("clusters") or []
    server = ((clusters[0] if clusters else {}).get("cluster") or {}).get("server")
    return str(server) if server else None


class ForeignClusters:
    def __init__(self, api: ClusterApi, informers: Informers, sightings: Sightings,
                 workers: int = 2) -> None:
        self.api = api
        self.sightings = sightings
        self.controller: Controller[str] = Controller(
            "foreignclusters", self.reconcile, workers=workers, synced=self.synced,
            cluster=lambda cluster_id: cluster_id)  # a ForeignCluster is named by its id
        self.offers = OfferWatches(self.controller.add)
        self.listed: set[str] = set()
        self.foreign = informers.watch(HOME, FOREIGN_CLUSTERS, by="cluster")
        self.secrets = informers.watch(HOME, SECRETS.resource, by="namespace",
                                       label_selector=REMOTE_CLUSTER_ID_LABEL)
        self.virtual_nodes = informers.watch(HOME, VIRTUAL_NODES, by="namespace")
        self.nodes = informers.watch(HOME, NODES.resource, by="cluster",
                                     label_selector=f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE}")
        informers.keys(HOME, FOREIGN_CLUSTER.plural, _cluster_id_of_spec, self.controller)
        informers.keys(HOME, SECRETS.plural, _cluster_id_of_label, self.controller)
        informers.keys(HOME, VIRTUAL_NODE.plural, _cluster_id_of_spec, self.controller)
        informers.keys(HOME, NODES.plural, _cluster_id_of_label, self.controller)

    def synced(self) -> bool:
        """Nothing is decided on half-listed mirrors, nor on a discovery source's first look
        still under way (an announcement not seen yet is no announcement gone)."""
        listed = self.listed >= {FOREIGN_CLUSTER.plural, SECRETS.plural, VIRTUAL_NODE.plural,
                                 NODES.plural}
        return listed and self.sightings.settled()

    def on_listed(self, resource: str) -> None:
        self.listed.add(resource)

    # --- reading the mirrors -------------------------------------------------------------------

    def _foreign_cluster(self, cluster_id: str) -> ForeignCluster | None:
        found = [obj for obj in self.foreign.values()
                 if (obj.get("spec") or {}).get("clusterId") == cluster_id]
        # Two ForeignClusters for one id (made by hand): the one named after it, else the oldest.
        found.sort(key=lambda obj: (obj["metadata"]["name"] != cluster_id,
                                    obj["metadata"].get("creationTimestamp") or ""))
        return ForeignCluster.model_validate(found[0]) if found else None

    def _secret(self, cluster_id: str) -> dict[str, Any] | None:
        return next((obj for obj in self.secrets.values()
                     if (obj["metadata"].get("labels") or {}).get(
                         REMOTE_CLUSTER_ID_LABEL) == cluster_id
                     and kubeconfig_of(obj) is not None), None)

    def _virtual_node(self, cluster_id: str) -> str | None:
        found = next((obj for obj in self.virtual_nodes.values()
                      if (obj.get("spec") or {}).get("clusterId") == cluster_id), None)
        return None if found is None else (
            f"{found['metadata']['namespace']}/{found['metadata']['name']}")

    def _virtual_node_deleted(self, cluster_id: str) -> bool:
        """Whether a VirtualNode of the cluster is being deleted (drained)."""
        return any((obj.get("spec") or {}).get("clusterId") == cluster_id
                   and obj["metadata"].get("deletionTimestamp")
                   for obj in self.virtual_nodes.values())

    def _nodes(self, cluster_id: str) -> list[dict[str, Any]]:
        """The provider's virtual nodes: one, or one per pool of its offer."""
        return [obj for obj in self.nodes.values()
                if (obj["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL) == cluster_id]

    # --- the reconcile -------------------------------------------------------------------------

    async def reconcile(self, cluster_id: str) -> Result:
        sightings = self.sightings.of(cluster_id)
        foreign = self._foreign_cluster(cluster_id)
        if foreign is None:
            secret = self._secret(cluster_id)
            if sightings:
                wanted = rules.discovered(sightings[0])
                log.info("discovered %s (%s)", cluster_id, sightings[0].source.value)
            elif secret is not None or self._virtual_node(cluster_id) is not None:
                # Known without discovery (the chart's remotes, a peering of before): shown
                # all the same, as it is (accepted if a VirtualNode serves it).
                wanted = rules.known(cluster_id, _server_of(secret),
                                     accepted=self._virtual_node(cluster_id) is not None)
                log.info("%s is peered: its ForeignCluster is made", cluster_id)
            else:
                self.offers.stop(cluster_id)
                return DONE
            created, _ = await create_or_refuse(
                self.api, custom_path(FOREIGN_CLUSTER),
                custom_path(FOREIGN_CLUSTER, name=cluster_id), wanted, owned=lambda _: True)
            foreign = ForeignCluster.model_validate(created)
        name = str(foreign.metadata.name)
        source = foreign.status.discovery.source if foreign.status.discovery else (
            rules.discovered_by(foreign))
        looking = source is None or self.sightings.looking(source)
        if looking and rules.forgotten(foreign, sightings):
            log.info("%s is announced no more: its ForeignCluster goes", cluster_id)
            await self.api.delete_if_exists(custom_path(FOREIGN_CLUSTER, name=name))
            self.offers.stop(cluster_id)
            return DONE
        if (patch := rules.discovered_spec_patch(foreign, sightings)) is not None:
            await self.api.patch(custom_path(FOREIGN_CLUSTER, name=name), patch)

        secret = self._secret(cluster_id)
        kubeconfig = kubeconfig_of(secret) if secret is not None else None
        self.offers.follow(cluster_id, kubeconfig)
        virtual_node = self._virtual_node(cluster_id)
        if foreign.spec.accepted and self._virtual_node_deleted(cluster_id):
            # Deleting the VirtualNode withdraws the acceptance: the drained provider is not
            # made a VirtualNode again (accepting it again does).
            await self.api.patch(custom_path(FOREIGN_CLUSTER, name=name),
                                 {"spec": {"accepted": False}})
            log.info("%s: its VirtualNode is deleted: no longer accepted", cluster_id)
            foreign = foreign.model_copy(update={
                "spec": foreign.spec.model_copy(update={"accepted": False})})
        refused = None
        if foreign.spec.accepted and secret is not None and virtual_node is None:
            wanted = rules.virtual_node(foreign, secret["metadata"]["namespace"],
                                        secret["metadata"]["name"])
            where = f"{wanted['metadata']['namespace']}/{cluster_id}"
            try:
                await create_or_refuse(
                    self.api, custom_path(VIRTUAL_NODE, wanted["metadata"]["namespace"]),
                    custom_path(VIRTUAL_NODE, wanted["metadata"]["namespace"], cluster_id),
                    wanted, owned=lambda existing: (existing.get("spec") or {}).get(
                        "clusterId") == cluster_id)
            except Foreign as error:
                refused = (f"VirtualNode {where} exists for cluster "
                           f"{(error.existing.get('spec') or {}).get('clusterId')}: rename or "
                           "delete it")
                log.warning("%s accepted: %s", cluster_id, refused)
            else:
                log.info("%s accepted: VirtualNode %s created", cluster_id, where)
                virtual_node = where

        offer = self.offers.resources(cluster_id)
        for node in self._nodes(cluster_id) if virtual_node is not None else []:
            if (cordon := rules.cordon_patch(node, offer)) is None:
                continue
            await self.api.patch(core_path("nodes", name=node["metadata"]["name"]), cordon)
            log.info("virtual node %s %s: %s offers %s", node["metadata"]["name"],
                     "cordoned" if cordon["spec"]["unschedulable"] else "uncordoned",
                     cluster_id, rules.offer_summary(offer))
        status = rules.status(foreign, sightings, credentials=secret is not None,
                              virtual_node=virtual_node, offer=offer, now=datetime.now(UTC),
                              looking=looking, refused=refused)
        if status is not None:
            await self.api.patch(custom_path(FOREIGN_CLUSTER, name=name, subresource="status"),
                                 {"status": status})
        return DONE if refused is None else RETRY  # the name may be freed
