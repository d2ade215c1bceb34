"""What both webhook servers share: the body limit and reading the AdmissionReview."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from annex.webhooks import admission_application, admission_request
from shared.admission import review_response


async def client() -> TestClient[Any, Any]:
    async def review(request: web.Request) -> web.Response:
        admission = await admission_request(request)
        return web.json_response(review_response(str(admission.get("uid", ""))))

    app = admission_application()
    app.router.add_post("/review", review)
    test_client: TestClient[Any, Any] = TestClient(TestServer(app))
    await test_client.start_server()
    return test_client


async def test_a_review_over_a_mebibyte_is_read() -> None:
    test_client = await client()
    try:
        body = {"request": {"uid": "u1", "object": {"data": "x" * 1_500_000}}}
        answer = await test_client.post("/review", json=body)
        assert answer.status == 200
        assert (await answer.json())["response"] == {"uid": "u1", "allowed": True}
    finally:
        await test_client.close()


async def test_anything_but_an_admission_review_is_a_400_naming_what_was_expected() -> None:
    test_client = await client()
    try:
        for body in (b"not json", b"[1, 2]", b'{"kind": "AdmissionReview"}'):
            answer = await test_client.post("/review", data=body)
            assert answer.status == 400
            assert "expected an AdmissionReview" in await answer.text()
    finally:
        await test_client.close()
