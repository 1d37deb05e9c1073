package request

import (
	"strings"
)

// safeMethods are the methods treated as reads unless a rule says
// otherwise. Everything else, including methods the sidecar has never
// heard of, is a write: unknown means write.
var safeMethods = map[string]bool{"GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true}

// normalizeRules upper-cases methods and lower-cases hosts once, so
// matching does no allocation.
func normalizeRules(in []WriteRule) []WriteRule {
	out := make([]WriteRule, len(in))
	for i, r := range in {
		r.Host = strings.ToLower(r.Host)
		ms := make([]string, len(r.Methods))
		for j, m := range r.Methods {
			ms[j] = strings.ToUpper(m)
		}
		r.Methods = ms
		out[i] = r
	}
	return out
}

// isWrite classifies a request. Rules are tried in order and the first
// match decides; without a match, the method decides.
func isWrite(rules []WriteRule, method string, t target) bool {
	for _, r := range rules {
		if r.matches(method, t) {
			return r.Write
		}
	}
	return !safeMethods[method]
}

func (r WriteRule) matches(method string, t target) bool {
	if len(r.Methods) > 0 {
		ok := false
		for _, m := range r.Methods {
			if m == method {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if r.Host != "" && !hostMatches(r.Host, t) {
		return false
	}
	if r.PathPrefix != "" {
		raw := strings.HasPrefix(t.rawPath, r.PathPrefix)
		norm := strings.HasPrefix(t.normPath, r.PathPrefix)
		if r.Write {
			return raw || norm // widening to "write" is always safe
		}
		return raw && norm // narrowing to "read" needs both views to agree
	}
	return true
}

func hostMatches(pattern string, t target) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(t.host, "."+suffix)
	}
	if strings.Contains(pattern, ":") && !strings.HasPrefix(pattern, "[") || strings.HasPrefix(pattern, "[") && strings.Contains(pattern, "]:") {
		return pattern == t.hostPort
	}
	return pattern == t.host
}
