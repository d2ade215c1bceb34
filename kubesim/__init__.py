"""Simulated Kubernetes clusters that behave like the real kube-apiserver wherever
controllers could notice."""
