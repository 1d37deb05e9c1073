package leases

import (
	"io"

	"github.com/valyala/fasthttp"
)

// Ticket methods for the parts that carry a write: the request path's
// upstream connections and relays, and CONNECT tunnels. Each asks the
// ticket's lease; none decides anything itself.

// IsZero reports whether t is the zero ticket, which reads carry.
func (t Ticket) IsZero() bool { return t.st == nil }

// Track registers a connection (or, with tunnel, a CONNECT tunnel)
// carrying writes of t's generation, so that the lease's end closes it;
// false (and c must be closed by the caller) when that generation is no
// longer current.
func (t Ticket) Track(c io.Closer, tunnel bool) bool { return t.st.track(t.gen, c, tunnel) }

// Untrack forgets a closed connection of t's lease.
func (t Ticket) Untrack(c io.Closer) { t.st.untrack(c) }

// WriteClient returns the write client of t's generation, made by mk on
// first use; false when the generation is no longer current.
func (t Ticket) WriteClient(mk func() *fasthttp.Client) (*fasthttp.Client, bool) {
	return t.st.writeClient(t.gen, mk)
}
