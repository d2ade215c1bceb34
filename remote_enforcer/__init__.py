"""The provider-side operator: ShadowPods become pods that stay alive.

`python -m remote_enforcer --kubeconfig PATH --cluster-id ID` (no --kubeconfig: in-cluster).
Built as the home agent is: its watches (pods, ShadowPods, namespaces, nodes, Quotas, claims,
NamespaceMaps) are declared in an informer registry (`annex.informers`) whose mirrors and
routes feed controllers on the shared runtime (`annex.controller`); each hands an object to
the module that owns its rule:

- routes.py      what is watched, what each mirror keeps, where each change goes
- operator.py    the wiring: watches, controllers, webhooks, probes, the leader election
- shadowpods.py  ShadowPod → owned pod, recreated when deleted, never once terminal; pod status
                 copied into the ShadowPod status: gathers the inputs, carries out the plan
                 (the decision: shared/forge/shadowpod_plan.py; the pod it asks for:
                 shared/forge/enforcement.py)
- ephemeral.py   the ephemeral containers a ShadowPod lists, added to its pod through the pod's
                 ephemeralcontainers subresource (kubectl debug)
- admission.py   the validating webhook (HTTPS, AdmissionReview v1) at /validate/shadowpods
                 (rules: shared/forge/tenancy.py, shared/quota.py)
- leadership.py  which replica decides a quota (the leader), and the others forwarding to it
- ledger.py      per-consumer usage from the ShadowPods and claims watched, for the quota
- namespaces.py  NamespaceMap → twin namespaces with the consumer's Role and RoleBinding
                 (rules: shared/forge/tenancy.py)
- offer.py       one ResourceOffer per tenant namespace (rules: shared/offer.py)
- rbac.py        the consumer's twin-namespace rules and the enforcer's own ClusterRole rules
- node_failure.py  pods Terminating on a NotReady node force-deleted, so that their
                 ShadowPods get new ones
- claim_admission.py, object_admission.py  the validating webhooks for reflected claims and for
                 the Services, EndpointSlices and Ingresses of twin namespaces
- webhooks.py    every webhook's path and the requests it reviews, as the API server calls them
- certs.py       the webhook's TLS (given files, or a self-signed development CA)
- consumers.py   which consumer a twin namespace belongs to, from namespaces and Quotas
- quota_status.py  Quota.status.used, from the ledger
- announce.py    the provider's mDNS announcement
- metrics.py, settings.py  /metrics; the command line

Tenancy contract (what the chart creates per consumer, what the enforcer reads):
- tenant namespace labels `liqo.io/tenant-namespace=true`, `liqo.io/remote-cluster-id=<consumer>`;
  NamespaceMaps are honoured and the ResourceOffer (named `offer`) is published only there;
- the consumer identity: annotation `liqo.io/consumer-identity` on the tenant namespace,
  `serviceaccount:<name>` (in the tenant namespace) or `user:<name>`; default: the service
  account `consumer`. The enforcer binds it in every twin namespace it creates for the consumer;
- twin namespaces carry `offloading.liqo.io/origin=<consumer>` and
  `offloading.liqo.io/destination=<provider>`; the webhook reads the origin label to know which
  consumer a namespace belongs to;
- Quotas (any namespace) are matched by `spec.consumerClusterId`; no Quota: nothing enforced.
"""
