"""The home controller: the home cluster's one Deployment that turns what it knows of providers
into resources (ForeignClusters from discovery and consent) and accepted ones into VirtualNodes.
"""
