"""The agents' token requests, confined to the offloaded namespaces: each namespace holding a
NamespaceOffloading gets the release's token grant (`shared.forge.agent.token_grant`, a
RoleBinding of the agents' token-request ClusterRole), which goes with its last
NamespaceOffloading. A kubelet's tokens are confined by the Node authorizer to the pods bound to
it; the agents' are confined to the namespaces users offloaded, never the release's own (the
agents' accounts) nor the system namespaces, even offloaded (`token_grant_refusal`).

The controller holds `bind` on that ClusterRole only (not its rights: it requests no token
itself); a grant it did not make (another release's, a user's RoleBinding of that name) is left
alone and logged. Once the NamespaceOffloadings are listed, the grants found in any namespace
are looked at again, so that one whose namespace stopped being offloaded while the controller
was down goes too.
"""

from __future__ import annotations

import asyncio
import logging

from annex.controller import DONE, Controller, Result
from annex.informers import Change, Informers
from annex.kubeapi import ClusterApi, group_path
from annex.writes import Foreign, create_or_refuse, delete_owned
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.forge.agent import (
    TOKEN_GRANT_COMPONENT,
    AgentTemplate,
    is_token_grant,
    token_grant,
    token_grant_name,
    token_grant_refusal,
)

log = logging.getLogger(__name__)

HOME = "home"
ROLE_BINDINGS = ("rbac.authorization.k8s.io", "v1", "rolebindings")


def _namespace_key(change: Change) -> list[str]:
    return [str((change.obj.get("metadata") or {}).get("namespace") or "")]


class TokenGrants:
    def __init__(self, api: ClusterApi, informers: Informers, template: AgentTemplate,
                 *, workers: int = 2) -> None:
        self.api = api
        self.template = template
        self.controller: Controller[str] = Controller(
            "tokengrants", self.reconcile, workers=workers, synced=self.synced)
        self.listed = False
        self.sweep: asyncio.Task[None] | None = None
        self.offloadings = informers.watch(HOME, NAMESPACE_OFFLOADING.resource, by="cluster")
        informers.keys(HOME, NAMESPACE_OFFLOADING.plural, _namespace_key, self.controller)

    def synced(self) -> bool:
        return self.listed

    def on_listed(self, resource: str) -> None:
        if resource != NAMESPACE_OFFLOADING.plural or self.listed:
            return
        self.listed = True
        self.sweep = asyncio.get_running_loop().create_task(self._sweep(), name="token-grants")

    async def _sweep(self) -> None:
        """Each namespace holding one of the release's grants, looked at again."""
        selector = ",".join(f"{key}={value}" for key, value in {
            **self.template.selector_labels,
            "app.kubernetes.io/component": TOKEN_GRANT_COMPONENT}.items())
        try:
            grants = await self.api.list(group_path(*ROLE_BINDINGS), selector)
        except Exception as error:
            log.warning("the token grants could not be listed (one left in a namespace no "
                        "longer offloaded stays until it is offloaded again): %s", error)
            return
        for grant in grants:
            self.controller.add(str(grant["metadata"]["namespace"]))

    def _path(self, namespace: str, name: str = "") -> str:
        return group_path(*ROLE_BINDINGS, namespace, name)

    async def reconcile(self, namespace: str) -> Result:
        name = token_grant_name(self.template)
        offloaded = any(key[0] == namespace for key in self.offloadings.keys())
        refusal = token_grant_refusal(self.template, namespace)
        if offloaded and refusal is not None:
            log.warning("namespace %s offloaded, but its pods get no reflected tokens: %s",
                        namespace, refusal)
        elif offloaded:
            try:
                _, made = await create_or_refuse(
                    self.api, self._path(namespace), self._path(namespace, name),
                    token_grant(self.template, namespace),
                    owned=lambda existing: is_token_grant(existing, self.template))
            except Foreign:
                log.warning("RoleBinding %s/%s exists and is not this release's token grant: "
                            "left alone (the agents may request no token in %s)", namespace,
                            name, namespace)
                return DONE
            if made:
                log.info("namespace %s offloaded: the agents may request its tokens", namespace)
            return DONE
        existing = await self.api.find(self._path(namespace, name))
        if existing is not None and is_token_grant(existing, self.template):
            await delete_owned(self.api, self._path(namespace, name),
                               existing["metadata"].get("uid"))
            log.info("namespace %s no longer offloaded: its token grant deleted", namespace)
        return DONE
