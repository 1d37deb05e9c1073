package conns

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDialTargetMapsLocalhostNamesToLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"fenced.localhost:7490":    "127.0.0.1:7490",
		"a.b.LOCALHOST:80":         "127.0.0.1:80",
		"fenced.localhost.:7490":   "127.0.0.1:7490",
		"localhost:7490":           "127.0.0.1:7490",
		"localhost.example.com:80": "localhost.example.com:80",
		"notlocalhost:80":          "notlocalhost:80",
		"api.example.com:443":      "api.example.com:443",
		"127.0.0.1:7490":           "127.0.0.1:7490",
		"[::1]:7490":               "[::1]:7490",
		"no-port":                  "no-port",
	} {
		require.Equal(t, want, DialTarget(in), in)
	}
}
