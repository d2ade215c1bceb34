"""Simulated Kubernetes clusters that behave like the real kube-apiserver where controllers notice."""
