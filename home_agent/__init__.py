"""The home-cluster agent: a virtual kubelet showing one remote cluster as a Node.

- __main__.py, runner.py  the entry point; wiring and supervision of everything on one loop
- assembly.py             the components built from the agent's state, each with what it uses
- config.py               the command line, parsed once into a frozen record
- agent.py                the shared state: both clusters' clients, mirrors, the work queue
- twins.py                the twin namespaces, as this consumer's NamespaceMap says them
- offloaded_namespaces.py the namespaces offloaded here whose objects are watched, and listed
- watches.py              the watches (home, home pods, home offloaded namespaces, remote
                          tenant, remote twins)
- routes.py               where every watch event goes: mirrors, keyers, controllers
- remote_watch.py         the remote watches' lifecycle
- pod.py                  pod offloading: a home pod bound to the virtual node ⇄ its ShadowPod
- namespace_offloading.py NamespaceOffloading → this consumer's NamespaceMap entry → status
- namespace_map.py        this consumer's NamespaceMap in the remote tenant namespace
- virtual_node.py         the virtual Node and the VirtualNode's status
- heartbeat.py            the node Lease heartbeat and the remote API server health checks
- reflection/             resource reflection, one module per kind
- kubelet/                the virtual node's kubelet API (logs, exec, attach, port-forward, stats)
- webhook.py              the mutating admission webhook for home pods
- credentials.py          the remote credentials: followed in their Secret, and renewed
- apiserver_address.py    where offloaded pods reach the home API server
- kubelet_service.py      the offloaded pods' hostIP, the same whichever replica leads
- synced_cache.py         the optional Redis cache of the pods last found converged
- metrics.py              /healthz, /readyz and /metrics
- rbac.py                 what the agent does on the home cluster, as RBAC rules
"""
