"""The Kubernetes release kubesim imitates, and what its /version answers."""

IMITATED_RELEASE = (1, 33)
"""The release whose API behaviour kubesim imitates (tests gate newer behaviour on it)."""
VERSION = {
    "major": "1", "minor": "31", "gitVersion": "v1.31.0-kubesim", "gitCommit": "kubesim",
    "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z", "goVersion": "go1.22.5",
    "compiler": "gc", "platform": "linux/amd64",
}
"""/version says v1.31: kubectl 1.32 sends protobuf to servers that say 1.33, and kubesim reads
JSON only."""
