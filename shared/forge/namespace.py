"""The twin namespace's name on the remote cluster (namespace extension).

- DefaultName: `<namespace>-<home cluster id>`, so that several consumers can extend namespaces
  of the same name into one provider without clashing;
- EnforceSameName: the namespace's own name;
- SelectedName: the name the user chose, used exactly as given.

A DefaultName over 63 characters (a namespace name's limit) is shortened deterministically: the
head is kept and a hash of the whole name appended, so that the same inputs always give the same
name and two long names that share a head still differ. A chosen name is never rewritten: if it
is not a valid namespace name the request fails with the apiserver's own validation message.
"""

from __future__ import annotations

import hashlib
import re

from shared.api.namespace_offloading import NamespaceMappingStrategy

DNS1123_LABEL_MAX_LENGTH = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL_FMT}$")
# apimachinery's IsDNS1123Label messages (validation.go), verbatim.
_DNS1123_LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{_DNS1123_LABEL_FMT}')"
)
HASH_LENGTH = 10
"""Hex characters of sha256 in a shortened name: 40 bits, collisions are not a practical worry."""


def dns1123_label_errors(value: str) -> list[str]:
    """What is wrong with `value` as a namespace name (empty when it is valid)."""
    errors = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters")
    if not _DNS1123_LABEL.match(value):
        errors.append(_DNS1123_LABEL_ERROR)
    return errors


def shortened(name: str, max_length: int = DNS1123_LABEL_MAX_LENGTH) -> str:
    """`name` itself when it fits in `max_length` characters, else its head, `-`, and a hash of
    the whole name: deterministic, and distinct for long names sharing a head."""
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_LENGTH]
    head = name[: max_length - HASH_LENGTH - 1].rstrip("-.")
    return f"{head}-{digest}"


def _checked(name: str, what: str) -> str:
    errors = dns1123_label_errors(name)
    if errors:
        raise ValueError(f"invalid remote namespace name {name!r} ({what}): {'; '.join(errors)}")
    return name


def remote_namespace_name(
    local_namespace: str,
    strategy: NamespaceMappingStrategy,
    home_cluster_id: str,
    selected_name: str | None = None,
) -> str:
    """The twin namespace's name for `local_namespace`; ValueError with the reason if the
    strategy cannot give a valid namespace name (e.g. SelectedName without a name)."""
    match NamespaceMappingStrategy(strategy):
        case NamespaceMappingStrategy.DEFAULT_NAME:
            full = f"{local_namespace}-{home_cluster_id}"
            # Characters are checked on the full name: truncation must not hide a bad cluster id.
            if not _DNS1123_LABEL.match(full):
                _checked(full, "DefaultName")
            return shortened(full)
        case NamespaceMappingStrategy.ENFORCE_SAME_NAME:
            return _checked(local_namespace, "EnforceSameName")
        case NamespaceMappingStrategy.SELECTED_NAME:
            if not selected_name:
                raise ValueError(
                    "namespace mapping strategy SelectedName needs a remoteNamespaceName"
                )
            return _checked(selected_name, "SelectedName")
