"""The pods' `ephemeralcontainers` subresource (EphemeralContainersREST in
pkg/registry/core/pod/storage/storage.go): GET answers the pod; PUT and PATCH (the way
`kubectl debug` adds a container) change only `spec.ephemeralContainers`, through the pod's update
path with the ephemeral containers strategy (`PodStrategy.prepare_for_ephemeral_containers_update`,
`validate_ephemeral_containers_update`): admission (PodSecurity judges the new containers), the
resourceVersion precondition, a generation bump, a watch event."""

from __future__ import annotations

from kubesim import errors
from kubesim.apiserver import EPHEMERAL_CONTAINERS, ApiServer, Obj, SubresourceRequest


def install_ephemeral_containers(api: ApiServer) -> None:
    pods = api.kinds.get("", "v1", "pods")
    if pods is None:
        return

    async def serve(request: SubresourceRequest) -> Obj:
        dry_run = request.query.get("dryRun") == "All"
        if request.verb == "get":
            return await api.get(pods, request.namespace, request.name,
                                 subresource=EPHEMERAL_CONTAINERS, user=request.user)
        if request.verb == "update":
            stored = await api.update_stored(pods, request.namespace, request.name, request.body,
                                             subresource=EPHEMERAL_CONTAINERS,
                                             user=request.user, dry_run=dry_run)
            return stored.obj
        if request.verb == "patch":
            stored = await api.patch_stored(pods, request.namespace, request.name, request.body,
                                            request.content_type,
                                            subresource=EPHEMERAL_CONTAINERS,
                                            user=request.user, dry_run=dry_run)
            return stored.obj
        raise errors.method_not_supported("pods", request.verb)

    api.register_subresource(pods, EPHEMERAL_CONTAINERS, serve)
