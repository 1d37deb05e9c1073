package main

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// tlsMode is the transport security of the clusters the harness starts and
// of its clients. The harness runs one mode at a time: sec is nil for
// plaintext, set for the TLS pass of --tls.
type tlsMode struct {
	fpDir string // fencepost's CA, member, sidecar and operator files

	fpSidecar  *tls.Config // the load generator: a sidecar certificate
	fpOperator *tls.Config // cluster status reads: an operator certificate

	etcdCA, etcdCert, etcdKey string      // one server+peer certificate for every member
	etcdClient                *tls.Config // the load generator's client certificate
}

// sec is the current mode; nil is plaintext.
var sec *tlsMode

// fpMembers are the node ids startFPCluster gives its nodes; their member
// certificates name them.
var fpMembers = []string{"fp1", "fp2", "fp3"}

// scheme is the URL scheme of the current mode, for both systems.
func scheme() string {
	if sec != nil {
		return "https://"
	}
	return "http://"
}

// hostPort strips a URL's scheme.
func hostPort(u string) string {
	return strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
}

// setupTLS makes every certificate a TLS pass needs under dir: fencepost's
// with the product's own tooling (so the run proves the README's set-up),
// etcd's with crypto/x509 (writeCert: ECDSA P-256; leaves valid for
// 127.0.0.1, ::1 and localhost).
// benchSidecar is the load generator's sidecar certificate name, and so
// the worker id of every session it opens over TLS.
const benchSidecar = "bench"

func setupTLS(fpBin, dir string) (*tlsMode, error) {
	m := &tlsMode{fpDir: filepath.Join(dir, "fp-tls")}
	if fpBin != "" {
		out, err := exec.Command(fpBin, "tls", "init", "--dir", m.fpDir, "--member", strings.Join(fpMembers, ","),
			"--sidecar", benchSidecar, "--operator", "bench").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("fencepost tls init: %w: %s", err, out)
		}
		if m.fpSidecar, err = clientTLS(m.fpFile("ca.pem"), m.fpFile("sidecar-bench.pem"), m.fpFile("sidecar-bench-key.pem")); err != nil {
			return nil, err
		}
		if m.fpOperator, err = clientTLS(m.fpFile("ca.pem"), m.fpFile("operator-bench.pem"), m.fpFile("operator-bench-key.pem")); err != nil {
			return nil, err
		}
	}
	ed := filepath.Join(dir, "etcd-tls")
	if err := os.MkdirAll(ed, 0o700); err != nil {
		return nil, err
	}
	ca, caKey, err := writeCert(filepath.Join(ed, "ca.pem"), filepath.Join(ed, "ca-key.pem"), &x509.Certificate{
		Subject: pkix.Name{CommonName: "bench etcd CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		return nil, err
	}
	// One certificate serves every member's client and peer ports and is
	// also its client certificate toward its peers; the harness has its own.
	for _, name := range []string{"member", "client"} {
		leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "bench etcd " + name},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		if _, _, err := writeCert(filepath.Join(ed, name+".pem"), filepath.Join(ed, name+"-key.pem"), leaf, ca, caKey); err != nil {
			return nil, err
		}
	}
	m.etcdCA, m.etcdCert, m.etcdKey = filepath.Join(ed, "ca.pem"), filepath.Join(ed, "member.pem"), filepath.Join(ed, "member-key.pem")
	m.etcdClient, err = clientTLS(m.etcdCA, filepath.Join(ed, "client.pem"), filepath.Join(ed, "client-key.pem"))
	return m, err
}

// fpFile names a file of fencepost's TLS directory.
func (m *tlsMode) fpFile(name string) string { return filepath.Join(m.fpDir, name) }

// fpConfig is node id's tls block of its server config.
func (m *tlsMode) fpConfig(id string) string {
	return fmt.Sprintf("tls:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n",
		m.fpFile("ca.pem"), m.fpFile("member-"+id+".pem"), m.fpFile("member-"+id+"-key.pem"))
}

// etcdFlags are etcd's own TLS flags: TLS with client certificates on the
// client port, mutual TLS between members.
func (m *tlsMode) etcdFlags() []string {
	return []string{
		"--cert-file", m.etcdCert, "--key-file", m.etcdKey, "--trusted-ca-file", m.etcdCA, "--client-cert-auth",
		"--peer-cert-file", m.etcdCert, "--peer-key-file", m.etcdKey, "--peer-trusted-ca-file", m.etcdCA, "--peer-client-cert-auth",
	}
}

// clientTLS loads a client certificate and the CA that verifies the server.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := poolFrom(caFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// tlsRounds runs the selected workloads in rounds, each round a
// plaintext pass and a TLS pass on fresh clusters, in ABBA order (plain,
// TLS, TLS, plain, ...), so the machine's drift hits both modes alike. Each pass runs
// its share of the repetitions; h.res collects the plaintext runs and
// h.res.TLS the TLS runs. Clusters are started by the same code in both
// modes; only sec differs. The plaintext passes run h.only, the TLS
// passes tlsOnly (nil: every workload).
func (h *harness) tlsRounds(rounds int, tlsOnly map[string]bool) error {
	base := h.plan
	h.plan.Reps = (base.Reps + rounds - 1) / rounds
	h.plan.FailoverReps = (base.FailoverReps + rounds - 1) / rounds
	h.res.TLS = &Results{Mode: h.res.Mode, Settings: h.plan, Rounds: rounds}
	h.res.Settings, h.res.Rounds = h.plan, rounds
	if h.ps.used == nil {
		h.ps.used = map[int]bool{} // shared by every pass, so no port is reused
	}
	var machine [2]Machine
	for r := 1; r <= rounds; r++ {
		// ABBA: plaintext first in odd rounds, TLS first in even ones, so a
		// steady drift of the machine favours neither mode.
		for k := 0; k < 2; k++ {
			i := (k + r + 1) % 2
			res := []*Results{h.res, h.res.TLS}[i]
			dir := filepath.Join(h.dir, fmt.Sprintf("round%d-%s", r, [2]string{"plain", "tls"}[i]))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if i == 1 && sec == nil {
				m, err := setupTLS(h.prebuilt, h.dir)
				if err != nil {
					return err
				}
				sec = m
			}
			logf("round %d of %d, %s", r, rounds, [2]string{"plaintext", "TLS"}[i])
			only := h.only
			if i == 1 {
				only = tlsOnly
			}
			p := &harness{plan: h.plan, res: res, root: h.root, dir: dir, only: only, prebuilt: h.prebuilt, ps: h.ps}
			saved := sec
			if i == 0 {
				sec = nil
			}
			err := p.run()
			p.stop()
			sec = saved
			if r == 1 {
				machine[i] = res.Machine
			}
			if h.prebuilt == "" {
				h.prebuilt, h.fpBin = p.fpBin, p.fpBin
			}
			if err != nil {
				return err
			}
		}
	}
	sec = nil
	h.res.Machine, h.res.TLS.Machine = machine[0], machine[1]
	h.res.TLS.Machine.Built = h.res.Machine.Built
	for _, res := range []*Results{h.res, h.res.TLS} {
		res.Rows, res.Notes, res.Skipped = lastRows(res.Rows), unique(res.Notes), unique(res.Skipped)
	}
	return nil
}

// lastRows keeps one row per comparison: every pass appends its rows again,
// built from all runs so far, so the last of each is the whole.
func lastRows(rows []Row) []Row {
	type key struct{ wl, cs, metric, ours, peer string }
	at := map[key]int{}
	var out []Row
	for _, r := range rows {
		k := key{r.Workload, r.Case, r.Metric, r.Ours, r.Peer}
		if i, ok := at[k]; ok {
			out[i] = r
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

// unique drops repeated lines, keeping the first of each.
func unique(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
