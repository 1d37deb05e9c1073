package workertie

import (
	"strconv"
	"strings"
)

// Env is what the sidecar tells a worker it starts (the control API
// contract's "environment the sidecar gives a worker").
type Env struct {
	// ControlURL is the control API, e.g. http://127.0.0.1:7481.
	ControlURL string
	// ProxyURL is the sidecar's proxy, e.g. http://127.0.0.1:7480.
	ProxyURL string
	// NoProxy lists what the worker reaches directly: the control API's
	// host. Never "localhost" (it would send *.localhost services around
	// the sidecar).
	NoProxy string
	// CABundle is the system roots plus the sidecar's interception CA;
	// empty when the sidecar does not intercept.
	CABundle string
	// Grant is the lease the worker starts under (zero: none yet).
	Grant Grant
}

// Vars returns the variables as KEY=value lines for exec.Cmd.Env, to be
// appended to the sidecar's own environment (later entries win).
func (e Env) Vars() []string {
	var out []string
	add := func(k, v string) { out = append(out, k+"="+v) }
	both := func(k, v string) { add(k, v); add(strings.ToLower(k), v) }
	if e.ProxyURL != "" {
		both("HTTP_PROXY", e.ProxyURL)
		both("HTTPS_PROXY", e.ProxyURL)
		add("NODE_USE_ENV_PROXY", "1")
	}
	if e.NoProxy != "" {
		both("NO_PROXY", e.NoProxy)
	}
	if e.CABundle != "" {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
			add(k, e.CABundle)
		}
	}
	add("FENCEPOST_CONTROL_URL", e.ControlURL)
	add("FENCEPOST_TASK", e.Grant.Task)
	epoch := ""
	if e.Grant.Epoch != 0 {
		epoch = strconv.FormatUint(e.Grant.Epoch, 10)
	}
	add("FENCEPOST_EPOCH", epoch)
	add("FENCEPOST_CHECKPOINT", e.Grant.Checkpoint)
	return out
}
