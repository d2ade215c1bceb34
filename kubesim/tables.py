"""Server-side conversions a client asks for in its Accept header: meta.k8s.io Tables (what
`kubectl get` prints) and PartialObjectMetadata(List), as the real server does them: content
negotiation (handlers/negotiation/negotiate.go with the RequestScope's
AllowsMediaTypeTransform), TableOptions (`includeObject`) and the row objects
(handlers/response.go asTable). kubesim/printers.py says what each kind's table looks like.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubesim.errors import StatusError, bad_request
from kubesim.kinds import ResourceKind
from kubesim.printers import printer_for

Obj = dict[str, Any]
META_GROUP = "meta.k8s.io"
META_VERSIONS = ("v1", "v1beta1")
TABLE, PARTIAL, PARTIAL_LIST = "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
# what the real server serializes (errors list them); kubesim answers every one of them in JSON
SERVED_MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
INCLUDE_OBJECT = ("Metadata", "Object", "None", "")


# ------------------------------------------------------------------------------ negotiation
@dataclass(frozen=True)
class Target:
    """What the response is converted to (`as`, `v` of the accepted media type)."""

    kind: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"


def not_acceptable(message: str) -> StatusError:
    return StatusError(406, "NotAcceptable", message)


def negotiate(accept: str, custom: bool = False) -> Target | None:
    """The conversion an Accept header asks for (None: the object itself), choosing as
    NegotiateMediaTypeOptions does: clauses by quality, the first acceptable wins; none
    acceptable is a 406. kubesim writes JSON whichever media type wins."""
    if not accept.strip():
        return None
    for media_type, params in _clauses(accept):
        for served in SERVED_MEDIA_TYPES:
            if not _matches(media_type, served):
                continue
            accepted, target = _acceptable(served, params, custom)
            if accepted:
                return target
    raise not_acceptable("only the following media types are accepted: "
                         + ", ".join(SERVED_MEDIA_TYPES))


def _clauses(accept: str) -> list[tuple[str, dict[str, str]]]:
    """goautoneg.ParseAccept: media ranges with parameters, highest quality first (stable)."""
    parsed: list[tuple[float, str, dict[str, str]]] = []
    for part in accept.split(","):
        range_, *raw_params = part.strip().split(";")
        pieces = range_.split("/")
        main = pieces[0].strip()
        if len(pieces) == 1 and main == "*":
            sub = "*"
        elif len(pieces) == 2:
            sub = pieces[1].strip()
        else:
            continue
        quality, params = 1.0, {}
        for raw in raw_params:
            key, sep, value = raw.partition("=")
            if not sep:
                continue
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
            else:
                params[key.strip()] = value.strip()
        parsed.append((quality, f"{main}/{sub}", params))
    parsed.sort(key=lambda c: (-c[0], c[1].startswith("*"), c[1].endswith("/*")))
    return [(media_type, params) for _, media_type, params in parsed]


def _matches(media_type: str, served: str) -> bool:
    main, _, sub = media_type.partition("/")
    served_main, _, served_sub = served.partition("/")
    return (main, sub) in ((served_main, served_sub), (served_main, "*"), ("*", "*"))


def _acceptable(served: str, params: Mapping[str, str], custom: bool
                ) -> tuple[bool, Target | None]:
    """acceptMediaTypeOptions with the RequestScope's endpoint restrictions."""
    if params.get("stream") and (params["stream"] != "watch" or served.endswith("yaml")):
        return False, None
    if params.get("sv") and params["sv"] != "v1":
        return False, None
    if not {"as", "g", "v"} & params.keys():
        # custom resources are served in JSON and YAML only (their StandardSerializers)
        return not (custom and served.endswith("protobuf")), None
    target = Target(params.get("as", ""), params.get("v", ""))
    if params.get("g", "") != META_GROUP or target.version not in META_VERSIONS:
        return False, None
    if target.kind == TABLE:
        return not served.endswith("protobuf"), target
    return target.kind in (PARTIAL, PARTIAL_LIST), target


def include_object(query: Mapping[str, str]) -> str:
    """TableOptions.includeObject, validated as ValidateTableOptions does (400 otherwise)."""
    value = query.get("includeObject", "")
    if value not in INCLUDE_OBJECT:
        raise bad_request(f'Unable to convert to Table as requested: includeObject: Invalid '
                          f'value: "{value}": must be \'Metadata\', \'Object\', \'None\', or '
                          f'empty')
    return value


# ------------------------------------------------------------------------------- converter
class Converter:
    """Converts one response (or one watch stream's objects) to `target`."""

    def __init__(self, kind: ResourceKind, target: Target, query: Mapping[str, str],
                 crd: Obj | None = None) -> None:
        self.kind = kind
        self.target = target
        self.query = query
        self.crd = crd
        self._headers_sent = False

    def check_options(self) -> None:
        if self.target.kind == TABLE:
            include_object(self.query)

    def of_object(self, obj: Obj) -> Obj:
        if self.target.kind == PARTIAL_LIST:
            raise not_acceptable(f"you requested PartialObjectMetadataList, but the requested "
                                 f"object is not a list ({self._go_type(False)})")
        if self.target.kind == PARTIAL:
            return self._partial(obj)
        meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
        return self._table([obj], meta, is_list=False)

    def of_list(self, listed: Obj) -> Obj:
        """`listed`: the list object (`apiserver.list_object`)."""
        if self.target.kind == PARTIAL:
            raise not_acceptable(f"you requested PartialObjectMetadata, but the requested "
                                 f"object is a list ({self._go_type(True)})")
        if self.target.kind == PARTIAL_LIST:
            items = [self._partial(obj) for obj in listed["items"]]
            return {"kind": PARTIAL_LIST, "apiVersion": self.target.api_version,
                    "metadata": listed["metadata"], "items": items or None}
        return self._table(listed["items"], listed["metadata"], is_list=True)

    def of_watch_object(self, obj: Obj) -> Obj:
        """A watch event's object: Tables carry the column definitions in the first event
        only (watchEmbeddedEncoder); a list conversion fails per object, and the encoder
        then sends the object itself."""
        if self.target.kind == PARTIAL_LIST:
            return obj
        converted = self.of_object(obj)
        self._headers_sent = True
        return converted

    def _partial(self, obj: Obj) -> Obj:
        return {"kind": PARTIAL, "apiVersion": self.target.api_version,
                "metadata": obj["metadata"]}

    def _go_type(self, is_list: bool) -> str:
        """How `%T` names the internal type in NotAcceptable messages."""
        if self.kind.custom:
            return "*unstructured.UnstructuredList" if is_list else "*unstructured.Unstructured"
        package = self.kind.group.split(".")[0] if self.kind.group else "core"
        package = "core" if package == "events" else package
        return f"*{package}.{self.kind.kind}{'List' if is_list else ''}"

    def _table(self, objects: Sequence[Obj], list_meta: Obj, is_list: bool) -> Obj:
        include = include_object(self.query)
        printer = printer_for(self.kind, self.crd)
        now = datetime.now(UTC)
        rows: list[Obj] = []
        for obj in objects:
            row = printer.row(obj, now)
            encoded: Obj = {"cells": row.cells}
            if row.conditions:
                encoded["conditions"] = row.conditions
            encoded["object"] = self._row_object(obj, include)
            rows.append(encoded)
        metadata = {k: list_meta[k] for k in ("resourceVersion", "continue",
                                              "remainingItemCount") if list_meta.get(k)}
        columns = None
        if not self._headers_sent:
            columns = [c.definition() for c in printer.columns]
        return {"kind": TABLE, "apiVersion": self.target.api_version, "metadata": metadata,
                "columnDefinitions": columns,
                "rows": rows if rows or not is_list else printer.empty_rows}

    def _row_object(self, obj: Obj, include: str) -> Obj | None:
        if include == "None":
            return None
        if include == "Object":
            return obj
        return self._partial(obj)
