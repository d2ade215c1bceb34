"""Kubernetes resource quantities (`100m`, `1.5`, `2Gi`, `1e3`) as exact `Decimal`s.

Mirrors apimachinery's `resource.ParseQuantity` and canonical formatting (quantity.go, suffix.go):

- grammar `<sign><digits>.<digits><suffix>`, suffix one of the decimal SI ones (`n u m "" k M G
  T P E`), the binary SI ones (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent (`e3`, `E-2`);
- values finer than a nano-unit are rounded *up* (away from zero) to the next nano-unit ("if you
  want some resources you should get some");
- binary-suffixed values are capped at 2^63-1 in magnitude;
- the canonical form keeps the input's kind of suffix, emits no fractional digits and the largest
  suffix that loses nothing (`1.5` → `1500m`, `1.5Gi` → `1536Mi`); binary values below 1024 in
  magnitude or not whole are emitted with decimal suffixes (`512` not `0.5Ki`).

Kubernetes' JSON decoding also accepts plain numbers and surrounding blanks, so does `parse`.
"""

from __future__ import annotations

import decimal
from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple


class QuantityFormat(StrEnum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class Quantity(NamedTuple):
    value: Decimal
    format: QuantityFormat


# apimachinery's error texts, so messages match what kube-apiserver says about the same input.
_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {exponent: suffix for suffix, exponent in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_NANO = Decimal(1).scaleb(-9)
_MAX_BINARY = Decimal(2**63 - 1)
_INT64 = 2**63


class _Scanned(NamedTuple):
    negative: bool
    digits: str  # integer and fractional digits, concatenated
    fraction_length: int
    suffix: str


def _scan(text: str) -> _Scanned:
    """apimachinery's parseQuantityString: sign, digits, `.`, digits, then the suffix.

    Its quirks are kept: a number without digits (`-`, `m`, `.`) reads as zero.
    """
    pos, end = 0, len(text)
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    integer = text[start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in ("-", "+"):
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(ERR_FORMAT_WRONG)
    return _Scanned(negative, integer + fraction, len(fraction), text[suffix_start:])


def _interpret(suffix: str) -> tuple[int, int, QuantityFormat]:
    """(base, exponent, format) of a suffix, as apimachinery's suffixer interprets it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = _go_parse_int64(suffix[1:])
        except ValueError:
            raise ValueError(ERR_SUFFIX) from None
        # Go truncates the exponent to int32; wrap the same way.
        exponent = (exponent + 2**31) % 2**32 - 2**31
        return 10, exponent, QuantityFormat.DECIMAL_EXPONENT
    raise ValueError(ERR_SUFFIX)


def _go_parse_int64(text: str) -> int:
    """strconv.ParseInt(text, 10, 64): optional sign, then at least one digit, within int64."""
    body = text[1:] if text[:1] in ("-", "+") else text
    if not body or not set(body) <= _DIGITS:
        raise ValueError(text)
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ValueError(text)
    return value


def _exact_context(digits: int) -> decimal.Context:
    """A context wide enough that the arithmetic here is exact, whatever the input's length."""
    return decimal.Context(prec=digits + 40, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int), "quantities are finite"
    return exponent


def _round_up_to_nano(magnitude: Decimal) -> Decimal:
    """apimachinery rounds values finer than 1n up (away from zero) to the next nano-unit."""
    if _exponent(magnitude) >= -9:
        return magnitude
    context = _exact_context(len(magnitude.as_tuple().digits))
    return magnitude.quantize(_NANO, rounding=decimal.ROUND_UP, context=context)


def parse(text: str | int | float) -> Quantity:
    """The exact value and format of a Kubernetes quantity; ValueError if malformed."""
    if isinstance(text, bool):  # bool is an int subclass, and never a quantity
        raise ValueError(ERR_FORMAT_WRONG)
    raw = str(text).strip() if isinstance(text, int | float) else text.strip()
    if not raw:
        raise ValueError(ERR_FORMAT_WRONG)
    scanned = _scan(raw)
    base, exponent, quantity_format = _interpret(scanned.suffix)
    context = _exact_context(len(scanned.digits))
    magnitude = Decimal(int(scanned.digits or "0")).scaleb(-scanned.fraction_length, context)
    if base == 10:
        magnitude = magnitude.scaleb(exponent, context)
    else:
        magnitude = context.multiply(magnitude, Decimal(2**exponent))
    magnitude = _round_up_to_nano(magnitude)
    if quantity_format is QuantityFormat.BINARY_SI:
        magnitude = min(magnitude, _MAX_BINARY)
        if 0 < magnitude < 1:
            quantity_format = QuantityFormat.DECIMAL_SI
    return Quantity(-magnitude if scanned.negative else magnitude, quantity_format)


def parse_quantity(text: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity; ValueError if malformed."""
    return parse(text).value


def _canonical_decimal(value: Decimal) -> tuple[int, int]:
    """(mantissa, exponent) with the exponent a multiple of 3, as large as loses nothing."""
    normal = value.normalize(_exact_context(len(value.as_tuple().digits)))
    mantissa, exponent = int(normal.scaleb(-_exponent(normal))), _exponent(normal)
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


def format_quantity(
    value: Decimal | int, quantity_format: QuantityFormat = QuantityFormat.DECIMAL_SI
) -> str:
    """The canonical string of `value` in the given format (apimachinery's CanonicalizeBytes).

    Values finer than a nano-unit are rounded up first, as parsing would have done.
    """
    value = Decimal(value)
    if value.is_zero():
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = _round_up_to_nano(abs(value))
    if quantity_format is QuantityFormat.BINARY_SI and magnitude >= 1024 and magnitude == int(
        magnitude
    ):
        mantissa, power = int(magnitude), 0
        while mantissa % 1024 == 0 and power < 60:
            mantissa //= 1024
            power += 10
        return f"{sign}{mantissa}{_BINARY_BY_EXPONENT.get(power, '')}"
    mantissa, exponent = _canonical_decimal(magnitude)
    if quantity_format is QuantityFormat.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    # Beyond E (10^18) apimachinery has no suffix; spell the surplus out in digits instead.
    while exponent > 18:
        mantissa *= 1000
        exponent -= 3
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def canonical(text: str | int | float) -> str:
    """`text` re-emitted in its canonical form (`1.5Gi` → `1536Mi`, `0.1` → `100m`)."""
    quantity = parse(text)
    return format_quantity(quantity.value, quantity.format)
