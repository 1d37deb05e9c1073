package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

//go:embed assets
var assets embed.FS

// pageNames are the pages, each a template file defining "body".
var pageNames = []string{"tasks", "task", "workers", "cluster", "health", "confirm", "login"}

// pages holds each page's template: the layout with its body.
var pages = func() map[string]*template.Template {
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(assets, "assets/layout.html"))
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		out[n] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/"+n+".html"))
	}
	return out
}()

var funcs = template.FuncMap{
	"ago":      ago,
	"ts":       ts,
	"validFor": validFor,
	"short": func(s string) string {
		if len(s) > 10 {
			return s[:10] + "…"
		}
		return s
	},
}

// moment reads a template argument that is either a time.Time (the API's
// own replies) or a lease.Stamp (the lease model's records).
func moment(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case lease.Stamp:
		return t.Time()
	}
	return time.Time{}
}

// ago renders how long ago v was, "" for the zero time.
func ago(now time.Time, v any) string {
	t := moment(v)
	if t.IsZero() {
		return ""
	}
	return human(now.Sub(t)) + " ago"
}

// ts renders a moment in UTC to the second.
func ts(v any) string {
	t := moment(v)
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// validFor renders a live lease's remaining validity as the cluster sees
// it (the leader overlays its renewals), "" for other statuses.
func validFor(now time.Time, l *lease.Lease) string {
	if l == nil || !l.Status.Live() || l.ExpiresAt.IsZero() {
		return ""
	}
	d := l.ExpiresAt.Time().Sub(now)
	if d <= 0 {
		return "lapsed"
	}
	return human(d)
}

func human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// navItem is one link of the page header.
type navItem struct {
	Name, Href string
	Current    bool
}

// view is what every page's template gets.
type view struct {
	Title      string
	Now        time.Time
	Nav        []navItem
	Identity   string
	CanOperate bool
	CSRF       string
	Live       bool
	TaskID     string
	States     []lease.TaskState
	Body       any
}

var taskStates = []lease.TaskState{lease.TaskPending, lease.TaskLeased, lease.TaskWaiting, lease.TaskCompleted, lease.TaskFailed, lease.TaskCancelled}

func (s *Server) view(r *http.Request, page, title string, body any) view {
	v := view{Title: title, Now: s.cfg.Now(), Identity: s.cfg.Identity.String(), CanOperate: s.cfg.canOperate(), CSRF: s.guard.csrf,
		Live: page != "confirm" && page != "login", States: taskStates, Body: body}
	for _, n := range []struct{ name, href, page string }{
		{"Tasks", "/tasks", "tasks"}, {"Workers", "/workers", "workers"}, {"Cluster", "/cluster", "cluster"}, {"Health", "/health", "health"},
	} {
		v.Nav = append(v.Nav, navItem{Name: n.name, Href: n.href, Current: n.page == page || (page == "task" && n.page == "tasks")})
	}
	return v
}

// render writes page; with ?fragment=1 only its main content, which the
// page's script swaps in on a live update.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	name := "layout"
	if r.URL.Query().Get("fragment") == "1" {
		name = "body"
	}
	var buf bytes.Buffer
	if err := pages[page].ExecuteTemplate(&buf, name, v); err != nil {
		s.log.Sugar().Errorw("console: render", "page", page, "error", err)
		http.Error(w, "console: render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderLogin writes the login page (the guard has no Server).
func renderLogin(w http.ResponseWriter, csrf, next string, failed bool) {
	v := view{Title: "Log in", CSRF: csrf, Body: struct {
		Next   string
		Failed bool
	}{next, failed}}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pages["login"].ExecuteTemplate(w, "layout", v)
}

// staticHandler serves the embedded style and script.
func staticHandler() http.Handler {
	sub, _ := fs.Sub(assets, "assets") // a literal directory of the embed
	files := http.FileServer(http.FS(sub))
	return http.StripPrefix(staticPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "style.css" && r.URL.Path != "app.js" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
}
