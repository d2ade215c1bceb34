"""kubesim.selectors: label and field selectors as apimachinery parses and matches them."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    escape_field_value,
    field_value,
    label_selector_from_object,
    label_selector_from_object_strict,
    parse_field_selector,
    parse_label_selector,
)

NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# --- label selector strings ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, rendered",
    [
        ("", ""),
        ("   ", ""),
        ("a=b", "a=b"),
        ("a==b", "a==b"),
        ("a!=b", "a!=b"),
        ("a", "a"),
        ("!a", "!a"),
        (" ! a ", "!a"),
        ("a in (x, y)", "a in (x,y)"),
        ("a in (y,x,x)", "a in (x,y)"),
        ("a notin (x)", "a notin (x)"),
        ("a in ()", "a in ()"),
        ("a in (,x)", "a in (,x)"),
        ("a in (x,)", "a in (,x)"),
        ("a in (in,notin)", "a in (in,notin)"),
        ("a=", "a="),
        ("a=,b", "a=,b"),
        ("z=1,a=2", "a=2,z=1"),
        ("x>1", "x>1"),
        ("x<1", "x<1"),
        ("\ta = b ,\n c != d ", "a=b,c!=d"),
        ("example.com/app=web", "example.com/app=web"),
        ("a=b,a=c", "a=b,a=c"),
        ("x= ,z= ", "x=,z="),
        ("x>1,z<5", "x>1,z<5"),
        ("x in (a),y notin (b,c),!z", "x in (a),y notin (b,c),!z"),
        ("in=notin", "in=notin"),
    ],
)
def test_valid_label_selectors_parse_and_render_like_the_real_parser(
    text: str, rendered: str
) -> None:
    assert str(parse_label_selector(text)) == rendered


@pytest.mark.parametrize(
    "text, message",
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        (
            "a in x",
            "unable to parse requirement: found 'x' expected: '('",
        ),
        (
            "a in (x y)",
            "unable to parse requirement: found 'y', expected: ',' or ')'",
        ),
        (
            "a in (x",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "a in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
        ),
        (
            "a (b)",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
        ("a!b", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("x in (a),", "found '', expected: identifier after ','"),
        (
            "x=a||y=b",
            'unable to parse requirement: values[0][x]: Invalid value: "a||y": ' + LABEL_VALUE_MSG,
        ),
        (
            "x>1.5",
            'unable to parse requirement: values[0]: Invalid value: "1.5": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "a-=b",
            'unable to parse requirement: <nil>: Invalid value: "a-": ' + NAME_PART_MSG,
        ),
        (
            "a=b-",
            'unable to parse requirement: values[0][a]: Invalid value: "b-": ' + LABEL_VALUE_MSG,
        ),
        (
            "a in (x-,y)",
            'unable to parse requirement: values[0][a]: Invalid value: "x-": ' + LABEL_VALUE_MSG,
        ),
        (
            "x>a",
            'unable to parse requirement: values[0]: Invalid value: "a": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_invalid_label_selectors_give_the_real_parsers_message(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as error:
        parse_label_selector(text)
    assert str(error.value) == message


LABELS = {"app": "web", "tier": "frontend", "size": "10"}


@pytest.mark.parametrize(
    "text, matches",
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),  # != and notin match objects without the label
        ("missing notin (x)", True),
        ("missing in (x)", False),
        ("missing=", False),  # an empty value still requires the label
        ("app in (db,web)", True),
        ("app notin (db,web)", False),
        ("app", True),
        ("!app", False),
        ("missing", False),
        ("!missing", True),
        ("app=web,tier=backend", False),
        ("app=web,tier=frontend", True),
        ("size>9", True),
        ("size>10", False),
        ("size<11", True),
        ("app>1", False),  # not an integer: no match
    ],
)
def test_label_selector_matching(text: str, matches: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is matches


def test_empty_selector_selects_everything_including_objects_without_labels() -> None:
    selector = parse_label_selector("")
    assert selector.empty
    assert selector.matches(None) and selector.matches({})
    assert not parse_label_selector("a").empty
    assert parse_label_selector("!a").matches(None)


# --- metav1.LabelSelector objects ------------------------------------------------------------


@pytest.mark.parametrize(
    "selector, labels, matches",
    [
        (None, {}, True),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            {"app": "web"},
            True,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": ""}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
            },
            {"app": "web", "tier": "c"},
            False,
        ),
    ],
)
def test_label_selector_objects(
    selector: dict[str, Any] | None, labels: dict[str, str], matches: bool
) -> None:
    assert label_selector_from_object(selector).matches(labels) is matches


def test_a_missing_selector_can_select_nothing_as_label_selector_as_selector_nil_does() -> None:
    nothing = label_selector_from_object_strict(None)
    assert not nothing.matches({}) and not nothing.empty
    assert label_selector_from_object_strict({}).matches({"a": "b"})


@pytest.mark.parametrize(
    "selector, message",
    [
        (
            {"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]},
            '"Equals" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]},
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't "
            "be empty",
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does '
            "not exist",
        ),
        (
            {"matchLabels": {"bad key": "x"}},
            'key: Invalid value: "bad key": ' + NAME_PART_MSG,
        ),
        (
            {"matchLabels": {"app": "bad value"}},
            'values[0][app]: Invalid value: "bad value": ' + LABEL_VALUE_MSG,
        ),
        (
            {"matchLabels": {"bad key": "bad value"}},
            '[key: Invalid value: "bad key": '
            + NAME_PART_MSG
            + ', values[0][bad key]: Invalid value: "bad value": '
            + LABEL_VALUE_MSG
            + "]",
        ),
    ],
)
def test_invalid_label_selector_objects(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as error:
        label_selector_from_object(selector)
    assert str(error.value) == message


# --- field selectors -------------------------------------------------------------------------

POD_FIELDS = ["spec.nodeName", "status.phase", "spec.restartPolicy", "spec.hostNetwork"]
SCHEDULED = {
    "metadata": {"name": "p1", "namespace": "ns"},
    "spec": {"nodeName": "node-1", "hostNetwork": True},
    "status": {"phase": "Running"},
}
UNSCHEDULED = {"metadata": {"name": "p2", "namespace": "ns"}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    "text, scheduled, unscheduled",
    [
        ("", True, True),
        ("metadata.name=p1", True, False),
        ("metadata.name==p1", True, False),
        ("metadata.name!=p1", False, True),
        ("metadata.namespace=ns", True, True),
        ("spec.nodeName=node-1", True, False),
        ("spec.nodeName=", False, True),  # unscheduled pods: the missing field is ""
        ("spec.nodeName!=", True, False),
        ("status.phase=Running,spec.nodeName=node-1", True, False),
        ("status.phase!=Running,status.phase!=Pending", False, True),
        ("spec.hostNetwork=true", True, False),
        ("spec.hostNetwork=false", False, True),
    ],
)
def test_field_selector_matching(text: str, scheduled: bool, unscheduled: bool) -> None:
    selector = parse_field_selector(text, POD_FIELDS)
    assert selector.matches(SCHEDULED) is scheduled
    assert selector.matches(UNSCHEDULED) is unscheduled


def test_event_field_selectors_read_nested_fields() -> None:
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p1", "uid": "u1"},
        "source": {"component": "kubelet"},
        "type": "Warning",
    }
    supported = ["involvedObject.kind", "involvedObject.name", "source", "type"]
    selector = parse_field_selector("involvedObject.kind=Pod,involvedObject.name=p1", supported)
    assert selector.matches(event)
    assert parse_field_selector("source=kubelet,type=Warning", supported).matches(event)
    assert not parse_field_selector("involvedObject.kind=Node", supported).matches(event)


@pytest.mark.parametrize(
    "text, value",
    [
        ("metadata.name=a\\,b", "a,b"),
        ("metadata.name=a\\=b", "a=b"),
        ("metadata.name=a\\\\b", "a\\b"),
    ],
)
def test_field_selector_values_unescape(text: str, value: str) -> None:
    selector = parse_field_selector(text, [])
    assert selector.requires_exact_match("metadata.name") == value
    assert parse_field_selector(str(selector), []) == selector


@pytest.mark.parametrize(
    "text, message",
    [
        ("spec.foo=x", "field label not supported: spec.foo"),
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        (
            "metadata.name=a,b",
            "invalid selector: 'metadata.name=a,b'; can't understand 'b'",
        ),
        ("metadata.name=a\\xb", "invalid field selector: invalid escape sequence: \\x"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_invalid_field_selectors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as error:
        parse_field_selector(text, POD_FIELDS)
    assert str(error.value) == message


def test_field_selector_operators_split_at_the_first_operator() -> None:
    selector = parse_field_selector("metadata.name!=\\=x", [])
    assert selector.requires_exact_match("metadata.name") is None
    assert selector.matches({"metadata": {"name": "y"}})
    assert not selector.matches({"metadata": {"name": "=x"}})
    with pytest.raises(SelectorError, match="unescaped character in value: 61"):
        parse_field_selector("metadata.name!==x", [])


def test_empty_field_selector() -> None:
    assert parse_field_selector("", []).empty
    assert parse_field_selector(",,", []) == FieldSelector()


@pytest.mark.parametrize(
    "obj, label, value",
    [
        ({"spec": {"replicas": 3}}, "spec.replicas", "3"),
        ({"spec": {"unschedulable": False}}, "spec.unschedulable", "false"),
        ({"spec": None}, "spec.nodeName", ""),
        ({"spec": "x"}, "spec.nodeName", ""),
        ({}, "status.phase", ""),
        ({"spec": {}}, "spec.unschedulable", "false"),
        ({"spec": {"unschedulable": True}}, "spec.unschedulable", "true"),
        ({}, "spec.hostNetwork", "false"),
        ({"status": {}}, "status.replicas", "0"),
        ({"source": {"component": "kubelet", "host": "n1"}}, "source", "kubelet"),
    ],
)
def test_field_values(obj: dict[str, Any], label: str, value: str) -> None:
    assert field_value(obj, label) == value


# --- properties ------------------------------------------------------------------------------

_name = st.from_regex(r"[a-z0-9]([-a-z0-9._]{0,10}[a-z0-9])?", fullmatch=True)
_key = st.one_of(
    _name,
    st.builds(
        lambda p, n: f"{p}.io/{n}", _name.filter(lambda s: "." not in s and "_" not in s), _name
    ),
)
_value = st.one_of(st.just(""), _name)
_requirement = st.one_of(
    st.builds(lambda k, op, v: f"{k}{op}{v}", _key, st.sampled_from(["=", "==", "!="]), _value),
    st.builds(
        lambda k, op, vs: f"{k} {op} ({','.join(vs)})",
        _key,
        st.sampled_from(["in", "notin"]),
        st.lists(_value, min_size=1, max_size=4),
    ),
    _key,
    st.builds(lambda k: "!" + k, _key),
)


@given(st.lists(_requirement, max_size=5))
def test_parse_of_render_round_trips(requirements: list[str]) -> None:
    selector = parse_label_selector(",".join(requirements))
    assert parse_label_selector(str(selector)) == selector


@given(st.dictionaries(_key, _value, max_size=5), st.dictionaries(_key, _value, max_size=5))
def test_a_match_labels_selector_matches_exactly_the_supersets(
    wanted: dict[str, str], labels: dict[str, str]
) -> None:
    selector = label_selector_from_object({"matchLabels": wanted})
    assert selector.matches(labels) is (wanted.items() <= labels.items())


def test_selectors_are_hashable_values() -> None:
    assert {parse_label_selector("a=b"), parse_label_selector(" a = b ")} == {
        LabelSelector(parse_label_selector("a=b").requirements)
    }


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["metadata.name", "spec.nodeName", "status.phase"]),
            st.text("ab,=\\! ", max_size=5),
            st.booleans(),
        ),
        max_size=4,
    )
)
def test_field_selectors_render_escaped_and_parse_back(terms: list[tuple[str, str, bool]]) -> None:
    text = ",".join(
        f"{field}{'=' if equal else '!='}{escape_field_value(value)}"
        for field, value, equal in terms
    )
    selector = parse_field_selector(text, POD_FIELDS)
    assert sorted((t.field, t.value, t.equal) for t in selector.terms) == sorted(terms)
    assert parse_field_selector(str(selector), POD_FIELDS) == selector
