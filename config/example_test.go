package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestExamplesLoadAndValidate(t *testing.T) {
	stubHost(t, "n1")
	for _, r := range Roles() {
		t.Run(string(r), func(t *testing.T) {
			ex := Example(r)
			require.NotEmpty(t, ex)
			cfg, err := Parse(r, []byte(ex), string(r)+".yaml")
			require.NoError(t, err)
			require.Equal(t, r, cfg.Role())

			got, err := InferRole([]byte(ex))
			require.NoError(t, err)
			require.Equal(t, r, got, "the example's keys identify its role")
		})
	}
	require.Empty(t, Example(Role("nope")))
}

// TestExamplesShowDefaults keeps the examples honest: apart from the keys a
// comment says are required, every value shown is the default.
func TestExamplesShowDefaults(t *testing.T) {
	stubHost(t, "n1")
	for _, r := range Roles() {
		cfg, err := Parse(r, []byte(Example(r)), "x.yaml")
		require.NoError(t, err)
		want := Default(r)
		if s, ok := want.(*Sidecar); ok {
			s.Cluster = []string{"127.0.0.1:7400"}
		}
		want.fill()
		// Lists written as [] in the example decode as empty, not nil.
		normalize := func(c Config) string {
			b, err := yaml.Marshal(c)
			require.NoError(t, err)
			return strings.ReplaceAll(string(b), "[]", "null")
		}
		require.Equal(t, normalize(want), normalize(cfg), "role %s", r)
	}
}

// TestExamplesCoverEveryKey makes a new schema key fail until the example
// documents it.
func TestExamplesCoverEveryKey(t *testing.T) {
	for _, r := range Roles() {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(Example(r)), &doc))
		for _, k := range Keys(r) {
			require.True(t, hasKey(doc.Content[0], strings.Split(k.Name, ".")), "role %s: example lacks %s", r, k.Name)
		}
	}
}

// hasKey reports whether the mapping n has the dotted path; "*" matches any
// entry.
func hasKey(n *yaml.Node, segs []string) bool {
	if len(segs) == 0 {
		return true
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if segs[0] == "*" || n.Content[i].Value == segs[0] {
			if hasKey(n.Content[i+1], segs[1:]) {
				return true
			}
		}
	}
	return false
}

func TestDurationAndByteSizeRoundTrip(t *testing.T) {
	type doc struct {
		D Duration `yaml:"d"`
		B ByteSize `yaml:"b"`
		C ByteSize `yaml:"c"`
	}
	in := doc{D: Duration(1500 * time.Millisecond), B: 64 << 10, C: 1000}
	out, err := yaml.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, "d: 1.5s\nb: 64KiB\nc: 1000\n", string(out))
	var back doc
	require.NoError(t, yaml.Unmarshal(out, &back))
	require.Equal(t, in, back)

	for text, want := range map[string]ByteSize{"0": 0, "10MiB": 10 << 20, "1 GiB": 1 << 30, "5MB": 5e6, "7KB": 7000, "12B": 12, "2GB": 2e9} {
		var b ByteSize
		require.NoError(t, b.UnmarshalText([]byte(text)), text)
		require.Equal(t, want, b, text)
	}
	for _, bad := range []string{"", "-1", "1.5MiB", "1TiB", "99999999999GiB", "MiB"} {
		var b ByteSize
		require.Error(t, b.UnmarshalText([]byte(bad)), bad)
	}
	require.Equal(t, 1<<20, ByteSize(1<<20).Int())

	var d Duration
	require.NoError(t, d.UnmarshalText([]byte(" 2m ")))
	require.Equal(t, 2*time.Minute, d.Std())
	require.Error(t, yaml.Unmarshal([]byte("d: [1s]"), &struct {
		D Duration `yaml:"d"`
	}{}))
	txt, err := d.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "2m", string(txt))
	require.Equal(t, "1h", Duration(time.Hour).String())
	require.Equal(t, "1h0m5s", Duration(time.Hour+5*time.Second).String())
	require.Equal(t, "1h5m", Duration(time.Hour+5*time.Minute).String())
}

func TestInferRole(t *testing.T) {
	for body, want := range map[string]Role{
		"raft: {election_timeout: 1s}\n": RoleServer,
		"cluster: [a:1]\n":               RoleSidecar,
		"addr: 127.0.0.1:1\n":            RoleFenced,
		"ports: {http: 1}\n":             RoleDev,
		"cluster: [a:1]\nraftt: 1\n":     RoleSidecar, // best match; validation reports raftt
	} {
		got, err := InferRole([]byte(body))
		require.NoError(t, err, body)
		require.Equal(t, want, got, body)
	}
	for _, body := range []string{"", "log: {level: info}\n", "data_dir: x\n", "what: 1\n", "cluster: [a:1]\nraft: {}\n"} {
		_, err := InferRole([]byte(body))
		require.ErrorIs(t, err, ErrRole, body)
	}
	_, err := InferRole([]byte("a: [\n"))
	require.ErrorIs(t, err, ErrSyntax)
}

func TestKeysDescribeDefaults(t *testing.T) {
	byName := map[string]Key{}
	for _, k := range Keys(RoleServer) {
		byName[k.Name] = k
	}
	require.Equal(t, Key{Name: "raft.election_timeout", Env: "FENCEPOST_RAFT_ELECTION_TIMEOUT", Flag: "raft-election-timeout",
		Doc: "candidate wait before a new election", Default: "300ms"}, byName["raft.election_timeout"])
	require.Equal(t, "FENCEPOST_LEASES_PROFILES_*_TTL", byName["leases.profiles.*.ttl"].Env)
	require.Empty(t, byName["leases.profiles.*.ttl"].Flag)
	require.Empty(t, byName["node_id"].Default)
	require.Equal(t, "1MiB", byName["leases.checkpoint_max_bytes"].Default)
	require.Nil(t, Keys(Role("nope")))
	require.True(t, reflect.DeepEqual(Keys(RoleFenced), Keys(RoleFenced)))
}
