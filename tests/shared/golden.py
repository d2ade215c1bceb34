"""Data-driven golden cases: one YAML file per case under `tests/shared/golden/<topic>/`.

A case names a pure function of `shared` and the keyword arguments to call it with, and says what
it must return (`expected`) or raise (`raises`, the exception class name, with an optional
`match` regex). Arguments whose parameter is annotated with a pydantic model are validated into
it; a returned model is compared in its wire form. Example::

    description: kube-root-ca.crt is renamed so it does not clash with the remote one
    function: shared.forge.configmap:remote_configmap
    args:
      local: {apiVersion: v1, kind: ConfigMap, metadata: {name: kube-root-ca.crt}}
    expected: {...}
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

GOLDEN_DIR = Path(__file__).parent / "golden"


def load_cases() -> list[Any]:
    return [
        pytest.param(path, id=str(path.relative_to(GOLDEN_DIR).with_suffix("")))
        for path in sorted(GOLDEN_DIR.rglob("*.yaml"))
    ]


def _resolve(dotted: str) -> Any:
    module_name, _, attr = dotted.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _model_type(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation names, also inside `X | None`."""
    candidates = typing.get_args(annotation) or (annotation,)
    for candidate in candidates:
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _dataclass_type(annotation: Any) -> type | None:
    """The dataclass an annotation names, also inside `X | None` (built from a mapping)."""
    candidates = typing.get_args(annotation) or (annotation,)
    for candidate in candidates:
        if inspect.isclass(candidate) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def _to_plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _to_plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(_to_plain(v) for v in value)
    return value


def call(case: dict[str, Any]) -> Any:
    """What the case's function returns for its arguments, in plain (wire) form."""
    function = _resolve(case["function"])
    hints = typing.get_type_hints(function)
    kwargs = {}
    for name, raw in (case.get("args") or {}).items():
        model = _model_type(hints.get(name))
        data_class = _dataclass_type(hints.get(name))
        if model is not None and raw is not None:
            kwargs[name] = model.model_validate(raw)
        elif data_class is not None and isinstance(raw, dict):
            kwargs[name] = data_class(**raw)
        else:
            kwargs[name] = raw
    return _to_plain(function(**kwargs))
