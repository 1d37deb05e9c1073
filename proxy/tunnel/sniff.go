package tunnel

import (
	"bufio"
	"bytes"
	"net"
)

// tunnelKind is what the first bytes of a CONNECT tunnel (or of the
// plaintext inside an intercepted one) look like.
type tunnelKind int

const (
	kindGarbage tunnelKind = iota // neither TLS nor HTTP/1.x: closed
	kindTLS                       // a TLS handshake record (ClientHello)
	kindHTTP                      // an HTTP/1.x request line
	kindHTTP2                     // the HTTP/2 connection preface: cannot be fenced
	kindNone                      // nothing arrived in time, or the worker closed
)

// String names the kind in logs.
func (k tunnelKind) String() string {
	return [...]string{"garbage", "tls", "http/1.1", "http/2 preface", "nothing"}[k]
}

// http2Preface starts every HTTP/2 connection (RFC 9113 3.4).
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// sniffSize is the read buffer a tunnel is sniffed through: enough for
// the HTTP/2 preface's first line, small enough that the reads after the
// sniff go to the connection directly.
const sniffSize = 16

// sniff classifies a tunnel by its first bytes, read through br (whose
// connection carries the read deadline). A TLS record starts with the
// handshake content type 0x16 and major version 3; an HTTP/1.x request
// starts with an upper-case method token and a space.
func sniff(br *bufio.Reader) tunnelKind {
	b, err := br.Peek(1)
	if err != nil {
		return kindNone
	}
	switch c := b[0]; {
	case c == 0x16:
		if h, err := br.Peek(3); err == nil && h[1] == 3 {
			return kindTLS
		}
		return kindGarbage
	case c >= 'A' && c <= 'Z':
		line, _ := br.Peek(sniffSize) // short on EOF or deadline: judged on what came
		if bytes.HasPrefix(http2Preface, line) && len(line) >= 4 {
			return kindHTTP2
		}
		for i, c := range line {
			if c == ' ' && i > 0 {
				return kindHTTP
			}
			if c < 'A' || c > 'Z' {
				if c == '-' || c == '_' {
					continue
				}
				return kindGarbage
			}
		}
		if len(line) == sniffSize {
			return kindHTTP // a long method token: let the parser judge
		}
		return kindGarbage
	}
	return kindGarbage
}

// peekedConn reads through the reader a tunnel was sniffed with, so the
// sniffed bytes are not lost.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
