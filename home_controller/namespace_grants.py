"""The agents' rights in the offloaded namespaces: each namespace holding a NamespaceOffloading
gets the release's namespace grant (`shared.forge.agent.namespace_grant`), a RoleBinding of the
agents' offloaded-namespace ClusterRole for the agents whose virtual node its clusterSelector
selects (their Nodes' labels, as each agent decides for itself), which goes with its last
NamespaceOffloading or agent. An agent reads the Secrets, ConfigMaps and claims of the
namespaces offloaded to it and of no other: not kube-system's, not another remote's
kubeconfig, not a namespace offloaded to another provider only. Never in the release's own
namespace (the agents' accounts and kubeconfig Secrets) nor the system namespaces, even
offloaded (`namespace_grant_refusal`).

The controller holds `bind` on that ClusterRole only (none of its rights); a grant it did not
make (a user's RoleBinding of that name) is left alone and logged. Its grants are watched, by
their labels, so one whose namespace stopped being offloaded while the controller was down, or
an earlier version's token grant (bound to every agent), goes once they are listed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from annex.api_paths import group_path
from annex.controller import DONE, Controller, Result
from annex.informers import Change, Informers
from annex.kubeapi import ClusterApi
from annex.writes import Foreign, create_or_refuse, delete_owned, replace_or_create
from shared.api.builtin import NODES, ROLE_BINDINGS
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.agent import (
    NAMESPACE_GRANT_COMPONENT,
    RETIRED_GRANT_COMPONENTS,
    AgentTemplate,
    is_namespace_grant,
    namespace_grant,
    namespace_grant_name,
    namespace_grant_refusal,
    serving_accounts,
)

log = logging.getLogger(__name__)

HOME = "home"


def grant_selector(template: AgentTemplate) -> str:
    """The release's grants, current and retired."""
    components = ",".join(sorted({NAMESPACE_GRANT_COMPONENT, *RETIRED_GRANT_COMPONENTS}))
    return ",".join([*(f"{key}={value}" for key, value in template.selector_labels.items()),
                     f"app.kubernetes.io/component in ({components})"])


def _namespace_key(change: Change) -> list[str]:
    return [str((change.obj.get("metadata") or {}).get("namespace") or "")]


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _granted(grant: Mapping[str, Any]) -> tuple[object, ...]:
    """What a grant gives, whoever wrote it: compared, not its metadata."""
    return (grant.get("roleRef"), sorted(
        (str(subject.get("kind")), str(subject.get("namespace")), str(subject.get("name")))
        for subject in grant.get("subjects") or []))


class NamespaceGrants:
    def __init__(self, api: ClusterApi, informers: Informers, template: AgentTemplate,
                 *, workers: int = 2) -> None:
        self.api = api
        self.template = template
        self.controller: Controller[str] = Controller(
            "namespacegrants", self.reconcile, workers=workers, synced=self.synced)
        self.listed: set[str] = set()
        self.offloadings = informers.watch(HOME, NAMESPACE_OFFLOADING.resource, by="cluster")
        self.grants = informers.watch(HOME, ROLE_BINDINGS.resource, by="cluster",
                                      label_selector=grant_selector(template))
        # Watched by the VirtualNode controller: the agents and their Nodes.
        self.virtual_nodes = informers.mirror(HOME, VIRTUAL_NODE.plural)
        self.nodes = informers.mirror(HOME, NODES.plural)  # the virtual Nodes: their labels select
        informers.keys(HOME, NAMESPACE_OFFLOADING.plural, _namespace_key, self.controller)
        informers.keys(HOME, ROLE_BINDINGS.plural, _namespace_key, self.controller)
        informers.keys(HOME, VIRTUAL_NODE.plural, lambda _: self._every_namespace(),
                       self.controller)
        informers.keys(HOME, NODES.plural, self._relabelled, self.controller, compares=True)

    def synced(self) -> bool:
        return self.listed >= {NAMESPACE_OFFLOADING.plural, ROLE_BINDINGS.plural,
                               VIRTUAL_NODE.plural, NODES.plural}

    def on_listed(self, resource: str) -> None:
        self.listed.add(resource)

    def _every_namespace(self) -> Iterable[str]:
        return {namespace for namespace, _ in [*self.offloadings.keys(), *self.grants.keys()]}

    def _relabelled(self, change: Change) -> Iterable[str]:
        """A virtual Node's labels decide what it serves; its status (heartbeats) does not."""
        if _labels(change.before) == _labels(None if change.deleted else change.obj):
            return ()
        return self._every_namespace()

    def _accounts(self, namespace: str) -> list[str]:
        offloading = self.offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
        if offloading is None:
            return []
        virtual_nodes = []
        for obj in self.virtual_nodes.values():
            try:
                virtual_nodes.append(VirtualNode.model_validate(obj))
            except ValidationError:
                continue  # refused by the VirtualNode controller: it makes no agent
        labels = {name: dict(_labels(self.nodes.get(("", name))))
                  for _, name in self.nodes.keys()}
        return serving_accounts(offloading, self.template, virtual_nodes, labels)

    def _path(self, namespace: str, name: str = "") -> str:
        return group_path(*ROLE_BINDINGS.resource, namespace, name)

    async def reconcile(self, namespace: str) -> Result:
        name = namespace_grant_name(self.template)
        for key in self.grants.keys():  # an earlier version's, of another name
            retired = self.grants.get(key)
            if key[0] == namespace and key[1] != name and retired is not None:
                await delete_owned(self.api, self._path(*key), retired["metadata"].get("uid"))
                log.info("namespace %s: an earlier grant %s deleted", namespace, key[1])
        accounts = self._accounts(namespace)
        refusal = namespace_grant_refusal(self.template, namespace)
        current = self.grants.get((namespace, name))
        if accounts and refusal is not None:
            log.warning("namespace %s offloaded, but no agent may act there: %s", namespace,
                        refusal)
        elif accounts:
            desired = namespace_grant(self.template, namespace, accounts)
            if current is None:
                await self._create(namespace, desired)
            elif current["roleRef"] != desired["roleRef"]:  # immutable
                await delete_owned(self.api, self._path(namespace, name),
                                   current["metadata"].get("uid"))
                await self._create(namespace, desired)
            elif _granted(current) != _granted(desired):
                await replace_or_create(
                    self.api, self._path(namespace, name),
                    {**desired, "metadata": {**desired["metadata"],
                                             "resourceVersion": current["metadata"].get(
                                                 "resourceVersion")}},
                    lambda: self._create(namespace, desired))
                log.info("namespace %s: its agents are now %s", namespace, ", ".join(accounts))
            return DONE
        if current is not None:
            await delete_owned(self.api, self._path(namespace, name),
                               current["metadata"].get("uid"))
            log.info("namespace %s no longer offloaded to any agent: its grant deleted",
                     namespace)
        return DONE

    async def _create(self, namespace: str, desired: dict[str, Any]) -> None:
        name = desired["metadata"]["name"]
        try:
            await create_or_refuse(self.api, self._path(namespace), self._path(namespace, name),
                                   desired,
                                   owned=lambda existing: is_namespace_grant(existing,
                                                                             self.template))
        except Foreign:
            log.warning("RoleBinding %s/%s exists and is not this release's namespace grant: "
                        "left alone (no agent may act in %s)", namespace, name, namespace)
            return
        log.info("namespace %s offloaded: %s may act there", namespace,
                 ", ".join(subject["name"] for subject in desired["subjects"]))
