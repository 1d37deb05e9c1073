package mitm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bundleCAs returns the interception CA certificates in a bundle file.
func bundleCAs(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return out
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		require.NoError(t, err)
		if c.Subject.CommonName == "fencepost sidecar interception CA" {
			out = append(out, c)
		}
	}
}

func kinds(evs []Event) []EventKind {
	out := []EventKind{}
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// The renewal steps on a fake clock: announce at half the life (bundle
// lists both, the old one still signs), switch at 15/16 of it (the new
// one signs, the old one is still listed), retire at the old one's expiry.
func TestRenewAnnouncesSwitchesRetires(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	ca, err := New(Config{Hosts: []string{"api.test"}, Validity: 8 * time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bundle.pem")
	require.NoError(t, ca.WriteBundle(path))
	first := ca.Certificate()

	require.Empty(t, ca.Renew(path), "nothing is due at birth")
	require.Equal(t, start.Add(4*time.Hour), ca.NextRenewal())

	now = start.Add(4 * time.Hour)
	require.Equal(t, []EventKind{Announced}, kinds(ca.Renew(path)))
	cas := bundleCAs(t, path)
	require.Len(t, cas, 2, "the bundle lists the signing CA and the next")
	require.True(t, cas[0].Equal(first))
	second := cas[1]
	require.True(t, ca.Certificate().Equal(first), "the old CA still signs")
	leaf, err := ca.Leaf("api.test")
	require.NoError(t, err)
	require.NoError(t, leaf.Leaf.CheckSignatureFrom(first))
	require.Equal(t, start.Add(7*time.Hour+30*time.Minute), ca.NextRenewal())

	now = start.Add(7*time.Hour + 30*time.Minute)
	require.Equal(t, []EventKind{Switched}, kinds(ca.Renew(path)))
	require.True(t, ca.Certificate().Equal(second))
	leaf, err = ca.Leaf("api.test")
	require.NoError(t, err)
	require.NoError(t, leaf.Leaf.CheckSignatureFrom(second), "a cached leaf of the old CA is not served after the switch")
	require.Len(t, bundleCAs(t, path), 2, "the old CA stays listed until it expires")

	now = start.Add(8 * time.Hour)
	evs := ca.Renew(path)
	require.Equal(t, []EventKind{Retired, Announced}, kinds(evs), "the old CA retires; the new one, half through its life, announces the next")
	cas = bundleCAs(t, path)
	require.Len(t, cas, 2)
	require.True(t, cas[0].Equal(second))
	require.False(t, cas[1].Equal(first))
}

// A bundle that cannot be written holds the switch back: no leaf of a CA
// the workers were never given is served.
func TestRenewSwitchWaitsForTheBundle(t *testing.T) {
	start := time.Now()
	now := start
	ca, err := New(Config{Hosts: []string{"*"}, Validity: 8 * time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	first := ca.Certificate()
	bad := filepath.Join(t.TempDir(), "missing-dir", "bundle.pem")
	now = start.Add(7*time.Hour + 30*time.Minute)
	evs := ca.Renew(bad)
	require.Equal(t, []EventKind{Announced, Failed}, kinds(evs))
	require.Error(t, evs[1].Err)
	require.True(t, ca.Certificate().Equal(first), "no switch without a written bundle")
	require.Equal(t, []EventKind{Failed}, kinds(ca.Renew(bad)))
	good := filepath.Join(t.TempDir(), "bundle.pem")
	require.Equal(t, []EventKind{Switched}, kinds(ca.Renew(good)))
	require.Len(t, bundleCAs(t, good), 2)
}

// TLS traffic across renewals in real time: the CA lives 2 s, so it is
// renewed every second; a client that reads the bundle file for every
// connection (as curl does) handshakes every few milliseconds through at
// least three switches and never fails.
func TestTrafficNeverFailsAcrossRenewals(t *testing.T) {
	const host = "api.test"
	ca, err := New(Config{Hosts: []string{host}, Validity: 2 * time.Second})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bundle.pem")
	require.NoError(t, ca.WriteBundle(path))

	ln, err := tls.Listen("tcp", "127.0.0.1:0", ca.ServerConfig(host))
	require.NoError(t, err)
	var serving sync.WaitGroup
	serving.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("ok"))
			}()
		}
	})
	defer serving.Wait()
	defer ln.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var switched atomic.Int32
	var renewing sync.WaitGroup
	renewing.Go(func() {
		ca.KeepRenewed(ctx, path, func(e Event) {
			if e.Kind == Switched {
				switched.Add(1)
			}
			if e.Kind == Failed {
				t.Errorf("renewal failed: %v", e.Err)
			}
		})
	})
	defer renewing.Wait()
	defer cancel()

	var ok, failed int
	var lastErr error
	deadline := time.Now().Add(20 * time.Second)
	expires := ca.Certificate().NotAfter
	for switched.Load() < 3 || !time.Now().After(expires) {
		require.True(t, time.Now().Before(deadline), "only %d switches in 20s", switched.Load())
		pemBytes, err := os.ReadFile(path)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pemBytes))
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", ln.Addr().String(),
			&tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
		if err != nil {
			failed++
			lastErr = err
			continue
		}
		buf := make([]byte, 2)
		_, err = conn.Read(buf)
		_ = conn.Close()
		if err != nil {
			failed++
			lastErr = err
			continue
		}
		ok++
	}
	require.Zero(t, failed, "%d of %d handshakes failed across %d renewals; last: %v", failed, ok+failed, switched.Load(), lastErr)
	require.Greater(t, ok, 10)
}
