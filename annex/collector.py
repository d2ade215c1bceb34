"""The garbage collector of a long-running component, set once everything is imported.

Nearly all of a component's garbage goes by reference counting; the cyclic collector's passes
only find it. With CPython's defaults (a young pass every 700 net container allocations) the
agent spent 2.6 % of its CPU in them at N = 10,000 (0.87 s, 0.46 s of it in full passes over
every module, class and schema imported at start). Frozen, those are never scanned again; a
young pass every 20,000 allocations does the same work in fewer wake-ups: 0.16 s
(docs/decisions/0008-garbage-collector-tuned.md)."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Net container allocations between two young passes (CPython's default: 700)."""


def tune() -> None:
    """Freeze what exists now (the imports) out of every pass, and make young passes rarer.
    Call it once, from a component's entry point: a test process must not freeze its heap."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
