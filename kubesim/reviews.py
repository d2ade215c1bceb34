"""TokenReview and SubjectAccessReview, as a kubelet's Webhook authentication and authorization
modes call them (and any other delegating server: the virtual node's kubelet API).

Both are create-only and stored nowhere (pkg/registry/authentication/tokenreview,
pkg/registry/authorization/subjectaccessreview): the answer is the request with its status
filled in, 201 Created. The caller needs `create` on the review resource; the review itself asks
the cluster's own authenticators and authorizer about someone else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from kubesim import errors
from kubesim.apiserver import RequestAttributes, User, forbidden_message
from kubesim.errors import FieldCause, StatusError
from kubesim.kinds import ResourceKind
from kubesim.responses import USER_KEY, json_response, status_response

TOKEN_REVIEWS = ("authentication.k8s.io", "v1", "tokenreviews", "TokenReview")
SUBJECT_ACCESS_REVIEWS = ("authorization.k8s.io", "v1", "subjectaccessreviews",
                          "SubjectAccessReview")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _path(review: tuple[str, str, str, str]) -> str:
    return f"/apis/{review[0]}/{review[1]}/{review[2]}"


def _answer(review: tuple[str, str, str, str], body: Mapping[str, Any],
            status: dict[str, Any]) -> dict[str, Any]:
    return {"kind": review[3], "apiVersion": f"{review[0]}/{review[1]}",
            "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None},
            "spec": body.get("spec") or {}, "status": status}


def token_review_status(authenticate: Callable[[str], User | None],
                        spec: Mapping[str, Any]) -> dict[str, Any]:
    user = authenticate(str(spec.get("token") or ""))
    if user is None:
        return {"user": {}, "error": "[invalid bearer token]"}
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    return {"authenticated": True, "user": info}


def subject_access_review_status(authorizer: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    extra = {key: tuple(values) for key, values in (spec.get("extra") or {}).items()}
    user = User(str(spec.get("user") or ""), tuple(spec.get("groups") or ()),
                str(spec.get("uid") or ""), extra)
    resource = spec.get("resourceAttributes")
    if resource is not None:
        attributes = RequestAttributes(
            user, str(resource.get("verb") or ""), str(resource.get("group") or ""),
            str(resource.get("version") or ""), str(resource.get("resource") or ""),
            str(resource.get("subresource") or ""), str(resource.get("namespace") or ""),
            str(resource.get("name") or ""))
    else:
        non_resource = spec.get("nonResourceAttributes") or {}
        attributes = RequestAttributes(user, str(non_resource.get("verb") or ""), "", "", "",
                                       "", "", "", resource_request=False,
                                       path=str(non_resource.get("path") or ""))
    allowed, reason = authorizer.authorize(attributes)
    status: dict[str, Any] = {"allowed": bool(allowed)}
    if reason:
        status["reason"] = reason
    return status


def _validate_subject_access_review(spec: Mapping[str, Any]) -> None:
    """ValidateSubjectAccessReviewSpec."""
    causes = []
    if (spec.get("resourceAttributes") is None) == (spec.get("nonResourceAttributes") is None):
        causes.append(FieldCause("spec.resourceAttributes", "Invalid value",
                                 "exactly one of nonResourceAttributes or resourceAttributes "
                                 "must be specified", value=spec.get("resourceAttributes")))
    if not spec.get("user") and not spec.get("groups"):
        causes.append(FieldCause("spec.user", "Invalid value",
                                 "at least one of user or group must be specified",
                                 value=spec.get("user") or ""))
    if causes:
        raise errors.invalid(SUBJECT_ACCESS_REVIEWS[3] + "." + SUBJECT_ACCESS_REVIEWS[0], "",
                             causes)


def reviews_middleware(cluster: Any) -> Callable[[web.Request, Handler],
                                                 Awaitable[web.StreamResponse]]:
    """Serves both reviews ahead of the generic resource router (a cluster middleware)."""

    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        review = {_path(TOKEN_REVIEWS): TOKEN_REVIEWS,
                  _path(SUBJECT_ACCESS_REVIEWS): SUBJECT_ACCESS_REVIEWS}.get(request.path)
        if review is None or request.method != "POST":
            return await handler(request)
        try:
            attributes = RequestAttributes(request[USER_KEY], "create", review[0], review[1],
                                           review[2], "", "", "")
            allowed, reason = cluster.api.authorizer.authorize(attributes)
            if not allowed:
                message = forbidden_message(attributes) + (f": {reason}" if reason else "")
                raise errors.forbidden(f"{review[2]}.{review[0]}", "", message)
            try:
                body = orjson.loads(await request.read())
            except ValueError as error:
                raise StatusError(400, "BadRequest", str(error)) from None
            if not isinstance(body, dict):
                raise StatusError(400, "BadRequest", "expected an object")
            spec = body.get("spec") or {}
            if review is TOKEN_REVIEWS:
                status = token_review_status(cluster.authenticate, spec)
            else:
                _validate_subject_access_review(spec)
                status = subject_access_review_status(cluster.api.authorizer, spec)
            return json_response(_answer(review, body, status), 201)
        except StatusError as error:
            return status_response(error)

    return middleware


def install_reviews(cluster: Any) -> None:
    cluster.middlewares.append(reviews_middleware(cluster))
    for group, version, plural, kind in (TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS):
        # discovery lists them as kube-apiserver does: cluster-scoped, create only
        cluster.api.kinds.announce(ResourceKind(group, version, plural, kind, False,
                                                verbs=("create",)))
