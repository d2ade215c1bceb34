"""Twin namespace names: deterministic, and always a valid namespace name or a clear refusal."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.namespace_offloading import NamespaceMappingStrategy
from shared.forge.namespace import remote_namespace_name

EXAMPLES = settings(max_examples=3000, deadline=None, database=None)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
# Valid DNS labels: alphanumeric ends, '-' allowed inside, 1 to 63 characters.
labels = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-", max_size=61),
    st.sampled_from(["", *_ALNUM]),
).map(lambda label: label.rstrip("-") or "a")
# Cluster ids as operators write them: mostly valid, sometimes not (upper case, dots, blanks).
cluster_ids = st.one_of(labels, st.text(min_size=0, max_size=80))
strategies = st.sampled_from(list(NamespaceMappingStrategy))


def _name_or_error(*args: object) -> str | None:
    try:
        return remote_namespace_name(*args)  # type: ignore[arg-type]
    except ValueError as error:
        assert str(error), "a refusal always says why"
        return None


@EXAMPLES
@given(labels, strategies, cluster_ids, st.one_of(st.none(), labels, st.text(max_size=80)))
def test_names_are_valid_dns_labels_or_refused(
    namespace: str, strategy: NamespaceMappingStrategy, cluster_id: str, selected: str | None
) -> None:
    name = _name_or_error(namespace, strategy, cluster_id, selected)
    if name is not None:
        assert len(name) <= 63
        assert DNS_LABEL.match(name), name


@EXAMPLES
@given(labels, strategies, cluster_ids, st.one_of(st.none(), labels))
def test_names_are_deterministic(
    namespace: str, strategy: NamespaceMappingStrategy, cluster_id: str, selected: str | None
) -> None:
    first = _name_or_error(namespace, strategy, cluster_id, selected)
    assert _name_or_error(namespace, strategy, cluster_id, selected) == first


@EXAMPLES
@given(labels, labels)
def test_default_name_of_valid_inputs_is_never_refused(namespace: str, cluster_id: str) -> None:
    name = remote_namespace_name(namespace, NamespaceMappingStrategy.DEFAULT_NAME, cluster_id)
    full = f"{namespace}-{cluster_id}"
    assert name == full if len(full) <= 63 else name.startswith(full[:40])


def test_long_names_sharing_a_head_stay_distinct() -> None:
    head = "team-" + "x" * 55
    first = remote_namespace_name(head + "-a", NamespaceMappingStrategy.DEFAULT_NAME, "home")
    second = remote_namespace_name(head + "-b", NamespaceMappingStrategy.DEFAULT_NAME, "home")
    assert first != second
    assert len(first) == len(second) == 63


@pytest.mark.parametrize("selected", ["Shop", "shop.eu", "-shop", ""])
def test_an_invalid_selected_name_is_refused_not_rewritten(selected: str) -> None:
    with pytest.raises(ValueError):
        remote_namespace_name("shop", NamespaceMappingStrategy.SELECTED_NAME, "home", selected)
