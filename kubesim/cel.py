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
import lark
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


# Fields of the typed `request` variable whose type is bool; `object`, `oldObject`, `params`
# and the other fields of objects are dyn.
_BOOL_REQUEST_FIELDS = frozenset({"dryRun"})
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition",
                       "multiplication", "unary", "member", "primary", "paren_expr"})


def _static_type(node: Any) -> str:
    """"bool", "dyn" or "other": the type cel-go's checker gives `node`, as far as it can be told
    without the variables' declarations (an unknown function or method is taken to be bool)."""
    if isinstance(node, lark.Token):
        return "dyn" if node.type == "IDENT" else "other"
    children = node.children
    if node.data == "expr" and len(children) == 3:  # a ? b : c
        branches = {_static_type(children[1]), _static_type(children[2])}
        return branches.pop() if len(branches) == 1 else "dyn"
    if node.data in ("conditionalor", "conditionaland") and len(children) == 2:
        return "bool"
    if node.data in ("addition", "multiplication") and len(children) == 2:
        return "other"  # arithmetic (or string and list concatenation)
    if node.data == "unary" and len(children) == 2:
        return "bool" if children[0].data == "unary_not" else "other"
    if node.data in _WRAPPERS and len(children) == 1:
        return _static_type(children[0])
    if node.data.startswith("relation_"):
        return "bool"
    if node.data == "literal":
        return "bool" if str(children[0]) in ("true", "false") else "other"
    if node.data in ("ident", "member_index", "member_object", "dot_ident"):
        return "dyn"
    if node.data == "member_dot":
        target, field = children
        is_request = (isinstance(target, lark.Tree) and target.data == "member"
                      and target.children[0].data == "primary"
                      and str(target.children[0].children[0].children[0]) == "request")
        return "bool" if is_request and str(field) in _BOOL_REQUEST_FIELDS else "dyn"
    if node.data in ("list_lit", "map_lit"):
        return "other"
    return "bool"  # function and method calls: has(), startsWith(), exists(), ...


def bool_result_error(expression: str) -> str | None:
    """Why `expression` is refused where a bool is required (a match condition), None when it
    compiles to a bool: the checker refuses dyn too, so `object.spec.paused` must be written
    `object.spec.paused == true`."""
    if problem := compile_error(expression):
        return problem
    if _static_type(celpy.Environment().compile(expression)) != "bool":
        return "must evaluate to bool"
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
