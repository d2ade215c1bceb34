"""The REST paths of the Kubernetes API: of a collection or an object (`group_path`,
`core_path`, `custom_path`), a query added (`with_query`), and what a request's path and method
do as the API server's audit log names it (`request_verb`)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from shared.api.resource import ResourceDefinition


def core_path(plural: str, namespace: str = "", name: str = "", subresource: str = "") -> str:
    return group_path("", "v1", plural, namespace, name, subresource)


_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*").fullmatch
"""RFC 3986's unreserved characters: what a path segment carries as it is (every DNS name)."""


def _segment(text: str) -> str:
    """`text` as one path segment: escaped, unless it has nothing to escape (a fifth of
    `quote`'s time, a few calls a request)."""
    return text if _UNRESERVED(text) else quote(text, safe="")


def group_path(group: str, version: str, plural: str, namespace: str = "", name: str = "",
               subresource: str = "") -> str:
    """The REST path of a collection or object; group "" is the core API."""
    parts = [f"/apis/{group}/{version}" if group else f"/api/{version}"]
    if namespace:
        parts.append(f"namespaces/{_segment(namespace)}")
    parts.append(plural)
    if name:
        parts.append(_segment(name))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def custom_path(definition: ResourceDefinition, namespace: str = "", name: str = "",
                subresource: str = "") -> str:
    return group_path(*definition.resource, namespace, name, subresource)


def request_verb(method: str, path: str, watch: bool = False) -> tuple[str, str, str]:
    """(Kubernetes verb, API group, resource) of a request as the API server's audit log names
    them: verb get, list, watch, create, update, patch, delete or deletecollection; resource the
    plural with its subresource as RBAC writes it (`pods/status`); group "" for the core API.
    A non-resource path (/livez, /version) is (lowercase method, "", "")."""
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, parts = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, parts = parts[1], parts[3:]
    else:
        return method.lower(), "", ""
    if parts[:1] == ["namespaces"] and len(parts) >= 3 and parts[2] not in ("status", "finalize"):
        parts = parts[2:]  # a namespaced resource, not the namespace's own subresource
    resource = "/".join(parts[:1] + parts[2:3])
    collection = len(parts) == 1
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method)
    if verb is None and method == "DELETE":
        verb = "deletecollection" if collection else "delete"
    if verb is None:
        verb = "watch" if watch else ("list" if collection else "get")
    return verb, group, resource


def with_query(target: str, query: dict[str, Any] | None) -> str:
    """`target` with `query` added, after the query it may carry already."""
    if not query:
        return target
    return f"{target}{'&' if '?' in target else '?'}{urlencode(query)}"
