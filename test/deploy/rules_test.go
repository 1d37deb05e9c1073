package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
)

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	decodeYAML(t, &f, "prometheus", "rules.yaml")
	require.NotEmpty(t, f.Groups, "prometheus/rules.yaml: no groups")
	return f
}

type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	require.NoError(t, json.Unmarshal(readDeploy(t, "grafana", "fencepost.json"), &d), "grafana/fencepost.json")
	return d
}

// allPanels flattens rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// A PromQL expression's references: exported series (fencepost_*) and
// recorded ones (fencepost:*). The lookbehind is done by hand: a name must
// not continue another identifier.
var (
	exportedRef = regexp.MustCompile(`(^|[^A-Za-z0-9_:])(fencepost_[A-Za-z0-9_]+)`)
	recordedRef = regexp.MustCompile(`(^|[^A-Za-z0-9_:])(fencepost:[A-Za-z0-9_:]+)`)
	// selectorRef captures name{matchers} to check label names.
	selectorRef = regexp.MustCompile(`(fencepost_[A-Za-z0-9_]+)\{([^}]*)\}`)
	matcherRef  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

func refs(re *regexp.Regexp, expr string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[2])
	}
	return out
}

// exprs lists every PromQL expression in deploy/, labelled by where it is.
func exprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			out[fmt.Sprintf("rules.yaml %s %s%s", g.Name, r.Record, r.Alert)] = r.Expr
		}
	}
	for _, p := range loadDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("fencepost.json panel %d %q target %s", p.ID, p.Title, tg.RefID)] = tg.Expr
		}
	}
	return out
}

// referencedMetrics maps every exported metric name deploy/ uses to where.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for where, e := range exprs(t) {
		for _, name := range refs(exportedRef, e) {
			if !slices.Contains(out[name], where) {
				out[name] = append(out[name], where)
			}
		}
	}
	return out
}

// balanced checks brackets and double quotes of a PromQL expression.
func balanced(expr string) error {
	var stack []rune
	inQuote := false
	for i, r := range expr {
		if inQuote {
			if r == '"' && (i == 0 || expr[i-1] != '\\') {
				inQuote = false
			}
			continue
		}
		switch r {
		case '"':
			inQuote = true
		case '(', '{', '[':
			stack = append(stack, r)
		case ')', '}', ']':
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unbalanced %q at offset %d", r, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote {
		return fmt.Errorf("unterminated string")
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	return nil
}

var (
	promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	metricName   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	alertName    = regexp.MustCompile(`^Fencepost[A-Z][A-Za-z0-9]*$`)
)

// requiredAlerts are the alerts deploy/README.md promises.
var requiredAlerts = []string{
	"FencepostNoRaftLeader",
	"FencepostDoubleExecutionAlarm",
	"FencepostStaleWritesRejectedDownstream",
	"FencepostLeaseReclaimSpike",
	"FencepostSidecarHeartbeatFailures",
	"FencepostSidecarWritesBlocked",
	"FencepostResumeSuccessRateLow",
}

// templateFuncs stubs the functions Prometheus offers alert templates, so
// text/template can parse the annotations.
var templateFuncs = template.FuncMap{}

func init() {
	for _, f := range []string{"humanize", "humanize1024", "humanizeDuration", "humanizePercentage", "humanizeTimestamp",
		"printf", "query", "first", "value", "label", "reReplaceAll", "title", "toUpper", "toLower", "match", "args", "safeHtml", "externalURL", "pathPrefix"} {
		templateFuncs[f] = func(...any) string { return "" }
	}
}

func TestPrometheusRules(t *testing.T) {
	f := loadRules(t)
	recorded := map[string]bool{}
	alerts := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range f.Groups {
		require.NotEmpty(t, g.Name, "group without a name")
		require.False(t, groups[g.Name], "group %s defined twice", g.Name)
		groups[g.Name] = true
		if g.Interval != "" {
			require.Regexp(t, promDuration, g.Interval, "group %s: interval", g.Name)
		}
		require.NotEmpty(t, g.Rules, "group %s: no rules", g.Name)
		for _, r := range g.Rules {
			where := fmt.Sprintf("group %s rule %s%s", g.Name, r.Record, r.Alert)
			require.True(t, (r.Record == "") != (r.Alert == ""), "%s: exactly one of record and alert", where)
			require.NotEmpty(t, strings.TrimSpace(r.Expr), "%s: expr", where)
			require.NoError(t, balanced(r.Expr), "%s: expr %q", where, r.Expr)
			if r.For != "" {
				require.Regexp(t, promDuration, r.For, "%s: for", where)
			}
			if r.Record != "" {
				require.Regexp(t, metricName, r.Record, "%s: record name", where)
				require.True(t, strings.HasPrefix(r.Record, "fencepost:"), "%s: recorded series are named fencepost:<what>:<how>", where)
				require.False(t, recorded[r.Record], "%s: recorded twice", where)
				recorded[r.Record] = true
				require.Empty(t, r.Annotations, "%s: recording rules take no annotations", where)
				continue
			}
			require.Regexp(t, alertName, r.Alert, "%s: alert name", where)
			require.False(t, alerts[r.Alert], "%s: alert defined twice", where)
			alerts[r.Alert] = true
			require.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "%s: labels.severity", where)
			for _, a := range []string{"summary", "description"} {
				require.NotEmpty(t, r.Annotations[a], "%s: annotations.%s", where, a)
			}
			for k, v := range r.Annotations {
				// Prometheus defines these variables before every template.
				defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
				_, err := template.New(k).Funcs(templateFuncs).Parse(defs + v)
				require.NoError(t, err, "%s: annotations.%s is not a valid template", where, k)
			}
		}
	}
	for _, a := range requiredAlerts {
		require.True(t, alerts[a], "rules.yaml: missing alert %s", a)
	}
	// Every fencepost:* series used anywhere is recorded here.
	for where, e := range exprs(t) {
		for _, name := range refs(recordedRef, e) {
			require.True(t, recorded[name], "%s uses %s, which no rule records", where, name)
		}
	}
}

// requiredPanels are the seed's dashboard (DESIGN.md 9): a panel title must
// contain each phrase (case-insensitive).
var requiredPanels = []string{
	"lease expiries reclaimed",
	"resume success rate after reclaim",
	"writes rejected by fencing: blocked in the sidecar",
	"writes rejected by fencing: stale downstream",
	"paused_waiting_external",
	"double-execution alarms",
	"raft state",
	"heartbeat rate",
	"heartbeat latency",
	"proxy requests by decision",
	"upstream latency",
}

func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	require.NotEmpty(t, d.Title, "title")
	require.NotEmpty(t, d.UID, "uid")
	require.GreaterOrEqual(t, d.SchemaVersion, 36, "schemaVersion")
	require.True(t, slices.ContainsFunc(d.Templating.List, func(v struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query any    `json:"query"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}), "templating: a Prometheus datasource variable named datasource, so the dashboard imports anywhere")

	ids := map[int]string{}
	var titles []string
	type rect struct {
		title      string
		x, y, w, h int
	}
	var rects []rect
	for _, p := range d.allPanels() {
		require.NotZero(t, p.ID, "panel %q: id", p.Title)
		require.Empty(t, ids[p.ID], "panel id %d used by %q and %q", p.ID, ids[p.ID], p.Title)
		ids[p.ID] = p.Title
		require.NotEmpty(t, p.Title, "panel %d: title", p.ID)
		g := p.GridPos
		require.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
		for _, r := range rects {
			overlap := g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H
			require.False(t, overlap, "panels %q and %q overlap", p.Title, r.title)
		}
		rects = append(rects, rect{p.Title, g.X, g.Y, g.W, g.H})
		if p.Type == "row" {
			continue
		}
		titles = append(titles, strings.ToLower(p.Title))
		require.NotNil(t, p.Datasource, "panel %q: datasource", p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, "panel %q: use the datasource variable", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q: no queries", p.Title)
		refIDs := map[string]bool{}
		for _, tg := range p.Targets {
			require.NotEmpty(t, strings.TrimSpace(tg.Expr), "panel %q target %s: expr", p.Title, tg.RefID)
			require.NoError(t, balanced(tg.Expr), "panel %q target %s: %q", p.Title, tg.RefID, tg.Expr)
			require.False(t, refIDs[tg.RefID], "panel %q: refId %s twice", p.Title, tg.RefID)
			refIDs[tg.RefID] = true
			require.NotEmpty(t, refs(exportedRef, tg.Expr), "panel %q target %s names no fencepost metric", p.Title, tg.RefID)
		}
	}
	for _, want := range requiredPanels {
		require.True(t, slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, want) }),
			"dashboard: no panel titled like %q (the seed's dashboard, DESIGN.md 9)", want)
	}
}

// TestNoTaskIDLabels guards DESIGN.md 9: no query groups or filters by a
// per-task label.
func TestNoTaskIDLabels(t *testing.T) {
	bad := regexp.MustCompile(`\b(task_?id|taskId|lease_?id|session_?id)\b`)
	for where, e := range exprs(t) {
		require.False(t, bad.MatchString(e), "%s: %q uses a per-task label", where, e)
	}
	var buf bytes.Buffer
	buf.Write(readDeploy(t, "prometheus", "rules.yaml"))
	require.NotRegexp(t, `\$labels\.(task|lease|session)`, buf.String(), "rules.yaml: annotations must not expect per-task labels")
}
