"""CEL expressions as the API server's admission policies evaluate them (cel-python).

Kubernetes compiles against typed declarations (cel-go); kubesim evaluates JSON values
dynamically, which agrees on what a well-typed expression yields: a field not set is an error
(guard it with `has()`), null compares equal to null, `&&`/`||` absorb an error when the other
side decides.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError


class CelError(Exception):
    """An expression that does not compile, fails while evaluated, or yields the wrong type."""


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    environment = celpy.Environment()
    try:
        return environment.program(environment.compile(expression))
    except CELParseError as error:  # worded as cel-go's issues
        raise CelError(f"compilation failed: ERROR: <input>:{error.line}:{error.column}: "
                       "Syntax error") from error


def compile_error(expression: str) -> str | None:
    """Why `expression` does not compile, None when it does."""
    try:
        _program(expression)
    except CelError as error:
        return str(error)
    return None


def value(data: Any) -> Any:
    """A JSON value as CEL sees it (null stays null)."""
    return json_to_cel(data)


def variables(values: Mapping[str, Any]) -> Any:
    """The `variables` map of values already converted with `value` (or kept as errors)."""
    return celtypes.MapType({celtypes.StringType(name): v for name, v in values.items()})


def evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The CEL value of `expression`; CelError when it cannot be evaluated."""
    try:
        result = _program(expression).evaluate(dict(activation))
    except CELEvalError as error:
        raise CelError(str(error.args[0] if error.args else error)) from error
    if isinstance(result, CELEvalError):
        raise CelError(str(result.args[0] if result.args else result))
    return result


def variable(expression: str, activation: Mapping[str, Any]) -> Any:
    """A policy variable's value, or the error as a value: variables are evaluated lazily by the
    API server, so one that fails fails only the expressions that use it."""
    try:
        return evaluate(expression, activation)
    except CelError as error:
        return CELEvalError(str(error))


def evaluate_bool(expression: str, activation: Mapping[str, Any]) -> bool:
    result = evaluate(expression, activation)
    if not isinstance(result, bool | celtypes.BoolType):
        raise CelError(f"expected a bool, got {type(result).__name__.removesuffix('Type')}")
    return bool(result)


def evaluate_string(expression: str, activation: Mapping[str, Any]) -> str:
    result = evaluate(expression, activation)
    if not isinstance(result, str):  # (concatenations give plain str)
        raise CelError(f"expected a string, got {type(result).__name__.removesuffix('Type')}")
    return str(result)
