"""annex.writes: each write tolerates exactly the answers that mean "someone got there first"
and passes every other failure on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from annex.api_errors import ApiError
from annex.writes import (
    Foreign,
    confirmed_gone,
    create_or_refuse,
    delete_owned,
    replace_or_create,
)

PATH = "/api/v1/namespaces/team/configmaps/settings"
COLLECTION = "/api/v1/namespaces/team/configmaps"
OURS = {"metadata": {"namespace": "team", "name": "settings", "labels": {"ours": "yes"}}}
FOREIGN = {"metadata": {"namespace": "team", "name": "settings"}}


class Api:
    """Answers each verb with `answers[verb]` (raised when it is an exception); records calls."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, Any]] = []

    async def _answer(self, verb: str, path: str, body: Any = None) -> Any:
        self.calls.append((verb, path, body))
        answer = self.answers[verb]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def create(self, path: str, body: Any) -> Any:
        return await self._answer("create", path, body)

    async def replace(self, path: str, body: Any) -> Any:
        return await self._answer("replace", path, body)

    async def get(self, path: str) -> Any:
        return await self._answer("get", path)

    async def delete(self, path: str, options: Any = None) -> Any:
        return await self._answer("delete", path, options)


def _owned(obj: Any) -> bool:
    return bool((obj.get("metadata") or {}).get("labels", {}).get("ours"))


def _run(coroutine: Awaitable[Any]) -> Any:
    async def wrapped() -> Any:
        return await coroutine
    return asyncio.run(wrapped())


def test_create_or_refuse_creates_or_finds_our_object_and_refuses_a_foreign_one() -> None:
    created = Api(create={"created": True})
    assert _run(create_or_refuse(created, COLLECTION, PATH, OURS, _owned)) == (  # type: ignore[arg-type]
        {"created": True}, True)
    ours = Api(create=ApiError(409), get=OURS)
    assert _run(create_or_refuse(ours, COLLECTION, PATH, OURS, _owned)) == (OURS, False)  # type: ignore[arg-type]
    assert [verb for verb, _, _ in ours.calls] == ["create", "get"]
    foreign = Api(create=ApiError(409), get=FOREIGN)
    with pytest.raises(Foreign, match="team/settings is not ours") as refused:
        _run(create_or_refuse(foreign, COLLECTION, PATH, OURS, _owned))  # type: ignore[arg-type]
    assert refused.value.existing == FOREIGN
    with pytest.raises(ApiError, match="422"):
        _run(create_or_refuse(Api(create=ApiError(422)), COLLECTION, PATH, OURS, _owned))  # type: ignore[arg-type]


def test_replace_or_create_creates_what_was_deleted_meanwhile() -> None:
    async def create() -> str:
        return "created"

    assert _run(replace_or_create(Api(replace="replaced"), PATH, OURS, create)) == "replaced"  # type: ignore[arg-type]
    assert _run(replace_or_create(Api(replace=ApiError(404)), PATH, OURS, create)) == "created"  # type: ignore[arg-type]
    with pytest.raises(ApiError, match="409"):
        _run(replace_or_create(Api(replace=ApiError(409)), PATH, OURS, create))  # type: ignore[arg-type]


@pytest.mark.parametrize("answer", [{}, ApiError(404), ApiError(409)])
def test_delete_owned_is_done_when_deleted_gone_or_replaced_by_another(answer: Any) -> None:
    api = Api(delete=answer)
    _run(delete_owned(api, PATH, "uid-1", {"propagationPolicy": "Foreground"}))  # type: ignore[arg-type]
    assert api.calls == [("delete", PATH, {"propagationPolicy": "Foreground",
                                           "preconditions": {"uid": "uid-1"}})]


def test_delete_owned_passes_other_failures_on_and_needs_no_uid() -> None:
    with pytest.raises(ApiError, match="403"):
        _run(delete_owned(Api(delete=ApiError(403)), PATH, "uid-1"))  # type: ignore[arg-type]
    api = Api(delete={})
    _run(delete_owned(api, PATH, None))  # type: ignore[arg-type]
    assert api.calls == [("delete", PATH, None)]


def test_confirmed_gone_only_on_the_api_server_s_404() -> None:
    assert _run(confirmed_gone(Api(get=ApiError(404)), PATH)) is True  # type: ignore[arg-type]
    assert _run(confirmed_gone(Api(get=FOREIGN), PATH)) is False  # type: ignore[arg-type]
    with pytest.raises(ApiError, match="503"):
        _run(confirmed_gone(Api(get=ApiError(503)), PATH))  # type: ignore[arg-type]
