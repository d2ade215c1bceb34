"""Pydantic models of annex's custom resources (DESIGN.md section 3)."""
