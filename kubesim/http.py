"""The HTTP face of an `ApiServer`: routing, discovery, content types, watch streaming, Status
responses and bearer-token authentication. Every semantic rule lives in apiserver.py."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import orjson
from aiohttp import web

from kubesim import errors, tables, warning
from kubesim.apiserver import CRD_KEY, ApiServer, ListResult, User, list_object
from kubesim.errors import StatusError
from kubesim.kinds import SUBRESOURCE_KINDS, SUBRESOURCE_VERBS, ResourceKind
from kubesim.kubeletproxy import add_routes as add_kubelet_routes
from kubesim.responses import JSON, USER_KEY, WRITE_GATE_KEY, json_response, status_response
from kubesim.store import Stored, dumps
from kubesim.version import VERSION
from kubesim.watch import ERROR

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]
PUBLIC_PATHS = frozenset({"/livez", "/readyz", "/healthz", "/version"})
WATCH_BATCH = 500
"""Watch events one write carries at most."""


class ClusterFace(Protocol):
    """What the HTTP layer needs from a cluster."""

    api: ApiServer
    middlewares: list[Middleware]

    def authenticate(self, token: str) -> User | None: ...


def make_app(cluster: ClusterFace) -> web.Application:
    app = web.Application(
        middlewares=[_authentication(cluster), _cluster_middlewares(cluster)],
        client_max_size=64 * 1024 * 1024,
    )
    router = Router(cluster.api)
    kubelet_client = getattr(cluster, "kubelet_client", None)
    if kubelet_client is not None:  # pods/log|exec|attach|portforward, nodes/proxy
        add_kubelet_routes(app, cluster.api, kubelet_client, USER_KEY)
    app.router.add_route("*", "/{tail:.*}", router.handle)
    return app


def _authentication(cluster: ClusterFace) -> Any:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        user = cluster.authenticate(token) if token else None
        if user is None:
            if request.path not in PUBLIC_PATHS:
                return status_response(errors.unauthorized())
            user = User("system:anonymous", ("system:unauthenticated",))
        request[USER_KEY] = user
        return await handler(request)

    return authenticate


def _cluster_middlewares(cluster: ClusterFace) -> Any:
    """Runs `cluster.middlewares` as they are at request time (part 2 installs faults later)."""

    @web.middleware
    async def chain(request: web.Request, handler: Handler) -> web.StreamResponse:
        wrapped = handler
        for middleware in reversed(cluster.middlewares):
            wrapped = _bind(middleware, wrapped)
        return await wrapped(request)

    return chain


def _bind(middleware: Middleware, handler: Handler) -> Handler:
    async def call(request: web.Request) -> web.StreamResponse:
        return await middleware(request, handler)

    return call


def _not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def _integer(query: Any, key: str, default: int = 0) -> int:
    value = query.get(key)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"{key}: invalid value {value!r}: must be an integer") from None


def _truthy(value: str | None) -> bool:
    return value in ("true", "1", "True")


class Router:
    def __init__(self, api: ApiServer) -> None:
        self.api = api

    async def handle(self, request: web.Request) -> web.StreamResponse:
        with warning.recording() as texts:
            response = await self._answer(request)
        if not response.prepared:  # a watch's headers are already sent
            for value in warning.header_values(texts):
                response.headers.add("Warning", value)
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except StatusError as error:
            return status_response(error)
        except Exception as error:  # a bug here is still answered as the server would
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return status_response(errors.internal(str(error)))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/livez", "/readyz", "/healthz"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version":
            return json_response(VERSION)
        segments = path.strip("/").split("/")
        if segments[0] == "api":
            if len(segments) == 1:
                return json_response(self._api_versions(request))
            if segments[1] != "v1":
                raise _not_found()
            group, version, rest = "", "v1", segments[2:]
        elif segments[0] == "apis":
            if len(segments) == 1:
                return json_response(self._group_list())
            group = segments[1]
            if len(segments) == 2:
                return json_response(self._group(group))
            version, rest = segments[2], segments[3:]
        else:
            raise _not_found()
        if not rest:
            return json_response(self._resource_list(group, version))
        if self.api.kinds.announced(group, version, rest[0]) is not None:
            # served by its own handler for its verbs only (the reviews: POST); go-restful has
            # no route for another method
            return web.Response(status=405, text="405: Method Not Allowed")
        return await self._resource(request, group, version, rest)

    # ---------------------------------------------------------------------------- discovery
    def _api_versions(self, request: web.Request) -> dict[str, Any]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]}

    def _group_versions(self, group: str) -> dict[str, Any]:
        versions = self.api.kinds.versions(group)
        if not versions:
            raise _not_found()
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _group_list(self) -> dict[str, Any]:
        groups = [self._group_versions(g) for g in self.api.kinds.groups() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, group: str) -> dict[str, Any]:
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_versions(group)}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        kinds = self.api.kinds.in_group_version(group, version)
        if not kinds:
            raise _not_found()
        resources: list[dict[str, Any]] = []
        for kind in kinds:
            entry: dict[str, Any] = {
                "name": kind.plural, "singularName": kind.singular,
                "namespaced": kind.namespaced, "kind": kind.kind, "verbs": list(kind.verbs),
            }
            if kind.short_names:
                entry["shortNames"] = list(kind.short_names)
            if kind.categories:
                entry["categories"] = list(kind.categories)
            resources.append(entry)
            for sub in kind.subresources:
                sub_entry: dict[str, Any] = {
                    "name": f"{kind.plural}/{sub}", "singularName": "",
                    "namespaced": kind.namespaced, "kind": kind.kind,
                    "verbs": list(SUBRESOURCE_VERBS.get(sub, ("get", "patch", "update"))),
                }
                if sub in SUBRESOURCE_KINDS:
                    sub_group, sub_version, sub_kind = SUBRESOURCE_KINDS[sub]
                    sub_entry["kind"] = sub_kind
                    if sub_group:
                        sub_entry["group"], sub_entry["version"] = sub_group, sub_version
                resources.append(sub_entry)
        group_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": resources}

    # ----------------------------------------------------------------------------- resources
    def _parse(self, group: str, version: str, rest: list[str]
               ) -> tuple[ResourceKind, str, str, str, bool]:
        """(kind, namespace, name, subresource, legacy-watch) from the path after /api/v1."""
        watch = False
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.api.kinds.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found()
        kind = self.api.kinds.get(group, version, rest[0])
        if kind is None or (namespace and not kind.namespaced):
            raise _not_found()
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and subresource not in kind.subresources:
            raise _not_found()
        return kind, namespace, name, subresource, watch

    async def _resource(self, request: web.Request, group: str, version: str,
                        rest: list[str]) -> web.StreamResponse:
        kind, namespace, name, subresource, legacy_watch = self._parse(group, version, rest)
        user: User = request[USER_KEY]
        query = request.query
        dry_run = self._dry_run(query.getall("dryRun", []))
        method = request.method
        api = self.api
        if method == "GET" and subresource not in ("", "status"):
            return await self._subresource(request, "get", kind, namespace, name, subresource,
                                           None, user)
        # the resource and its status answer Tables when asked (StatusREST converts too)
        converter = self._converter(request, kind) if subresource in ("", "status") else None
        if method == "GET":
            if legacy_watch or (not name and _truthy(query.get("watch"))):
                return await self._watch(request, kind, namespace, name, user, converter)
            if not name:
                if kind.namespaced is False and namespace:
                    raise _not_found()
                result = await api.list_stored(
                    kind, namespace, label_selector=query.get("labelSelector", ""),
                    field_selector=query.get("fieldSelector", ""),
                    limit=_integer(query, "limit"),
                    continue_token=query.get("continue", ""), user=user)
                if converter is not None:
                    return json_response(converter.of_list(list_object(kind, result)))
                return json_response(list_bytes(kind, result))
            stored = await api.get_stored(kind, namespace, name, subresource=subresource,
                                          user=user)
            return _object_response(stored, converter)
        if method == "POST":
            body = await self._body(request)
            if name and not subresource:
                raise errors.method_not_supported(kind.group_resource, "create")
            if kind.namespaced and not namespace:
                raise _not_found()
            if subresource and subresource != "binding" and not api.has_subresource_handler(
                kind, subresource
            ):
                raise _not_found()
            created = await api.create_stored(kind, namespace, body, name=name,
                                              subresource=subresource, user=user,
                                              dry_run=dry_run, owned=True)
            if isinstance(created, str):
                return web.Response(text=created, content_type="text/plain", status=201)
            return _object_response(created, converter, 201)
        if not name:
            if method == "DELETE":
                if "deletecollection" not in kind.verbs:
                    # no route for it: go-restful's plain-text answer
                    return web.Response(status=405, text="405: Method Not Allowed")
                options = await self._delete_options(request)
                collection = await api.delete_collection(
                    kind, namespace, label_selector=query.get("labelSelector", ""),
                    field_selector=query.get("fieldSelector", ""), options=options, user=user,
                    dry_run=dry_run)
                return json_response(collection)
            raise errors.method_not_supported(kind.group_resource, method.lower())
        if subresource not in ("", "status", "finalize"):
            body = await self._body(request)
            return await self._subresource(request, method.lower().replace("put", "update"),
                                           kind, namespace, name, subresource, body, user)
        if method == "PUT":
            body = await self._body(request)
            # an update that creates (AllowCreateOnUpdate kinds) answers 201, as update.go does
            creates = kind.create_on_update and not subresource and not api.exists(
                kind, namespace, name)
            stored = await api.update_stored(kind, namespace, name, body,
                                             subresource=subresource, user=user,
                                             dry_run=dry_run, owned=True)
            return _object_response(stored, converter, 201 if creates else 200)
        if method == "PATCH":
            body = await self._body(request)
            stored = await api.patch_stored(kind, namespace, name, body,
                                            request.headers.get("Content-Type", ""),
                                            subresource=subresource, user=user, dry_run=dry_run)
            return _object_response(stored, converter)
        if method == "DELETE":
            options = await self._delete_options(request)
            deleted, gone = await api.delete_stored(kind, namespace, name, options=options,
                                                    user=user, dry_run=dry_run)
            code = 202 if not gone and options.get("orphanDependents") is False else 200
            return _object_response(deleted, converter, code)
        raise errors.method_not_supported(kind.group_resource, method.lower())

    def _converter(self, request: web.Request, kind: ResourceKind) -> tables.Converter | None:
        """The Table/PartialObjectMetadata conversion the Accept header asks for (406 when it
        accepts nothing the server serves)."""
        target = tables.negotiate(request.headers.get("Accept", ""), custom=kind.custom)
        if target is None:
            return None
        crd = None
        if kind.custom:  # its printer columns come from the CRD version being served
            stored = self.api.store.get(CRD_KEY, "", f"{kind.plural}.{kind.group}")
            crd = stored.obj if stored is not None else None
        return tables.Converter(kind, target, request.query, crd)

    @staticmethod
    def _dry_run(values: Iterable[str]) -> bool:
        values = list(values)
        for value in values:
            if value != "All":
                raise errors.bad_request(f'dryRun: Unsupported value: "{value}": supported '
                                         'values: "All"')
        return bool(values)

    @staticmethod
    async def _body(request: web.Request) -> Any:
        raw = await request.read()
        if len(raw) > errors.MAX_REQUEST_BODY_BYTES:
            raise errors.request_entity_too_large()
        if not raw:
            return {}
        media_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if request.method != "PATCH" and media_type not in ("", JSON):
            # NegotiateInputSerializer: an unknown body format is a 415 (kubesim decodes JSON
            # only; patch types are checked by the patch handler)
            raise errors.unsupported_media_type(media_type, [JSON])
        try:
            return orjson.loads(raw)
        except ValueError as error:
            raise errors.bad_request(f"error decoding request body: {error}") from None

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        options = await self._body(request)
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be an object")
        query = request.query
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = _integer(query, "gracePeriodSeconds")
        if "orphanDependents" in query:
            options["orphanDependents"] = _truthy(query["orphanDependents"])
        return options

    async def _subresource(self, request: web.Request, verb: str, kind: ResourceKind,
                           namespace: str, name: str, subresource: str, body: Any,
                           user: User) -> web.StreamResponse:
        from kubesim.apiserver import SubresourceRequest

        result = await self.api.call_subresource(SubresourceRequest(
            verb, kind, subresource, namespace, name, body, dict(request.query), user,
            request.headers.get("Content-Type", "")))
        if isinstance(result, str):
            return web.Response(text=result, content_type="text/plain")
        return json_response(result, 201 if verb == "create" else 200)

    async def _watch(self, request: web.Request, kind: ResourceKind, namespace: str,
                     name: str, user: User, converter: tables.Converter | None = None
                     ) -> web.StreamResponse:
        query = request.query
        field_selector = query.get("fieldSelector", "")
        if name:  # the legacy /watch/.../NAME path watches one object
            by_name = f"metadata.name={name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        timeout = _integer(query, "timeoutSeconds")
        stream = self.api.open_watch(
            kind, namespace, resource_version=query.get("resourceVersion", ""),
            label_selector=query.get("labelSelector", ""), field_selector=field_selector,
            allow_bookmarks=_truthy(query.get("allowWatchBookmarks")),
            timeout_seconds=float(timeout) if timeout else None, user=user,
            send_initial_events=(None if "sendInitialEvents" not in query
                                 else _truthy(query.get("sendInitialEvents"))),
            resource_version_match=query.get("resourceVersionMatch", ""))
        if converter is not None:
            try:  # serveWatch checks the Table options once the watch is open
                converter.check_options()
            except StatusError:
                stream.close()
                raise
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        gate = request.get(WRITE_GATE_KEY)
        try:
            await response.prepare(request)
            batch: list[bytes] = []
            async for event_type, stored in stream:
                if converter is not None and event_type != ERROR:
                    batch.append(dumps({"type": event_type, "object":
                                        converter.of_watch_object(stored.obj)}) + b"\n")
                else:
                    batch.append(stored.watch_line(event_type))
                # one write (one TLS record) a burst, a long one in pieces
                if not stream.has_pending() or len(batch) >= WATCH_BATCH:
                    if gate is not None:
                        await gate()
                    await response.write(b"".join(batch))
                    batch.clear()
            if gate is not None:
                await gate()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            stream.close()
        return response


def _object_response(answer: Stored | dict[str, Any], converter: tables.Converter | None,
                     status: int = 200) -> web.Response:
    """An object, converted when the Accept header asked for it (a Status never is, as
    doTransformObject passes it through)."""
    if not isinstance(answer, Stored):
        return json_response(answer, status)
    if converter is not None:
        return json_response(converter.of_object(answer.obj), status)
    return json_response(answer.full, status)


def list_bytes(kind: ResourceKind, result: ListResult) -> bytes:
    """A list built from the stored bytes. Built-in lists carry items without apiVersion/kind,
    custom resource lists with them, as the real server encodes them."""
    metadata: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
    if result.continue_token:
        metadata["continue"] = result.continue_token
    if result.remaining is not None:
        metadata["remainingItemCount"] = result.remaining
    items = b",".join(s.full if kind.custom else s.item for s in result.items)
    head = dumps({"apiVersion": kind.api_version, "kind": kind.list_kind, "metadata": metadata})
    return head[:-1] + b',"items":[' + items + b"]}"
