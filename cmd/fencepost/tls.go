package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/pki"
)

const tlsUsage = `
Usage:
  fencepost tls ca create [--dir DIR] [--name NAME] [--days N]
  fencepost tls cert create --member|--server|--sidecar|--operator|--reader|--service --name NAME
                            [--dns NAME,...] [--ip ADDR,...] [--dir DIR] [--days N]
                            [--ca FILE --ca-key FILE] [--worker-ids ID,...]
  fencepost tls crl create --revoke CERT-FILE|SERIAL,... [--dir DIR] [--out FILE]
                           [--days N] [--ca FILE --ca-key FILE]
  fencepost tls signing-key create [--dir DIR]
  fencepost tls init --dir DIR [--member NAME,...] [--sidecar NAME,...]
                     [--operator NAME,...] [--reader NAME,...] [--service NAME,...]
                     [--signing-key]

Certificates for the cluster, in the shape of 'consul tls'. Keys are ECDSA
P-256, written 0600; certificates 0644. Nothing is ever overwritten.

  ca create          a cluster CA: ca.pem and ca-key.pem. Keep ca-key.pem off
                     the members; it is only needed to issue certificates.
  cert create        a certificate naming NAME (its CommonName) with one role
                     (its first OrganizationalUnit), signed by the CA:
                     <role>-<name>.pem and <role>-<name>-key.pem.
                       --member    a cluster member; NAME is its node_id. Used
                                   for raft (mutual TLS) and to serve the API.
                                   Add every name clients dial with --dns/--ip.
                       --server    the same as --member.
                       --sidecar   a sidecar; NAME is its worker id, the only
                                   one it may open sessions under unless
                                   --worker-ids names more (an id ending
                                   in '*' is a prefix: 'web-*').
                       --operator  a person or tool that changes the cluster.
                       --reader    a person or tool that only reads.
                       --service   a downstream service serving HTTPS (fenced's
                                   tls.*): a server certificate only, valid for
                                   NAME and every --dns/--ip; it can neither
                                   call the cluster nor speak raft.
  crl create         a revocation list signed by the CA (crl.pem): every
                     certificate or serial given with --revoke, plus every
                     serial of the list already at --out (a list only grows;
                     the file is replaced atomically). Members load it with
                     tls.crl_file (re-read when it changes) and refuse those
                     certificates on raft and the API; sidecars with their
                     tls.crl_file refuse a revoked member.
  signing-key create the Ed25519 key that signs fencing tokens:
                     signing-key.pem (0600). Give the same file to every member
                     (signing.key_file); it never enters the raft log.

  init               everything a stack needs in one idempotent step, for
                     containers without a shell (compose's init service):
                     the CA, a certificate per name (members valid for their
                     name and localhost) and, with --signing-key, the signing
                     key; what already exists is kept.

Examples:
  fencepost tls ca create --dir tls
  fencepost tls cert create --member --name n1 --dns n1.fencepost.default.svc --ip 127.0.0.1 --dir tls
  fencepost tls cert create --sidecar --name worker-7 --dir tls
  fencepost tls cert create --service --name fenced --dns fenced.default.svc --dir tls
  fencepost tls crl create --revoke tls/member-n3.pem --dir tls
  fencepost tls signing-key create --dir tls
`

func init() {
	register(&command{name: "tls", summary: "create the cluster CA, role certificates and the token signing key", usage: tlsUsage, run: runTLS})
}

func runTLS(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) >= 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, strings.TrimSpace(tlsUsage))
		return exitOK
	}
	if len(args) >= 1 && args[0] == "init" {
		return runTLSInit(args[1:], stdout, stderr)
	}
	if len(args) < 2 || args[1] != "create" {
		return usageError(stderr, "tls", "want 'ca create', 'cert create', 'crl create', 'signing-key create' or 'init'")
	}
	switch args[0] {
	case "ca":
		return runTLSCA(args[2:], stdout, stderr)
	case "cert":
		return runTLSCert(args[2:], stdout, stderr)
	case "crl":
		return runTLSCRL(args[2:], stdout, stderr)
	case "signing-key":
		return runSigningKey(args[2:], stdout, stderr)
	}
	return usageError(stderr, "tls", fmt.Sprintf("unknown object %q: want ca, cert, crl or signing-key", args[0]))
}

func runTLSCA(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tls ca create")
	dir := fs.String("dir", ".", "directory to write ca.pem and ca-key.pem into")
	name := fs.String("name", "fencepost-ca", "the CA's CommonName")
	days := fs.Int("days", int(pki.DefaultCAValidity/(24*time.Hour)), "validity in days")
	if code, ok := parseFlags(fs, tlsUsage, args, stdout, stderr); !ok {
		return code
	}
	if *days < 1 {
		return usageError(stderr, "tls ca create", "--days must be at least 1")
	}
	_, pair, err := pki.NewCA(*name, time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return usageError(stderr, "tls ca create", err.Error())
	}
	cert, key, err := pki.WritePair(*dir, pki.CAFile, pki.CAKeyFile, pair)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost tls ca create: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "==> wrote %s\n==> wrote %s (0600)\n", cert, key)
	return exitOK
}

func runTLSCert(args []string, stdout, stderr io.Writer) int {
	const name = "tls cert create"
	fs := newFlagSet(name)
	roles := map[string]*bool{}
	for _, r := range []string{"member", "server", "sidecar", "operator", "reader", "service"} {
		roles[r] = fs.Bool(r, false, "issue a "+r+" certificate")
	}
	id := fs.String("name", "", "identity: a member's node_id, a sidecar's worker id, a user")
	dns := fs.String("dns", "", "extra DNS names (comma-separated) clients dial this identity by")
	ips := fs.String("ip", "", "extra IP addresses (comma-separated)")
	dir := fs.String("dir", ".", "directory to write the certificate and key into")
	caFile := fs.String("ca", "", "CA certificate (default DIR/ca.pem)")
	caKey := fs.String("ca-key", "", "CA key (default DIR/ca-key.pem)")
	days := fs.Int("days", int(pki.DefaultCertValidity/(24*time.Hour)), "validity in days")
	workers := fs.String("worker-ids", "", "--sidecar only: extra worker ids (comma-separated) it may open sessions under")
	if code, ok := parseFlags(fs, tlsUsage, args, stdout, stderr); !ok {
		return code
	}
	var role pki.Role
	for r, set := range roles {
		if !*set {
			continue
		}
		if r == "server" {
			r = "member"
		}
		if role != "" && role != pki.Role(r) {
			return usageError(stderr, name, "give exactly one of --member, --server, --sidecar, --operator, --reader, --service")
		}
		role = pki.Role(r)
	}
	switch {
	case role == "":
		return usageError(stderr, name, "give one of --member, --server, --sidecar, --operator, --reader, --service")
	case !validCertName(*id):
		return usageError(stderr, name, "--name is required and may not contain '/', '\\' or spaces")
	case *days < 1:
		return usageError(stderr, name, "--days must be at least 1")
	case *workers != "" && role != pki.RoleSidecar:
		return usageError(stderr, name, "--worker-ids is for --sidecar certificates only")
	}
	req := pki.Request{Name: *id, Role: role, Validity: time.Duration(*days) * 24 * time.Hour, DNSNames: splitList(*dns),
		WorkerIDs: splitList(*workers)}
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return usageError(stderr, name, fmt.Sprintf("--ip %q is not an IP address", s))
		}
		req.IPs = append(req.IPs, ip)
	}
	if role == pki.RoleMember && len(req.DNSNames) == 0 && len(req.IPs) == 0 {
		// The API on loopback works out of the box; real names are added
		// with --dns / --ip.
		req.DNSNames, req.IPs = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if *caFile == "" {
		*caFile = filepath.Join(*dir, pki.CAFile)
	}
	if *caKey == "" {
		*caKey = filepath.Join(*dir, pki.CAKeyFile)
	}
	ca, err := pki.LoadCA(*caFile, *caKey)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost %s: --ca/--ca-key: %v (create one with 'fencepost tls ca create')\n", name, err)
		return exitUsage
	}
	pair, err := ca.Issue(req, time.Now())
	if err != nil {
		return usageError(stderr, name, err.Error())
	}
	certName, keyName := pki.CertFiles(role, *id)
	cert, key, err := pki.WritePair(*dir, certName, keyName, pair)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "==> wrote %s (%s/%s)\n==> wrote %s (0600)\n", cert, role, *id, key)
	return exitOK
}

// signingKeyFile is the name 'tls signing-key create' writes.
const signingKeyFile = "signing-key.pem"

func runSigningKey(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tls signing-key create")
	dir := fs.String("dir", ".", "directory to write signing-key.pem into")
	if code, ok := parseFlags(fs, tlsUsage, args, stdout, stderr); !ok {
		return code
	}
	path, err := writeSigningKey(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost tls signing-key create: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "==> wrote %s (0600)\n", path)
	return exitOK
}

// writeSigningKey writes a new Ed25519 key as PEM PKCS #8 into dir.
func writeSigningKey(dir string) (string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, signingKeyFile)
	return path, pki.WriteNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runTLSInit(args []string, stdout, stderr io.Writer) int {
	const name = "tls init"
	fs := newFlagSet(name)
	dir := fs.String("dir", "", "directory holding (or to hold) the CA, certificates and key")
	lists := map[pki.Role]*string{}
	for _, r := range pki.Roles {
		lists[r] = fs.String(string(r), "", string(r)+" names, comma-separated")
	}
	signing := fs.Bool("signing-key", false, "also create signing-key.pem")
	if code, ok := parseFlags(fs, tlsUsage, args, stdout, stderr); !ok {
		return code
	}
	if *dir == "" {
		return usageError(stderr, name, "--dir is required")
	}
	var reqs []pki.Request
	for _, r := range pki.Roles {
		for _, n := range splitList(*lists[r]) {
			if !validCertName(n) {
				return usageError(stderr, name, fmt.Sprintf("--%s %q: a name may not contain '/', '\\' or spaces", r, n))
			}
			req := pki.Request{Name: n, Role: r, Validity: pki.DefaultCertValidity}
			if r == pki.RoleMember {
				req.DNSNames, req.IPs = []string{n, "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			}
			reqs = append(reqs, req)
		}
	}
	files, err := pki.EnsureLocal(*dir, reqs, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
		return exitRuntime
	}
	if *signing {
		if _, err := os.Stat(filepath.Join(*dir, signingKeyFile)); os.IsNotExist(err) {
			if _, err := writeSigningKey(*dir); err != nil {
				fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
				return exitRuntime
			}
		}
	}
	fmt.Fprintf(stdout, "==> %s holds the CA and %d certificate(s)\n", *dir, len(files))
	return exitOK
}

// validCertName is the rule for a certificate's name: it becomes part of
// file names (<role>-<name>.pem), so no path separators or spaces.
func validCertName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "/\\ \t")
}
