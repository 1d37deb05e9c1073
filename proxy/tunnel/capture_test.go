package tunnel

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hello returns the first flight a TLS client sends for serverName.
func hello(t *testing.T, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		_ = tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake() //nolint:gosec // only the hello is used
		_ = c.Close()
	}()
	require.NoError(t, s.SetDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, maxRecord)
	n, err := s.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

func TestServerNameIsReadWithoutConsuming(t *testing.T) {
	h := hello(t, "api.example.com")
	br := bufio.NewReaderSize(bytes.NewReader(h), maxRecord)
	require.Equal(t, kindTLS, sniff(br))
	require.Equal(t, "api.example.com", serverName(br))
	require.Equal(t, len(h), br.Buffered(), "nothing is consumed: the handshake still sees the whole hello")
	got, _ := br.Peek(len(h))
	require.Equal(t, h, got)
}

func TestServerNameAbsentOrTruncated(t *testing.T) {
	h := hello(t, "") // no SNI (a client dialling an IP)
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader(h), maxRecord)))
	cut := hello(t, "api.example.com")[:20]
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader(cut), maxRecord)), "a truncated hello names nothing")
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader([]byte{0x16, 3}), maxRecord)))
}

func TestOtherTCPValid(t *testing.T) {
	for _, o := range []OtherTCP{OtherAllow, OtherBlockWithoutLease, OtherBlock} {
		require.True(t, o.Valid(), o)
	}
	require.False(t, OtherTCP("").Valid())
	require.False(t, OtherTCP("deny").Valid())
}
