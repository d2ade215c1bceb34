"""The virtual node's kubelet API (logs, exec, attach, port-forward, stats) served from the twin
pods through the remote API server; see `server`."""
