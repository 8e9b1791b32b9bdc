//go:build tools

// Package tools pins the upstream main package this module builds; there is no code of its own.
package tools

import _ "go.etcd.io/etcd/server/v3"
