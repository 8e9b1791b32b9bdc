// The upstream material lwsflow's tests and tools read (CRDs, example manifests, schemas), pinned by
// this module's go.sum and fetched from the Go module proxy by scripts/fetch-upstream into
// ${LWSFLOW_CACHE:-~/.cache/lwsflow}/upstream. Nothing is built from it: it only names versions.
// sigs.k8s.io/lws is the version the reference cluster runs (scripts/refcluster/cluster/go.mod), and so
// are k8s.io/api and k8s.io/apimachinery (their generated.proto files: scripts/pack_protobuf.py).
// sigs.k8s.io/kueue: the CRDs of its quota objects (ClusterQueue, LocalQueue, ResourceFlavor) that the
// quota tests apply to the embedded cluster (tests/rollout/test_quota_kueue.py).
module lwsflow.local/upstream

go 1.19

require (
	github.com/argoproj/argo-workflows/v3 v3.7.4
	k8s.io/api v0.36.3
	k8s.io/apimachinery v0.36.3
	sigs.k8s.io/gateway-api v1.6.1
	sigs.k8s.io/gateway-api-inference-extension v1.6.0
	sigs.k8s.io/kueue v0.17.0
	sigs.k8s.io/lws v0.9.0
)
