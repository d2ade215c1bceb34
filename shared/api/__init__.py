"""Pydantic models of annex's custom resources (DESIGN.md section 3).

One module per kind; each exposes its `ResourceDefinition` (group, version, plural, ...) and its
top-level model. `shared.api.registry.RESOURCE_MODELS` lists every kind.
"""
