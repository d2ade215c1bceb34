"""Properties of the reflection policy (shared.reflection_policy); the rules are golden cases."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.reflection_policy import (
    ReflectionType,
    annotation_is_set,
    explicit_decision,
    should_reflect,
    should_reflect_endpointslice,
)
from shared.wellknown import ALLOW_REFLECTION_ANNOTATION, SKIP_REFLECTION_ANNOTATION

EXAMPLES = settings(max_examples=3000, deadline=None)

# An annotation is absent, or present with a value that counts ("", "true", anything) or not.
_annotation_value = st.one_of(
    st.none(), st.sampled_from(["", "true", "TRUE", "yes", "false", "False", "FALSE"])
)


@st.composite
def annotated(draw: st.DrawFn) -> dict[str, Any]:
    annotations = {"other": "x"}
    for key in (SKIP_REFLECTION_ANNOTATION, ALLOW_REFLECTION_ANNOTATION):
        value = draw(_annotation_value)
        if value is not None:
            annotations[key] = value
    return {"metadata": {"name": "o", "annotations": annotations}}


policies = st.sampled_from(list(ReflectionType))


@EXAMPLES
@given(annotated(), policies)
def test_the_policy_reads_the_annotations_as_liqo_does(obj: Any, policy: ReflectionType) -> None:
    skip = annotation_is_set(obj, SKIP_REFLECTION_ANNOTATION)
    allow = annotation_is_set(obj, ALLOW_REFLECTION_ANNOTATION)
    if skip:
        assert not should_reflect(obj, policy), "skip wins under every policy"
    elif policy is ReflectionType.DENY_LIST:
        assert should_reflect(obj, policy)
    else:
        assert should_reflect(obj, policy) == allow
    value = obj["metadata"]["annotations"].get(SKIP_REFLECTION_ANNOTATION)
    assert skip == (value is not None and value.lower() != "false")


@EXAMPLES
@given(annotated(), st.one_of(st.none(), annotated()), policies)
def test_an_endpointslice_follows_its_own_annotation_else_its_service(
    endpointslice: Any, service: Any, policy: ReflectionType
) -> None:
    decision = should_reflect_endpointslice(endpointslice, service, policy)
    own = explicit_decision(endpointslice)
    if own is not None:
        assert decision == own
    elif service is not None:
        assert decision == should_reflect(service, policy)
    else:
        assert decision == should_reflect(endpointslice, policy)


def test_the_policy_accepts_its_flag_spelling() -> None:
    unannotated = {"metadata": {"name": "o"}}
    assert ReflectionType("DenyList") is ReflectionType.DENY_LIST
    assert should_reflect(unannotated, ReflectionType("DenyList"))
    assert not should_reflect(unannotated, ReflectionType("AllowList"))
