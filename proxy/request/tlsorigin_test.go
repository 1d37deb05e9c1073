package request

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOriginTableLookup(t *testing.T) {
	o, err := newOriginTable([]TLSOrigin{{Host: "API.example.com"}, {Host: "db.local:8443", ServerName: "db"}})
	require.NoError(t, err)
	require.NotNil(t, o.lookup("api.example.com", ""))
	require.NotNil(t, o.lookup("api.example.com", "8080"))
	require.Nil(t, o.lookup("db.local", ""))
	require.Equal(t, "db", o.lookup("db.local", "8443").ServerName)
	require.Equal(t, "api.example.com", o.forAddr("api.example.com:443").ServerName)
	_, err = newOriginTable([]TLSOrigin{{Host: "x", CAFile: "/nonexistent"}})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
