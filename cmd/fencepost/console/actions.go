package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// actionNames are the POST actions, with the question each confirms.
var actionNames = map[string]string{
	"revoke": "Revoke the lease of task %s at epoch %d?",
	"cancel": "Cancel task %s for good (epoch %d)?",
	"signal": "Signal waiting task %s (last epoch %d)?",
}

// maxReason bounds the reason and payload a form may send.
const maxReason = 1024

// actionResult is the JSON answer to a script's action.
type actionResult struct {
	Message string          `json:"message"`
	State   lease.TaskState `json:"state,omitempty"`
	Epoch   uint64          `json:"epoch,omitempty"`
}

// problem is the JSON refusal of a script's action.
type problem struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// action revokes, cancels or signals one task. The guard has checked the
// CSRF token; here the credential must be an operator's, the form must
// name the epoch the person saw, and without confirm=yes the console asks
// first (the page's script asks in a dialog and sends confirm=yes).
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("action")
	question, ok := actionNames[name]
	if !ok {
		s.refuse(w, r, http.StatusNotFound, "no such action "+strconv.Quote(name))
		return
	}
	if !s.cfg.canOperate() {
		s.log.Warn("console action refused: read-only credential", zap.String("action", name), zap.String("task", id),
			zap.String("identity", s.cfg.Identity.String()))
		s.refuse(w, r, http.StatusForbidden, fmt.Sprintf("this console's credential (%s) may not %s; actions need an operator's", s.cfg.Identity, name))
		return
	}
	epoch, err := strconv.ParseUint(r.PostFormValue("epoch"), 10, 64)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "epoch must be the task's epoch as the page showed it")
		return
	}
	reason, payload := r.PostFormValue("reason"), r.PostFormValue("payload")
	if len(reason) > maxReason || len(payload) > maxReason {
		s.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("reason and payload are at most %d bytes", maxReason))
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "confirm", s.view(r, "confirm", "Confirm", struct {
			ID, Action, Question, Reason, Payload string
			Epoch                                 uint64
		}{id, r.URL.Path, fmt.Sprintf(question, id, epoch), reason, payload, epoch}))
		return
	}
	// The reason the cluster records names the console and its
	// credential, so the task's history says who acted and from where.
	if by := "console, " + s.cfg.Identity.String(); reason == "" {
		reason = by
	} else {
		reason += " (" + by + ")"
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	var t *lease.Task
	switch name {
	case "revoke":
		t, err = s.cfg.Cluster.Revoke(ctx, id, api.RevokeRequest{Epoch: epoch, Reason: reason})
	case "cancel", "signal":
		// Neither call takes an epoch: refuse when the task moved on
		// since the page was drawn, so the confirmation stays true.
		if cur, gerr := s.cfg.Cluster.TaskSummary(ctx, id, false); gerr != nil {
			err = gerr
		} else if e := currentEpoch(cur); e != epoch {
			s.refuse(w, r, http.StatusConflict, fmt.Sprintf("task %s is at epoch %d now, not %d: look again before acting", id, e, epoch))
			return
		} else if name == "cancel" {
			t, err = s.cfg.Cluster.Cancel(ctx, id, api.CancelRequest{Reason: reason})
		} else {
			t, err = s.cfg.Cluster.Signal(ctx, id, api.SignalRequest{Reason: reason, Payload: []byte(payload)})
		}
	}
	log := s.log.With(zap.String("action", name), zap.String("task", id), zap.Uint64("epoch", epoch),
		zap.String("identity", s.cfg.Identity.String()))
	if err != nil {
		log.Warn("console action refused by the cluster", zap.Error(err))
		s.refuse(w, r, errStatus(err), errText(err))
		return
	}
	log.Info("console action")
	res := actionResult{Message: fmt.Sprintf("%s %s at epoch %d", name, id, epoch), State: t.State, Epoch: currentEpoch(t)}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
		return
	}
	http.Redirect(w, r, "/tasks/"+id, http.StatusSeeOther)
}

// currentEpoch is the task's lease epoch, or its highest one without a lease.
func currentEpoch(t *lease.Task) uint64 {
	if t.Lease != nil {
		return t.Lease.Epoch
	}
	return t.MaxEpoch
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// refuse answers a refused action: JSON for the script, text otherwise.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, detail string) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(problem{Title: http.StatusText(status), Status: status, Detail: detail})
		return
	}
	http.Error(w, "console: "+detail, status)
}
