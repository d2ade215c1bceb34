"""Two real control planes for the end-to-end tests (`pytest --control-plane=envtest`): etcd,
kube-apiserver, kube-controller-manager and kube-scheduler from KUBEBUILDER_ASSETS, with a
kubeadm-like PKI and stand-in worker nodes (kubesim's kubelet against the real API server)."""
