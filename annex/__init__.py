"""Runtime pieces both components share (Kubernetes client and kopf login from a kubeconfig,
logging) and, later, the `annexctl` CLI. Rules stay in `shared/`; this package does I/O."""
