//go:build kubeproxy

package main

import proxy "k8s.io/kubernetes/cmd/kube-proxy/app"

// built only with -tags kubeproxy (build.sh always sets it)
func init() { commands["kube-proxy"] = proxy.NewProxyCommand }
