package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Kind is one row of the shared error table: a problem code and what a
// worker should do about it. The generated Err* variables are the Kinds;
// match an error with errors.Is(err, worker.ErrStaleEpoch).
type Kind struct {
	// Code is the problem's code (the tail of its type URI).
	Code string
	// Status is the HTTP status the code always comes with; 0 when the
	// sidecar uses it with several.
	Status int
	// Retryable says the same call may succeed later, unchanged.
	Retryable bool
	// LeaseLost says the caller's epoch is over: errors.Is(err,
	// ErrLeaseLost) holds for it.
	LeaseLost bool
	// Doc says what the code means.
	Doc string
}

// Error names the code and says what it means.
func (k *Kind) Error() string { return "fencepost: " + k.Code + ": " + k.Doc }

// ErrLeaseLost matches every error that means the lease (this epoch) is
// over: a stop event on the attach stream, or a refusal whose Kind has
// LeaseLost. Stop the work; a later acquire or claim is a new lease.
var ErrLeaseLost = errors.New("fencepost: lease lost")

// ErrUnknownCode is the Kind of a problem whose code is in no table (a
// newer sidecar); it is retryable when its status is 5xx.
var ErrUnknownCode = &Kind{Code: "unknown", Doc: "a problem code this SDK does not know"}

// Error is a control API refusal (a problem+json body) or a lease loss
// seen on the attach stream.
type Error struct {
	// Kind is the code's row; errors.Is(err, kind) matches it.
	Kind *Kind
	// Code is the code as received (Kind.Code, or the unknown code).
	Code string
	// Status is the HTTP status (0 for a loss seen on the stream).
	Status int
	// Title and Detail are the problem's text.
	Title, Detail string
	// Epoch is the task's current epoch when the problem names one.
	Epoch uint64
	// Tasks lists the held tasks on task-ambiguous.
	Tasks []string
	// Retryable says the same call may succeed later.
	Retryable bool
}

// Error is the code, the status and the problem's detail.
func (e *Error) Error() string {
	s := "fencepost: " + e.Code
	if e.Status != 0 {
		s += fmt.Sprintf(" (%d)", e.Status)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	} else if e.Title != "" {
		s += ": " + e.Title
	}
	return s
}

// Is matches the error's Kind, and ErrLeaseLost for a lost lease.
func (e *Error) Is(target error) bool {
	if target == ErrLeaseLost {
		return e.Kind.LeaseLost
	}
	k, ok := target.(*Kind)
	return ok && k == e.Kind
}

// lostKind is the Kind of a loss seen on the attach stream (stop: true).
var lostKind = &Kind{Code: "lease_lost", LeaseLost: true, Doc: "the sidecar said stop: the lease is over"}

// lostError is the error of a stop event.
func lostError(ev Event) *Error {
	return &Error{Kind: lostKind, Code: lostKind.Code, Title: string(ev.Kind), Detail: strings.TrimSpace(string(ev.Kind) + " " + ev.Reason), Epoch: ev.Epoch}
}

// problemError reads a refusal; body is the response body.
func problemError(status int, body []byte) *Error {
	var p struct {
		Title  string   `json:"title"`
		Detail string   `json:"detail"`
		Code   string   `json:"code"`
		Epoch  uint64   `json:"epoch"`
		Tasks  []string `json:"tasks"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		p.Code, p.Title = "unknown", http.StatusText(status)
		p.Detail = strings.TrimSpace(string(body))
		if len(p.Detail) > 200 {
			p.Detail = p.Detail[:200]
		}
	}
	k, ok := kinds[p.Code]
	if !ok {
		k = ErrUnknownCode
	}
	retry := k.Retryable || (!ok && status >= 500)
	return &Error{Kind: k, Code: p.Code, Status: status, Title: p.Title, Detail: p.Detail, Epoch: p.Epoch, Tasks: p.Tasks, Retryable: retry}
}
