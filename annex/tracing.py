"""Optional OpenTelemetry tracing: a span per reconcile, per API request and per admission
review, exported over OTLP/HTTP. Off unless a component is given `--otlp-endpoint` (or
OTEL_EXPORTER_OTLP_ENDPOINT); off, nothing of OpenTelemetry is imported and the hot paths are
the untraced functions themselves: what is traced is decided once, when a controller, client or
webhook is built (`traced_*` hand back the function unchanged), never per call.

A pod's path crosses components: the agent writes its reconcile's W3C traceparent on the
ShadowPod it creates or updates (`TRACEPARENT_ANNOTATION`), and the enforcer's reconcile of that
ShadowPod continues the trace. The annotation is the consumer's: it is only ever a parent span
context, and only in the strict W3C form (`parse_traceparent`)."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from shared.wellknown import TRACEPARENT_ANNOTATION

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

__all__ = ["TRACEPARENT_ANNOTATION", "enable", "enabled", "install", "parse_traceparent"]

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")

_tracer: Tracer | None = None

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def add_endpoint_flag(add: Callable[..., Any]) -> None:
    """Every component's `--otlp-endpoint` (its `add_argument`)."""
    add("--otlp-endpoint", default="", metavar="URL",
        help=f"export traces over OTLP/HTTP to this collector (its base URL; default: "
             f"{ENDPOINT_ENV}, else no tracing); needs the tracing extra")


def enabled() -> bool:
    return _tracer is not None


def install(provider: TracerProvider | None) -> None:
    """Trace with `provider` from now on (None: stop). What is built afterwards is traced."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("annex")


def enable(endpoint: str | None, service: str) -> bool:
    """Export spans to the OTLP/HTTP collector at `endpoint` (its base URL: spans go to
    /v1/traces) or OTEL_EXPORTER_OTLP_ENDPOINT's; nothing when neither is set. Needs the
    `tracing` extra."""
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or ""
    if not endpoint:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise SystemExit(f"tracing to {endpoint} needs the tracing extra "
                         f"(pip install 'kube-annex[tracing]'): {error}") from error
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    install(provider)
    return True


# --- propagation ---------------------------------------------------------------------------------


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span; None when there is none."""
    from opentelemetry import trace
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def with_traceparent(body: dict[str, Any]) -> dict[str, Any]:
    """`body` (an object or a merge patch) carrying the current span's traceparent as an
    annotation, when tracing."""
    if _tracer is not None and (traceparent := current_traceparent()) is not None:
        body.setdefault("metadata", {}).setdefault("annotations", {})[
            TRACEPARENT_ANNOTATION] = traceparent
    return body


def parse_traceparent(value: object) -> tuple[int, int, int] | None:
    """(trace id, span id, sampled flag) of a strict W3C traceparent (version 00, lower-case
    hex, neither id all zeros); None for anything else."""
    if not isinstance(value, str) or len(value) != 55:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, span_id = int(match[1], 16), int(match[2], 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, int(match[3], 16) & 0x01


def parent_context(value: object) -> Context | None:
    """The context whose remote parent `value` (an untrusted traceparent) names; None unless it
    is well-formed. Nothing else of it is used (no tracestate, no baggage)."""
    parsed = parse_traceparent(value)
    if parsed is None:
        return None
    from opentelemetry import trace
    trace_id, span_id, sampled = parsed
    parent = trace.SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                               trace_flags=trace.TraceFlags(sampled))
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


# --- spans ---------------------------------------------------------------------------------------


def _object_attributes(controller: str, namespace: str | None, name: str | None,
                       cluster: str | None = None) -> dict[str, str]:
    attributes = {"annex.controller": controller}
    if namespace:
        attributes["k8s.namespace.name"] = namespace
    if name:
        attributes["annex.object.name"] = name
    if cluster:
        attributes["annex.cluster"] = cluster
    return attributes


def traced_reconcile(controller: str, reconcile: Callable[[K], Awaitable[R]],
                     describe: Callable[[K], tuple[str | None, str | None]],
                     cluster: Callable[[K], str | None],
                     parent: Callable[[K], object] | None = None
                     ) -> Callable[[K], Awaitable[R]]:
    """`reconcile`, each call in a span naming the key's object (`parent(key)`: an untrusted
    traceparent it continues, when well-formed); `reconcile` itself when not tracing."""
    tracer = _tracer
    if tracer is None:
        return reconcile

    async def traced(key: K) -> R:
        context = parent_context(parent(key)) if parent is not None else None
        with tracer.start_as_current_span(
                f"reconcile {controller}", context=context,
                attributes=_object_attributes(controller, *describe(key), cluster(key))) as span:
            result = await reconcile(key)
            outcome = getattr(result, "outcome", None)
            if isinstance(outcome, str):
                span.set_attribute("annex.outcome", outcome)
            return result
    return traced


def traced_request(request: F, host: Callable[[], str]) -> F:
    """A ClusterApi's `request`, each call in a client span (method, path, server, status);
    `request` itself when not tracing."""
    tracer = _tracer
    if tracer is None:
        return request
    from opentelemetry.trace import SpanKind

    async def traced(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(method, kind=SpanKind.CLIENT, attributes={
                "http.request.method": method, "url.path": path}) as span:
            try:
                return await request(method, path, *args, **kwargs)
            except Exception as error:
                status = getattr(error, "status", None)
                if isinstance(status, int):
                    span.set_attribute("http.response.status_code", status)
                raise
            finally:
                span.set_attribute("server.address", host())
    return cast(F, traced)


def traced_review(webhook: str, review: F) -> F:
    """An admission webhook's `review`, each call in a span naming the reviewed object;
    `review` itself when not tracing."""
    tracer = _tracer
    if tracer is None:
        return review

    async def traced(request: Mapping[str, Any]) -> Any:
        kind = request.get("kind") or {}
        attributes = _object_attributes(webhook, request.get("namespace"), request.get("name"))
        attributes["annex.admission.operation"] = str(request.get("operation", ""))
        attributes["annex.admission.kind"] = str(kind.get("kind", "")) if isinstance(
            kind, dict) else ""
        with tracer.start_as_current_span(f"admit {webhook}", attributes=attributes):
            return await review(request)
    return cast(F, traced)


@contextmanager
def spans_in_memory() -> Iterator[Any]:
    """Trace into memory meanwhile (the SDK's InMemorySpanExporter, which this yields): what
    tests read spans from."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider)
    try:
        yield exporter
    finally:
        install(None)
        provider.shutdown()
