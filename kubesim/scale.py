"""The `scale` subresource of Deployments and ReplicaSets: an autoscaling/v1 Scale view of the
parent, as ScaleREST in pkg/registry/apps/deployment/storage/storage.go serves it.

A Scale write changes only the parent's spec.replicas and goes through the parent's update path
(resourceVersion precondition, strategy, generation bump, watch event), the way
scaleUpdatedObjectInfo turns "old parent -> old Scale -> new Scale -> new parent".
"""

from __future__ import annotations

from kubesim import errors, selectors
from kubesim.apiserver import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiServer,
    ConcurrentWrite,
    Obj,
    SubresourceRequest,
    _apply_patch,
    copy_json,
)
from kubesim.errors import FieldCause
from kubesim.kinds import ResourceKind
from kubesim.store import Stored

SCALED_RESOURCES = (("apps", "v1", "deployments"), ("apps", "v1", "replicasets"))
PATCH_TYPES = [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH]
# conflicts retried when the client's Scale carries no resourceVersion (GuaranteedUpdate)
MAX_RETRIES = 5
GO_JSON_TYPES = {str: "string", bool: "bool", list: "array", dict: "object"}


def scale_of(parent: Obj) -> Obj:
    """scaleFromDeployment: the parent's identity, spec.replicas and selector as a Scale."""
    meta = parent["metadata"]
    spec = parent.get("spec") or {}
    try:
        selector = selectors.label_selector_from_object_strict(spec.get("selector"))
    except selectors.SelectorError as error:
        raise errors.bad_request(str(error)) from None
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in
                     ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if key in meta},
        # ScaleSpec.replicas is omitempty; ScaleStatus.replicas is not
        "spec": {"replicas": spec["replicas"]} if spec.get("replicas") else {},
        "status": {"replicas": (parent.get("status") or {}).get("replicas", 0),
                   "selector": str(selector)},
    }


def validation_causes(scale: Obj) -> list[FieldCause]:
    """autoscaling validation.ValidateScale, for the field a Scale write can change."""
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if replicas < 0:
        return [FieldCause("spec.replicas", "Invalid value",
                           "must be greater than or equal to 0", replicas)]
    return []


class ScaleSubresource:
    """GET, PUT and PATCH of `<kind>/scale` for one API server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    async def serve(self, request: SubresourceRequest) -> Obj:
        kind = request.kind
        if request.verb == "get":
            stored = await self.api.get_stored(kind, request.namespace, request.name,
                                               subresource="scale", user=request.user)
            return scale_of(stored.obj)
        if request.verb not in ("update", "patch"):
            raise errors.method_not_supported(f"{kind.group_resource}/scale", request.verb)
        if request.verb == "patch" and request.content_type.split(";")[0].strip() not in (
                PATCH_TYPES):
            raise errors.unsupported_media_type(request.content_type, PATCH_TYPES)
        dry_run = "All" in request.query.get("dryRun", "")
        for attempt in range(MAX_RETRIES):
            parent = self._existing(kind, request.namespace, request.name)
            new_scale = self._requested_scale(request, scale_of(parent.obj))
            wanted_version = (new_scale.get("metadata") or {}).get("resourceVersion") or ""
            new_parent = self._parent_with(parent, new_scale, kind)
            try:
                stored = await self.api.update_stored(
                    kind, request.namespace, request.name, new_parent, subresource="scale",
                    user=request.user, dry_run=dry_run, owned=True, verb=request.verb)
            except ConcurrentWrite:
                if wanted_version or attempt == MAX_RETRIES - 1:
                    raise
                continue
            return scale_of(stored.obj)
        raise AssertionError("unreachable")

    def _existing(self, kind: ResourceKind, namespace: str, name: str) -> Stored:
        stored = self.api.store.get(kind.storage_key, namespace, name)
        if stored is None:
            raise errors.not_found(kind.group_resource, name)
        return stored

    @staticmethod
    def _requested_scale(request: SubresourceRequest, old_scale: Obj) -> Obj:
        """The new Scale: the body of a PUT, or the patch applied to the current Scale (the
        patched Scale keeps the current resourceVersion unless the patch sets one)."""
        if request.verb == "patch":
            patch_type = request.content_type.split(";")[0].strip()
            return _apply_patch(old_scale, request.body, patch_type, "Scale")
        if not isinstance(request.body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        body: Obj = request.body
        return body

    @staticmethod
    def _parent_with(parent: Stored, scale: Obj, kind: ResourceKind) -> Obj:
        """scaleUpdatedObjectInfo.UpdatedObject: validate, check the uid precondition, move
        spec.replicas and the resourceVersion onto a copy of the parent."""
        name = parent.name
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            # the real server fails to decode the body into a Scale (int32) before validating
            raise errors.bad_request(
                'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
                f"{GO_JSON_TYPES.get(type(replicas), 'number')} into Go struct field "
                "ScaleSpec.spec.replicas of type int32")
        causes = validation_causes(scale)
        if causes:
            raise errors.invalid("Scale.autoscaling", name, causes)
        meta = parent.obj["metadata"]
        scale_meta = scale.get("metadata") or {}
        uid = scale_meta.get("uid")
        if uid and uid != meta.get("uid"):
            group = f".{kind.group}" if kind.group else ""
            raise errors.conflict(
                f"{kind.plural}/scale{group}", name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{meta.get('uid')}")
        new: Obj = copy_json(parent.obj)
        new.setdefault("spec", {})["replicas"] = (scale.get("spec") or {}).get("replicas", 0)
        # without a client precondition, our snapshot's version guards against lost updates
        new["metadata"]["resourceVersion"] = (scale_meta.get("resourceVersion")
                                              or meta["resourceVersion"])
        return new


def install_scale(api: ApiServer) -> None:
    """Serve `scale` for every built-in kind that declares it."""
    handler = ScaleSubresource(api)
    for group, version, plural in SCALED_RESOURCES:
        kind = api.kinds.get(group, version, plural)
        if kind is not None and "scale" in kind.subresources:
            api.register_subresource(kind, "scale", handler.serve)
