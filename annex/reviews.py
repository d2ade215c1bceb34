"""TokenReviews and SubjectAccessReviews, as a delegating server asks them of its cluster (a
kubelet's Webhook authentication and authorization, kube-rbac-proxy): who a bearer token is, and
whether that user may do what the request does. Answers are cached as a kubelet caches them
(authentication 2 min; authorization 5 min allowed, 30 s denied), so that a stream of requests
does not become a stream of reviews."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from annex.kubeapi import ClusterApi

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
AUTHENTICATION_TTL = 120.0
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0


@dataclass(frozen=True)
class Caller:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class _Cache:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> tuple[bool, Any]:
        entry = self._entries.get(key)
        if entry is None or entry[0] < self._clock():
            self._entries.pop(key, None)
            return False, None
        return True, entry[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if len(self._entries) > 4096:  # bounded: expired entries go first, then everything
            now = self._clock()
            self._entries = {k: v for k, v in self._entries.items() if v[0] >= now}
            if len(self._entries) > 4096:
                self._entries.clear()
        self._entries[key] = (self._clock() + ttl, value)


class Reviews:
    """TokenReviews and SubjectAccessReviews at home, cached."""

    def __init__(self, home: ClusterApi, clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self._tokens = _Cache(clock)
        self._decisions = _Cache(clock)

    async def authenticate_token(self, token: str) -> Caller | None:
        key = hashlib.sha256(token.encode()).digest()
        known, cached = self._tokens.get(key)
        if known:
            return cached if isinstance(cached, Caller) else None
        review = await self.home.create(TOKEN_REVIEWS, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
        status = (review or {}).get("status") or {}
        user = status.get("user") or {}
        caller: Caller | None = None
        if status.get("authenticated") and user.get("username"):
            caller = Caller(str(user["username"]), tuple(user.get("groups") or ()),
                            str(user.get("uid") or ""),
                            {k: tuple(v) for k, v in (user.get("extra") or {}).items()})
        self._tokens.put(key, caller, AUTHENTICATION_TTL)
        return caller

    async def authorize(self, caller: Caller, attributes: Mapping[str, str], *,
                        non_resource: bool = False) -> bool:
        """Whether `caller` may: `attributes` are the review's resourceAttributes, or with
        `non_resource` its nonResourceAttributes (path, verb)."""
        key = (caller.name, caller.groups, caller.uid,
               tuple(sorted((k, v) for k, v in caller.extra.items())),
               tuple(sorted(attributes.items())), non_resource)
        known, allowed = self._decisions.get(key)
        if known:
            return bool(allowed)
        spec: dict[str, Any] = {"user": caller.name, "groups": list(caller.groups),
                                ("nonResourceAttributes" if non_resource
                                 else "resourceAttributes"): dict(attributes)}
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = {k: list(v) for k, v in caller.extra.items()}
        review = await self.home.create(SUBJECT_ACCESS_REVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec})
        allowed = bool(((review or {}).get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed, ALLOWED_TTL if allowed else DENIED_TTL)
        return allowed
