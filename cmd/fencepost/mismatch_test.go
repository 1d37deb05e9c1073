package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// A TLS/plain mismatch is one line that says what to pass, exit 2, for
// the sidecar (at start, instead of retrying forever) and for ctl (instead
// of "unreachable"), in both directions (issue 29, item 6). A certificate
// whose role may not do a thing is exit 5, not 4 (item 8).
func TestTLSPlainMismatchSaysWhatToPass(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	secure := httpapitest.StartClusterWith(t, 1, zap.WarnLevel, func(cfg *node.Config) {
		cfg.Store.TLS = kit.Source(pki.RoleMember, cfg.Store.NodeID)
	}).Endpoints()[0]
	plain := startCtlCluster(t)
	side := kit.Files(pki.RoleSidecar, "w1", time.Hour)
	op := kit.Files(pki.RoleOperator, "alice", time.Hour)
	addrs := []string{"--proxy-addr", "127.0.0.1:0", "--control-addr", "127.0.0.1:0"}

	code, _, errOut := runCLI(t, append([]string{"sidecar", "--cluster", secure, "--worker-id", "w1", "--task", "t1"}, addrs...)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, "fencepost sidecar: cluster member "+secure+" speaks TLS and this sidecar plain HTTP: "+
		"pass --cluster-tls-ca-file CA --cluster-tls-cert-file CERT --cluster-tls-key-file KEY (cluster_tls.*): "+
		"the cluster CA and a sidecar certificate (fencepost tls cert create --sidecar --name w1)\n", errOut)

	code, _, errOut = runCLI(t, append([]string{"sidecar", "--cluster", plain, "--worker-id", "w1", "--task", "t1",
		"--cluster-tls-ca-file", side.CA, "--cluster-tls-cert-file", side.Cert, "--cluster-tls-key-file", side.Key}, addrs...)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, "fencepost sidecar: cluster member "+plain+" speaks plain HTTP and this sidecar TLS: "+
		"drop cluster_tls (--cluster-tls-*) or point --cluster at the TLS cluster\n", errOut)

	errOut = ctlFails(t, secure, exitUsage, []string{"status", "--timeout", "1s"})
	require.Equal(t, "fencepost ctl: cluster member "+secure+" speaks TLS and ctl plain HTTP: pass --ca, --cert and --key "+
		"(or FENCEPOST_CA_FILE, FENCEPOST_CERT_FILE, FENCEPOST_KEY_FILE): the cluster CA and your certificate "+
		"(fencepost dev prints them in its ctl line)\n", errOut)
	errOut = ctlFails(t, plain, exitUsage, []string{"status", "--timeout", "1s", "--ca", op.CA, "--cert", op.Cert, "--key", op.Key})
	require.Contains(t, errOut, "speaks plain HTTP and ctl TLS: drop --ca, --cert and --key")

	// The right certificates: the operator reads the status; acquiring
	// needs a sidecar's, and the operator's is refused with exit 5.
	tlsArgs := func(f pki.Files, args ...string) []string {
		return append(args, "--ca", f.CA, "--cert", f.Cert, "--key", f.Key)
	}
	ctlOK(t, secure, tlsArgs(op, "status")...)
	errOut = ctlFails(t, secure, exitForbidden, tlsArgs(op, "acquire", "t1", "--worker", "w1", "--create"))
	require.Contains(t, errOut, "forbidden")
	ctlOK(t, secure, tlsArgs(side, "acquire", "t1", "--worker", "w1", "--create")...)
	ctlFails(t, secure, exitForbidden, tlsArgs(side, "tasks", "revoke", "t1"))
}
