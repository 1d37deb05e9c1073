package main

import (
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/fencepost/fencepost/fence/pki"
)

// runTLSCRL is `fencepost tls crl create`: a revocation list that keeps
// every serial of the list it replaces, so revoking one more certificate
// never un-revokes another.
func runTLSCRL(args []string, stdout, stderr io.Writer) int {
	const name = "tls crl create"
	fs := newFlagSet(name)
	dir := fs.String("dir", ".", "directory holding the CA (and, by default, crl.pem)")
	out := fs.String("out", "", "the list to write (default DIR/crl.pem); its serials are kept")
	revoke := fs.String("revoke", "", "certificate files or hex serials to revoke (comma-separated)")
	caFile := fs.String("ca", "", "CA certificate (default DIR/ca.pem)")
	caKey := fs.String("ca-key", "", "CA key (default DIR/ca-key.pem)")
	days := fs.Int("days", int(pki.DefaultCRLValidity/(24*time.Hour)), "days until the list's NextUpdate")
	if code, ok := parseFlags(fs, tlsUsage, args, stdout, stderr); !ok {
		return code
	}
	if *days < 1 {
		return usageError(stderr, name, "--days must be at least 1")
	}
	if *out == "" {
		*out = filepath.Join(*dir, pki.CRLFile)
	}
	if *caFile == "" {
		*caFile = filepath.Join(*dir, pki.CAFile)
	}
	if *caKey == "" {
		*caKey = filepath.Join(*dir, pki.CAKeyFile)
	}
	var serials []*big.Int
	for _, r := range splitList(*revoke) {
		n, err := revokeTarget(r)
		if err != nil {
			return usageError(stderr, name, fmt.Sprintf("--revoke %q: %v", r, err))
		}
		serials = append(serials, n)
	}
	if len(serials) == 0 {
		return usageError(stderr, name, "--revoke must name at least one certificate file or serial")
	}
	ca, err := pki.LoadCA(*caFile, *caKey)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost %s: --ca/--ca-key: %v\n", name, err)
		return exitUsage
	}
	number := big.NewInt(1)
	if old, err := os.ReadFile(*out); err == nil {
		kept, n, err := pki.ReadCRLSerials(ca, old)
		if err != nil {
			return usageError(stderr, name, fmt.Sprintf("--out %s: the existing list: %v", *out, err))
		}
		serials, number = append(kept, serials...), n.Add(n, big.NewInt(1))
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
		return exitRuntime
	}
	b, err := ca.IssueCRL(serials, number, time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return usageError(stderr, name, err.Error())
	}
	// Replaced by a rename, so a member re-reading it never sees half a list.
	tmp := *out + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil { //nolint:gosec // a CRL is public
		fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
		return exitRuntime
	}
	if err := os.Rename(tmp, *out); err != nil {
		_ = os.Remove(tmp)
		fmt.Fprintf(stderr, "fencepost %s: %v\n", name, err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "==> wrote %s (list %s)\n", *out, number)
	for _, s := range serials {
		fmt.Fprintf(stdout, "    revoked serial %s\n", s.Text(16))
	}
	return exitOK
}

// revokeTarget reads one --revoke item: a certificate file, else a serial.
func revokeTarget(s string) (*big.Int, error) {
	if _, err := os.Stat(s); err == nil {
		return pki.CertSerial(s)
	}
	return pki.ParseSerial(s)
}
