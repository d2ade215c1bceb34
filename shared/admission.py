"""The AdmissionReview answer both components' webhooks give (admission.k8s.io/v1)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

ADMISSION_REVIEW_API_VERSION = "admission.k8s.io/v1"


def review_response(uid: str, *, denied: str | None = None,
                    patch: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The review answering request `uid`: allowed, or refused with 403 and the `denied`
    message; a non-empty JSON `patch` mutates the object."""
    response: dict[str, Any] = {"uid": uid, "allowed": denied is None}
    if denied is not None:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": denied}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    return {"apiVersion": ADMISSION_REVIEW_API_VERSION, "kind": "AdmissionReview",
            "response": response}
