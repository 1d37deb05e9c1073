package config

import (
	"slices"
	"strings"

	"github.com/fencepost/fencepost/proxy/cluster"
)

// The sidecar's clusters key: several clusters sharing the task ids
// (README "More than one cluster"), in ctl's --clusters syntax, parsed by
// proxy/cluster's one parser.

// Shards parses Clusters (nil when it is empty): the one parser of the
// syntax, proxy/cluster's, shared with ctl's --clusters.
func (s *Sidecar) Shards() ([]cluster.ShardSpec, error) {
	if strings.TrimSpace(s.Clusters) == "" {
		return nil, nil
	}
	return cluster.ParseShardSpecs(s.Clusters)
}

// Endpoints lists every cluster endpoint the sidecar talks to: cluster's,
// or those of every entry of clusters.
func (s *Sidecar) Endpoints() []string {
	out := slices.Clone(s.Cluster)
	shards, _ := s.Shards()
	for _, sh := range shards {
		out = append(out, sh.Endpoints...)
	}
	return out
}

// checkClusters checks cluster against clusters (exactly one is set, and
// clusters parses) and returns clusters' entries.
func (s *Sidecar) checkClusters(p *problems) []cluster.ShardSpec {
	shards, err := s.Shards()
	switch {
	case err != nil:
		p.invalid("clusters", "%s", strings.TrimPrefix(err.Error(), cluster.ErrShards.Error()+": "))
	case s.Clusters != "" && len(s.Cluster) > 0:
		p.invalid("clusters", "set either cluster (one cluster) or clusters (several), not both")
	case s.Clusters == "" && len(s.Cluster) == 0:
		p.invalid("cluster", "must list at least one cluster endpoint (host:port), or set clusters")
	}
	return shards
}
