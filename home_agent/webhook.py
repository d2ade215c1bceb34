"""The mutating admission webhook for home pods (AdmissionReview v1 over HTTPS): pods created in
a namespace with a NamespaceOffloading get its pod offloading strategy applied (the pure
mutation is `shared.forge.offloading_strategy`). A namespace without one is left alone, and a
malformed request is answered allowed without a patch: this webhook must never block pods."""

from __future__ import annotations

import base64
import json
import logging
import ssl
from typing import Any

import jsonpatch
from aiohttp import web

from home_agent.agent import Agent
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING_NAME
from shared.forge.offloading_strategy import pod_with_offloading_strategy

log = logging.getLogger(__name__)

MUTATE_POD_PATH = "/mutate-pod"


def strategy_for(agent: Agent, namespace: str) -> str | None:
    """The pod offloading strategy of `namespace`, or None when it is not offloaded."""
    offloading = agent.mirrors.offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
    if offloading is None or (offloading.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return str((offloading.get("spec") or {}).get("podOffloadingStrategy") or "LocalAndRemote")


def review_response(agent: Agent, review: dict[str, Any]) -> dict[str, Any]:
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    pod = request.get("object")
    namespace = request.get("namespace") or ((pod or {}).get("metadata") or {}).get("namespace")
    strategy = strategy_for(agent, str(namespace or ""))
    if isinstance(pod, dict) and strategy is not None and request.get("operation") == "CREATE":
        try:
            mutated = pod_with_offloading_strategy(pod, strategy)
        except ValueError as error:
            log.warning("namespace %s: %s", namespace, error)
        else:
            operations = jsonpatch.make_patch(pod, mutated).patch
            if operations:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(operations).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}


def application(agent: Agent) -> web.Application:
    async def mutate(request: web.Request) -> web.Response:
        try:
            review = await request.json()
        except ValueError:
            return web.json_response({"message": "expected an AdmissionReview"}, status=400)
        return web.json_response(review_response(agent, review))

    app = web.Application()
    app.router.add_post(MUTATE_POD_PATH, mutate)
    return app


async def serve(agent: Agent) -> web.AppRunner | None:
    config = agent.config
    if not (config.webhook_address and config.webhook_cert and config.webhook_key):
        return None
    host, _, port = config.webhook_address.rpartition(":")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config.webhook_cert, config.webhook_key)
    runner = web.AppRunner(application(agent), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "0.0.0.0", int(port), ssl_context=context).start()
    log.info("pod webhook serving on https://%s%s", config.webhook_address, MUTATE_POD_PATH)
    return runner
