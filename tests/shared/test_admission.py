"""The AdmissionReview answer both webhooks give."""

import base64
import json

from shared.admission import review_response


def test_an_allowed_review_names_its_request_and_carries_no_status() -> None:
    assert review_response("u1") == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "u1", "allowed": True}}


def test_a_refusal_is_403_with_the_message() -> None:
    response = review_response("u2", denied="over quota")["response"]
    assert response == {"uid": "u2", "allowed": False,
                        "status": {"code": 403, "reason": "Forbidden", "message": "over quota"}}


def test_a_patch_is_base64_json_patch() -> None:
    ops = [{"op": "add", "path": "/spec/tolerations", "value": []}]
    response = review_response("u3", patch=ops)["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == ops
