"""kubesim.names: apimachinery's name, label and annotation rules, with their exact messages."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.names import (
    GENERATED_SUFFIX_ALPHABET,
    annotation_field_errors,
    annotations_errors,
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    generate_name,
    go_quote,
    label_key_errors,
    label_value_errors,
    path_segment_errors,
)

LABEL_REGEX_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_REGEX_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_REGEX_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
NAME_PART_REGEX_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    "value, errors",
    [
        ("a", []),
        ("my-name", []),
        ("123-abc", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("a.b", ["must not contain dots"]),
        ("A", [LABEL_REGEX_MSG]),
        ("-a", [LABEL_REGEX_MSG]),
        ("a-", [LABEL_REGEX_MSG]),
        ("", [LABEL_REGEX_MSG]),
        ("a_b", [LABEL_REGEX_MSG]),
        ("a\n", [LABEL_REGEX_MSG]),
        ("a" * 64 + "-", ["must be no more than 63 characters", LABEL_REGEX_MSG]),
    ],
)
def test_dns1123_label(value: str, errors: list[str]) -> None:
    assert dns1123_label_errors(value) == errors


@pytest.mark.parametrize(
    "value, errors",
    [
        ("example.com", []),
        ("a", []),
        ("0.1.2", []),
        ("a" * 253, []),
        ("a" * 254, ["must be no more than 253 characters"]),
        ("a..b", [SUBDOMAIN_REGEX_MSG]),
        (".a", [SUBDOMAIN_REGEX_MSG]),
        ("a.", [SUBDOMAIN_REGEX_MSG]),
        ("Example.com", [SUBDOMAIN_REGEX_MSG]),
        ("", [SUBDOMAIN_REGEX_MSG]),
        ("a_b", [SUBDOMAIN_REGEX_MSG]),
    ],
)
def test_dns1123_subdomain(value: str, errors: list[str]) -> None:
    assert dns1123_subdomain_errors(value) == errors


@pytest.mark.parametrize(
    "value, errors",
    [
        ("my-name", []),
        ("abc-123", []),
        ("1abc", [DNS1035_REGEX_MSG]),
        ("a.b", [DNS1035_REGEX_MSG]),
        ("a" * 64, ["must be no more than 63 characters"]),
    ],
)
def test_dns1035_label(value: str, errors: list[str]) -> None:
    assert dns1035_label_errors(value) == errors


@pytest.mark.parametrize(
    "value, errors",
    [
        ("good", []),
        ("...", []),
        (".", ["may not be '.'"]),
        ("..", ["may not be '..'"]),
        ("a/b", ["may not contain '/'"]),
        ("a%b", ["may not contain '%'"]),
        ("a/%b", ["may not contain '/'", "may not contain '%'"]),
    ],
)
def test_path_segment(value: str, errors: list[str]) -> None:
    assert path_segment_errors(value) == errors


@pytest.mark.parametrize(
    "key, errors",
    [
        ("app", []),
        ("App.Name_1", []),
        ("example.com/app", []),
        ("kubernetes.io/hostname", []),
        ("a" * 63, []),
        ("a" * 64, ["name part must be no more than 63 characters"]),
        ("", ["name part must be non-empty", NAME_PART_REGEX_MSG]),
        ("/app", ["prefix part must be non-empty"]),
        ("example.com/", ["name part must be non-empty", NAME_PART_REGEX_MSG]),
        ("Example.com/app", ["prefix part " + SUBDOMAIN_REGEX_MSG]),
        ("app-", [NAME_PART_REGEX_MSG]),
        ("a b", [NAME_PART_REGEX_MSG]),
        (
            "a/b/c",
            [
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_label_key(key: str, errors: list[str]) -> None:
    assert label_key_errors(key) == errors


@pytest.mark.parametrize(
    "value, errors",
    [
        ("", []),
        ("v1", []),
        ("My_Value.2", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("-a", [LABEL_VALUE_REGEX_MSG]),
        ("a b", [LABEL_VALUE_REGEX_MSG]),
        ("a/b", [LABEL_VALUE_REGEX_MSG]),
    ],
)
def test_label_value(value: str, errors: list[str]) -> None:
    assert label_value_errors(value) == errors


def test_annotation_keys_are_checked_case_insensitively_and_report_the_original_key() -> None:
    assert annotations_errors({"Example.COM/Key": "x", "UpperCase123": "y"}) == []
    assert annotations_errors({"bad key": "v"}) == [
        'Invalid value: "bad key": ' + NAME_PART_REGEX_MSG
    ]


def test_annotations_total_size_is_limited_to_256_kib() -> None:
    limit = 256 * 1024
    assert annotations_errors({"a": "b" * (limit - 1)}) == []
    assert annotations_errors({"a": "b" * limit}) == ["Too long: may not be more than 262144 bytes"]
    # Size counts keys and values of all annotations together.
    half = {"a": "b" * (limit // 2 - 1), "c": "d" * (limit // 2 - 1)}
    assert annotations_errors(half) == []
    assert annotations_errors({**half, "e": "f"}) != []


@pytest.mark.parametrize(
    "value, quoted",
    [("abc", '"abc"'), ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"'), ("a\nb", '"a\\nb"'), ("é", '"é"')],
)
def test_go_quote_matches_go_percent_q(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_generate_name_appends_five_characters_from_the_kubernetes_alphabet() -> None:
    name = generate_name("web-")
    assert re.fullmatch(f"web-[{GENERATED_SUFFIX_ALPHABET}]{{5}}", name)


def test_generate_name_truncates_the_base_to_58_characters() -> None:
    name = generate_name("y" * 100)  # y is not in the suffix alphabet
    assert re.fullmatch(f"y{{58}}[{GENERATED_SUFFIX_ALPHABET}]{{5}}", name), name


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?-?", fullmatch=True))
def test_generated_names_from_valid_prefixes_are_valid_labels(base: str) -> None:
    assert dns1123_label_errors(generate_name(base)) == []


def test_annotation_field_errors_are_structured_for_field_causes() -> None:
    assert annotation_field_errors({"ok": "1"}) == []
    (error,) = annotation_field_errors({"Bad Key": "v"})
    assert error == ("Invalid value", "Bad Key", NAME_PART_REGEX_MSG)
    assert annotation_field_errors({"a": "b" * 262144}) == [
        ("Too long", "", "may not be more than 262144 bytes")
    ]


def test_lengths_are_counted_in_bytes_like_go() -> None:
    # 32 two-byte characters are 64 bytes: too long for a label value even though 32 < 63.
    assert label_value_errors("é" * 32)[0] == "must be no more than 63 characters"
    assert dns1123_label_errors("a" * 63) == []
