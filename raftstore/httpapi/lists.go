package httpapi

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// DefaultMaxListBytes bounds the encoded tasks of one GET /v1/tasks page;
// past it the page ends early and Next points at the rest. Without the
// bound, 100 tasks of 1 MB payloads made one 133 MB reply.
const DefaultMaxListBytes = 4 << 20

// wantBodies reads ?bodies= and, when true, requires PermReadBodies.
func wantBodies(c *call) (bool, error) {
	v := c.query[api.QueryBodies]
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s must be true or false", ErrBadRequest, api.QueryBodies)
	}
	if b {
		return true, c.who.require(PermReadBodies)
	}
	return false, nil
}

// withoutBodies returns t without what a plain read leaves out: payload,
// checkpoint data, signal, result and journaled response bodies and
// headers. t is the store's copy, so it is changed in place.
func withoutBodies(t *lease.Task) *lease.Task {
	if t == nil {
		return nil
	}
	t.Payload = nil
	if t.Signal() != nil || t.Result() != nil {
		x := t.More()
		x.Signal, x.Result = nil, nil
	}
	if t.Checkpoint != nil {
		t.Checkpoint.Data = nil
	}
	for _, e := range t.Journal() {
		e.Body, e.Header = nil, nil
	}
	return t
}

// boundList ends the page once its tasks' encoding passes maxBytes (always
// keeping the first task) and points Next at the rest.
func boundList(list *api.TaskList, maxBytes int) error {
	total := 0
	for i, t := range list.Tasks {
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("encode task: %w", err)
		}
		total += len(b) + 1
		if i > 0 && total > maxBytes {
			list.Tasks = list.Tasks[:i]
			list.Next = list.Tasks[i-1].ID
			return nil
		}
	}
	return nil
}
