"""Name, label and annotation validation, and generateName: apimachinery's rules and messages.

The messages are copied verbatim from k8s.io/apimachinery (util/validation, api/validate/content,
api/validation/path, api/validation/objectmeta.go) because clients and tests compare them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DNS1035_LABEL_MAX_LENGTH = 63
LABEL_KEY_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * (1 << 10)

# storage/names/generate.go: the random suffix and the alphabet of utilrand.String.
GENERATED_SUFFIX_LENGTH = 5
MAX_GENERATED_NAME_LENGTH = 63 - GENERATED_SUFFIX_LENGTH
GENERATED_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_ERR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)


def _full_match(fmt: str) -> re.Pattern[str]:
    # Go's regexp "^...$" matches the whole string; \Z refuses a trailing newline as Go does.
    return re.compile("(?:" + fmt + r")\Z")


_DNS1123_LABEL_RE = _full_match(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = _full_match(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = _full_match(_DNS1035_LABEL_FMT)
_LABEL_KEY_RE = _full_match(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = _full_match(_LABEL_VALUE_FMT)


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def empty_error() -> str:
    return "must be non-empty"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including its odd "', " separators."""
    if not examples:
        return message + " (regex used for validation is '" + fmt + "')"
    message += " (e.g. "
    message += " or ".join("'" + example + "', " for example in examples)
    return message + "regex used for validation is '" + fmt + "')"


def _byte_length(value: str) -> int:
    # Go's len() counts UTF-8 bytes.
    return len(value.encode())


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_ERR, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def dns1035_label_errors(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > DNS1035_LABEL_MAX_LENGTH:
        errors.append(max_len_error(DNS1035_LABEL_MAX_LENGTH))
    if not _DNS1035_LABEL_RE.match(value):
        errors.append(regex_error(_DNS1035_LABEL_ERR, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def path_segment_errors(value: str) -> list[str]:
    """path.IsValidPathSegmentName: names used as a URL path segment (every object name)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


def _label_key_regex_error() -> str:
    return regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey (a.k.a. IsQualifiedName): `[prefix/]name`."""
    errors: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part " + empty_error())
        else:
            errors.extend("prefix part " + msg for msg in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _label_key_regex_error()
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part " + empty_error())
    elif _byte_length(name) > LABEL_KEY_NAME_MAX_LENGTH:
        errors.append("name part " + max_len_error(LABEL_KEY_NAME_MAX_LENGTH))
    if not _LABEL_KEY_RE.match(name):
        errors.append("name part " + _label_key_regex_error())
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > LABEL_VALUE_MAX_LENGTH:
        errors.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.match(value):
        errors.append(
            regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def annotation_field_errors(annotations: Mapping[str, str]) -> list[tuple[str, Any, str]]:
    """ValidateAnnotations as (error type, bad value, detail) triples for the field
    `metadata.annotations`: ("Invalid value", key, detail) per bad key (checked lowercased: case
    does not matter for annotation keys), ("Too long", "", "may not be more than 262144 bytes")
    for the total size of keys and values."""
    errors: list[tuple[str, Any, str]] = [
        ("Invalid value", key, msg) for key in annotations for msg in label_key_errors(key.lower())
    ]
    total = sum(_byte_length(k) + _byte_length(v) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_B:
        errors.append(
            ("Too long", "", f"may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT_B} bytes")
        )
    return errors


def annotations_errors(annotations: Mapping[str, str]) -> list[str]:
    """ValidateAnnotations, as field-error bodies relative to `metadata.annotations`:
    `Invalid value: "<key>": <detail>`, `Too long: may not be more than 262144 bytes`."""
    return [
        f"{kind}: {go_quote(value)}: {detail}" if kind == "Invalid value" else f"{kind}: {detail}"
        for kind, value, detail in annotation_field_errors(annotations)
    ]


def go_quote(value: str) -> str:
    """Go's %q for a string: double quotes, backslash escapes, printable Unicode kept."""
    out = ['"']
    for char in value:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not char.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def generate_name(base: str) -> str:
    """names.SimpleNameGenerator: base cut to 58 characters plus 5 random characters."""
    if len(base) > MAX_GENERATED_NAME_LENGTH:
        base = base[:MAX_GENERATED_NAME_LENGTH]
    suffix = "".join(
        secrets.choice(GENERATED_SUFFIX_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH)
    )
    return base + suffix
