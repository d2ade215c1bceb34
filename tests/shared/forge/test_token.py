"""shared.forge.token: when a reflected token is due for a refresh (the kubelet's rule), and
what makes a token Secret stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.forge.pod_tokens import ProjectedToken
from shared.forge.token import (
    IssuedToken,
    issued_token,
    stale_reason,
    token_request,
    token_secret,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
POD: dict[str, Any] = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
                       "spec": {"serviceAccountName": "robot"}}


def _issued(lifetime: timedelta) -> IssuedToken:
    return IssuedToken(key="k", token="t", expires=NOW + lifetime, lifetime=lifetime)


@pytest.mark.parametrize(("lifetime", "refresh_after"), [
    (timedelta(hours=1), timedelta(minutes=48)),  # 80% of the lifetime
    (timedelta(minutes=10), timedelta(minutes=8)),
    (timedelta(hours=48), timedelta(hours=24)),  # ... but never older than 24 h
])
def test_a_token_is_refreshed_at_80_percent_of_its_lifetime_or_after_24_hours(
        lifetime: timedelta, refresh_after: timedelta) -> None:
    assert _issued(lifetime).refresh_due() == NOW + refresh_after


def test_the_granted_lifetime_counts_not_the_requested_one() -> None:
    answer = {"spec": {"expirationSeconds": 3600},
              "status": {"token": "t", "expirationTimestamp": "2026-11-21T13:00:00Z"}}
    assert issued_token("k", answer, requested_seconds=7200).lifetime == timedelta(hours=1)
    with pytest.raises(ValueError):
        issued_token("k", {"status": {"token": "t"}}, requested_seconds=600)


def test_the_request_is_bound_to_the_pod_with_its_audience() -> None:
    body = token_request(POD, ProjectedToken(key="k", path="token", audience="vault",
                                             expiration_seconds=600))
    assert body["spec"] == {"expirationSeconds": 600, "audiences": ["vault"], "boundObjectRef": {
        "apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1"}}


def test_a_secret_is_stale_for_another_pod_other_keys_or_when_due() -> None:
    secret = token_secret(POD, "shop-home", [_issued(timedelta(hours=1))], "home", "remote")
    assert stale_reason(secret, POD, ["k"], NOW) is None
    assert stale_reason(secret, POD, ["k"], NOW + timedelta(minutes=48)) == "due for a refresh"
    assert stale_reason(secret, POD, ["k", "other"], NOW) == "its keys are not the pod's tokens"
    recreated = {**POD, "metadata": {**POD["metadata"], "uid": "u-2"}}
    assert stale_reason(secret, recreated, ["k"], NOW) == "issued for another pod of that name"
