"""Pure translation ("forge") functions: what the components write, computed from what they
read, one module per kind (pod.py, service.py, node.py, ...) or per concern of a kind (the
pod's tokens, status and ShadowPod patch beside pod.py); and the decisions made whole, as plans
of writes from their inputs (pod_plan.py for a home pod, shadowpod_plan.py for a ShadowPod,
namespace_offloading.py). No I/O here; the home agent and the remote enforcer do the fetching
and writing around these functions."""
