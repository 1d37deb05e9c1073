package console

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// tasksBody is the Tasks page's data.
type tasksBody struct {
	Query          listQuery
	Page           listPage
	First, NextURL string
	Error          string
}

func (q listQuery) url(after string) string {
	v := url.Values{}
	for k, val := range map[string]string{"state": string(q.State), "profile": q.Profile, "worker": q.Worker, "q": q.Prefix, "after": after} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if q.Limit != DefaultPageSize && q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if len(v) == 0 {
		return "/tasks"
	}
	return "/tasks?" + v.Encode()
}

func (s *Server) tasksPage(w http.ResponseWriter, r *http.Request) {
	f := r.URL.Query()
	q := listQuery{State: lease.TaskState(f.Get("state")), Profile: strings.TrimSpace(f.Get("profile")),
		Worker: strings.TrimSpace(f.Get("worker")), Prefix: strings.TrimSpace(f.Get("q")), After: f.Get("after")}
	if n, err := strconv.Atoi(f.Get("limit")); err == nil {
		q.Limit = n
	}
	body := tasksBody{Query: q}
	status := http.StatusOK
	if q.State != "" && !slices.Contains(taskStates, q.State) {
		body.Error, status = fmt.Sprintf("unknown state %q", q.State), http.StatusBadRequest
	} else {
		ctx, cancel := s.callCtx(r)
		page, err := listTasks(ctx, s.cfg.Cluster, q)
		cancel()
		body.Page = page
		if err != nil {
			body.Error, status = errText(err), errStatus(err)
		}
	}
	body.Query.Limit = max(body.Query.Limit, 0)
	body.First = q.url("")
	if body.Page.Next != "" {
		body.NextURL = q.url(body.Page.Next)
	}
	s.render(w, r, status, "tasks", s.view(r, "tasks", "Tasks", body))
}

// taskBody is the Task page's data.
type taskBody struct {
	ID                   string
	Task                 *lease.Task
	Epoch                uint64
	Live, Final, Waiting bool
	Leases               []lease.Lease
	InDoubt              []*lease.Effect
	Events               []timelineEvent
	Dropped              uint64
	Error                string
	FencedError          string
}

// timelineEvent is one line of the timeline, newest first.
type timelineEvent struct {
	at     time.Time // for merging the fenced service's writes in
	Time   string
	When   string
	Kind   string
	Epoch  uint64
	Detail string
	Class  string
	// TraceID is the W3C trace id of the call the event is about, if
	// known; TraceLink is it in the configured trace UI.
	TraceID, TraceLink string
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body := taskBody{ID: id}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	t, err := s.cfg.Cluster.TaskSummary(ctx, id, false)
	status := http.StatusOK
	if err != nil {
		body.Error, status = errText(err), errStatus(err)
		v := s.view(r, "task", "Task "+id, body)
		v.TaskID = id
		s.render(w, r, status, "task", v)
		return
	}
	body.Task, body.Epoch = t, t.MaxEpoch
	body.Final, body.Waiting = t.State.Final(), t.State == lease.TaskWaiting
	if t.Lease != nil {
		body.Epoch, body.Live = t.Lease.Epoch, t.Lease.Status.Live()
	}
	body.Leases = append(body.Leases, t.History()...)
	if t.Lease != nil && (len(t.History()) == 0 || t.History()[len(t.History())-1].Epoch != t.Lease.Epoch) {
		body.Leases = append(body.Leases, *t.Lease)
	}
	sort.Slice(body.Leases, func(i, j int) bool { return body.Leases[i].Epoch > body.Leases[j].Epoch })
	for _, e := range t.Journal() {
		if e.State == lease.EffectInDoubt {
			body.InDoubt = append(body.InDoubt, e)
		}
	}
	if h, err := s.cfg.Cluster.TaskHistory(ctx, id); err == nil {
		body.Dropped = h.Dropped
		for i := len(h.Events) - 1; i >= 0; i-- {
			body.Events = append(body.Events, s.withTrace(timeline(h.Events[i]), h.Events[i].TraceID))
		}
	} else {
		body.Error = "history: " + errText(err)
	}
	if fw, err := s.fencedWrites(ctx, id); err != nil {
		body.FencedError = err.Error()
	} else if len(fw) > 0 {
		body.Events = append(body.Events, fw...)
		sort.SliceStable(body.Events, func(i, j int) bool { return body.Events[i].at.After(body.Events[j].at) })
	}
	v := s.view(r, "task", "Task "+id, body)
	v.TaskID = id
	s.render(w, r, status, "task", v)
}

// timeline renders one event for people.
func timeline(e api.HistoryEvent) timelineEvent {
	out := timelineEvent{at: e.Time, Time: e.Time.UTC().Format(time.RFC3339Nano), When: e.Time.UTC().Format("15:04:05.000"), Kind: e.Kind, Epoch: e.Epoch}
	var d []string
	add := func(format string, a ...any) { d = append(d, fmt.Sprintf(format, a...)) }
	if e.Status != "" {
		add("→ %s", e.Status)
	} else if e.State != "" {
		add("→ %s", e.State)
	}
	if e.WorkerID != "" && (e.Kind == "acquire" || e.Kind == "claim" || e.Kind == "open_session") {
		add("by %s", e.WorkerID)
	}
	if e.Kind == api.EventBlocked {
		// The sidecar stopped these itself: they reached neither the
		// cluster nor a fenced service.
		out.Kind = "blocked by the sidecar"
		if e.Count == 1 {
			add("1 call")
		} else {
			add("%d calls, the first", e.Count)
		}
	}
	if e.Step != "" || e.CheckpointSeq != 0 {
		add("checkpoint #%d %s", e.CheckpointSeq, e.Step)
	}
	if e.Method != "" {
		add("%s %s", e.Method, e.URL)
	}
	if e.Key != "" {
		add("key %s", e.Key)
	}
	if e.EffectState != "" {
		add("(%s)", e.EffectState)
	}
	if e.HTTPStatus != 0 {
		add("answered %d", e.HTTPStatus)
	}
	if e.Reason != "" {
		add("— %s", e.Reason)
	}
	if e.By != "" {
		add("[%s]", e.By)
	}
	switch {
	case e.Error != "":
		add("REFUSED: %s", e.Error)
		out.Class = "bad"
	case e.Kind == api.EventInDoubt || e.Kind == api.EventBlocked || e.Status == lease.StatusRevoked || e.Status == lease.StatusExpired || e.Kind == "cancel":
		out.Class = "bad"
	case e.Status == lease.StatusActive:
		out.Class = "good"
	case e.Status == lease.StatusSuspectDead || e.Kind == "wait" || e.Kind == "reclaim":
		out.Class = "warn"
	}
	out.Detail = strings.Join(d, " ")
	return out
}

// workersBody is the Workers page's data.
type workersBody struct {
	Sessions []api.SessionInfo
	Held     map[string][]lease.Lease
	Next     string
	Error    string
}

func (s *Server) workersPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.callCtx(r)
	defer cancel()
	body := workersBody{Held: map[string][]lease.Lease{}}
	status := http.StatusOK
	list, err := s.cfg.Cluster.Sessions(ctx, r.URL.Query().Get("after"), DefaultPageSize)
	if err != nil {
		body.Error, status = errText(err), errStatus(err)
	}
	body.Sessions, body.Next = list.Sessions, list.Next
	if ls, err := s.cfg.Cluster.Leases(ctx, false); err == nil {
		for _, l := range ls.Leases {
			body.Held[l.SessionID] = append(body.Held[l.SessionID], l)
		}
	}
	s.render(w, r, status, "workers", s.view(r, "workers", "Workers", body))
}

// certRow is one certificate the Cluster page lists.
type certRow struct {
	Name, Subject string
	NotAfter      time.Time
	Left          string
	Soon          bool
}

// clusterBody is the Cluster page's data.
type clusterBody struct {
	Status *api.ClusterStatus
	// Ready is each member's answer to /readyz by id: "" when ready.
	Ready map[string]string
	Certs []certRow
	Error string
}

// readyTimeout bounds one member's readiness probe on the Cluster page.
const readyTimeout = time.Second

// soon is how close to expiry a certificate is flagged.
const soon = 14 * 24 * time.Hour

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.callCtx(r)
	defer cancel()
	body := clusterBody{Ready: map[string]string{}}
	status := http.StatusOK
	st, err := s.cfg.Cluster.Status(ctx)
	if err != nil {
		body.Error, status = errText(err), errStatus(err)
	} else {
		body.Status = &st
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, m := range st.Members {
			if m.HTTPAddr == "" {
				continue
			}
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, readyTimeout)
				defer cancel()
				msg := "ready"
				if err := s.cfg.Cluster.Ready(rctx, m.HTTPAddr); err != nil {
					msg = "not ready: " + errText(err)
				}
				mu.Lock()
				body.Ready[m.ID] = msg
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	now := s.cfg.Now()
	add := func(name string, c *x509.Certificate) {
		body.Certs = append(body.Certs, certRow{Name: name, Subject: c.Subject.String(), NotAfter: c.NotAfter,
			Left: human(c.NotAfter.Sub(now)), Soon: c.NotAfter.Sub(now) < soon})
	}
	for name, c := range s.cfg.Certs {
		add(name, c)
	}
	if err == nil && s.cfg.MemberTLS != nil {
		for _, m := range st.Members {
			if c := s.peerCert(m.HTTPAddr); c != nil {
				add("member "+m.ID, c)
			}
		}
	}
	sort.Slice(body.Certs, func(i, j int) bool { return body.Certs[i].Name < body.Certs[j].Name })
	s.render(w, r, status, "cluster", s.view(r, "cluster", "Cluster", body))
}

// peerCert returns the certificate a member's API presents, nil when it
// cannot be reached.
func (s *Server) peerCert(addr string) *x509.Certificate {
	if addr == "" {
		return nil
	}
	d := &net.Dialer{Timeout: time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, s.cfg.MemberTLS)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if pcs := conn.ConnectionState().PeerCertificates; len(pcs) > 0 {
		return pcs[0]
	}
	return nil
}

// errText renders a cluster error for a page.
func errText(err error) string { return strings.TrimPrefix(err.Error(), "cluster: ") }

// errStatus maps an error to the page's status: the model's table for its
// errors, 502 for a cluster that did not answer.
func errStatus(err error) int {
	if info, ok := lease.LookupError(err); ok {
		return info.Status
	}
	var st interface{ HTTPStatus() int }
	if errors.As(err, &st) {
		return st.HTTPStatus()
	}
	if errors.Is(err, errBadQuery) {
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
