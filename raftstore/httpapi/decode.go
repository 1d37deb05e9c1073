package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/valyala/fasthttp"
)

// MaxIDBytes bounds every id the API accepts (task, session, worker, node,
// journal key, request id). The store may enforce a smaller bound of its own.
const MaxIDBytes = 256

// decodeBody strictly decodes a JSON object into v. An empty body decodes as
// {}, so bodiless POSTs (cancel, signal, heartbeat) work from curl. It
// refuses invalid UTF-8 (encoding/json would silently turn it into U+FFFD
// and the stored id would not be the one the client sent), unknown fields,
// anything after the object, repeated keys and keys that match a field only
// case-insensitively (decode_keys.go).
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: body is not valid UTF-8", ErrBadRequest)
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// encoding/json has no typed error for unknown fields; its message
		// is stable ("json: unknown field \"x\"").
		if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
			return fmt.Errorf("%w: %s", ErrUnknownField, strings.TrimPrefix(msg, "json: "))
		}
		return fmt.Errorf("%w: invalid JSON body: %v", ErrBadRequest, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON body", ErrBadRequest)
	}
	return nil
}

// checkID validates an id: non-empty (unless optional), at most MaxIDBytes,
// valid UTF-8, no control characters (they break logs and terminals).
func checkID(field, s string, optional bool) error {
	switch {
	case s == "":
		if optional {
			return nil
		}
		return fmt.Errorf("%w: %s is required", ErrBadRequest, field)
	case len(s) > MaxIDBytes:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrBadRequest, field, MaxIDBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadRequest, field)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s contains control characters", ErrBadRequest, field)
	}
	return nil
}

// requireIDs checks pairs of (field name, value), all required.
func requireIDs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkID(pairs[i], pairs[i+1], false); err != nil {
			return err
		}
	}
	return nil
}

// queryArgs validates the query string against the parameters a route
// accepts and returns them. A parameter given twice or not accepted is a
// 400: a typo such as ?sate= must not silently list everything.
func queryArgs(args *fasthttp.Args, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	var err error
	for k, v := range args.All() {
		key := string(k)
		if !slices.Contains(allowed, key) {
			if err == nil {
				err = fmt.Errorf("%w: unknown query parameter %q", ErrBadRequest, key)
			}
			continue
		}
		if _, dup := out[key]; dup && err == nil {
			err = fmt.Errorf("%w: query parameter %q given twice", ErrBadRequest, key)
		}
		if !utf8.Valid(v) && err == nil {
			err = fmt.Errorf("%w: query parameter %q is not valid UTF-8", ErrBadRequest, key)
		}
		out[key] = string(v)
	}
	return out, err
}

// parseStale reads ?stale=; absent means a linearizable read.
func parseStale(q map[string]string) (bool, error) {
	v, ok := q["stale"]
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: stale must be true or false", ErrBadRequest)
	}
	return b, nil
}

var taskStates = []lease.TaskState{
	lease.TaskPending, lease.TaskLeased, lease.TaskWaiting,
	lease.TaskCompleted, lease.TaskFailed, lease.TaskCancelled,
}

var leaseStatuses = []lease.Status{
	lease.StatusActive, lease.StatusPausedWaiting, lease.StatusSuspectDead, lease.StatusExpired,
	lease.StatusReclaimed, lease.StatusRevoked, lease.StatusReleased,
}

// parseTaskFilter reads GET /v1/tasks' ?state=&status=&after=&limit=.
func parseTaskFilter(q map[string]string) (lease.TaskFilter, error) {
	var f lease.TaskFilter
	if v := q["state"]; v != "" {
		f.State = lease.TaskState(v)
		if !slices.Contains(taskStates, f.State) {
			return f, fmt.Errorf("%w: unknown task state %q", ErrBadRequest, v)
		}
	}
	if v := q["status"]; v != "" {
		f.Status = lease.Status(v)
		if !slices.Contains(leaseStatuses, f.Status) {
			return f, fmt.Errorf("%w: unknown lease status %q", ErrBadRequest, v)
		}
	}
	if v := q["after"]; v != "" {
		if err := checkID("after", v, false); err != nil {
			return f, err
		}
		f.After = v
	}
	if v := q["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > raftstore.MaxListLimit {
			return f, fmt.Errorf("%w: limit must be an integer in [1, %d]", ErrBadRequest, raftstore.MaxListLimit)
		}
		f.Limit = n
	}
	return f, nil
}
