package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// ctlClustersEnv names the variable read for --clusters.
const ctlClustersEnv = config.EnvClusters

// ctlAcrossShards are the verbs that, with --clusters, ask every cluster
// and merge the answers; verbs whose first argument is a task ID go to the
// task's cluster; every other verb concerns one cluster and needs
// --cluster.
var ctlAcrossShards = map[string]bool{"tasks list": true, "leases list": true}

// shardsFor builds the router of --clusters with newClient.
func shardsFor(spec string, newClient func([]string) (*cluster.Client, error)) (*cluster.Shards, error) {
	parsed, err := cluster.ParseShardSpecs(spec)
	if err != nil {
		return nil, fmt.Errorf("--clusters: %v", strings.TrimPrefix(err.Error(), cluster.ErrShards.Error()+": "))
	}
	var shards []cluster.Shard
	for _, p := range parsed {
		c, err := newClient(p.Endpoints)
		if err != nil {
			return nil, fmt.Errorf("--clusters: %s: %v", p.Name, err)
		}
		shards = append(shards, cluster.Shard{Name: p.Name, Client: c})
	}
	s, err := cluster.NewShards(shards)
	if err != nil {
		for _, sh := range shards {
			sh.Client.Close()
		}
		return nil, fmt.Errorf("--clusters: %v", strings.TrimPrefix(err.Error(), cluster.ErrShards.Error()+": "))
	}
	return s, nil
}

// tasksAcross lists tasks in every cluster and merges them into one page
// in id order. Each cluster returns its tasks after f.After in id order;
// the page ends at the smallest of their Next marks, below which every
// cluster's tasks are all present, so paging with the merged Next neither
// skips nor repeats a task.
func tasksAcross(ctx context.Context, s *cluster.Shards, f lease.TaskFilter, stale bool) (api.TaskList, error) {
	var all []*lease.Task
	next := ""
	for _, sh := range s.All() {
		list, err := sh.Client.Tasks(ctx, f, stale)
		if err != nil {
			return api.TaskList{}, fmt.Errorf("cluster %s: %w", sh.Name, err)
		}
		all = append(all, list.Tasks...)
		if list.Next != "" && (next == "" || list.Next < next) {
			next = list.Next
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	if next != "" {
		n := sort.Search(len(all), func(i int) bool { return all[i].ID > next })
		all = all[:n]
	}
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
		next = all[len(all)-1].ID
	}
	return api.TaskList{Tasks: all, Next: next}, nil
}

// leasesAcross lists live leases in every cluster, by task id.
func leasesAcross(ctx context.Context, s *cluster.Shards, stale bool) (api.LeaseList, error) {
	var all []lease.Lease
	for _, sh := range s.All() {
		list, err := sh.Client.Leases(ctx, stale)
		if err != nil {
			return api.LeaseList{}, fmt.Errorf("cluster %s: %w", sh.Name, err)
		}
		all = append(all, list.Leases...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].TaskID < all[j].TaskID })
	return api.LeaseList{Leases: all}, nil
}
