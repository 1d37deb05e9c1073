package httpapi

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/valyala/fasthttp"
)

// requestID returns the client's request id, or a fresh one when absent
// (so forwarded requests and logs always carry one).
func requestID(rc *fasthttp.RequestCtx) (string, error) {
	if v := rc.Request.Header.Peek(api.HeaderRequestID); len(v) > 0 {
		id := string(v)
		if err := checkID(api.HeaderRequestID, id, false); err != nil {
			return newRequestID(), err
		}
		return id, nil
	}
	return newRequestID(), nil
}

// newRequestID returns 128 random bits in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
