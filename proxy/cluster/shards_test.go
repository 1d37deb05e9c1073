package cluster

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func testShards(t *testing.T, names ...string) *Shards {
	t.Helper()
	var shards []Shard
	for _, n := range names {
		c, err := New(Config{Endpoints: []string{"127.0.0.1:1"}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		shards = append(shards, Shard{Name: n, Client: c})
	}
	s, err := NewShards(shards)
	require.NoError(t, err)
	return s
}

// Rendezvous hashing: tasks spread evenly; adding a cluster moves only
// the tasks it now owns, removing one only its own.
func TestShardsMoveOnlyTheirShare(t *testing.T) {
	const n = 30000
	three := testShards(t, "east", "west", "north")
	four := testShards(t, "east", "west", "north", "south")
	two := testShards(t, "east", "north")
	count := map[string]int{}
	moved := 0
	for i := range n {
		id := fmt.Sprintf("run_%d", i)
		a, b := three.For(id).Name, four.For(id).Name
		count[a]++
		if a != b {
			moved++
			require.Equal(t, "south", b, "%s moved from %s to %s, not to the new cluster", id, a, b)
		}
		if c := two.For(id).Name; a != "west" {
			require.Equal(t, a, c, "%s moved off %s when west was removed", id, a)
		}
	}
	for name, c := range count {
		require.InDelta(t, n/3, c, n/3*0.05, "%s owns %d of %d", name, c, n)
	}
	require.InDelta(t, n/4, moved, n/4*0.05, "adding a fourth cluster moves about a quarter")
}

// The score is the deployment's contract between sidecars and ctl: these
// values must never change.
func TestShardScoreIsPinned(t *testing.T) {
	require.Equal(t, ShardScore("east", "run_1"), ShardScore("east", "run_1"))
	require.NotEqual(t, ShardScore("east", "run_1"), ShardScore("east", "run_2"))
	require.NotEqual(t, ShardScore("ab", "c"), ShardScore("a", "bc"), "the separator keeps name and id apart")
	got := map[string]uint64{"east/run_1": ShardScore("east", "run_1"), "west/job-42": ShardScore("west", "job-42")}
	require.Equal(t, map[string]uint64{"east/run_1": 8210648947099182747, "west/job-42": 1349469998106299964}, got)
}

func TestNewShardsRefusesBadLists(t *testing.T) {
	c, err := New(Config{Endpoints: []string{"127.0.0.1:1"}})
	require.NoError(t, err)
	defer c.Close()
	for _, bad := range [][]Shard{nil, {{Name: "", Client: c}}, {{Name: "a", Client: c}, {Name: "a", Client: c}}, {{Name: "a"}}} {
		_, err := NewShards(bad)
		require.ErrorIs(t, err, ErrShards)
	}
}

// Rank puts the owner first and, past it, the shard that owned the task
// before the owner was added: a task created before a cluster was added
// is found where it was by looking down the ranking.
func TestRankIsOwnerThenPreviousOwner(t *testing.T) {
	three := testShards(t, "east", "west", "north")
	names := []string{"east", "west", "north", "south"}
	four := testShards(t, names...)
	for i := range 2000 {
		id := fmt.Sprintf("run_%d", i)
		r := Rank(names, id)
		require.Len(t, r, 4)
		require.Equal(t, four.For(id).Name, r[0])
		require.Equal(t, r[0], four.Ranked(id)[0].Name)
		if r[0] == "south" {
			require.Equal(t, three.For(id).Name, r[1], "%s: the next in rank is the owner before south was added", id)
		}
	}
}

func TestParseShardSpecs(t *testing.T) {
	got, err := ParseShardSpecs(" east=a:1, b:2 ;west=c:3;")
	require.NoError(t, err)
	require.Equal(t, []ShardSpec{{Name: "east", Endpoints: []string{"a:1", "b:2"}}, {Name: "west", Endpoints: []string{"c:3"}}}, got)
	for spec, want := range map[string]string{
		"":                "no cluster given",
		"east":            `"east" is not NAME=ADDR[,ADDR...]`,
		"=a:1":            `"=a:1" is not NAME=ADDR[,ADDR...]`,
		"east=,":          `"east=," is not NAME=ADDR[,ADDR...]`,
		"east=a:1;east=b": `shard name "east" given twice`,
	} {
		_, err := ParseShardSpecs(spec)
		require.ErrorIs(t, err, ErrShards, spec)
		require.ErrorContains(t, err, want, spec)
	}
}
