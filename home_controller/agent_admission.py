"""The agents' NodeRestriction: a validating admission webhook, served by the home controller
(never by an agent: a compromised agent must not answer its own checks), that confines each
agent to its own virtual node as the NodeRestriction admission plugin confines a kubelet (the
rules: `shared.agent_restriction`).

The chart's ValidatingWebhookConfiguration sends it the writes of the release namespace's
ServiceAccounts other than the controller's (matchConditions on the username, Kubernetes
1.28+): RBAC binds the agents' shared rights to that namespace's accounts group. Until the
VirtualNodes are listed every write sent is refused (the API server's clients retry). The
handler looks up what a rule needs beyond the request: the pod a token is bound to, the real
volume a home-provisioned volume copies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from annex.api_paths import core_path
from annex.kubeapi import ClusterApi
from annex.metrics import ServedRequests
from annex.mirror import Mirror
from annex.webhooks import admission_application, admission_request, serve_tls
from shared.admission import review_response
from shared.agent_restriction import (
    Agent,
    account_of,
    agents_by_account,
    needed_object,
    refusal,
    request_name,
)
from shared.forge.agent import AgentTemplate

log = logging.getLogger(__name__)

VALIDATE_AGENTS_PATH = "/validate-agents"


class AgentAdmission:
    """The webhook's handler: `virtual_nodes` holds the VirtualNodes of the release namespace
    (the controller's mirror), `synced()` says whether they are listed."""

    def __init__(self, api: ClusterApi, template: AgentTemplate, virtual_nodes: Mirror,
                 synced: Callable[[], bool], served: ServedRequests | None = None,
                 offered_pools: Callable[[str], frozenset[str] | None] = lambda _: None
                 ) -> None:
        self.api = api
        self.offered_pools = offered_pools
        """The pools a provider's offer declares, by its cluster id (None: not known yet)."""
        self.served = served
        """What counts the webhook's requests (/metrics)."""
        self.template = template
        self.virtual_nodes = virtual_nodes
        self.synced = synced
        self._agents: tuple[int, dict[str, Agent]] = (-1, {})
        """The agents by account as of a version of the mirror: every Lease renewal and pod
        status write of every agent is reviewed, and VirtualNodes seldom change."""

    def agent(self, account: str) -> Agent | None:
        version = self.virtual_nodes.version  # read before the mirror: never a stale index
        if self._agents[0] != version:
            self._agents = (version, agents_by_account(self.template,
                                                       self.virtual_nodes.values()))
        return self._agents[1].get(account)

    async def review(self, request: Mapping[str, Any]) -> str | None:
        """The refusal of an admission `request`, None when it is admitted."""
        username = str((request.get("userInfo") or {}).get("username") or "")
        account = account_of(username, self.template.namespace)
        if account is None:
            return None  # not the release's (an API server without matchConditions sent it)
        if not self.synced():
            return "the home controller has not listed the VirtualNodes yet: try again"
        agent = self.agent(account)
        if agent is not None:
            agent = dataclasses.replace(agent,
                                        offered_pools=self.offered_pools(agent.cluster_id))
        needed = needed_object(request) if agent is not None else None
        found = await self.api.find(core_path(*needed)) if needed is not None else None
        denied = refusal(request, agent, self.template, found)
        if denied is not None:
            log.warning("refused %s %s %s/%s%s of %s: %s", request.get("operation"),
                        (request.get("resource") or {}).get("resource"),
                        request.get("namespace") or "", request_name(request),
                        f" ({request['subResource']})" if request.get("subResource") else "",
                        username, denied)
        return denied

    def application(self) -> web.Application:
        async def validate(request: web.Request) -> web.Response:
            admission = await admission_request(request)
            return web.json_response(review_response(str(admission.get("uid", "")),
                                                     denied=await self.review(admission)))

        app = admission_application([self.served.middleware] if self.served else [])
        app.router.add_post(VALIDATE_AGENTS_PATH, validate)
        return app

    async def serve(self, address: str, cert: str, key: str) -> web.AppRunner:
        runner = await serve_tls(self.application(), address, cert, key)
        log.info("agent admission webhook serving on https://%s%s", address,
                 VALIDATE_AGENTS_PATH)
        return runner
