"""The `scale` subresource: an autoscaling/v1 Scale view of a Deployment, a ReplicaSet or a custom
resource whose CRD declares `subresources.scale`.

Built-ins follow ScaleREST in pkg/registry/apps/deployment/storage/storage.go, custom resources
ScaleREST in apiextensions-apiserver's pkg/registry/customresource/etcd.go. Either way a Scale
write changes only the parent's replicas and goes through the parent's update path
(resourceVersion precondition, strategy, generation bump, validation, watch event), the way
scaleUpdatedObjectInfo turns "old parent -> old Scale -> new Scale -> new parent".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim import errors, selectors
from kubesim.apiserver import (
    CRD_KEY,
    ApiServer,
    ConcurrentWrite,
    Obj,
    SubresourceRequest,
    _apply_patch,
    accepted_patch_type,
    copy_json,
)
from kubesim.errors import FieldCause
from kubesim.kinds import ResourceKind
from kubesim.store import Stored

SCALED_RESOURCES = (("apps", "v1", "deployments"), ("apps", "v1", "replicasets"),
                    ("apps", "v1", "statefulsets"))
# conflicts retried when the client's Scale carries no resourceVersion (GuaranteedUpdate)
MAX_RETRIES = 5
GO_JSON_TYPES = {str: "string", bool: "bool", list: "array", dict: "object"}
# what a custom resource's Scale says when its spec replicas field is missing (etcd.go)
REPLICAS_NOT_SET = -2147483648
SCALE_META_FIELDS = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


@dataclass(frozen=True)
class ScaleShape:
    """Where a parent keeps what its Scale shows (paths as in CustomResourceSubresourceScale)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str = ""  # a string field; built-ins render .spec.selector instead
    custom: bool = False


BUILTIN_SHAPE = ScaleShape()


def _path(path: str) -> list[str]:
    return path.removeprefix(".").split(".")


def _nested(obj: Obj, path: str) -> Any:
    value: Any = obj
    for key in _path(path):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _set_nested(obj: Obj, path: str, value: Any) -> None:
    *parents, last = _path(path)
    for key in parents:
        obj = obj.setdefault(key, {})
    obj[last] = value


def _selector(parent: Obj, shape: ScaleShape) -> str:
    if shape.custom:
        value = _nested(parent, shape.label_selector) if shape.label_selector else None
        return value if isinstance(value, str) else ""
    try:
        return str(selectors.label_selector_from_object_strict(
            (parent.get("spec") or {}).get("selector")))
    except selectors.SelectorError as error:
        raise errors.bad_request(str(error)) from None


def scale_of(parent: Obj, shape: ScaleShape = BUILTIN_SHAPE) -> Obj:
    """scaleFromDeployment / scaleFromCustomResource: the parent's identity, replicas and
    selector as a Scale."""
    meta = parent["metadata"]
    replicas = _nested(parent, shape.spec_replicas)
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in SCALE_META_FIELDS if key in meta},
        # ScaleSpec.replicas is omitempty; ScaleStatus.replicas is not
        "spec": {"replicas": replicas} if replicas else {},
        "status": {"replicas": _nested(parent, shape.status_replicas) or 0,
                   "selector": _selector(parent, shape)},
    }


def validation_causes(scale: Obj) -> list[FieldCause]:
    """autoscaling validation.ValidateScale, for the field a Scale write can change."""
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if replicas < 0:
        return [FieldCause("spec.replicas", "Invalid value",
                           "must be greater than or equal to 0", replicas)]
    return []


def custom_shape(api: ApiServer, kind: ResourceKind) -> ScaleShape:
    """The scale paths the CRD serving `kind` declares for its version."""
    crd = api.store.get(CRD_KEY, "", f"{kind.plural}.{kind.group}")
    versions = ((crd.obj.get("spec") or {}).get("versions") or []) if crd else []
    for version in versions:
        if version.get("name") == kind.version:
            scale = (version.get("subresources") or {}).get("scale")
            if isinstance(scale, dict):
                return ScaleShape(scale.get("specReplicasPath", ""),
                                  scale.get("statusReplicasPath", ""),
                                  scale.get("labelSelectorPath") or "", custom=True)
    raise errors.not_found(kind.group_resource, "")


def _scale_not_found(kind: ResourceKind, name: str) -> errors.StatusError:
    """The built-in ScaleREST's own NotFound, naming the subresource
    (apps.Resource("deployments/scale")); a custom resource's passes its storage's on."""
    return errors.not_found(f"{kind.plural}/scale" + (f".{kind.group}" if kind.group else ""),
                            name)


class ScaleSubresource:
    """GET, PUT and PATCH of `<resource>/scale` for one API server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    async def serve(self, request: SubresourceRequest) -> Obj:
        kind = request.kind
        shape = custom_shape(self.api, kind) if kind.custom else BUILTIN_SHAPE
        if request.verb == "get":
            try:
                stored = await self.api.get_stored(kind, request.namespace, request.name,
                                                   subresource="scale", user=request.user)
            except errors.StatusError as error:
                if error.code == 404 and not kind.custom:
                    raise _scale_not_found(kind, request.name) from None
                raise
            if shape.custom and _nested(stored.obj, shape.spec_replicas) is None:
                # ScaleREST.Get: a custom resource without replicas has no Scale to show
                raise errors.internal(
                    f'the spec replicas field "{shape.spec_replicas}" does not exist')
            return scale_of(stored.obj, shape)
        if request.verb not in ("update", "patch"):
            raise errors.method_not_supported(f"{kind.group_resource}/scale", request.verb)
        if request.verb == "patch":
            accepted_patch_type(kind, request.content_type)
        dry_run = "All" in request.query.get("dryRun", "")
        for attempt in range(MAX_RETRIES):
            parent = self._existing(kind, request.namespace, request.name)
            new_scale = self._requested_scale(request, self._old_scale(parent.obj, shape))
            wanted_version = (new_scale.get("metadata") or {}).get("resourceVersion") or ""
            new_parent = self._parent_with(parent, new_scale, kind, shape)
            try:
                stored = await self.api.update_stored(
                    kind, request.namespace, request.name, new_parent, subresource="scale",
                    user=request.user, dry_run=dry_run, owned=True, verb=request.verb)
            except ConcurrentWrite:
                if wanted_version or attempt == MAX_RETRIES - 1:
                    raise
                continue
            return scale_of(stored.obj, shape)
        raise AssertionError("unreachable")

    def _existing(self, kind: ResourceKind, namespace: str, name: str) -> Stored:
        stored = self.api.store.get(kind.storage_key, namespace, name)
        if stored is None:
            raise (errors.not_found(kind.group_resource, name) if kind.custom
                   else _scale_not_found(kind, name))
        return stored

    @staticmethod
    def _old_scale(parent: Obj, shape: ScaleShape) -> Obj:
        scale = scale_of(parent, shape)
        if shape.custom and not isinstance(_nested(parent, shape.spec_replicas), int):
            scale["spec"]["replicas"] = REPLICAS_NOT_SET  # a patch must set it
        return scale

    @staticmethod
    def _requested_scale(request: SubresourceRequest, old_scale: Obj) -> Obj:
        """The new Scale: the body of a PUT, or the patch applied to the current Scale (the
        patched Scale keeps the current resourceVersion unless the patch sets one)."""
        if request.verb == "patch":
            patch_type = accepted_patch_type(request.kind, request.content_type)
            return _apply_patch(old_scale, request.body, patch_type, "Scale")
        if not isinstance(request.body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        body: Obj = request.body
        return body

    @staticmethod
    def _parent_with(parent: Stored, scale: Obj, kind: ResourceKind, shape: ScaleShape) -> Obj:
        """scaleUpdatedObjectInfo.UpdatedObject: check the new Scale, move its replicas and
        resourceVersion onto a copy of the parent."""
        name = parent.name
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            # the real server fails to decode the body into a Scale (int32) before validating
            raise errors.bad_request(
                'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
                f"{GO_JSON_TYPES.get(type(replicas), 'number')} into Go struct field "
                "ScaleSpec.spec.replicas of type int32")
        meta = parent.obj["metadata"]
        scale_meta = scale.get("metadata") or {}
        if shape.custom:
            # the custom resource's own schema validates the replicas it ends up with
            if replicas == REPLICAS_NOT_SET:
                raise errors.bad_request(
                    f'the spec replicas field "{shape.spec_replicas}" cannot be empty')
        else:
            causes = validation_causes(scale)
            if causes:
                raise errors.invalid("Scale.autoscaling", name, causes)
            uid = scale_meta.get("uid")
            if uid and uid != meta.get("uid"):
                raise errors.conflict(
                    f"{kind.plural}/scale.{kind.group}", name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    f"{meta.get('uid')}")
        new: Obj = copy_json(parent.obj)
        _set_nested(new, shape.spec_replicas, replicas)
        # without a client precondition, our snapshot's version guards against lost updates
        new["metadata"]["resourceVersion"] = (scale_meta.get("resourceVersion")
                                              or meta["resourceVersion"])
        return new


def install_scale(api: ApiServer) -> None:
    """Serve `scale` for the built-in kinds that declare it and for custom resources."""
    handler = ScaleSubresource(api)
    for group, version, plural in SCALED_RESOURCES:
        kind = api.kinds.get(group, version, plural)
        if kind is not None and "scale" in kind.subresources:
            api.register_subresource(kind, "scale", handler.serve)
    api.register_custom_subresource("scale", handler.serve)
