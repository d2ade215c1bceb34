"""`ApiServer`: the request pipeline of one simulated kube-apiserver, without sockets.

authorize -> decode -> strategy -> mutating admission -> validate -> validating admission -> store,
as staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go does it. Objects returned
(and yielded by watches) are shared with the store: treat them as read-only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import pickle
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kubesim import conversion, crds, errors, names, objectmeta
from kubesim.certificates import CertificateSigningRequestStrategy
from kubesim.errors import FieldCause, GoLiteral, StatusError
from kubesim.kinds import KindRegistry, ResourceKind, unsupported_field_label_message
from kubesim.store import ADDED, Filter, Store, Stored, storage_order
from kubesim.strategies import (
    DEFAULT_CLASS_ANNOTATION,
    DEFAULT_INGRESS_CLASS_ANNOTATION,
    ConfigMapStrategy,
    CustomResourceDefinitionStrategy,
    CustomResourceStrategy,
    DaemonSetStrategy,
    DeploymentStrategy,
    EndpointSliceStrategy,
    EventStrategy,
    IngressStrategy,
    NamespaceStrategy,
    NodeStrategy,
    PersistentVolumeClaimStrategy,
    PersistentVolumeStrategy,
    PodStrategy,
    RbacStrategy,
    ResourceQuotaStrategy,
    SecretStrategy,
    ServiceAccountStrategy,
    ServiceIPAllocator,
    ServiceStrategy,
    StorageClassStrategy,
    Strategy,
    ValidatingAdmissionPolicyBindingStrategy,
    ValidatingAdmissionPolicyStrategy,
    WebhookConfigurationStrategy,
    service_node_ports,
)
from kubesim.watch import BOOKMARK, ERROR, WatchStream, bookmark

Obj = dict[str, Any]
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
EPHEMERAL_CONTAINERS = "ephemeralcontainers"
ANY_CUSTOM_RESOURCE = ("*", "*")  # the storage key subresources of all custom resources use
# metadata an update keeps from the stored object whatever the request says (BeforeUpdate)
SYSTEM_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                 "generation", "namespace", "resourceVersion")
NAMESPACE_KEY = ("", "namespaces")
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")  # NamespaceLifecycle's
STORAGE_CLASS_KEY = ("storage.k8s.io", "storageclasses")
INGRESS_CLASS_KEY = ("networking.k8s.io", "ingressclasses")
UNSUPPORTED_FIELD_LABEL = "field label not supported: "  # how kubesim.selectors refuses a label
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


class ConcurrentWrite(StatusError):
    """The stored object changed while this write's admission ran (etcd's compare-and-swap
    failed). Writes without a resourceVersion precondition are retried on the fresh object, as
    GuaranteedUpdate does; the others surface it as the usual optimistic-lock Conflict."""

    def __init__(self, group_resource: str, name: str) -> None:
        conflict = errors.modified_conflict(group_resource, name)
        super().__init__(conflict.code, conflict.reason, conflict.message, conflict.details)


# GuaranteedUpdate retries until its compare-and-swap succeeds; a bound keeps a pathological
# writer from spinning forever here.
MAX_WRITE_RETRIES = 16


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


SYSTEM_USER = User("system:apiserver", ("system:masters",))


@dataclass(frozen=True)
class RequestAttributes:
    user: User
    verb: str
    api_group: str
    api_version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    resource_request: bool = True
    path: str = ""


class Authorizer(Protocol):
    def authorize(self, attributes: RequestAttributes) -> tuple[bool, str]: ...


class AllowAll:
    def authorize(self, attributes: RequestAttributes) -> tuple[bool, str]:
        return True, ""


@dataclass(frozen=True)
class AdmissionRequest:
    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    kind: ResourceKind
    subresource: str
    namespace: str
    name: str
    object: Obj | None
    old_object: Obj | None
    user: User
    dry_run: bool
    options: Obj | None


class AdmissionChain(Protocol):
    async def mutate(self, request: AdmissionRequest) -> Obj | None: ...
    async def validate(self, request: AdmissionRequest) -> None: ...
    async def close(self) -> None: ...


class NoAdmission:
    async def mutate(self, request: AdmissionRequest) -> Obj | None:
        return request.object

    async def validate(self, request: AdmissionRequest) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class SubresourceRequest:
    verb: str  # get | create | update | patch
    kind: ResourceKind
    subresource: str
    namespace: str
    name: str
    body: Any
    query: Mapping[str, str]
    user: User
    content_type: str = ""  # the request's Content-Type (a patch's type)


# A handler returns a JSON-able dict (sent as JSON) or a str (sent as text/plain, e.g. pods/log).
SubresourceHandler = Callable[[SubresourceRequest], Awaitable[Obj | str]]


@dataclass
class ListResult:
    items: list[Stored]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


def now_timestamp(offset_seconds: int = 0) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_json(obj: Any) -> Any:
    """A deep copy of JSON-shaped data (pickle is the fastest deep copy for it)."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


def _pinned_name(kind: ResourceKind, field_selector: str) -> str:
    """The name a list or watch is authorized as: the one `metadata.name=` pins, as
    NewRequestInfo (apiserver/pkg/endpoints/request/requestinfo.go) reads it from the field
    selector, so that RBAC's resourceNames allow following one object; "" otherwise."""
    from kubesim import selectors

    if not field_selector:
        return ""
    try:
        parsed = selectors.parse_field_selector(field_selector, kind.field_selectors)
    except selectors.SelectorError:
        return ""  # the real server ignores it here; the selection answers 400
    name = parsed.requires_exact_match("metadata.name") or ""
    return "" if name in (".", "..") or "/" in name or "%" in name else name


class ApiServer:
    def __init__(self, service_cidr: str = "10.96.0.0/12") -> None:
        self.kinds = KindRegistry()
        self.store = Store()
        self.authorizer: Authorizer = AllowAll()
        self.admission: AdmissionChain = NoAdmission()
        # kube-apiserver's --enable-garbage-collector: deletes with propagationPolicy Orphan or
        # Foreground leave the object with the `orphan` / `foregroundDeletion` finalizer for the
        # garbage collector (kubesim/controllers/garbagecollector.py) to act on and remove.
        self.garbage_collection = True
        self.bookmark_interval = 60.0  # seconds between periodic watch bookmarks
        self._subresources: dict[tuple[tuple[str, str], str], SubresourceHandler] = {}
        self._strategies: dict[tuple[str, str, str], Strategy] = {}
        self._service_ips = ServiceIPAllocator(service_cidr)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._views = {(v.served.group, v.served.version, v.served.plural): v
                       for v in conversion.views(self.kinds.get)}

    # ---------------------------------------------------------------------------- plumbing
    def register_subresource(
        self, kind: ResourceKind, name: str, handler: SubresourceHandler
    ) -> None:
        self._subresources[(kind.storage_key, name)] = handler

    def register_custom_subresource(self, name: str, handler: SubresourceHandler) -> None:
        """Serve `name` for every custom resource whose CRD declares it (e.g. scale)."""
        self._subresources[(ANY_CUSTOM_RESOURCE, name)] = handler

    def _subresource_handler(self, kind: ResourceKind, name: str) -> SubresourceHandler | None:
        handler = self._subresources.get((kind.storage_key, name))
        if handler is None and kind.custom and name in kind.subresources:
            handler = self._subresources.get((ANY_CUSTOM_RESOURCE, name))
        return handler

    def strategy(self, kind: ResourceKind) -> Strategy:
        key = (kind.group, kind.version, kind.plural)
        strategy = self._strategies.get(key)
        if strategy is None:
            strategy = self._strategies[key] = self._make_strategy(kind)
        return strategy

    def _make_strategy(self, kind: ResourceKind) -> Strategy:
        if kind.custom:
            return CustomResourceStrategy(kind)
        by_resource: dict[tuple[str, str], Callable[[ResourceKind], Strategy]] = {
            NAMESPACE_KEY: NamespaceStrategy,
            ("", "pods"): PodStrategy,
            ("", "nodes"): NodeStrategy,
            ("", "persistentvolumes"): PersistentVolumeStrategy,
            ("", "persistentvolumeclaims"): lambda k: PersistentVolumeClaimStrategy(
                k, self._storage_class, self._default_storage_class),
            ("storage.k8s.io", "storageclasses"): StorageClassStrategy,
            ("networking.k8s.io", "ingresses"): lambda k: IngressStrategy(
                k, lambda: self._newest_default(INGRESS_CLASS_KEY,
                                                DEFAULT_INGRESS_CLASS_ANNOTATION)),
            ("", "serviceaccounts"): ServiceAccountStrategy,
            ("", "resourcequotas"): ResourceQuotaStrategy,
            ("", "configmaps"): ConfigMapStrategy,
            ("", "secrets"): SecretStrategy,
            ("", "events"): EventStrategy,
            ("", "services"): lambda k: ServiceStrategy(k, self._service_ips.allocate,
                                                        self._node_ports_in_use),
            CRD_KEY: CustomResourceDefinitionStrategy,
            ("apps", "deployments"): DeploymentStrategy,
            ("apps", "replicasets"): DeploymentStrategy,
            ("apps", "statefulsets"): DeploymentStrategy,
            ("apps", "daemonsets"): DaemonSetStrategy,
            ("discovery.k8s.io", "endpointslices"): EndpointSliceStrategy,
            ("certificates.k8s.io", "certificatesigningrequests"):
                CertificateSigningRequestStrategy,
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations"):
                WebhookConfigurationStrategy,
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"):
                WebhookConfigurationStrategy,
            ("admissionregistration.k8s.io", "validatingadmissionpolicies"):
                ValidatingAdmissionPolicyStrategy,
            ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"):
                ValidatingAdmissionPolicyBindingStrategy,
        }
        if kind.group == "rbac.authorization.k8s.io":
            return RbacStrategy(kind)
        return by_resource.get(kind.storage_key, Strategy)(kind)

    def _storage_class(self, name: str) -> Obj | None:
        stored = self.store.get(STORAGE_CLASS_KEY, "", name)
        return stored.obj if stored is not None else None

    def _default_storage_class(self) -> str | None:
        """DefaultStorageClass: the newest class annotated as the default, if any."""
        return self._newest_default(STORAGE_CLASS_KEY, DEFAULT_CLASS_ANNOTATION)

    def _newest_default(self, key: tuple[str, str], annotation: str) -> str | None:
        """The newest class of `key` annotated as the default, if any (DefaultStorageClass,
        DefaultIngressClass)."""
        defaults = [s.obj for s in self.store.iterate(key)
                    if (s.obj["metadata"].get("annotations") or {}).get(annotation) == "true"]
        if not defaults:
            return None
        newest = max(defaults, key=lambda c: (c["metadata"].get("creationTimestamp") or "",
                                              c["metadata"]["name"]))
        return str(newest["metadata"]["name"])

    def _node_ports_in_use(self, namespace: str, name: str) -> set[int]:
        """The node ports stored Services other than namespace/name hold (what the real
        allocator's bitmap holds: ports are freed with the Service or its NodePort type)."""
        used: set[int] = set()
        for stored in self.store.iterate(("", "services")):
            if (stored.namespace, stored.name) != (namespace, name):
                used |= service_node_ports(stored.obj.get("spec") or {})
        return used

    def _authorize(
        self, user: User, verb: str, kind: ResourceKind, namespace: str, name: str,
        subresource: str = "",
    ) -> None:
        attributes = RequestAttributes(user, verb, kind.group, kind.version, kind.plural,
                                       subresource, namespace, name)
        allowed, reason = self.authorizer.authorize(attributes)
        if not allowed:
            message = forbidden_message(attributes) + (f": {reason}" if reason else "")
            # ForbiddenStatusError names the resource without its subresource (the message
            # itself says "pods/status")
            raise errors.forbidden(kind.group_resource, name, message)

    def _track(self, coroutine: Awaitable[Any]) -> None:
        """Run background work (e.g. signing an approved CSR); a lost race (404/409) is fine:
        the next write triggers the same work again."""
        task: asyncio.Task[Any] = asyncio.ensure_future(_tolerating_races(coroutine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -------------------------------------------------------------------------------- reads
    async def get(self, kind: ResourceKind, namespace: str, name: str, *, subresource: str = "",
                  user: User = SYSTEM_USER) -> Obj:
        return (await self.get_stored(kind, namespace, name, subresource=subresource,
                                      user=user)).obj

    async def get_stored(self, kind: ResourceKind, namespace: str, name: str, *,
                         subresource: str = "", user: User = SYSTEM_USER) -> Stored:
        if (view := self._view(kind)) is not None:
            return view.outbound(await self.get_stored(view.storage, namespace, name,
                                                       subresource=subresource, user=user))
        self._authorize(user, "get", kind, namespace, name, subresource)
        return self._existing(kind, namespace, name)

    def _refuse_served(self, view: conversion.View, obj: Obj, old: Obj | None) -> None:
        """The served API's own rules for a write through it (events.k8s.io/v1's stricter
        validation of Events), on the storage form of the object."""
        strategy = self.strategy(view.storage)
        if not isinstance(strategy, EventStrategy):
            return
        causes = (strategy.served_create_causes(obj) if old is None
                  else strategy.served_update_causes(obj, old))
        if causes:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise errors.invalid(view.storage.group_kind, name, causes)

    def _view(self, kind: ResourceKind) -> conversion.View | None:
        return self._views.get((kind.group, kind.version, kind.plural)) if self._views else None

    def exists(self, kind: ResourceKind, namespace: str, name: str) -> bool:
        view = self._view(kind)
        target = view.storage if view is not None else kind
        return self.store.get(target.storage_key, namespace if kind.namespaced else "",
                              name) is not None

    def _existing(self, kind: ResourceKind, namespace: str, name: str) -> Stored:
        stored = self.store.get(kind.storage_key, namespace if kind.namespaced else "", name)
        if stored is None:
            raise errors.not_found(kind.group_resource, name)
        return stored

    async def list(self, kind: ResourceKind, namespace: str, *, label_selector: str = "",
                   field_selector: str = "", limit: int = 0, continue_token: str = "",
                   user: User = SYSTEM_USER) -> Obj:
        result = await self.list_stored(kind, namespace, label_selector=label_selector,
                                        field_selector=field_selector, limit=limit,
                                        continue_token=continue_token, user=user)
        return list_object(kind, result)

    async def list_stored(self, kind: ResourceKind, namespace: str, *, label_selector: str = "",
                          field_selector: str = "", limit: int = 0, continue_token: str = "",
                          user: User = SYSTEM_USER) -> ListResult:
        if (view := self._view(kind)) is not None:
            result = await self.list_stored(
                view.storage, namespace, label_selector=label_selector,
                field_selector=view.field_selector(field_selector), limit=limit,
                continue_token=continue_token, user=user)
            result.items = [view.outbound(s) for s in result.items]
            return result
        self._authorize(user, "list", kind, namespace, _pinned_name(kind, field_selector))
        matches = self.selection(kind, label_selector, field_selector)
        list_rv, after = self.store.resource_version, ""
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if list_rv < self.store.compacted_resource_version:
                raise errors.expired(CONTINUE_EXPIRED)
            after = storage_order(*start)
        # A page is read from its start on, only as far as it needs (an etcd range read).
        candidates = self.store.iterate(kind.storage_key, namespace, after)
        selected = (s for s in candidates if matches is None or matches(s.obj))
        if not limit:
            return ListResult(list(selected), list_rv)
        page = list(itertools.islice(selected, limit))
        if len(page) < limit or next(selected, None) is None:
            return ListResult(page, list_rv)
        last = page[-1]
        token = _encode_continue(list_rv, (last.namespace, last.name))
        remaining = None
        if matches is None:  # remainingItemCount: only an unfiltered list knows it
            remaining = self.store.count_after(kind.storage_key, namespace,
                                               storage_order(last.namespace, last.name))
        return ListResult(page, list_rv, token, remaining)

    def selection(self, kind: ResourceKind, label_selector: str, field_selector: str
                  ) -> Filter | None:
        """One predicate for a label and a field selector; 400 BadRequest when unparseable."""
        from kubesim import selectors

        try:
            labels = selectors.parse_label_selector(label_selector) if label_selector else None
            fields = (selectors.parse_field_selector(field_selector, kind.field_selectors)
                      if field_selector else None)
        except selectors.SelectorError as error:
            message = str(error)
            if message.startswith(UNSUPPORTED_FIELD_LABEL):
                message = unsupported_field_label_message(
                    kind, message.removeprefix(UNSUPPORTED_FIELD_LABEL))
            raise errors.bad_request(message) from None
        if labels is not None and labels.empty:
            labels = None
        if labels is None and fields is None:
            return None

        def matches(obj: Obj) -> bool:
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                return False
            return fields is None or fields.matches(obj)

        return matches

    # ------------------------------------------------------------------------------- create
    async def create(self, kind: ResourceKind, namespace: str, body: Obj, *, name: str = "",
                     subresource: str = "", user: User = SYSTEM_USER,
                     dry_run: bool = False) -> Obj:
        result = await self.create_stored(kind, namespace, body, name=name,
                                          subresource=subresource, user=user, dry_run=dry_run)
        if isinstance(result, str):
            raise errors.bad_request(f"{kind.plural}/{subresource} answers with text")
        return result.obj if isinstance(result, Stored) else result

    async def create_stored(self, kind: ResourceKind, namespace: str, body: Obj, *,
                            name: str = "", subresource: str = "", user: User = SYSTEM_USER,
                            dry_run: bool = False, owned: bool = False) -> Stored | Obj | str:
        """Create; `owned` says the caller hands over `body` (the HTTP layer's fresh decode)."""
        if (view := self._view(kind)) is not None:
            inbound = view.inbound(body if owned else copy_json(body))
            if isinstance(inbound, dict) and not subresource:
                self._authorize(user, "create", view.storage, namespace, "")
                self._refuse_served(view, inbound, None)
            created = await self.create_stored(
                view.storage, namespace, inbound,
                name=name, subresource=subresource, user=user, dry_run=dry_run, owned=True)
            return view.outbound(created) if isinstance(created, Stored) else created
        namespace = namespace if kind.namespaced else ""
        if subresource:
            return await self._create_subresource(kind, namespace, name, subresource, body,
                                                  user, dry_run)
        obj = body if owned else copy_json(body)
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        meta = self._decode(kind, namespace, obj)
        self._authorize(user, "create", kind, namespace, meta.get("name", ""))
        if kind.namespaced:
            self._check_namespace_open(kind, namespace, meta.get("name", ""))
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        strategy = self.strategy(kind)
        for system_field in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds",
                             "generation", "selfLink"):
            meta.pop(system_field, None)
        strategy.default(obj)
        obj = await self._mutate("CREATE", kind, "", namespace, obj, None, user, dry_run)
        strategy.prepare_for_create(obj)
        meta = obj["metadata"]
        if strategy.tracks_generation:
            meta["generation"] = 1
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generated_name(kind, namespace, str(meta["generateName"]))
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_timestamp()
        name = meta.get("name", "")
        self._validate(kind, strategy, obj, None)
        await self._admit("CREATE", kind, "", namespace, obj, None, user, dry_run)
        if self.store.get(kind.storage_key, namespace, name) is not None:
            raise errors.already_exists(kind.group_resource, name)
        if dry_run:
            return Stored.of(obj, 0)
        stored = self.store.put(kind.storage_key, obj, etcd_limit=kind.custom)
        if kind.storage_key == CRD_KEY:
            self._establish_crd(stored.obj)
        return stored

    def _generated_name(self, kind: ResourceKind, namespace: str, base: str) -> str:
        """generateName, retried on a taken name (RetryGenerateName, GA in 1.32)."""
        for _ in range(8):
            name = names.generate_name(base)
            if self.store.get(kind.storage_key, namespace, name) is None:
                break
        return name

    def _decode(self, kind: ResourceKind, namespace: str, obj: Obj) -> Obj:
        """Check and fill apiVersion, kind and metadata.namespace, as the decoder does."""
        api_version, obj_kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != kind.api_version and not (
            # a custom resource may arrive in any served version of its group
            kind.custom and api_version.startswith(kind.group + "/")
        ):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({kind.api_version})")
        if obj_kind and obj_kind != kind.kind:
            raise errors.bad_request(
                f"the kind in the data ({obj_kind}) does not match the expected kind "
                f"({kind.kind})")
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        obj.clear()
        obj.update({"apiVersion": kind.api_version, "kind": kind.kind, **body})
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if kind.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return meta

    def _check_namespace_open(self, kind: ResourceKind, namespace: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin."""
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource")
        stored = self.store.get(NAMESPACE_KEY, "", namespace)
        if stored is None:
            raise errors.not_found("namespaces", namespace)
        if stored.obj["metadata"].get("deletionTimestamp") or (
            stored.obj.get("status") or {}
        ).get("phase") == "Terminating":
            raise errors.forbidden(
                kind.group_resource, name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated")

    async def _mutate(self, operation: str, kind: ResourceKind, subresource: str, namespace: str,
                      obj: Obj, old: Obj | None, user: User, dry_run: bool, *,
                      name: str = "") -> Obj:
        request = AdmissionRequest(operation, kind, subresource, namespace,
                                   name or (obj.get("metadata") or {}).get("name", ""), obj, old,
                                   user, dry_run, None)
        mutated = await self.admission.mutate(request)
        return obj if mutated is None else mutated

    async def _admit(self, operation: str, kind: ResourceKind, subresource: str, namespace: str,
                     obj: Obj | None, old: Obj | None, user: User, dry_run: bool,
                     options: Obj | None = None) -> None:
        name = (obj or old or {}).get("metadata", {}).get("name", "")
        await self.admission.validate(AdmissionRequest(
            operation, kind, subresource, namespace, name, obj, old, user, dry_run, options))

    def _validate(self, kind: ResourceKind, strategy: Strategy, obj: Obj, old: Obj | None,
                  subresource: str = "") -> None:
        name = str(obj["metadata"].get("name", ""))
        causes: list[Any] = objectmeta.metadata_errors(obj["metadata"], strategy.name_errors)
        if old is not None:
            causes += objectmeta.no_new_finalizers_errors(obj, old)
            if subresource == EPHEMERAL_CONTAINERS and isinstance(strategy, PodStrategy):
                causes += strategy.validate_ephemeral_containers_update(obj, old)
            elif subresource == "status":
                causes += strategy.validate_status_update(obj, old)
            else:
                causes += strategy.validate_update(obj, old)
        else:
            causes += strategy.validate(obj)
        if causes:
            raise errors.invalid(kind.group_kind, name, causes)

    # ------------------------------------------------------------------------------- update
    async def update(self, kind: ResourceKind, namespace: str, name: str, body: Obj, *,
                     subresource: str = "", user: User = SYSTEM_USER,
                     dry_run: bool = False) -> Obj:
        return (await self.update_stored(kind, namespace, name, body, subresource=subresource,
                                         user=user, dry_run=dry_run)).obj

    async def update_stored(self, kind: ResourceKind, namespace: str, name: str, body: Obj, *,
                            subresource: str = "", user: User = SYSTEM_USER,
                            dry_run: bool = False, owned: bool = False,
                            verb: str = "update") -> Stored:
        """Update; `verb` is what RBAC checks (a subresource may patch through an update)."""
        if (view := self._view(kind)) is not None:
            inbound = view.inbound(body if owned else copy_json(body))
            if isinstance(inbound, dict) and not subresource:
                self._authorize(user, verb, view.storage, namespace, name)
                old = self.store.get(view.storage.storage_key, namespace, name)
                if old is not None:
                    self._refuse_served(view, inbound, old.obj)
            return view.outbound(await self.update_stored(
                view.storage, namespace, name, inbound,
                subresource=subresource, user=user, dry_run=dry_run, owned=True, verb=verb))
        namespace = namespace if kind.namespaced else ""
        self._authorize(user, verb, kind, namespace, name, subresource)
        obj = body if owned else copy_json(body)
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        meta = self._decode(kind, namespace, obj)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})")
        meta["name"] = name
        if kind.create_on_update and self.store.get(kind.storage_key, namespace, name) is None:
            created = await self.create_stored(kind, namespace, obj, user=user, dry_run=dry_run,
                                               owned=True)
            assert isinstance(created, Stored)
            return created
        version = meta.get("resourceVersion")
        if not version and not kind.unconditional_update:
            raise errors.invalid(f"{kind.plural}.{kind.group}" if kind.group else kind.plural,
                                 name, [FieldCause("metadata.resourceVersion", "Invalid value",
                                                   "must be specified for an update",
                                                   GoLiteral("0x0"))])
        for attempt in range(MAX_WRITE_RETRIES):
            old = self._existing(kind, namespace, name)
            # an object's uid acts as an update precondition (DefaultUpdatedObjectInfo)
            _check_preconditions(kind, old, {"uid": meta.get("uid")})
            if version and version != old.obj["metadata"]["resourceVersion"]:
                raise errors.modified_conflict(kind.group_resource, name)
            try:
                return await self._write_update(kind, old, copy_json(obj), subresource, user,
                                                dry_run)
            except ConcurrentWrite:
                if version or attempt == MAX_WRITE_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    async def _write_update(self, kind: ResourceKind, old: Stored, new: Obj, subresource: str,
                            user: User, dry_run: bool) -> Stored:
        strategy = self.strategy(kind)
        old_obj = old.obj
        old_meta = old_obj["metadata"]
        _keep_system_fields(new["metadata"], old_meta)
        strategy.default(new)
        new = await self._mutate("UPDATE", kind, subresource, old.namespace, new, old_obj, user,
                                 dry_run)
        _keep_system_fields(new["metadata"], old_meta)  # admission may not change them either
        if subresource == "status":
            strategy.prepare_for_status_update(new, old_obj)
        elif subresource == "finalize" and isinstance(strategy, NamespaceStrategy):
            strategy.prepare_for_finalize(new, old_obj)
        elif subresource == "approval" and isinstance(strategy,
                                                      CertificateSigningRequestStrategy):
            strategy.prepare_for_approval(new, old_obj)
        elif subresource == EPHEMERAL_CONTAINERS and isinstance(strategy, PodStrategy):
            strategy.prepare_for_ephemeral_containers_update(new, old_obj)
        elif subresource and subresource != "scale":  # kubesim/scale.py writes the parent
            raise errors.not_found(kind.group_resource, old.name)
        else:
            strategy.prepare_for_update(new, old_obj)
        if subresource in ("", "scale", EPHEMERAL_CONTAINERS) and strategy.tracks_generation and (
                strategy.generation_view(new) != strategy.generation_view(old_obj)):
            new["metadata"]["generation"] = int(old_meta.get("generation", 0)) + 1
        self._validate(kind, strategy, new, old_obj, subresource)
        await self._admit("UPDATE", kind, subresource, old.namespace, new, old_obj, user, dry_run)
        if new == old_obj:
            return old  # a no-op write neither bumps the resourceVersion nor emits an event
        meta = new["metadata"]
        if dry_run:
            return Stored.of(new, old.rv)
        current = self.store.get(kind.storage_key, old.namespace, old.name)
        if current is None:
            raise errors.not_found(kind.group_resource, old.name)
        if current is not old:  # written meanwhile (admission awaited): optimistic lock
            raise ConcurrentWrite(kind.group_resource, old.name)
        if (meta.get("deletionTimestamp") and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")
                and not strategy.blocks_deletion(new)):
            return self._remove(kind, old.namespace, old.name)  # last finalizer gone
        stored = self.store.put(kind.storage_key, new, etcd_limit=kind.custom)
        if kind.storage_key == CRD_KEY:
            self._serve_crd(stored.obj)
        return stored

    # -------------------------------------------------------------------------------- patch
    async def patch(self, kind: ResourceKind, namespace: str, name: str, patch: Any,
                    patch_type: str, *, subresource: str = "", user: User = SYSTEM_USER,
                    dry_run: bool = False) -> Obj:
        return (await self.patch_stored(kind, namespace, name, patch, patch_type,
                                        subresource=subresource, user=user,
                                        dry_run=dry_run)).obj

    async def patch_stored(self, kind: ResourceKind, namespace: str, name: str, patch: Any,
                           patch_type: str, *, subresource: str = "", user: User = SYSTEM_USER,
                           dry_run: bool = False) -> Stored:
        view = self._view(kind)
        target = view.storage if view is not None else kind
        namespace = namespace if kind.namespaced else ""
        self._authorize(user, "patch", target, namespace, name, subresource)
        patch_type = accepted_patch_type(kind, patch_type)
        for attempt in range(MAX_WRITE_RETRIES):
            # the patch is applied to the freshest object on every attempt, as the real
            # patcher does inside GuaranteedUpdate
            old = self._existing(target, namespace, name)
            current = view.served_form(old.obj) if view is not None else copy_json(old.obj)
            new = _apply_patch(current, patch, patch_type, kind.kind)
            if view is not None:
                new = view.inbound(new)
                if not subresource:
                    self._refuse_served(view, new, old.obj)
            self._decode(target, namespace, new)
            version = new["metadata"].get("resourceVersion")
            if version and version != old.obj["metadata"]["resourceVersion"]:
                raise errors.modified_conflict(target.group_resource, name)
            if new["metadata"].get("name") != name:
                raise errors.bad_request(
                    "the name of the object does not match the name on the URL")
            try:
                stored = await self._write_update(target, old, new, subresource, user, dry_run)
            except ConcurrentWrite:
                if _patch_sets_resource_version(patch, patch_type) or (
                        attempt == MAX_WRITE_RETRIES - 1):
                    raise
                continue
            return view.outbound(stored) if view is not None else stored
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------------------- delete
    async def delete(self, kind: ResourceKind, namespace: str, name: str, *,
                     options: Obj | None = None, user: User = SYSTEM_USER,
                     dry_run: bool = False) -> Obj:
        body, _ = await self.delete_stored(kind, namespace, name, options=options, user=user,
                                           dry_run=dry_run)
        return body.obj if isinstance(body, Stored) else body

    async def delete_stored(self, kind: ResourceKind, namespace: str, name: str, *,
                            options: Obj | None = None, user: User = SYSTEM_USER,
                            dry_run: bool = False) -> tuple[Stored | Obj, bool]:
        """Delete; returns (the object or a Success Status, whether it is gone already)."""
        if (view := self._view(kind)) is not None:
            body, gone = await self.delete_stored(view.storage, namespace, name,
                                                  options=options, user=user, dry_run=dry_run)
            return (view.outbound(body) if isinstance(body, Stored) else body), gone
        namespace = namespace if kind.namespaced else ""
        self._authorize(user, "delete", kind, namespace, name)
        if kind.storage_key == NAMESPACE_KEY and name in IMMORTAL_NAMESPACES:
            # the NamespaceLifecycle admission plugin, before anything else is admitted
            raise errors.forbidden(kind.group_resource, name, "this namespace may not be deleted")
        options = options or {}
        old = self._existing(kind, namespace, name)
        _check_delete_preconditions(kind, old, options.get("preconditions") or {})
        if _graceful_deletion_pending(old.obj, options.get("gracePeriodSeconds")):
            return old, False  # rest.BeforeDelete: nothing to do, and nothing admits it
        await self._admit("DELETE", kind, "", namespace, None, old.obj, user, dry_run, options)
        strategy = self.strategy(kind)
        obj = copy_json(old.obj)
        meta = obj["metadata"]
        finalizers: list[str] = list(meta.get("finalizers") or [])
        namespace_storage = kind.storage_key == NAMESPACE_KEY
        # namespace storage sets them on the first delete only
        if self.garbage_collection and not (namespace_storage and meta.get("deletionTimestamp")):
            finalizers = deletion_finalizers(finalizers, options, namespace=namespace_storage)
        grace = strategy.grace_period(obj, options.get("gracePeriodSeconds"))
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds") or 0
            if grace < current:  # a later delete may shorten the grace period
                meta["deletionGracePeriodSeconds"] = grace
                meta["deletionTimestamp"] = now_timestamp(grace)
            grace = min(grace, current)
        pending = bool(finalizers) or grace > 0 or strategy.blocks_deletion(obj)
        if not pending:
            if dry_run:
                return _deleted_body(kind, strategy, old), True
            removed = self._remove(kind, namespace, name)
            return _deleted_body(kind, strategy, removed), True
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_timestamp(grace)
            if strategy.records_deletion_grace:
                meta["deletionGracePeriodSeconds"] = grace
            if meta.get("generation"):
                meta["generation"] = int(meta["generation"]) + 1
            strategy.on_deletion_started(obj)
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        if dry_run:
            return Stored.of(obj, old.rv), False
        if obj == old.obj:
            return old, False
        return self.store.put(kind.storage_key, obj, etcd_limit=kind.custom), False

    async def delete_collection(self, kind: ResourceKind, namespace: str, *,
                                label_selector: str = "", field_selector: str = "",
                                options: Obj | None = None, user: User = SYSTEM_USER,
                                dry_run: bool = False) -> Obj:
        namespace = namespace if kind.namespaced else ""
        self._authorize(user, "deletecollection", kind, namespace, "")
        matches = self.selection(kind, label_selector, field_selector)
        view = self._view(kind)
        storage_key = kind.storage_key
        if view is not None:
            matches, storage_key = view.predicate(matches), view.storage.storage_key
        deleted: list[Stored] = []
        for stored in self.store.list(storage_key, namespace):
            if matches is not None and not matches(stored.obj):
                continue
            try:
                body, _ = await self.delete_stored(kind, stored.namespace, stored.name,
                                                   options=options, user=user, dry_run=dry_run)
            except StatusError as error:
                if error.code == 404:
                    continue
                raise
            deleted.append(body if isinstance(body, Stored) else stored)
        return list_object(kind, ListResult(deleted, self.store.resource_version))

    def _remove(self, kind: ResourceKind, namespace: str, name: str) -> Stored:
        """Remove from storage (a CRD takes its custom resources with it)."""
        removed = self.store.remove(kind.storage_key, namespace, name)
        assert removed is not None
        if kind.storage_key == CRD_KEY:
            self._unserve_crd(removed.obj)
        return removed

    # ------------------------------------------------------------------------ subresources
    async def _create_subresource(self, kind: ResourceKind, namespace: str, name: str,
                                  subresource: str, body: Obj, user: User,
                                  dry_run: bool) -> Obj | str:
        self._authorize(user, "create", kind, namespace, name, subresource)
        if kind.storage_key == ("", "pods") and subresource == "binding":
            return await self._bind_pod(kind, namespace, name, body, user, dry_run)
        return await self.call_subresource(SubresourceRequest(
            "create", kind, subresource, namespace, name, body, {}, user))

    async def mutate_created_subresource(self, request: SubresourceRequest, obj: Obj) -> Obj:
        """Mutating admission of a subresource create (`obj`: what it takes, a TokenRequest),
        as the create handler runs it before the subresource's REST Create."""
        return await self._mutate("CREATE", request.kind, request.subresource,
                                  request.namespace, obj, None, request.user, False,
                                  name=request.name)

    async def validate_created_subresource(self, request: SubresourceRequest, obj: Obj) -> None:
        """Validating admission of a subresource create: the REST Create's createValidation,
        called once the object passed its static validation."""
        await self.admission.validate(AdmissionRequest(
            "CREATE", request.kind, request.subresource, request.namespace, request.name,
            copy_json(obj), None, request.user, False, None))

    async def call_subresource(self, request: SubresourceRequest) -> Obj | str:
        handler = self._subresource_handler(request.kind, request.subresource)
        if handler is None:
            raise errors.not_found(request.kind.group_resource, request.name)
        return await handler(request)

    def has_subresource_handler(self, kind: ResourceKind, subresource: str) -> bool:
        return self._subresource_handler(kind, subresource) is not None

    async def _bind_pod(self, kind: ResourceKind, namespace: str, name: str, body: Obj,
                        user: User, dry_run: bool) -> Obj:
        target = (body.get("target") or {}).get("name", "")
        if not target:
            raise errors.invalid("Binding", name, [FieldCause("target.name", "Required value",
                                                                "")])
        old = self._existing(kind, namespace, (body.get("metadata") or {}).get("name") or name)
        pod = old.obj
        why = ""
        if pod["metadata"].get("deletionTimestamp"):
            why = f"pod {old.name} is being deleted, cannot be assigned to a host"
        elif (pod.get("spec") or {}).get("nodeName"):
            why = f'pod {old.name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        if why:
            raise errors.conflict("pods/binding", old.name, why)
        new = copy_json(pod)
        new["spec"]["nodeName"] = target
        annotations = (body.get("metadata") or {}).get("annotations")
        if annotations:
            new["metadata"].setdefault("annotations", {}).update(annotations)
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True",
                           "lastProbeTime": None, "lastTransitionTime": now_timestamp()})
        status["conditions"] = conditions
        if not dry_run:
            stored = self.store.put(kind.storage_key, new, etcd_limit=kind.custom)
            del stored  # binding answers with a Status, not the pod
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    # -------------------------------------------------------------------------------- CRDs
    def _establish_crd(self, crd: Obj) -> None:
        """What the naming and establishing controllers do, at once: accept names, serve."""
        new = copy_json(crd)
        new["status"] = crds.established_status(crd, now_timestamp())
        stored = self.store.put(CRD_KEY, new)
        self._serve_crd(stored.obj)

    def _serve_crd(self, crd: Obj) -> None:
        group, plural = crds.served_resource(crd)
        self.kinds.remove(group, plural)
        self._strategies = {k: v for k, v in self._strategies.items()
                            if (k[0], k[2]) != (group, plural)}
        for kind in crds.served_kinds(crd):
            self.kinds.add(kind)

    def _unserve_crd(self, crd: Obj) -> None:
        key = crds.served_resource(crd)
        self.kinds.remove(*key)
        for stored in self.store.list(key):
            self.store.remove(key, stored.namespace, stored.name)
        self.store.drop_kind(key)

    # ------------------------------------------------------------------------------- watch
    def watch(self, kind: ResourceKind, namespace: str, *, resource_version: str = "",
              label_selector: str = "", field_selector: str = "", allow_bookmarks: bool = False,
              timeout_seconds: float | None = None, user: User = SYSTEM_USER
              ) -> AsyncIterator[Obj]:
        stream = self.open_watch(kind, namespace, resource_version=resource_version,
                                 label_selector=label_selector, field_selector=field_selector,
                                 allow_bookmarks=allow_bookmarks,
                                 timeout_seconds=timeout_seconds, user=user)

        async def events() -> AsyncIterator[Obj]:
            async for event_type, stored in stream:
                yield {"type": event_type, "object": stored.obj}

        return events()

    def open_watch(self, kind: ResourceKind, namespace: str, *, resource_version: str = "",
                   label_selector: str = "", field_selector: str = "",
                   allow_bookmarks: bool = False, timeout_seconds: float | None = None,
                   user: User = SYSTEM_USER, send_initial_events: bool | None = None,
                   resource_version_match: str = "") -> WatchStream:
        """Start a watch now (errors raise here); iterate it for (type, Stored) pairs.

        `send_initial_events` (with `resource_version_match="NotOlderThan"`) is the watch-list
        protocol: the current state as ADDED events, then (with bookmarks allowed) a BOOKMARK
        annotated `k8s.io/initial-events-end`; False starts at the given or latest version."""
        _validate_watch_options(send_initial_events, resource_version_match)
        namespace = namespace if kind.namespaced else ""
        self._authorize(user, "watch", kind, namespace, _pinned_name(kind, field_selector))
        matches = self.selection(kind, label_selector, field_selector)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds if timeout_seconds else None
        stream = WatchStream(self.store, kind, deadline, allow_bookmarks,
                             lambda: self.bookmark_interval)
        if (view := self._view(kind)) is not None:
            matches, stream.present = view.predicate(matches), view.outbound
            kind = view.storage
        if send_initial_events or (send_initial_events is None
                                   and resource_version in ("", "0")):
            stream.backlog = [(ADDED, s) for s in self.store.list(kind.storage_key, namespace)
                              if matches is None or matches(s.obj)]
            if send_initial_events and allow_bookmarks:
                stream.backlog.append((BOOKMARK, bookmark(
                    stream.kind, self.store.resource_version, initial_events_end=True)))
            stream.watcher = self.store.watch(kind.storage_key, namespace, matches)
            return stream
        if resource_version in ("", "0"):  # sendInitialEvents=false: from the latest version
            stream.watcher = self.store.watch(kind.storage_key, namespace, matches)
            return stream
        try:
            since = int(resource_version)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {resource_version}") from None
        try:
            history = list(self.store.events_since(kind.storage_key, since))
        except StatusError as error:
            # past authorization the real server reports this as an ERROR event, not a status
            stream.backlog = [(ERROR, Stored.of(error.to_status(), 0))]
            return stream
        stream.watcher = watcher = self.store.watch(kind.storage_key, namespace, matches)
        watcher.since = stream.start_rv = since
        for event in history:
            translated = watcher.translate(event)
            if translated is not None:
                stream.backlog.append(translated)
        return stream

    def close_watches(self) -> None:
        self.store.close_watchers()

    async def drain(self) -> None:
        """Wait for background work (see `_track`) to settle."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _validate_watch_options(send_initial_events: bool | None, match: str) -> None:
    """validateWatchOptions (meta/internalversion/validation), WatchList enabled."""
    causes: list[FieldCause] = []
    if send_initial_events is not None and match != "NotOlderThan":
        causes.append(FieldCause("resourceVersionMatch", "Forbidden",
                                 "sendInitialEvents requires setting resourceVersionMatch to "
                                 "NotOlderThan"))
    if match:
        if send_initial_events is None:
            causes.append(FieldCause("resourceVersionMatch", "Forbidden",
                                     "resourceVersionMatch is forbidden for watch unless "
                                     "sendInitialEvents is provided"))
        if match != "NotOlderThan":
            causes.append(FieldCause("resourceVersionMatch", "Unsupported value",
                                     'supported values: "NotOlderThan"', match))
    if causes:
        raise errors.invalid("ListOptions.meta.k8s.io", "", causes)


def _keep_system_fields(meta: Obj, old_meta: Obj) -> None:
    for system_field in SYSTEM_FIELDS:
        if system_field in old_meta:
            meta[system_field] = old_meta[system_field]
        else:
            meta.pop(system_field, None)


def accepted_patch_type(kind: ResourceKind, content_type: str) -> str:
    """The patch type a Content-Type names; 415 unless `kind` takes it (server-side apply is
    listed, as the real server lists it, but not served)."""
    patch_type = content_type.split(";")[0].strip()
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    if not kind.custom:
        accepted.insert(2, STRATEGIC_MERGE_PATCH)
    if patch_type not in accepted or patch_type == APPLY_PATCH:
        raise errors.unsupported_media_type(patch_type, accepted)
    return patch_type


def _apply_patch(current: Obj, patch: Any, patch_type: str, kind: str) -> Obj:
    from kubesim import patch as patching

    try:
        if patch_type == JSON_PATCH:
            new = patching.apply_json_patch(current, patch)
        elif patch_type == MERGE_PATCH:
            new = patching.apply_merge_patch(current, patch)
        else:
            new = patching.apply_strategic_merge_patch(current, patch, kind)
    except patching.PatchError as error:
        raise StatusError(error.code, error.reason, error.message) from None
    if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
        raise errors.bad_request("the patched object is not a valid object")
    return new


async def _tolerating_races(work: Awaitable[Any]) -> None:
    try:
        await work
    except StatusError as error:
        if error.code not in (404, 409):
            raise


def list_object(kind: ResourceKind, result: ListResult) -> Obj:
    metadata: Obj = {"resourceVersion": str(result.resource_version)}
    if result.continue_token:
        metadata["continue"] = result.continue_token
    if result.remaining is not None:
        metadata["remainingItemCount"] = result.remaining
    return {
        "apiVersion": kind.api_version,
        "kind": kind.list_kind,
        "metadata": metadata,
        "items": [s.obj for s in result.items],
    }


# metav1.FinalizerOrphanDependents / FinalizerDeleteDependents: left by a delete for the collector
ORPHAN_FINALIZER, FOREGROUND_FINALIZER = "orphan", "foregroundDeletion"


def deletion_finalizers(finalizers: list[str], options: Obj, *, namespace: bool) -> list[str]:
    """The finalizers a delete leaves for the garbage collector: `orphan` for propagationPolicy
    Orphan (or orphanDependents true), `foregroundDeletion` for Foreground, none for
    Background; without either option the object keeps the ones it has (every kind kubesim
    serves defaults to background). The generic store's deletionFinalizersForGarbageCollection;
    namespace storage (`namespace`) reads orphanDependents false as Foreground."""
    orphan, foreground = ORPHAN_FINALIZER in finalizers, FOREGROUND_FINALIZER in finalizers
    orphan_dependents, policy = options.get("orphanDependents"), options.get("propagationPolicy")
    if orphan_dependents is not None:
        orphan, foreground = bool(orphan_dependents), namespace and not orphan_dependents
    elif policy is not None:
        orphan, foreground = policy == "Orphan", policy == "Foreground"
    wanted = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    wanted += [ORPHAN_FINALIZER] * orphan + [FOREGROUND_FINALIZER] * foreground
    return finalizers if set(wanted) == set(finalizers) else wanted


def _deleted_body(kind: ResourceKind, strategy: Strategy, removed: Stored) -> Stored | Obj:
    if strategy.return_deleted_object:
        return removed
    details = {"name": removed.name, "kind": kind.plural,
               "uid": removed.obj["metadata"].get("uid", "")}
    if kind.group:
        details["group"] = kind.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _patch_sets_resource_version(patch: Any, patch_type: str) -> bool:
    """Whether the client pinned the resourceVersion in its patch (then a concurrent write is the
    client's Conflict, not something to retry)."""
    if patch_type == JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion"
            for op in patch)
    metadata = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(metadata, dict) and bool(metadata.get("resourceVersion"))


def _check_preconditions(kind: ResourceKind, stored: Stored, preconditions: Obj) -> None:
    """storage.Preconditions.Check; the failure surfaces as a Conflict wrapping a StorageError."""
    meta = stored.obj["metadata"]
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    why = ""
    if uid and uid != meta.get("uid"):
        why = f"UID in precondition: {uid}, UID in object meta: {meta.get('uid')}"
    elif version and version != meta.get("resourceVersion"):
        why = (f"ResourceVersion in precondition: {version}, ResourceVersion in object meta: "
               f"{meta.get('resourceVersion')}")
    if why:
        prefix = f"{kind.group}/" if kind.custom else ""
        where = f"{stored.namespace}/" if stored.namespace else ""
        key = f"/registry/{prefix}{kind.plural}/{where}{stored.name}"
        raise errors.conflict(
            kind.group_resource, stored.name,
            f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: Precondition failed: {why}")


def _graceful_deletion_pending(obj: Obj, requested: Any) -> bool:
    """A graceful deletion under way that this delete does not shorten (rest.BeforeDelete's
    pendingGraceful): the object is returned as it is, before validating admission."""
    meta = obj.get("metadata") or {}
    current = meta.get("deletionGracePeriodSeconds")
    if not meta.get("deletionTimestamp") or not current:
        return False
    return requested is None or int(requested) >= int(current)


def _check_delete_preconditions(kind: ResourceKind, stored: Stored, preconditions: Obj) -> None:
    """rest.BeforeDelete checks a delete's preconditions before the storage does (so its words,
    naming the Kind, are what a client sees; the storage's check only catches a racing write)."""
    meta = stored.obj["metadata"]
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    resource = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
    if uid and uid != meta.get("uid"):
        raise errors.conflict(
            resource, stored.name,
            f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated")
    if version and version != meta.get("resourceVersion"):
        raise errors.conflict(
            resource, stored.name,
            f"the ResourceVersion in the precondition ({version}) does not match the "
            f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have "
            f"been modified")


def forbidden_message(attributes: RequestAttributes) -> str:
    """responsewriters.forbiddenMessage: what follows `<resource> "<name>" is forbidden: `."""
    user = attributes.user.name
    if not attributes.resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource
                                      else "")
    where = (f'in the namespace "{attributes.namespace}"' if attributes.namespace
             else "at the cluster scope")
    return (f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}')


def _encode_continue(rv: int, start: tuple[str, str]) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)})
    return base64.urlsafe_b64encode(token.encode()).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise errors.bad_request(f"continue key is not valid: {token}") from None

