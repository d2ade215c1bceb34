"""The pods/eviction subresource (policy/v1 Eviction): a pod deleted only as its
PodDisruptionBudget allows.

As kube-apiserver's EvictionREST.Create (pkg/registry/core/pod/storage/eviction.go):
- the Eviction's name must be the pod's (400 otherwise); a missing pod is 404;
- a pod Succeeded, Failed or Pending, or already being deleted, is deleted at once, whatever its
  budgets (a running pod with its resourceVersion as precondition);
- more than one budget selecting the pod: 500 "This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support.";
- a pod not Ready whose budget is met (currentHealthy >= desiredHealthy > 0), or whose budget's
  `unhealthyPodEvictionPolicy` is AlwaysAllow, is deleted without spending the budget;
- otherwise the budget's status must be current (observedGeneration) and allow a disruption:
  429 TooManyRequests "Cannot evict pod as it would violate the pod's disruption budget." with
  a `DisruptionBudget` cause saying why; else `disruptionsAllowed` goes down by one, the pod is
  recorded in `disruptedPods` (until the disruption controller sees it deleted) and deleted
  with the Eviction's `deleteOptions`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubesim import errors
from kubesim.apiserver import ApiServer, SubresourceRequest, copy_json
from kubesim.controllers.base import kind_of
from kubesim.controllers.disruption import selects
from kubesim.controllers.replicaset import is_ready
from kubesim.errors import StatusError

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
RETRIES = 5  # EvictionsRetry's steps


def too_many_requests(cause: str, retry_after: int) -> StatusError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StatusError(429, "TooManyRequests", VIOLATION, details)


def _success() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


class Evictions:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.budgets_kind = kind_of(api, "policy", "v1", "poddisruptionbudgets")

    async def serve(self, request: SubresourceRequest) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        body = await self.api.mutate_created_subresource(request, {
            "apiVersion": "policy/v1", "kind": "Eviction", **body})
        if (body.get("metadata") or {}).get("name") != request.name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        await self.api.validate_created_subresource(request, body)  # Create's createValidation
        options = dict(body.get("deleteOptions") or {})
        namespace, name = request.namespace, request.name
        stored = self.api.store.get(self.pods_kind.storage_key, namespace, name)
        if stored is None:
            raise errors.not_found("pods", name)
        pod = stored.obj
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        if phase in ("Succeeded", "Failed", "Pending") or deleting:
            if phase == "Pending" and not deleting:  # shouldEnforceResourceVersion
                options = _with_version(options, pod)
            await self.api.delete(self.pods_kind, namespace, name, options=options)
            return _success()
        budgets = [b.obj for b in self.api.store.list(self.budgets_kind.storage_key, namespace)
                   if selects(b.obj, pod)]
        if len(budgets) > 1:
            raise StatusError(500, "", "This pod has more than one PodDisruptionBudget, which "
                                       "the eviction subresource does not support.")
        pinned = False
        if budgets:
            budget = budgets[0]
            status = budget.get("status") or {}
            unhealthy_allowed = (budget.get("spec") or {}).get(
                "unhealthyPodEvictionPolicy") == "AlwaysAllow" or (
                int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0)) > 0)
            if not is_ready(pod) and unhealthy_allowed:
                pinned = True  # not counted as healthy: nothing to spend
            else:
                await self._spend(budget, name)
        if pinned:
            options = _with_version(options, pod)
        try:
            await self.api.delete(self.pods_kind, namespace, name, options=options)
        except StatusError as error:
            if error.code == 409 and pinned and budgets:
                raise too_many_requests(f"The disruption budget {budgets[0]['metadata']['name']}"
                                        " is still being processed by the server.", 10) from None
            raise
        return _success()

    async def _spend(self, budget: dict[str, Any], pod_name: str) -> None:
        """checkAndDecrement, again on a fresh read after a conflict."""
        namespace, name = budget["metadata"]["namespace"], budget["metadata"]["name"]
        for _ in range(RETRIES):
            status = budget.get("status") or {}
            if int(status.get("observedGeneration", 0)) < int(
                    budget["metadata"].get("generation", 1)):
                raise too_many_requests(
                    f"The disruption budget {name} is still being processed by the server.", 10)
            allowed = int(status.get("disruptionsAllowed", 0))
            if allowed < 0:
                raise errors.forbidden("poddisruptionbudget.policy", name,
                                       "pdb disruptions allowed is negative")
            if allowed == 0:
                raise too_many_requests(
                    f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} "
                    f"healthy pods and has {status.get('currentHealthy', 0)} currently", 0)
            new = copy_json(budget)
            new_status = new.setdefault("status", {})
            new_status["disruptionsAllowed"] = allowed - 1
            if allowed - 1 == 0:
                for condition in new_status.get("conditions") or []:
                    if condition.get("type") == "DisruptionAllowed":
                        condition.update(status="False", reason="InsufficientPods")
            new_status.setdefault("disruptedPods", {})[pod_name] = datetime.now(UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            try:
                await self.api.update(self.budgets_kind, namespace, name, new,
                                      subresource="status")
                return
            except StatusError as error:
                if error.code != 409:
                    raise
            fresh = self.api.store.get(self.budgets_kind.storage_key, namespace, name)
            if fresh is None:
                raise errors.not_found("poddisruptionbudgets.policy", name)
            budget = fresh.obj
        raise StatusError(504, "Timeout", f'couldn\'t update PodDisruptionBudget "{name}" due '
                                          "to conflicts", {"retryAfterSeconds": 10})


def _with_version(options: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's resourceVersion as precondition, unless the caller set one."""
    preconditions = dict(options.get("preconditions") or {})
    preconditions.setdefault("resourceVersion", pod["metadata"]["resourceVersion"])
    return {**options, "preconditions": preconditions}


def install_eviction(api: ApiServer) -> None:
    api.register_subresource(kind_of(api, "", "v1", "pods"), "eviction", Evictions(api).serve)
