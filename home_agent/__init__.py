"""The home-cluster agent: a virtual kubelet showing one remote cluster as a Node."""
