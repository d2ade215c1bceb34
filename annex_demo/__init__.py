"""The local demo: annex on two simulated clusters, told in under a minute (``annex-demo``)."""
