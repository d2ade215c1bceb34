"""Label and field selectors, parsed and matched as k8s.io/apimachinery does.

The label selector parser is a port of pkg/labels/selector.go (lexer, parser and the
error messages it produces); the field selector parser follows pkg/fields/selector.go.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.names import go_quote, label_key_errors, label_value_errors


class SelectorError(ValueError):
    """A selector the real server refuses; str() is the real server's message."""


class Operator(enum.StrEnum):
    # selection.Operator values.
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS = ("in", "notin", "=", "==", "!=", "gt", "lt")
_VALID_OPERATORS = (*_BINARY_OPERATORS, "exists", "!")


def _go_value(value: Any) -> str:
    """How field.Error prints a bad value (%q for strings, %#v for []string)."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list | tuple):
        # Requirement values reach NewRequirement as append([]string(nil), ...): nil when empty.
        if not value:
            return "[]string(nil)"
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    return str(value)


def _field_invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _aggregate(messages: Sequence[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message alone, several in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _key_error(key: str, path: str) -> str | None:
    errors = label_key_errors(key)
    return _field_invalid(path, key, "; ".join(errors)) if errors else None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        # Gt / Lt compare base-10 int64s; anything unparsable does not match.
        if self.key not in labels or len(self.values) != 1:
            return False
        label_value, wanted = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
        if label_value is None or wanted is None:
            return False
        return label_value > wanted if op is Operator.GREATER_THAN else label_value < wanted

    def __str__(self) -> str:
        prefix = "!" if self.operator is Operator.DOES_NOT_EXIST else ""
        if self.operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return prefix + self.key
        symbol = {
            Operator.IN: " in ",
            Operator.NOT_IN: " notin ",
            Operator.GREATER_THAN: ">",
            Operator.LESS_THAN: "<",
        }.get(self.operator, self.operator.value)
        values = ",".join(sorted(self.values))
        if self.operator in (Operator.IN, Operator.NOT_IN):
            values = "(" + values + ")"
        return self.key + symbol + values


def _parse_int64(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits only.
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def new_requirement(
    key: str, operator: Operator, values: Sequence[str], path: str = ""
) -> Requirement:
    """labels.NewRequirement: validates key, value count and values; errors are aggregated.

    `path` prefixes the field paths of the messages ("" is Go's nil path: `key`, `values[0]`).
    """

    def child(name: str) -> str:
        return f"{path}.{name}" if path else name

    errors = []
    key_error = _key_error(key, child("key"))
    if key_error:
        errors.append(key_error)
    values_path = child("values")
    values = list(values)
    if operator in (Operator.IN, Operator.NOT_IN):
        if not values:
            errors.append(
                _field_invalid(
                    values_path, values, "for 'in', 'notin' operators, values set can't be empty"
                )
            )
    elif operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
        if len(values) != 1:
            errors.append(
                _field_invalid(
                    values_path, values, "exact-match compatibility requires one single value"
                )
            )
    elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        if values:
            errors.append(
                _field_invalid(
                    values_path, values, "values set must be empty for exists and does not exist"
                )
            )
    else:
        if len(values) != 1:
            errors.append(
                _field_invalid(
                    values_path, values, "for 'Gt', 'Lt' operators, exactly one value is required"
                )
            )
        for index, value in enumerate(values):
            if _parse_int64(value) is None:
                errors.append(
                    _field_invalid(
                        f"{values_path}[{index}]",
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for index, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(
                _field_invalid(f"{values_path}[{index}][{key}]", value, "; ".join(value_errors))
            )
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, operator, tuple(values))


@dataclass(frozen=True)
class LabelSelector:
    """AND of requirements, kept sorted by key as the real parser does."""

    requirements: tuple[Requirement, ...] = ()
    # metav1.LabelSelectorAsSelector(nil) is labels.Nothing(); see label_selector_from_object.
    selects_nothing: bool = False

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.selects_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.selects_nothing:
            return False
        present = labels or {}
        return all(requirement.matches(present) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(selects_nothing=True)


# --- the label selector lexer and parser (labels/selector.go) -------------------------------


class _Token(enum.IntEnum):
    ERROR = 0
    END_OF_STRING = 1
    CLOSED_PAR = 2
    COMMA = 3
    DOES_NOT_EXIST = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GREATER_THAN = 7
    IDENTIFIER = 8
    IN = 9
    LESS_THAN = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_STRING_TO_TOKEN = {
    ")": _Token.CLOSED_PAR,
    ",": _Token.COMMA,
    "!": _Token.DOES_NOT_EXIST,
    "==": _Token.DOUBLE_EQUALS,
    "=": _Token.EQUALS,
    ">": _Token.GREATER_THAN,
    "in": _Token.IN,
    "<": _Token.LESS_THAN,
    "!=": _Token.NOT_EQUALS,
    "notin": _Token.NOT_IN,
    "(": _Token.OPEN_PAR,
}
_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),><"


def _lex(text: str) -> list[tuple[_Token, str]]:
    items: list[tuple[_Token, str]] = []
    pos, length = 0, len(text)
    while True:
        while pos < length and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= length:
            items.append((_Token.END_OF_STRING, ""))
            return items
        if text[pos] in _SPECIAL:
            # Longest run of special symbols that still spells a token ("!=", "==").
            buffer, last = "", None
            while pos < length and text[pos] in _SPECIAL:
                buffer += text[pos]
                if buffer in _STRING_TO_TOKEN:
                    last = (_STRING_TO_TOKEN[buffer], buffer)
                    pos += 1
                elif last is not None:
                    break
                else:
                    pos += 1
            if last is None:
                items.append((_Token.ERROR, f"error expected: keyword found '{buffer}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < length and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_STRING_TO_TOKEN.get(word, _Token.IDENTIFIER), word))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[_Token, str]:
        return self._as_context(self.items[self.position], values)

    def consume(self, values: bool = True) -> tuple[_Token, str]:
        self.position += 1
        return self._as_context(self.items[self.position - 1], values)

    @staticmethod
    def _as_context(item: tuple[_Token, str], values: bool) -> tuple[_Token, str]:
        # In the "Values" context `in` and `notin` are ordinary identifiers: `x in (in)`.
        token, literal = item
        if values and token in (_Token.IN, _Token.NOT_IN):
            return _Token.IDENTIFIER, literal
        return token, literal

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                try:
                    requirements.append(self.parse_requirement())
                except SelectorError as error:
                    raise SelectorError(f"unable to parse requirement: {error}") from None
                token, literal = self.consume()
                if token is _Token.END_OF_STRING:
                    return requirements
                if token is _Token.COMMA:
                    next_token, next_literal = self.lookahead()
                    if next_token not in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                        raise SelectorError(
                            f"found '{next_literal}', expected: identifier after ','"
                        )
                else:
                    raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            elif token is _Token.END_OF_STRING:
                return requirements
            else:
                raise SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        operator = self.parse_operator()
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return new_requirement(key, operator, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, Operator | None]:
        operator = None
        token, literal = self.consume()
        if token is _Token.DOES_NOT_EXIST:
            operator = Operator.DOES_NOT_EXIST
            token, literal = self.consume()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        key_error = _key_error(literal, "<nil>")
        if key_error:
            raise SelectorError(key_error)
        next_token, _ = self.lookahead()
        if next_token in (_Token.END_OF_STRING, _Token.COMMA) and operator is None:
            operator = Operator.EXISTS
        return literal, operator

    def parse_operator(self) -> Operator:
        token, literal = self.consume(values=False)
        operators = {
            _Token.IN: Operator.IN,
            _Token.EQUALS: Operator.EQUALS,
            _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
            _Token.GREATER_THAN: Operator.GREATER_THAN,
            _Token.LESS_THAN: Operator.LESS_THAN,
            _Token.NOT_IN: Operator.NOT_IN,
            _Token.NOT_EQUALS: Operator.NOT_EQUALS,
        }
        if token not in operators:
            raise SelectorError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operators[token]

    def parse_values(self) -> set[str]:
        token, literal = self.consume()
        if token is not _Token.OPEN_PAR:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token in (_Token.IDENTIFIER, _Token.COMMA):
            values = self.parse_identifiers_list()
            closing, _ = self.consume()
            if closing is not _Token.CLOSED_PAR:
                raise SelectorError(f"found '{literal}', expected: ')'")
            return values
        if token is _Token.CLOSED_PAR:
            self.consume()
            return {""}
        raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self.consume()
            if token is _Token.IDENTIFIER:
                values.add(literal)
                next_token, next_literal = self.lookahead()
                if next_token is _Token.COMMA:
                    continue
                if next_token is _Token.CLOSED_PAR:
                    return values
                raise SelectorError(f"found '{next_literal}', expected: ',' or ')'")
            if token is _Token.COMMA:
                # Empty values are allowed: "(,a)", "(a,)", "(a,,b)".
                if not values:
                    values.add("")
                next_token, _ = self.lookahead()
                if next_token is _Token.CLOSED_PAR:
                    values.add("")
                    return values
                if next_token is _Token.COMMA:
                    values.add("")
                continue
            raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        token, _ = self.lookahead()
        if token in (_Token.END_OF_STRING, _Token.COMMA):
            return {""}
        token, literal = self.consume()
        if token is _Token.IDENTIFIER:
            return {literal}
        raise SelectorError(f"found '{literal}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse: "a=b,c!=d,e in (f,g),h notin (i),j,!k"; raises SelectorError."""
    requirements = _Parser(text).parse()
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector for {matchLabels, matchExpressions}.

    `{}` selects everything. None also selects everything here (what list/watch callers want);
    use `label_selector_from_object_strict` where a missing selector must select nothing, as
    LabelSelectorAsSelector(nil) does (e.g. a Deployment's or PDB's selector).
    """
    if selector is None:
        return EVERYTHING
    match_labels: Mapping[str, Any] = selector.get("matchLabels") or {}
    expressions: Sequence[Mapping[str, Any]] = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return EVERYTHING
    requirements = [
        new_requirement(str(key), Operator.EQUALS, [str(value)])
        for key, value in match_labels.items()
    ]
    for expression in expressions:
        raw_operator = expression.get("operator", "")
        operator = _EXPRESSION_OPERATORS.get(raw_operator)
        if operator is None:
            raise SelectorError(
                f"{go_quote(str(raw_operator))} is not a valid label selector operator"
            )
        values = [str(v) for v in expression.get("values") or []]
        key = str(expression.get("key", ""))
        requirements.append(new_requirement(key, operator, values))
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


def label_selector_from_object_strict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Like label_selector_from_object, but None selects nothing (LabelSelectorAsSelector(nil))."""
    return NOTHING if selector is None else label_selector_from_object(selector)


# --- field selectors (fields/selector.go) ---------------------------------------------------


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    equal: bool  # False for "!="

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.field) == self.value) == self.equal

    def __str__(self) -> str:
        return f"{self.field}{'=' if self.equal else '!='}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in self.terms)

    def requires_exact_match(self, field: str) -> str | None:
        """The value `field` must equal, if a term pins it (used to narrow lists by name)."""
        for term in self.terms:
            if term.field == field and term.equal:
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


# Field labels whose value is not simply the object's field at that dotted path.
_FIELD_LABEL_PATHS = {"source": "source.component"}  # core/v1 Event
# Non-string field labels: the real server formats the Go field, so a missing one reads as its
# zero value (strconv.FormatBool / strconv.Itoa), not "".
_FIELD_LABEL_ZERO_VALUES = {
    "spec.unschedulable": "false",  # Node
    "spec.hostNetwork": "false",  # Pod
    "status.replicas": "0",  # ReplicaSet, ReplicationController
    "status.successful": "0",  # Job
}


def field_value(obj: Mapping[str, Any], label: str) -> str:
    """The string a field label has on an object, as the real server's field sets give it: a
    missing string field is "" (`spec.nodeName=` selects unscheduled pods), a missing boolean or
    count is its zero value ("false", "0"), booleans print as "true"/"false"."""
    current: Any = obj
    for part in _FIELD_LABEL_PATHS.get(label, label).split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if current is None:
        return _FIELD_LABEL_ZERO_VALUES.get(label, "")
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, str):
        return current
    if isinstance(current, int | float):
        return str(current)
    return ""


def _split_terms(text: str) -> list[str]:
    """Split on commas not escaped by a backslash (escapes stay in the terms)."""
    if not text:
        return []
    terms, start, in_slash = [], 0, False
    for index, char in enumerate(text):
        if in_slash:
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # The first position where "!=", "==" or "=" starts splits the term; the left side has
    # no escaping.
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def unescape_field_value(value: str) -> str:
    """fields.UnescapeValue: only backslash, comma and equals may be escaped; a bare comma or
    equals sign is an error."""
    if not any(char in value for char in "\\,="):
        return value
    out, in_slash = [], False
    for char in value:
        if in_slash:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char in ",=":
            # Go prints the rune with %v: its code point.
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out.append(char)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def parse_field_selector(text: str, supported: Collection[str]) -> FieldSelector:
    """fields.ParseSelector followed by the kind's field label conversion.

    `supported` lists the field labels the kind accepts (metadata.name and metadata.namespace
    are always accepted); any other raises SelectorError('field label not supported: x').
    """
    terms = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, raw_value = split
        terms.append(FieldTerm(field, unescape_field_value(raw_value), operator != "!="))
    always = ("metadata.name", "metadata.namespace")
    for term in terms:
        if term.field not in supported and term.field not in always:
            raise SelectorError(f"field label not supported: {term.field}")
    return FieldSelector(tuple(terms))
