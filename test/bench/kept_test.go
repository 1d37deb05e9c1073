package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A plaintext run and a TLS-only run both keep the hand-written tail, and
// a TLS section added to a file without one goes before it.
func TestRegeneratingKeepsTheHandWrittenTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	tail := keptBegin + "\n\n## 9 measured on its own\n\nfigures\n"
	require.NoError(t, os.WriteFile(path, []byte("# old generated text\n\n"+tail), 0o644))

	require.NoError(t, writeTLSSection(path, tlsBegin+"\ntls figures\n"+tlsEnd+"\n"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	require.True(t, strings.HasSuffix(s, tail), s)
	require.Contains(t, s, "tls figures")
	require.Less(t, strings.Index(s, tlsEnd), strings.Index(s, keptBegin), "the TLS section goes before the kept tail:\n%s", s)

	require.NoError(t, writeMD(path, &Results{}, "table"))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	s = string(b)
	require.NotContains(t, s, "old generated text")
	require.True(t, strings.HasSuffix(s, tail), s)
	require.Contains(t, s, "tls figures")
}
