"""annex's vocabulary and rules: API models, well-known names and pure translation functions.

Nothing in this package performs I/O (import-linter enforces it); the components do the I/O
around it.

- api/                  the models of annex's custom resources, and the table of the Kubernetes
                        built-in resources annex uses (api/builtin.py)
- forge/                pure translation: what the components write, from what they read, and
                        the plans of the pod's and the ShadowPod's decisions
- wellknown.py          every well-known label, annotation, taint, finalizer and API name
- agent_restriction.py  the agents' NodeRestriction (the home controller's webhook)
- admission.py          the AdmissionReview answer of every webhook
- offer.py, quota.py    what a provider offers a consumer; quota arithmetic for ShadowPods
- tenancy.py            a consumer's tenant namespace on the provider
- pod_policy.py, service_policy.py  what a provider lets a consumer run and expose
- pod_security.py       the Pod Security Standards levels, worded as PodSecurity admission does
- reflection_policy.py  which home objects are reflected
- ownership.py          the origin/destination pair on every object annex makes remotely
- node_selector.py      NodeSelector matching (NamespaceOffloading.clusterSelector)
- home_apiserver.py     where offloaded pods reach the home API server by default
- ipremap.py            prefix-preserving IP remapping between two CIDRs
- dnssd.py              the DNS-SD records a provider is announced with
- crdgen.py             the CustomResourceDefinitions, generated from the models
- quantity.py, rfc3339.py  resource quantities and timestamps as the Kubernetes API writes them
"""
