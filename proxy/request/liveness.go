package request

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"
)

// errStaleConn means a pooled upstream connection was found closed (or
// carrying unsolicited bytes) by the server before the first byte of a
// request was written on it: the request provably never reached the
// server, so it may be sent again on a new connection.
var errStaleConn = errors.New("pooled upstream connection closed by the server before the request was sent")

// livenessAfter is the pause after which a pooled connection is checked
// before reuse. Back-to-back requests skip the check (one syscall); a
// server closes idle connections only after a pause of seconds.
const livenessAfter = 100 * time.Millisecond

// retryStale is the upstream clients' retry policy: only a request that
// never left (errStaleConn) is retried. Whether its lease is still
// current is checked again by the write client's dialer and by every
// socket write of the new connection, so a retried write also never
// leaves without a current lease.
func retryStale(_ *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	return false, errors.Is(err, errStaleConn)
}
