package tracing

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The settings of fencepost's OTLP/HTTP exporter, read from the same
// OTEL_EXPORTER_OTLP_[TRACES_]* variables, in the same order and with the
// same precedence and defaults, as the stock otlptracehttp exporter reads
// them (its internal otlpconfig and envconfig packages): a setting that
// does not parse is ignored there, so it is ignored here.

// The stock exporter's defaults and limits.
const (
	otlpDefaultEndpoint = "localhost:4318"
	otlpTracesPath      = "/v1/traces"
	otlpDefaultTimeout  = 10 * time.Second
	otlpMaxRequest      = 64 << 20 // before compression
	otlpMaxResponse     = 4 << 20
)

// errInsecureWithTLS is the stock exporter's refusal of a certificate
// setting for an http:// endpoint.
var errInsecureWithTLS = errors.New("insecure HTTP endpoint cannot use TLS client configuration")

// httpSettings is what the variables (and fencepost's endpoint) decide.
type httpSettings struct {
	url     string
	headers map[string]string
	gzip    bool
	timeout time.Duration
	tls     *tls.Config // nil: the transport's default
}

// otlpEnv reads OTEL_EXPORTER_OTLP_<key>, trimmed, as the stock exporter
// does; ok is false when unset or blank.
func otlpEnv(key string) (string, bool) {
	v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + key))
	return v, v != ""
}

// readHTTPSettings reads the variables, with endpoint (a full URL, path
// included) taking the place of the variables' endpoint when set, as
// otlptracehttp.WithEndpointURL, applied after the variables, does.
func readHTTPSettings(endpoint string) (httpSettings, error) {
	insecure, host, urlPath := false, otlpDefaultEndpoint, otlpTracesPath
	if u, ok := envURL("ENDPOINT"); ok {
		// A base URL: the signal's path goes under it.
		insecure, host, urlPath = schemeInsecure(u.Scheme), u.Host, path.Join(u.Path, otlpTracesPath)
	}
	if u, ok := envURL("TRACES_ENDPOINT"); ok {
		// A per-signal URL is used as it is, "/" when it has no path.
		insecure, host, urlPath = schemeInsecure(u.Scheme), u.Host, orRoot(u.Path)
	}
	tlsCfg := &tls.Config{}
	tlsSet := false
	for _, k := range []string{"CERTIFICATE", "TRACES_CERTIFICATE"} {
		if pool, ok := envCertPool(k); ok {
			tlsCfg.RootCAs, tlsSet = pool, true
		}
	}
	for _, p := range [][2]string{{"CLIENT_CERTIFICATE", "CLIENT_KEY"}, {"TRACES_CLIENT_CERTIFICATE", "TRACES_CLIENT_KEY"}} {
		if c, ok := envClientCert(p[0], p[1]); ok {
			tlsCfg.Certificates, tlsSet = []tls.Certificate{c}, true
		}
	}
	for _, k := range []string{"INSECURE", "TRACES_INSECURE"} {
		if v, ok := otlpEnv(k); ok {
			insecure = strings.EqualFold(v, "true")
		}
	}
	s := httpSettings{headers: map[string]string{}, timeout: otlpDefaultTimeout}
	for _, k := range []string{"HEADERS", "TRACES_HEADERS"} {
		if v, ok := otlpEnv(k); ok {
			s.headers = parseHeaders(v) // the per-signal list replaces, as in the stock exporter
		}
	}
	for _, k := range []string{"COMPRESSION", "TRACES_COMPRESSION"} {
		if v, ok := otlpEnv(k); ok {
			s.gzip = v == "gzip"
		}
	}
	for _, k := range []string{"TIMEOUT", "TRACES_TIMEOUT"} {
		if v, ok := otlpEnv(k); ok {
			if ms, err := strconv.Atoi(v); err == nil {
				s.timeout = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil {
			return s, fmt.Errorf("%w: %q: %w", ErrEndpoint, endpoint, err)
		}
		host, urlPath, insecure = u.Host, orRoot(u.Path), u.Scheme != "https"
	}
	if insecure && tlsSet {
		return s, errInsecureWithTLS
	}
	if tlsSet {
		s.tls = tlsCfg
	}
	scheme := "https"
	if insecure {
		scheme = "http"
	}
	s.url = (&url.URL{Scheme: scheme, Host: host, Path: cleanPath(urlPath)}).String()
	return s, nil
}

// client is the HTTP client of the settings: the stock exporter's copy of
// http.DefaultTransport, minus HTTP_PROXY (noProxy), with the timeout per
// post.
func (s httpSettings) client() *http.Client {
	transport := &http.Transport{
		Proxy:                 noProxy,
		DialContext:           pooledCopyDial((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       s.tls,
	}
	return &http.Client{Transport: transport, Timeout: s.timeout}
}

// orRoot is "/" for an empty path: a URL without one targets the root.
func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// cleanPath trims p and makes it absolute; blank or "." is the default
// path, as the stock exporter's final clean-up has it.
func cleanPath(p string) string {
	p = strings.TrimSpace(p)
	if p == "" || p == "." {
		return otlpTracesPath
	}
	if !path.IsAbs(p) {
		p = "/" + p
	}
	return p
}

// schemeInsecure is the stock exporter's reading of an endpoint's scheme.
func schemeInsecure(scheme string) bool {
	s := strings.ToLower(scheme)
	return s == "http" || s == "unix"
}

// envURL parses an endpoint variable.
func envURL(key string) (*url.URL, bool) {
	v, ok := otlpEnv(key)
	if !ok {
		return nil, false
	}
	u, err := url.Parse(v)
	return u, err == nil
}

// envCertPool reads the PEM file a certificate variable names.
func envCertPool(key string) (*x509.CertPool, bool) {
	file, ok := otlpEnv(key)
	if !ok {
		return nil, false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	pool := x509.NewCertPool()
	return pool, pool.AppendCertsFromPEM(b)
}

// envClientCert reads the client certificate and key two variables name.
func envClientCert(certKey, keyKey string) (tls.Certificate, bool) {
	cf, ok1 := otlpEnv(certKey)
	kf, ok2 := otlpEnv(keyKey)
	if !ok1 || !ok2 {
		return tls.Certificate{}, false
	}
	c, err := tls.LoadX509KeyPair(cf, kf)
	return c, err == nil
}

// parseHeaders parses "k=v,k=v": keys trimmed and HTTP tokens, values
// percent-decoded then trimmed; a malformed pair is skipped.
func parseHeaders(s string) map[string]string {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !isToken(k) {
			continue
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			continue
		}
		out[k] = strings.TrimSpace(dv)
	}
	return out
}

// isToken reports whether k is a non-empty HTTP token (RFC 9110).
func isToken(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}
