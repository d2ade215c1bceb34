"""`StatusError`: a failed request as the real server reports it (a metav1.Status).

Constructors mirror k8s.io/apimachinery/pkg/api/errors/errors.go, messages verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StatusError(Exception):
    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status

    def __repr__(self) -> str:
        return f"StatusError({self.code}, {self.reason!r}, {self.message!r})"


def _details(group_resource: str, name: str, **extra: Any) -> dict[str, Any]:
    resource, _, group = group_resource.partition(".")
    details: dict[str, Any] = {"name": name, "kind": resource}  # Kind holds the resource, as in k8s
    if group:
        details["group"] = group
    details.update(extra)
    return details


def not_found(group_resource: str, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{group_resource} "{name}" not found',
                       _details(group_resource, name))


def already_exists(group_resource: str, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{group_resource} "{name}" already exists',
                       _details(group_resource, name))


def conflict(group_resource: str, name: str, why: str) -> StatusError:
    return StatusError(409, "Conflict",
                       f'Operation cannot be fulfilled on {group_resource} "{name}": {why}',
                       _details(group_resource, name))


OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def modified_conflict(group_resource: str, name: str) -> StatusError:
    return conflict(group_resource, name, OPTIMISTIC_LOCK_MESSAGE)


def forbidden(group_resource: str, name: str, why: str) -> StatusError:
    if not group_resource:
        message = f"forbidden: {why}"
    elif not name:
        message = f"{group_resource} is forbidden: {why}"
    else:
        message = f'{group_resource} "{name}" is forbidden: {why}'
    return StatusError(403, "Forbidden", message, _details(group_resource, name))


class FieldCause:
    """One field.Error: renders as `path: Type: "value": detail` (field/errors.go)."""

    def __init__(self, path: str, type_: str, detail: str, value: Any = None,
                 reason: str = "") -> None:
        self.path = path
        self.type = type_
        self.detail = detail
        self.value = value
        self.reason = reason or _reason_of(type_)

    def __str__(self) -> str:
        if self.type in ("Required value", "Forbidden", "Too many", "Too long",
                         "Internal error"):
            body = self.type
        else:
            body = f"{self.type}: {_go_value(self.value)}"
        return f"{self.path}: {body}: {self.detail}" if self.detail else f"{self.path}: {body}"


class GoLiteral(str):
    """A value already formatted the way Go prints it (e.g. `0x0` for a uint64 via %#v)."""


def _go_value(value: Any) -> str:
    if isinstance(value, GoLiteral):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def invalid(group_kind: str, name: str, causes: Iterable[Any]) -> StatusError:
    """422 Invalid; `causes` are FieldCause-like (str() renders them; .path/.type optional)."""
    causes = list(causes)
    rendered = [str(c) for c in causes]
    aggregate = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    kind, _, group = group_kind.partition(".")
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    details["causes"] = [
        {
            "reason": getattr(c, "reason", "") or _reason_of(getattr(c, "type", "")),
            "message": str(c)[len(getattr(c, "path", "")) + 2:] if getattr(c, "path", "")
            else str(c),
            "field": getattr(c, "path", ""),
        }
        for c in causes
    ]
    return StatusError(422, "Invalid", f'{group_kind} "{name}" is invalid: {aggregate}', details)


# field.ErrorType's String() -> its CauseType (apimachinery's field/errors.go)
_CAUSE_TYPES = {"Not found": "FieldValueNotFound", "Required value": "FieldValueRequired",
                "Duplicate value": "FieldValueDuplicate", "Invalid value": "FieldValueInvalid",
                "Unsupported value": "FieldValueNotSupported", "Forbidden": "FieldValueForbidden",
                "Too long": "FieldValueTooLong", "Too many": "FieldValueTooMany",
                "Internal error": "InternalError"}


def _reason_of(error_type: str) -> str:
    """field.ErrorType -> CauseType: "Invalid value" -> "FieldValueInvalid"."""
    return _CAUSE_TYPES.get(error_type, "FieldValueInvalid")


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_supported(group_resource: str, action: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed",
                       f"{action} is not supported on resources of kind {group_resource!r}",
                       {"kind": group_resource})


def unsupported_media_type(content_type: str, accepted: Iterable[str]) -> StatusError:
    return StatusError(
        415, "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def expired(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def gone(message: str) -> StatusError:
    return StatusError(410, "Gone", message)


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


# kube-apiserver's --max-request-bytes default (3 MiB): twice etcd's limit, as JSON shrinks when
# stored as protobuf
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
# etcd's --max-request-bytes default (1.5 MiB)
ETCD_MAX_REQUEST_BYTES = 1536 * 1024


def request_entity_too_large(limit: int = MAX_REQUEST_BODY_BYTES) -> StatusError:
    """limitedReadBody: a request body over the limit, refused before it is decoded."""
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def etcd_request_too_large() -> StatusError:
    """etcd refuses the write; kube-apiserver passes its error on as an unmapped 500."""
    return StatusError(500, "", "etcdserver: request is too large")


# The largest message kube-apiserver's etcd client sends (clientv3's MaxCallSendMsgSize)
ETCD_CLIENT_MAX_MESSAGE_BYTES = 2 * 1024 * 1024


def etcd_message_too_large(size: int) -> StatusError:
    """A write larger still never reaches etcd: the API server's gRPC client refuses to send
    it, and kube-apiserver passes that on as an unmapped 500 too."""
    return StatusError(500, "", "rpc error: code = ResourceExhausted desc = trying to send "
                                f"message larger than max ({size} vs. "
                                f"{ETCD_CLIENT_MAX_MESSAGE_BYTES})")


# NewGenericServerResponse's message and reason per status code (apimachinery errors.go)
_GENERIC = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    406: ("NotAcceptable",
          "the server was unable to respond with a content type that the client supports"),
    409: ("Conflict", "the server reported a conflict"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests",
          "the server has received too many requests and has asked us to try again later"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, but may "
                     "still be processing the request"),
}


def generic_server_response(code: int, verb: str, group_resource: str, name: str,
                            server_message: str) -> StatusError:
    """errors.NewGenericServerResponse: an upstream's failure (a kubelet's answer to a
    pods/log request) as the API server words it; most codes drop the upstream's text."""
    reason, message = _GENERIC.get(code, ("", (
        f"the server responded with the status code {code} but did not return more "
        "information")))
    if code in (403, 415) or (code == 406 and server_message not in ("", "unknown")):
        reason = {403: "Forbidden", 406: "NotAcceptable", 415: "UnsupportedMediaType"}[code]
        message = server_message  # details of who may do what, or which types are accepted
    elif code not in _GENERIC and code >= 500:
        reason = "InternalError"
        message = (f"an error on the server ({_go_quote(server_message)}) has prevented the "
                   "request from succeeding")
    if group_resource:
        message = f"{message} ({verb.lower()} {group_resource}{' ' + name if name else ''})"
    resource, _, group = group_resource.partition(".")
    details: dict[str, Any] = {"name": name, "kind": resource} if name else {"kind": resource}
    if group:
        details["group"] = group
    return StatusError(code, reason, message, details)


def upstream_failure(code: int, group_resource: str, name: str, body: str) -> StatusError:
    """GenericHttpResponseChecker (apiserver/pkg/registry/generic/rest): a location's
    non-2xx answer (the kubelet's, for pods/log) as the status the API server returns."""
    if code == 500:
        return internal(body)
    if code == 400:
        return bad_request(body)
    return generic_server_response(code, "", group_resource, name, body)


def _go_quote(text: str) -> str:
    """%q of a string (the printable-ASCII subset Go leaves as is)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\t", "\\t").replace("\r", "\\r") + '"'


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}",
                       {"causes": [{"message": message}]})
