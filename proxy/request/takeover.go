package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/reply"
)

// Takeover with generated keys. A new owner resuming from a checkpoint
// derives the same Idempotency-Keys as the old owner did for the same
// writes in the same order. When its payload for such a key differs (the
// step is not deterministic, or the old owner wrote more since the
// checkpoint), an idempotent downstream answers 422 and the effect
// journal refuses the intent: the write was already performed, with
// another payload. The sidecar says so in words the worker can act on.

// keyOrigin is how a write's Idempotency-Key was made: ordinal > 0 for a
// key derived from (checkpoint seq, ordinal of the write since it).
type keyOrigin struct{ seq, ordinal uint64 }

const titleAlreadyPerformed = "a previous owner already performed this write"

// alreadyPerformed explains a payload mismatch on x's key.
func alreadyPerformed(x *exchange) string {
	what := "this write (the Idempotency-Key the worker chose)"
	if x.key.ordinal > 0 {
		what = fmt.Sprintf("write %d after checkpoint %d of task %q", x.key.ordinal, x.key.seq, x.lease.TaskID)
	}
	return what + " was already performed, with a different payload, by this or an earlier owner. " +
		"A new owner replays a step's writes under the same keys, so each step must send the same writes in the same order: " +
		"checkpoint after every step, or name each action with " + HeaderActionID + " so different actions get different keys"
}

// explainTakeover answers a downstream's 422 payload-mismatch problem
// for a write whose key the sidecar derived with the explicit problem
// write-already-performed (the downstream's own problem is quoted). It
// reports whether it answered.
func (x *exchange) explainTakeover(body []byte) bool {
	if x.resp.StatusCode() != fasthttp.StatusUnprocessableEntity || !x.write || x.key.ordinal == 0 ||
		!bytes.Contains(body, []byte(fence.ProblemPayloadMismatch)) {
		return false
	}
	reply.Problem(x.ctx, reply.CodeWriteAlreadyPerformed, titleAlreadyPerformed,
		fmt.Sprintf("%s (key %s; the downstream answered: %s)", alreadyPerformed(x),
			x.req.Header.Peek(fence.HeaderIdempotencyKey), downstreamSaid(x.resp.StatusCode(), body)), x.lease.Epoch)
	return true
}

// downstreamSaid summarizes a downstream's problem+json in words ("422
// payload-mismatch: <title>") rather than quoting its JSON, whose every
// quote a bounded quote would have to escape; a body that is not a
// problem is quoted as it is.
func downstreamSaid(status int, body []byte) string {
	var p struct{ Type, Title, Detail string }
	if json.Unmarshal(body, &p) != nil || p.Type == "" && p.Title == "" {
		return reply.Quote(string(body))
	}
	code := p.Type
	if i := bytes.LastIndexByte([]byte(code), '/'); i >= 0 {
		code = code[i+1:]
	}
	text := p.Title
	if p.Detail != "" {
		text += ": " + p.Detail
	}
	return strconv.Itoa(status) + " " + code + " " + reply.Quote(text)
}
