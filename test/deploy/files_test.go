package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
)

// TestYAMLFilesParse decodes every document of every YAML file in deploy/,
// and the ConfigMaps' embedded files too.
func TestYAMLFilesParse(t *testing.T) {
	files := yamlFiles(t)
	for _, want := range []string{"compose.yaml", "prometheus/rules.yaml", "k8s/kustomization.yaml"} {
		require.Contains(t, files, want)
	}
	for _, f := range files {
		docs, err := yamlDocs(readDeploy(t, f))
		require.NoError(t, err, f)
		require.NotEmpty(t, docs, "%s: empty", f)
		for i, d := range docs {
			var v map[string]any
			require.NoError(t, d.Decode(&v), "%s document %d: want a mapping", f, i+1)
			require.NotEmpty(t, v, "%s document %d: empty mapping", f, i+1)
		}
	}
	for _, cm := range ofKind(k8sObjects(t), "ConfigMap") {
		for k, text := range cm.Data {
			if strings.HasSuffix(k, ".yaml") || strings.HasSuffix(k, ".yml") {
				_, err := yamlDocs([]byte(text))
				require.NoError(t, err, "%s: data %s", cm, k)
			}
		}
	}
}

func TestDashboardJSONParses(t *testing.T) {
	var d map[string]any
	dec := json.NewDecoder(bytes.NewReader(readDeploy(t, "grafana", "fencepost.json")))
	require.NoError(t, dec.Decode(&d), "grafana/fencepost.json")
	require.False(t, dec.More(), "grafana/fencepost.json: trailing data after the dashboard")
	require.NotEmpty(t, d["panels"], "grafana/fencepost.json: no panels")
}

// dockerfile is the parsed deploy/Dockerfile: instructions with line
// continuations joined.
type dockerfile []struct{ op, rest string }

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	var out dockerfile
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(readDeploy(t, "Dockerfile")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		op, rest, _ := strings.Cut(cur.String(), " ")
		out = append(out, struct{ op, rest string }{strings.ToUpper(op), strings.TrimSpace(rest)})
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	return out
}

func (d dockerfile) all(op string) []string {
	var out []string
	for _, i := range d {
		if i.op == op {
			out = append(out, i.rest)
		}
	}
	return out
}

// TestDockerfile checks the image against the module: the Go version of
// go.mod, a static trimmed build stamping main.version (which must exist),
// a non-root final image whose entrypoint is the binary, and every default
// port of every role exposed.
func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t)
	text := string(readDeploy(t, "Dockerfile"))

	gomod, err := os.ReadFile(filepath.Join(root(t), "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(gomod))
	require.NotNil(t, m, "go.mod: no go directive")
	goMinor := m[1] + "." + m[2]
	require.Contains(t, df.all("ARG"), "GO_VERSION="+goMinor, "Dockerfile: ARG GO_VERSION must match go.mod's go %s", goMinor)

	froms := df.all("FROM")
	require.GreaterOrEqual(t, len(froms), 2, "Dockerfile: multi-stage (builder + runtime)")
	require.Contains(t, froms[0], "golang:${GO_VERSION}", "Dockerfile: the builder is the golang image")
	final := froms[len(froms)-1]
	require.True(t, strings.Contains(final, "distroless/static") || strings.Contains(final, "debian:bookworm-slim"),
		"Dockerfile: final stage %q should be distroless/static or debian:bookworm-slim", final)

	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-X main.version=", "./cmd/fencepost"} {
		require.Contains(t, text, want, "Dockerfile: build step")
	}
	mainSrc, err := os.ReadFile(filepath.Join(root(t), "cmd", "fencepost", "main.go"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^var version = `, string(mainSrc), "cmd/fencepost: -X main.version needs a package-level string var version")

	users := df.all("USER")
	require.NotEmpty(t, users, "Dockerfile: USER")
	user := users[len(users)-1]
	require.NotContains(t, []string{"root", "0", "0:0", "root:root"}, user, "Dockerfile: run as non-root")
	require.Equal(t, []string{`["/fencepost"]`}, df.all("ENTRYPOINT"), "Dockerfile: the binary is the entrypoint, the subcommand the argument")

	var exposed []int
	for _, e := range df.all("EXPOSE") {
		for _, f := range strings.Fields(e) {
			p, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
			require.NoError(t, err, "EXPOSE %s", f)
			exposed = append(exposed, p)
		}
	}
	srv := config.DefaultServer()
	sc := config.DefaultSidecar()
	fd := config.DefaultFenced()
	for _, addr := range []string{srv.HTTPAddr, srv.RaftAddr, sc.ProxyAddr, sc.ControlAddr, fd.Addr} {
		p, err := strconv.Atoi(portOf(addr))
		require.NoError(t, err, addr)
		require.Contains(t, exposed, p, "Dockerfile: EXPOSE the default port of %s", addr)
	}
}

// TestDockerIgnoreKeepsBuildInputs builds the list of files `go build
// ./cmd/fencepost` reads from this module and checks that
// deploy/Dockerfile.dockerignore excludes none of them (the build context
// is the repository root).
func TestDockerIgnoreKeepsBuildInputs(t *testing.T) {
	var patterns []string
	sc := bufio.NewScanner(bytes.NewReader(readDeploy(t, "Dockerfile.dockerignore")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.False(t, strings.HasPrefix(line, "!"), "Dockerfile.dockerignore: keep to exclusions; this test does not model %q", line)
		patterns = append(patterns, strings.TrimPrefix(line, "/"))
	}
	require.NoError(t, sc.Err())

	rootDir := root(t)
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Path "github.com/fencepost/fencepost"}}{{.Dir}}|{{join .GoFiles ","}}|{{join .EmbedFiles ","}}{{end}}{{end}}`,
		"./cmd/fencepost")
	cmd.Dir = rootDir
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps ./cmd/fencepost")
	inputs := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		require.Len(t, parts, 3, line)
		rel, err := filepath.Rel(rootDir, parts[0])
		require.NoError(t, err)
		for _, f := range slices.Concat(strings.Split(parts[1], ","), strings.Split(parts[2], ",")) {
			if f != "" {
				inputs = append(inputs, path.Join(filepath.ToSlash(rel), f))
			}
		}
	}
	require.Greater(t, len(inputs), 3, "go list found no source files")
	for _, in := range inputs {
		for _, p := range patterns {
			require.False(t, ignored(p, in), "Dockerfile.dockerignore: %q excludes %s, which the build needs", p, in)
		}
	}
	// The ignore file must at least keep the context small.
	for _, heavy := range []string{".git", "deploy", "test/bench"} {
		require.Contains(t, patterns, heavy, "Dockerfile.dockerignore should exclude %s", heavy)
	}
}

// ignored reports whether a .dockerignore pattern excludes file (a slash
// path relative to the context): a path pattern matches the path or any of
// its parent directories; "**/" matches any number of leading directories.
func ignored(pattern, file string) bool {
	if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
		segs := strings.Split(file, "/")
		for i := range segs {
			if ignored(rest, strings.Join(segs[i:], "/")) {
				return true
			}
		}
		return false
	}
	for p := file; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}
