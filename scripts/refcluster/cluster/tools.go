//go:build tools

// Package tools pins the upstream main packages this module builds; there is no code of its own.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/lws/cmd"
)
