"""Pydantic models of annex's custom resources.

One module per kind; each exposes its `ResourceDefinition` (group, version, plural, ...) and its
top-level model. `shared.api.registry.RESOURCE_MODELS` lists every kind. The Kubernetes
built-in resources annex uses are named in one table, `shared.api.builtin`.
"""
