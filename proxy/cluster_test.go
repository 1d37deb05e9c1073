package proxy

import "github.com/fencepost/fencepost/proxy/cluster"

// The real client satisfies both interfaces the sidecar declares.
var (
	_ Cluster = (*cluster.Client)(nil)
	_ Journal = (*cluster.Client)(nil)
)
