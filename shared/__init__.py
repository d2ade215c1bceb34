"""annex's vocabulary and rules: API models, well-known names and pure translation functions.

Nothing in this package performs I/O (import-linter enforces it); the components do the I/O
around it.
"""
