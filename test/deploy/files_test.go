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
	require.NotEmpty(t, df.all("ENTRYPOINT"), "Dockerfile: ENTRYPOINT")
	for _, e := range df.all("ENTRYPOINT") { // the final stage and the capture variant
		require.Equal(t, `["/fencepost"]`, e, "Dockerfile: the binary is the entrypoint, the subcommand the argument")
	}

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

// shellWords splits a shell command line on blanks, honouring single and
// double quotes (no escapes or expansions beyond that: the Dockerfile's
// build line needs no more).
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// TestDockerfileBuildLine runs the Dockerfile's own `go build` line on this
// machine (for the host platform, into a temporary directory, without
// -trimpath) and checks the
// binary reports the version passed in VERSION: the flags work and
// -X main.version reaches the version command.
func TestDockerfileBuildLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	var line string
	for _, run := range parseDockerfile(t).all("RUN") {
		if strings.Contains(run, "go build") {
			line = run
		}
	}
	require.NotEmpty(t, line, "Dockerfile: no RUN with go build")
	words := shellWords(line)
	var env []string
	var argv []string
	for i, w := range words {
		if w == "go" && i+1 < len(words) && words[i+1] == "build" {
			argv = words[i:]
			break
		}
		if strings.HasPrefix(w, "--mount=") {
			continue
		}
		if k, _, ok := strings.Cut(w, "="); ok && regexp.MustCompile(`^[A-Z_]+$`).MatchString(k) {
			env = append(env, w)
		}
	}
	require.NotEmpty(t, argv, "Dockerfile: cannot find `go build` in %q", line)
	require.Contains(t, env, "CGO_ENABLED=0")

	const version = "deploy-test-1.2.3"
	bin := filepath.Join(t.TempDir(), "fencepost")
	vars := map[string]string{"VERSION": version, "TARGETOS": "", "TARGETARCH": ""}
	sub := func(s string) string {
		return regexp.MustCompile(`\$\{?([A-Z_]+)\}?`).ReplaceAllStringFunc(s, func(m string) string {
			name := strings.Trim(m, "${}")
			if v, ok := vars[name]; ok {
				return v
			}
			return m
		})
	}
	// -trimpath changes every package's build cache key, which makes this
	// a cold build of all dependencies (minutes on a loaded CI machine);
	// without it the compile is shared with the suite's other builds and
	// only the link, where -ldflags act, is new. TestDockerfile checks that
	// -trimpath is there.
	argv = slices.DeleteFunc(argv, func(w string) bool { return w == "-trimpath" })
	for i := range argv {
		argv[i] = sub(argv[i])
		if i > 0 && argv[i-1] == "-o" {
			argv[i] = bin
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root(t)
	cmd.Env = os.Environ()
	for _, e := range env {
		if e = sub(e); !strings.HasSuffix(e, "=") { // GOOS=$TARGETOS: keep the host's
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", strings.Join(argv, " "), out)
	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "fencepost "+version, "the Dockerfile's -X main.version does not reach `fencepost version`")
}
