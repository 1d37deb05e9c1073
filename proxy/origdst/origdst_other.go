//go:build !linux

package origdst

import (
	"net"
	"net/netip"
)

// Of returns ErrUnsupported: only Linux netfilter records the original
// destination of a redirected connection.
func Of(conn net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, ErrUnsupported
}
