package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Sentinel errors of peer verification.
var (
	// ErrWrongRole: the peer's certificate names a role this port does
	// not accept (a sidecar on the raft port).
	ErrWrongRole = errors.New("pki: peer has the wrong role")
	// ErrWrongName: the peer's certificate names another identity than
	// the one it claims or was dialed as.
	ErrWrongName = errors.New("pki: peer names another identity")
)

// ClientAuth is how the cluster API asks for client certificates:
// VerifyClientCertIfGiven, so a certificate, when sent, is verified against
// the cluster CA before any handler runs (pki.IdentityFromState then reads
// it), while a caller without one still reaches /healthz and /readyz
// (probes). Routes decide per role whether an identity is required.
const ClientAuth = tls.VerifyClientCertIfGiven

// ServerConfig returns the tls.Config of a TLS server presenting s's
// certificate. auth says whether client certificates are asked for;
// verified ones are checked against s's CA pool. The certificate and pool
// in use are the Source's current ones at each handshake.
func (s *Source) ServerConfig(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.Current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*m.Cert},
				ClientCAs:    m.Pool,
				ClientAuth:   auth,
				// A revoked client is refused in the handshake, before
				// any route or raft RPC sees it.
				VerifyConnection: func(cs tls.ConnectionState) error { return m.checkPeer(cs.PeerCertificates) },
			}, nil
		},
	}
}

// ClientConfig returns the tls.Config of a client that verifies the server
// against s's CA pool and host name (serverName, or the dialed host when
// empty) and presents s's certificate when asked. The pool is the current
// one at each handshake, so a rotated CA bundle needs no restart.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: serverName,
		// The chain is verified in VerifyConnection against the pool of
		// the moment; Go's built-in check would pin the pool at build time.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			m := s.Current()
			if _, err := VerifyChain(cs, m.Pool, x509.ExtKeyUsageServerAuth, cs.ServerName); err != nil {
				return err
			}
			return m.checkPeer(cs.PeerCertificates)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.Current().Cert, nil
		},
	}
}

// MemberConfigs returns the server and client tls.Configs of the raft
// port: both sides present member certificates from the cluster CA and
// TLS 1.3 only. The server requires a client certificate whose role is
// member; the client checks that the server's is a member's and, when
// expect returns a name for the dialed address, that it names that member.
func (s *Source) MemberConfigs(expect func(addr string) string) (server *tls.Config, client func(addr string) *tls.Config) {
	server = s.ServerConfig(tls.RequireAndVerifyClientCert)
	inner := server.GetConfigForClient
	server.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := inner(h)
		if err != nil {
			return nil, err
		}
		revoke := c.VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := revoke(cs); err != nil {
				return err
			}
			id, err := IdentityFromState(&cs)
			if err == nil && id.Role != RoleMember {
				err = fmt.Errorf("%w: %s on the raft port", ErrWrongRole, id)
			}
			return err
		}
		return c, nil
	}
	client = func(addr string) *tls.Config {
		want := ""
		if expect != nil {
			want = expect(addr)
		}
		return &tls.Config{
			MinVersion:         tls.VersionTLS13,
			InsecureSkipVerify: true, //nolint:gosec // verified below
			VerifyConnection: func(cs tls.ConnectionState) error {
				// Members are told apart by the name they carry, not by
				// host name: an address may be an IP or any DNS name.
				m := s.Current()
				id, err := VerifyChain(cs, m.Pool, x509.ExtKeyUsageServerAuth, "")
				switch {
				case err != nil:
					return err
				case m.checkPeer(cs.PeerCertificates) != nil:
					return m.checkPeer(cs.PeerCertificates)
				case id.Role != RoleMember:
					return fmt.Errorf("%w: %s answered on the raft port", ErrWrongRole, id)
				case want != "" && id.Name != want:
					return fmt.Errorf("%w: %s answered at %s, which is member %q", ErrWrongName, id, addr, want)
				}
				return nil
			},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return s.Current().Cert, nil
			},
		}
	}
	return server, client
}

// VerifyChain verifies the peer's chain in cs against pool for usage (and
// host name, unless empty) and returns the identity its leaf names.
func VerifyChain(cs tls.ConnectionState, pool *x509.CertPool, usage x509.ExtKeyUsage, host string) (Identity, error) {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, ErrNoCertificate
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: host,
		KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return Identity{}, fmt.Errorf("pki: verify peer %q: %w", leaf.Subject.CommonName, err)
	}
	return IdentityFromCert(leaf)
}
