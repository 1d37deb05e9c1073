package config

import (
	"fmt"
	"net/url"
	"strings"
)

// TraceIDPlaceholder is what a trace UI URL template names the trace id
// with; the console replaces it with the 32 hex digits of a W3C trace id.
const TraceIDPlaceholder = "{trace_id}"

// CheckTraceURL checks a trace UI URL template (the console's
// --trace-url, dev's console_trace_url): an absolute http or https URL
// that names TraceIDPlaceholder, e.g. Jaeger's
// http://127.0.0.1:16686/trace/{trace_id}. The one place this rule lives.
func CheckTraceURL(tmpl string) error {
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		return fmt.Errorf("must contain %s", TraceIDPlaceholder)
	}
	u, err := url.Parse(TraceURL(tmpl, "0123456789abcdef0123456789abcdef"))
	if err != nil {
		return fmt.Errorf("must be a URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http:// or https:// URL, not %q", tmpl)
	}
	return nil
}

// TraceURL fills a template CheckTraceURL accepted with one trace id.
func TraceURL(tmpl, traceID string) string {
	return strings.ReplaceAll(tmpl, TraceIDPlaceholder, url.PathEscape(traceID))
}
