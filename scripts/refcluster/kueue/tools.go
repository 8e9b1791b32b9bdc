//go:build tools

// Package tools pins the upstream main package this module builds; there is no code of its own.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
