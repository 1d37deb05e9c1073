//go:build linux

package origdst

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from linux/netfilter_ipv6/
// ip6_tables.h; golang.org/x/sys/unix does not define it. It has the same
// value as SO_ORIGINAL_DST but is asked at level SOL_IPV6.
const ip6tSOOriginalDst = 80

// Of returns the destination conn was dialled to before a REDIRECT rule
// sent it to this host's listener.
func Of(conn net.Conn) (netip.AddrPort, error) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%w (%T)", ErrNotTCP, conn)
	}
	local, _ := tc.LocalAddr().(*net.TCPAddr)
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("origdst: %w", err)
	}
	var dst netip.AddrPort
	var sysErr error
	v6 := local != nil && local.IP.To4() == nil
	cerr := raw.Control(func(fd uintptr) {
		if v6 {
			dst, sysErr = lookup6(int(fd))
		} else {
			dst, sysErr = lookup4(int(fd))
		}
	})
	if cerr != nil {
		return netip.AddrPort{}, fmt.Errorf("origdst: %w", cerr)
	}
	if sysErr != nil {
		// ENOENT: conntrack has no entry — nothing redirected this socket.
		return netip.AddrPort{}, fmt.Errorf("%w: %w", ErrNotRedirected, sysErr)
	}
	if local != nil && dst == local.AddrPort() {
		return netip.AddrPort{}, ErrNotRedirected
	}
	return dst, nil
}

// lookup4 reads a struct sockaddr_in.
func lookup4(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet4
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IP, unix.SO_ORIGINAL_DST, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port), nil
}

// lookup6 reads a struct sockaddr_in6.
func lookup6(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet6
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IPV6, ip6tSOOriginalDst, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port), nil
}

// getsockopt is the raw call: x/sys/unix has no typed getter for a
// sockaddr.
func getsockopt(fd, level, name int, val unsafe.Pointer, size *uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(val), uintptr(unsafe.Pointer(size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
