"""Events are one resource served by two APIs: core v1 and events.k8s.io/v1 (renamed fields)."""

from __future__ import annotations

from tests.kubesim.rest import MERGE, call, stream


def core(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/events" + (f"/{name}" if name else "")


def new(namespace: str, name: str = "") -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{namespace}/events" + (f"/{name}" if name else "")


def test_an_event_written_through_events_k8s_io_reads_through_core(home, namespace) -> None:
    status, created = call(home, "POST", new(namespace), {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "example.com/c",
        "reportingInstance": "c-1", "action": "Test", "reason": "Tested", "type": "Normal",
        "note": "hello", "regarding": {"kind": "Pod", "name": "p", "namespace": namespace}})
    assert status == 201, created
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "hello"
    status, seen = call(home, "GET", core(namespace, "e"))
    assert status == 200
    assert (seen["apiVersion"], seen["message"]) == ("v1", "hello")
    assert seen["involvedObject"]["name"] == "p"
    assert seen["reportingComponent"] == "example.com/c"


def test_a_core_event_reads_through_events_k8s_io_with_its_selectors(home, namespace) -> None:
    call(home, "POST", core(namespace), {
        "metadata": {"name": "c"}, "reason": "Made", "message": "from core", "type": "Normal",
        "involvedObject": {"kind": "Pod", "name": "q", "namespace": namespace}})
    listed = call(home, "GET", new(namespace),
                  query={"fieldSelector": "regarding.name=q"})[1]["items"]
    assert [(e["metadata"]["name"], e["note"]) for e in listed] == [("c", "from core")]
    status, patched = call(home, "PATCH", core(namespace, "c"), {"message": "patched"},
                           content_type=MERGE)
    assert status == 200 and patched["message"] == "patched"
    assert call(home, "GET", new(namespace, "c"))[1]["note"] == "patched"
    events = list(stream(home, new(namespace), {"timeoutSeconds": "1",
                                                "fieldSelector": "metadata.name=c"}))
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["note"]) for e in events] == [
        ("ADDED", "events.k8s.io/v1", "patched")]


def _core_event(namespace: str, name: str, **fields: object) -> dict[str, object]:
    return {"metadata": {"name": name}, "reason": "Made", "message": "m", "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "q", "namespace": namespace}, **fields}


def test_an_event_about_an_object_of_another_namespace_is_invalid(home, namespace) -> None:
    elsewhere = {"kind": "Pod", "name": "q", "namespace": "elsewhere"}
    status, body = call(home, "POST", core(namespace), _core_event(
        namespace, "e", involvedObject=elsewhere))
    assert status == 422, body
    assert body["message"] == ('Event "e" is invalid: involvedObject.namespace: Invalid value: '
                               '"elsewhere": does not match event.namespace')
    assert call(home, "POST", core(namespace), _core_event(namespace, "e"))[0] == 201
    status, body = call(home, "PUT", core(namespace, "e"), _core_event(
        namespace, "e", involvedObject=elsewhere))
    assert status == 422, body  # updates pass the same validation


def test_a_core_event_with_an_event_time_needs_the_new_apis_reporting_fields(
        home, namespace) -> None:
    status, body = call(home, "POST", core(namespace), _core_event(
        namespace, "bare", eventTime="2024-01-01T00:00:00.000000Z"))
    assert status == 422, body
    for cause in ("reportingComponent: Required value", "reportingInstance: Required value",
                  "action: Required value"):
        assert cause in body["message"]
    status, body = call(home, "POST", core(namespace), _core_event(
        namespace, "full", eventTime="2024-01-01T00:00:00.000000Z",
        reportingComponent="example.com/c", reportingInstance="c-1", action="Test"))
    assert status == 201, body


def test_an_update_through_events_k8s_io_keeps_what_the_event_reports(home, namespace) -> None:
    """ValidateEventUpdate through events.k8s.io/v1: the note, reason, type and the rest are
    immutable there (the core API still changes them); labels may change."""
    call(home, "POST", core(namespace), _core_event(namespace, "c"))
    status, body = call(home, "PATCH", new(namespace, "c"), {"note": "changed", "type": "Warning"},
                        content_type=MERGE)
    assert (status, body["message"]) == (422, (
        'Event "c" is invalid: [message: Invalid value: "changed": field is immutable, '
        'type: Invalid value: "Warning": field is immutable]')), body
    status, body = call(home, "PATCH", new(namespace, "c"),
                        {"metadata": {"labels": {"seen": "yes"}}}, content_type=MERGE)
    assert (status, body["metadata"]["labels"], body["note"]) == (200, {"seen": "yes"}, "m")


def test_a_create_through_events_k8s_io_needs_an_event_time(home, namespace) -> None:
    status, body = call(home, "POST", new(namespace), {
        "metadata": {"name": "e"}, "reportingController": "example.com/c",
        "reportingInstance": "c-1", "action": "Test", "reason": "Tested", "type": "Normal",
        "deprecatedCount": 2,
        "regarding": {"kind": "Pod", "name": "p", "namespace": namespace}})
    assert (status, body["message"]) == (422, (
        'Event "e" is invalid: [eventTime: Required value, count: Invalid value: "": needs to be '
        'unset]')), body
