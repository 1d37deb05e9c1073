package pki_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// rotate replaces f's certificate and key with a fresh pair from g, each
// file atomically (as cert-manager or 'fencepost tls cert create' into a
// mounted Secret would).
func rotate(g, f pki.Files) error {
	for _, p := range [][2]string{{g.Cert, f.Cert}, {g.Key, f.Key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(p[1]+".new", b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(p[1]+".new", p[1]); err != nil {
			return err
		}
	}
	return nil
}

// reissue issues role/name afresh and rotates it into to. It reports
// errors instead of failing the test: it runs off the test's goroutine.
func reissue(kit *pkitest.Kit, role pki.Role, name string, validity time.Duration, to pki.Files, dir string) error {
	pair, err := kit.CA.Issue(pki.Request{Name: name, Role: role, Validity: validity,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, time.Now())
	if err != nil {
		return err
	}
	sub, err := os.MkdirTemp(dir, "id")
	if err != nil {
		return err
	}
	certName, keyName := pki.CertFiles(role, name)
	cert, key, err := pki.WritePair(sub, certName, keyName, pair)
	if err != nil {
		return err
	}
	return rotate(pki.Files{Cert: cert, Key: key}, to)
}

// Certificates read from files renew without a restart under traffic:
// both the server's (a member) and the client's (a sidecar) live 4 s and
// are replaced every second; a client opens a new mutual-TLS connection
// every few milliseconds until well past the first certificates' expiry,
// and none fails. Both sides serve at least three generations.
func TestRotatedFilesKeepTrafficFlowing(t *testing.T) {
	const validity = 4 * time.Second
	kit := pkitest.New(t, "cluster")
	srvFiles := kit.Files(pki.RoleMember, "n1", validity)
	cliFiles := kit.Files(pki.RoleSidecar, "w1", validity)
	srv, err := pki.NewSource(srvFiles)
	require.NoError(t, err)
	cli, err := pki.NewSource(cliFiles)
	require.NoError(t, err)
	firstExpiry := srv.Current().Leaf.NotAfter

	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerConfig(tls.RequireAndVerifyClientCert))
	require.NoError(t, err)
	var serving sync.WaitGroup
	seenClient := map[string]bool{}
	var mu sync.Mutex
	serving.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					mu.Lock()
					seenClient[pc[0].SerialNumber.String()] = true
					mu.Unlock()
				}
				_, _ = tc.Write([]byte("ok"))
			}
			_ = tc.Close()
		}
	})
	defer serving.Wait()
	defer ln.Close()

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	var rotating sync.WaitGroup
	rotating.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, f := range []struct {
				role pki.Role
				name string
				to   pki.Files
			}{{pki.RoleMember, "n1", srvFiles}, {pki.RoleSidecar, "w1", cliFiles}} {
				if err := reissue(kit, f.role, f.name, validity, f.to, dir); err != nil {
					t.Errorf("rotate %s: %v", f.name, err)
				}
			}
		}
	})
	defer rotating.Wait()
	defer cancel()

	seenServer := map[string]bool{}
	var ok int
	end := firstExpiry.Add(2 * time.Second)
	for time.Now().Before(end) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", ln.Addr().String(), cli.ClientConfig("localhost"))
		require.NoError(t, err, "handshake %d, %v before the first certificate's expiry", ok, time.Until(firstExpiry))
		buf := make([]byte, 2)
		_, err = conn.Read(buf)
		require.NoError(t, err)
		seenServer[conn.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
		_ = conn.Close()
		ok++
	}
	// A reload may meet a rotation half written (the new certificate
	// beside the old key); the Source keeps the previous pair and tries
	// again at its next look, so once the writer stops both settle on the
	// last pair without an error.
	cancel()
	rotating.Wait()
	require.Eventually(t, func() bool {
		srv.Current()
		cli.Current()
		return srv.LastError() == nil && cli.LastError() == nil
	}, 5*pki.ReloadCheck, 50*time.Millisecond, "server: %v; client: %v", srv.LastError(), cli.LastError())
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(seenServer), 3, "server certificates served")
	require.GreaterOrEqual(t, len(seenClient), 3, "client certificates presented")
}
