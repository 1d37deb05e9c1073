package cluster_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

func TestEveryModelCodeMatchesItsSentinel(t *testing.T) {
	for _, e := range lease.Errors() {
		err := error(&cluster.Error{Status: e.Status, Problem: api.Problem{Code: e.Code, Status: e.Status}})
		require.ErrorIs(t, err, e.Err, "code %s", e.Code)
		for _, other := range lease.Errors() {
			if other.Err != e.Err {
				require.False(t, errors.Is(err, other.Err), "code %s matches %v", e.Code, other.Err)
			}
		}
	}
}
