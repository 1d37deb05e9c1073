package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// repoRoot returns the directory of the fencepost module's go.mod.
var repoRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/fencepost/fencepost\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod of github.com/fencepost/fencepost not found above the working directory")
		}
		dir = parent
	}
})

// root returns the module root or fails the test.
func root(t *testing.T) string {
	t.Helper()
	dir, err := repoRoot()
	require.NoError(t, err)
	return dir
}

// deployPath joins parts under deploy/.
func deployPath(t *testing.T, parts ...string) string {
	t.Helper()
	return filepath.Join(append([]string{root(t), "deploy"}, parts...)...)
}

// readDeploy reads a file under deploy/.
func readDeploy(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(deployPath(t, parts...))
	require.NoError(t, err)
	return b
}

// yamlFiles lists every *.yaml and *.yml file under deploy/, relative to
// deploy/, sorted.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	base := deployPath(t)
	var out []string
	err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			rel, err := filepath.Rel(base, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// yamlDocs decodes every document of a multi-document YAML stream into a
// yaml.Node. Empty documents (a trailing "---") are skipped.
func yamlDocs(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" {
			continue
		}
		docs = append(docs, &n)
	}
}

// decodeYAML decodes the single document of a file under deploy/ into v.
func decodeYAML(t *testing.T, v any, parts ...string) {
	t.Helper()
	docs, err := yamlDocs(readDeploy(t, parts...))
	require.NoError(t, err, filepath.Join(parts...))
	require.Len(t, docs, 1, "%s: want exactly one YAML document", filepath.Join(parts...))
	require.NoError(t, docs[0].Decode(v), filepath.Join(parts...))
}

// portOf returns the port of a host:port or URL text, "" if none.
func portOf(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	addr = strings.TrimSuffix(addr, "/")
	if at := strings.LastIndex(addr, "@"); at >= 0 {
		addr = addr[at+1:]
	}
	i := strings.LastIndex(addr, ":")
	if i < 0 || strings.HasSuffix(addr, "]") {
		return ""
	}
	return addr[i+1:]
}

// hostOf returns the host of a host:port or URL text.
func hostOf(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	addr = strings.TrimSuffix(addr, "/")
	if at := strings.LastIndex(addr, "@"); at >= 0 {
		addr = addr[at+1:]
	}
	if i := strings.LastIndex(addr, ":"); i >= 0 && !strings.HasSuffix(addr, "]") {
		addr = addr[:i]
	}
	return strings.Trim(addr, "[]")
}

// syncBuffer is a bytes.Buffer safe for a child process's output copiers
// and a test reading it at the same time.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
