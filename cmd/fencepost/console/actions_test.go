package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestActionsAskFirstThenRevokeTheEpochShown(t *testing.T) {
	f := newFakeCluster()
	epoch := f.acquire(t, "w1", "t1")
	s := startConsole(t, f)
	c := browser(t)
	token := csrfOf(t, c, s)
	status, body := post(t, c, s, "/tasks/t1/revoke", url.Values{"csrf": {token}, "epoch": {itoa(epoch)}})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Revoke the lease of task t1 at epoch "+itoa(epoch)+"?", "without JavaScript the console asks on a page")
	require.Empty(t, f.revokes)

	status, _ = post(t, c, s, "/tasks/t1/revoke", url.Values{"csrf": {token}, "epoch": {itoa(epoch + 1)}, "confirm": {"yes"}},
		"Accept", "application/json")
	require.Equal(t, http.StatusConflict, status, "an epoch the page did not show is stale in the cluster")

	status, body = post(t, c, s, "/tasks/t1/revoke", url.Values{"csrf": {token}, "epoch": {itoa(epoch)}, "confirm": {"yes"}, "reason": {"stuck"}},
		"Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)
	var res actionResult
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.Equal(t, epoch, res.Epoch)
	tk, err := f.TaskSummary(context.Background(), "t1", true)
	require.NoError(t, err)
	require.Equal(t, lease.StatusRevoked, tk.Lease.Status)
	require.Equal(t, "stuck (console, operator/alice)", tk.Lease.Reason, "the cluster records who acted, from where")
}

func TestCancelRefusesWhenTheTaskMovedOn(t *testing.T) {
	f := newFakeCluster()
	epoch := f.acquire(t, "w1", "t1")
	s := startConsole(t, f)
	c := browser(t)
	token := csrfOf(t, c, s)
	status, body := post(t, c, s, "/tasks/t1/cancel", url.Values{"csrf": {token}, "epoch": {itoa(epoch - 1)}, "confirm": {"yes"}},
		"Accept", "application/json")
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "at epoch "+itoa(epoch)+" now")
	status, _ = post(t, c, s, "/tasks/t1/cancel", url.Values{"csrf": {token}, "epoch": {itoa(epoch)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	tk, err := f.TaskSummary(context.Background(), "t1", true)
	require.NoError(t, err)
	require.Equal(t, lease.TaskCancelled, tk.State)
}

func TestReaderConsoleShowsActionsDisabledAndRefusesThem(t *testing.T) {
	f := newFakeCluster()
	epoch := f.acquire(t, "w1", "t1")
	s := startConsole(t, f, func(c *Config) { c.Identity = readerID })
	c := browser(t)
	status, body := get(t, c, s, "/tasks/t1")
	require.Equal(t, http.StatusOK, status)
	require.Regexp(t, `<button id="revoke" class="danger" disabled>`, body)
	require.Regexp(t, `<button id="cancel" class="danger" disabled>`, body)
	require.Contains(t, body, "read-only credential (reader/dashboard)")
	token := csrfAttr.FindStringSubmatch(body)[1]
	for _, action := range []string{"revoke", "cancel", "signal"} {
		status, body := post(t, c, s, "/tasks/t1/"+action, url.Values{"csrf": {token}, "epoch": {itoa(epoch)}, "confirm": {"yes"}},
			"Accept", "application/json")
		require.Equal(t, http.StatusForbidden, status, "%s: %s", action, body)
	}
	require.Empty(t, f.revokes)
}
