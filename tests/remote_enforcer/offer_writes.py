"""The provider's API server as the offer publisher writes to it: the tenant namespace's
ResourceOffer kept, each write recorded as (verb, spec)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from remote_enforcer.offer import OfferPublisher


class OfferApi:
    def __init__(self) -> None:
        self.offer: dict[str, Any] | None = None
        self.writes: list[tuple[str, dict[str, Any]]] = []

    async def find(self, path: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.offer)

    async def create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        self.offer = copy.deepcopy(body)
        self.writes.append(("create", body["spec"]))
        return body

    async def patch(self, path: str, patch: list[dict[str, Any]], *_: Any) -> dict[str, Any]:
        [replace] = patch
        assert self.offer is not None and replace["path"] == "/spec"
        self.offer["spec"] = copy.deepcopy(replace["value"])
        self.writes.append(("patch", replace["value"]))
        return self.offer


def published(publisher: OfferPublisher, consumer: str = "c",
              tenant: str = "tenant") -> list[tuple[str, dict[str, Any]]]:
    """The writes of one look at the consumer's offer (none when it did not change enough)."""
    api: OfferApi = publisher.api  # type: ignore[assignment]
    before = len(api.writes)
    asyncio.run(publisher.publish(tenant, consumer))
    return api.writes[before:]
