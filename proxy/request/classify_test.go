package request

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteRules(t *testing.T) {
	rules := normalizeRules([]WriteRule{
		{Host: "search.example", PathPrefix: "/query", Methods: []string{"post"}, Write: false},
		{Host: "*.danger.example", Methods: []string{"GET"}, Write: true},
		{Host: "api.example:8080", PathPrefix: "/admin", Write: true},
	})
	tg := func(host, hp, raw, norm string) target {
		return target{host: host, hostPort: hp, rawPath: raw, normPath: norm}
	}
	require.False(t, isWrite(rules, "POST", tg("search.example", "search.example:80", "/query/x", "/query/x")))
	// A dot-segment cannot narrow a write into a read.
	require.True(t, isWrite(rules, "POST", tg("search.example", "search.example:80", "/query/../delete", "/delete")))
	require.True(t, isWrite(rules, "POST", tg("other.example", "other.example:80", "/query", "/query")))
	require.True(t, isWrite(rules, "GET", tg("x.danger.example", "x.danger.example:80", "/", "/")))
	require.False(t, isWrite(rules, "GET", tg("danger.example", "danger.example:80", "/", "/")))
	require.True(t, isWrite(rules, "GET", tg("api.example", "api.example:8080", "/ad%6din", "/admin")))
	require.False(t, isWrite(rules, "GET", tg("api.example", "api.example:80", "/admin", "/admin")))
	// Unknown and lower-case methods are writes: unknown means write.
	require.True(t, isWrite(nil, "PURGE", tg("a", "a:80", "/", "/")))
	require.True(t, isWrite(nil, "get", tg("a", "a:80", "/", "/")))
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "TRACE"} {
		require.False(t, isWrite(nil, m, tg("a", "a:80", "/", "/")))
	}
}
