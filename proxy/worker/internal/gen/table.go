// Command gen writes the worker SDKs' error table from the two tables it
// comes from: the model's (fence/lease.Errors) and the sidecar's problem
// codes (every `Code* = "..."` string constant in the sidecar's packages
// under proxy/, read from source so a code added there shows up here).
// It writes one JSON file and one source file per language; the SDKs never
// re-type a code by hand, and TestGeneratedFilesAreCurrent fails when a
// written file drifts from the tables.
//
//	go run ./proxy/worker/internal/gen
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/reply"
)

// Row is one error code as every SDK sees it.
type Row struct {
	// Code is the problem's `code` (the tail of its `type`).
	Code string `json:"code"`
	// Name is the code in CamelCase: the error's name in each language.
	Name string `json:"name"`
	// Source is "model" (fence/lease) or "sidecar" (proxy).
	Source string `json:"source"`
	// Status is the HTTP status the code is always answered with: the
	// model's table's, or the sidecar's (package proxy/reply).
	Status int `json:"status"`
	// Retryable says the same call may succeed if repeated later.
	Retryable bool `json:"retryable"`
	// LeaseLost says the caller's lease (that epoch) is over: stop.
	LeaseLost bool `json:"leaseLost"`
	// Doc is one line saying what the code means.
	Doc string `json:"doc"`
}

// retryable lists the codes a worker may retry unchanged: the cluster or
// its session is not reachable yet, or a quota will refill. Every other
// refusal is about the request or the lease and repeats itself.
var retryable = map[string]bool{
	"no-session":          true,
	"cluster-error":       true,
	"cluster-timeout":     true,
	"journal-unavailable": true,
	"upstream-timeout":    true,
	"quota_exceeded":      true,
}

// leaseLost lists the codes that mean the caller's epoch is over: the
// SDKs raise them as (subtypes of) LeaseLost.
var leaseLost = map[string]bool{
	"stale_epoch":          true,
	"not_holder":           true,
	"lease_not_active":     true,
	"no-lease":             true,
	"lease-expired":        true,
	"lease-suspect":        true,
	"lease-revoked":        true,
	"lease-waiting":        true,
	"lease-lost-in-flight": true,
}

// camel turns "stale_epoch" or "lease-expired" into "StaleEpoch".
func camel(code string) string {
	var b strings.Builder
	for _, p := range strings.FieldsFunc(code, func(r rune) bool { return r == '_' || r == '-' }) {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// rows builds the table: model rows in the model's order, then the
// sidecar's codes sorted by code.
func rows(root string) ([]Row, error) {
	var out []Row
	for _, e := range lease.Errors() {
		out = append(out, Row{Code: e.Code, Source: "model", Status: e.Status, Doc: e.Err.Error()})
	}
	side, err := sidecarCodes(filepath.Join(root, "proxy"))
	if err != nil {
		return nil, err
	}
	if len(side) == 0 {
		return nil, fmt.Errorf("no Code* constants found under %s/proxy", root)
	}
	statuses := reply.Codes()
	for i := range side {
		st, ok := statuses[side[i].Code]
		if !ok {
			return nil, fmt.Errorf("sidecar code %q has no status in proxy/reply's table", side[i].Code)
		}
		side[i].Status = st
	}
	out = append(out, side...)
	names := map[string]string{}
	for i := range out {
		r := &out[i]
		r.Name = camel(r.Code)
		r.Retryable = retryable[r.Code]
		r.LeaseLost = leaseLost[r.Code]
		if prev, dup := names[r.Name]; dup {
			return nil, fmt.Errorf("codes %q and %q have the same name %s", prev, r.Code, r.Name)
		}
		names[r.Name] = r.Code
	}
	for c := range retryable {
		if _, ok := names[camel(c)]; !ok {
			return nil, fmt.Errorf("retryable code %q is in neither table", c)
		}
	}
	for c := range leaseLost {
		if _, ok := names[camel(c)]; !ok {
			return nil, fmt.Errorf("lease-lost code %q is in neither table", c)
		}
	}
	return out, nil
}

// sidecarCodes reads every string constant named Code* in the non-test Go
// files under dir, skipping dir/worker (this SDK).
func sidecarCodes(dir string) ([]Row, error) {
	seen := map[string]Row{}
	byName := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join(dir, "worker") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code, _ := strconv.Unquote(lit.Value)
					if prev, ok := byName[n.Name]; ok && prev != code {
						return fmt.Errorf("%s: %s is %q here and %q elsewhere", path, n.Name, code, prev)
					}
					byName[n.Name] = code
					doc := docOf(vs)
					if r, ok := seen[code]; ok && r.Doc != "" {
						doc = r.Doc
					}
					if doc == "" {
						doc = strings.ReplaceAll(code, "-", " ")
					}
					seen[code] = Row{Code: code, Source: "sidecar", Doc: doc}
				}
			}
		}
		return nil
	})
	out := make([]Row, 0, len(seen))
	for _, r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out, err
}

// docOf is the first sentence of a constant's comment, without its name.
func docOf(vs *ast.ValueSpec) string {
	cg := vs.Doc
	if cg == nil {
		cg = vs.Comment
	}
	if cg == nil {
		return ""
	}
	s := strings.Join(strings.Fields(cg.Text()), " ")
	if _, rest, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(s, vs.Names[0].Name) {
		s = rest
	}
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

func main() {
	root, err := repoRoot()
	if err == nil {
		err = writeAll(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// repoRoot walks up from the working directory to the go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
