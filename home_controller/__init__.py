"""The home controller: the home cluster's one Deployment that turns what it knows of providers
into resources (ForeignClusters from discovery and consent) and accepted ones into VirtualNodes.

- __main__.py, runner.py  the entry point; the wiring of watches and controllers
- settings.py             the command line, parsed into one frozen `Settings`
- foreign_clusters.py     the ForeignCluster controller, one key per provider cluster id
- virtual_nodes.py        the VirtualNode controller: each VirtualNode gets its agent
- offers.py               what each consented provider offers (its ResourceOffers)
- sightings.py            what the discovery sources see now
- mdns.py, dns.py         discovery on the LAN (mDNS) and in ordinary DNS
- namespace_grants.py     the agents' rights in the namespaces offloaded to them, and nowhere else
- agent_admission.py      the agents' NodeRestriction: a validating admission webhook
- metrics.py              /metrics
- rbac.py                 what the controller does on the home cluster, as RBAC rules
"""
