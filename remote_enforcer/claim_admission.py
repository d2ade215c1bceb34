"""The validating webhook for reflected PersistentVolumeClaims (the storage fabric).

In a consumer's twin namespaces:
- a claim must carry the consumer's origin label (as ShadowPods do: shared.forge.tenancy);
- it gets a volume provisioned for it: no `volumeName` nor `selector` binding an existing
  PersistentVolume of the provider (another tenant's released data, a static NFS export), no
  data source but a claim or a VolumeSnapshot of its own namespace; nor does the consumer
  identity bind an unbound claim later (the PV controller's binding updates pass);
- its storage class must be one the offer lists (`--storage-classes`); an offer that lists none
  leaves the provider's classes unrestricted (the DefaultStorageClass admission plugin has
  already put in the default one when the claim names none);
- the consumer's Quota caps `requests.storage` and `persistentvolumeclaims` (shared.quota.
  admit_claim) at creation and at expansion, against what its claims take (the usage ledger,
  from the enforcer's watch of claims) plus the admitted ones not yet seen there, decided by the
  replica that leads (remote_enforcer.leadership);
- a reflected claim is deleted only by its consumer, or with its twin namespace (unoffloading):
  the data behind it cannot be recreated as a ShadowPod's pod can, so nothing on
  the provider removes it while home is away, a cut included.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from annex.api_paths import core_path
from annex.kubeapi import ClusterApi
from remote_enforcer.consumers import Consumers
from remote_enforcer.leadership import Leadership
from remote_enforcer.ledger import UsageLedger
from shared import quota as quota_rules
from shared.forge.persistentvolumeclaim import claim_usage, storage_class_of
from shared.forge.tenancy import consumer_subject, origin_problem
from shared.wellknown import (
    ORIGIN_CLUSTER_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
)

WEBHOOK_PATH = "/validate/persistentvolumeclaims"
RESERVATION_SECONDS = 30.0


def consumer_username(tenant_namespace: Mapping[str, Any]) -> str:
    """The user name the API server gives the consumer identity its tenant namespace names."""
    subject = consumer_subject(tenant_namespace)
    if subject["kind"] == "User":
        return str(subject["name"])
    return f"system:serviceaccount:{subject['namespace']}:{subject['name']}"


def class_problem(claim: Mapping[str, Any], offered: Sequence[str]) -> str | None:
    name = storage_class_of(claim)
    if not offered or name in offered:
        return None
    return (f'storage class "{name}" is not offered to this consumer (offered: '
            f'{", ".join(offered)})')


# What a claim may be filled from: (apiGroup, kind), of the claim's own namespace.
CLAIM_DATA_SOURCES = frozenset({("", "PersistentVolumeClaim"),
                                ("snapshot.storage.k8s.io", "VolumeSnapshot")})


def volume_choice_problems(claim: Mapping[str, Any], namespace: str) -> list[str]:
    """What in a new claim would pick a volume or data the provisioner did not make for it."""
    spec = claim.get("spec") or {}
    problems = []
    if spec.get("volumeName"):
        problems.append("spec.volumeName: Forbidden: a claim of a twin namespace gets a volume "
                        "provisioned for it, never an existing PersistentVolume of the provider")
    if spec.get("selector"):
        problems.append("spec.selector: Forbidden: a claim of a twin namespace does not select "
                        "existing PersistentVolumes of the provider")
    for field in ("dataSource", "dataSourceRef"):
        source = spec.get(field) or {}
        if not source:
            continue
        group, kind = str(source.get("apiGroup") or ""), str(source.get("kind") or "")
        if (group, kind) not in CLAIM_DATA_SOURCES:
            problems.append(f'spec.{field}: Forbidden: a claim is made from a '
                            f'PersistentVolumeClaim or a VolumeSnapshot only, not a {kind} of '
                            f'group "{group}"')
        if source.get("namespace") not in (None, "", namespace):
            problems.append(f"spec.{field}.namespace: Forbidden: a claim is made from its own "
                            f'namespace\'s data only, not "{source["namespace"]}"\'s')
    return problems


def _binds(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return not (old.get("spec") or {}).get("volumeName") and bool(
        (new.get("spec") or {}).get("volumeName"))


def _terminating(namespace: Mapping[str, Any]) -> bool:
    return bool((namespace.get("metadata") or {}).get("deletionTimestamp")) or (
        namespace.get("status") or {}).get("phase") == "Terminating"


class ClaimAdmission:
    def __init__(self, api: ClusterApi, consumers: Consumers, ledger: UsageLedger,
                 storage_classes: Sequence[str], leadership: Leadership | None = None) -> None:
        self.api = api
        self.consumers = consumers
        self.ledger = ledger
        self.storage_classes = tuple(storage_classes)
        self.leadership = leadership or Leadership()
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # consumer -> (namespace, name) -> (usage, expiry): admitted, maybe not listed yet
        self._reserved: defaultdict[str, dict[tuple[str, str], tuple[dict[str, Decimal],
                                                                     float]]] = defaultdict(dict)

    async def review(self, request: Mapping[str, Any]) -> tuple[bool, str]:
        operation = request.get("operation")
        namespace = str(request.get("namespace") or "")
        namespace_obj = await self.consumers.namespace(self.api, namespace)
        consumer = self.consumers.twin_consumer(namespace_obj)
        if consumer is None:
            return True, ""  # not a twin namespace: the provider's own claims
        if operation == "DELETE":
            if not _terminating(namespace_obj or {}):  # the cache may lag the deletion
                namespace_obj = await self.api.find(core_path("namespaces", name=namespace))
            return self._deletion(request, consumer, namespace_obj or {})
        obj = request.get("object") or {}
        problem = origin_problem((obj.get("metadata") or {}).get("labels") or {}, namespace,
                                 consumer)
        if problem is None and operation == "CREATE":
            problem = "; ".join(volume_choice_problems(obj, namespace)) or class_problem(
                obj, self.storage_classes)
        old = request.get("oldObject") if operation == "UPDATE" else None
        if problem is None and old is not None and _binds(old, obj) and self._by_consumer(
                request, consumer):
            problem = ("spec.volumeName: Forbidden: the consumer does not bind a claim to a "
                       "volume: the provider's PersistentVolume controller does")
        if problem is not None:
            return False, problem
        return await self._within_quota(consumer, namespace, request)

    def _deletion(self, request: Mapping[str, Any], consumer: str,
                  namespace: Mapping[str, Any]) -> tuple[bool, str]:
        old = request.get("oldObject") or {}
        if ((old.get("metadata") or {}).get("labels") or {}).get(ORIGIN_CLUSTER_LABEL) is None:
            return True, ""
        if _terminating(namespace):
            return True, ""  # the twin namespace goes (unoffloaded): its content with it
        if self._by_consumer(request, consumer):
            return True, ""
        return False, (f"this claim holds the data of consumer {consumer}: only the consumer "
                       f"deletes it (or the deletion of its namespace)")

    def _by_consumer(self, request: Mapping[str, Any], consumer: str) -> bool:
        """Whether the consumer's identity makes the request."""
        user = str((request.get("userInfo") or {}).get("username") or "")
        return user in {consumer_username(t) for t in self._tenant_namespaces(consumer)}

    def _tenant_namespaces(self, consumer: str) -> list[dict[str, Any]]:
        return [ns for ns in self.consumers.namespaces.values()
                if ((ns.get("metadata") or {}).get("labels") or {}).get(TENANT_NAMESPACE_LABEL)
                == "true" and ns["metadata"]["labels"].get(REMOTE_CLUSTER_ID_LABEL) == consumer]

    def _used(self, consumer: str, key: tuple[str, str]) -> dict[str, Decimal]:
        """The consumer's usage without the claim `key`'s own, with the claims admitted and
        not yet seen by the ledger."""
        reserved = self._reserved[consumer]
        now = time.monotonic()
        for seen in [k for k, (_, expiry) in reserved.items()
                     if expiry < now or self.ledger.claim(k)]:
            del reserved[seen]
        own = {name: -amount for name, amount in self.ledger.claim(key).items()}
        return quota_rules.total_usage([self.ledger.usage(consumer), own,
                                        *(usage for k, (usage, _) in reserved.items()
                                          if k != key)])

    async def _within_quota(self, consumer: str, namespace: str, request: Mapping[str, Any]
                            ) -> tuple[bool, str]:
        obj = request.get("object") or {}
        old = request.get("oldObject") if request.get("operation") == "UPDATE" else None
        dry_run = bool(request.get("dryRun"))
        usage = claim_usage(obj)
        if old is not None and usage == claim_usage(old):
            return True, ""  # no new storage asked: metadata, status, binding
        verdict = await self.leadership.elsewhere(WEBHOOK_PATH, request)
        if verdict is not None:
            return verdict
        spec = (self.consumers.quota(consumer) or {}).get("spec") or {}
        limits = await self.consumers.limits(consumer)  # with a Quota or without
        key = (namespace, str((obj.get("metadata") or {}).get("name") or ""))
        await self.ledger.claims_synced.wait()
        async with self._locks[consumer]:
            used = self._used(consumer, key)
            cordoned = bool(spec.get("cordoned")) and old is None
            decision = quota_rules.admit_claim(cordoned, limits, used, usage)
            if decision.allowed and not dry_run and old is None:
                self._reserved[consumer][key] = (decision.requested,
                                                 time.monotonic() + RESERVATION_SECONDS)
            return decision.allowed, decision.message

    def reserved(self) -> int:
        """Admitted claims the ledger has not seen stored yet (nor given up on)."""
        now = time.monotonic()
        return sum(1 for reserved in self._reserved.values()
                   for key, (_, expiry) in reserved.items()
                   if expiry >= now and not self.ledger.claim(key))
