package scenario

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goodAudit is what a correct run looks like.
func goodAudit() audit {
	t0 := time.Now()
	return audit{
		epochA: 11, epochB: 16, resumed: true, retryReplayed: true,
		accepted:      []AcceptedWrite{{Epoch: 11}, {Epoch: 11}, {Epoch: 16}},
		rejectedStale: 1,
		lostAt:        t0.Add(2 * time.Second),
		sent: []sentWrite{
			{Worker: "A", Result: WriteResult{Outcome: Accepted, Sent: t0}},
			{Worker: "A", Result: WriteResult{Outcome: BlockedBySidecar, Sent: t0.Add(3 * time.Second)}},
		},
	}
}

func TestJudgeAcceptsACorrectRun(t *testing.T) {
	var s Summary
	goodAudit().judge(&s)
	require.True(t, s.OK, s.Reasons)
	require.Equal(t, 3, s.WritesAccepted)
	require.Equal(t, 1, s.BlockedBySidecar)
}

// TestJudgeCatchesEachBrokenGuarantee: every guarantee, broken alone,
// turns the verdict to not ok with a reason naming it.
func TestJudgeCatchesEachBrokenGuarantee(t *testing.T) {
	cases := map[string]func(a *audit){
		"stale accepted": func(a *audit) { a.accepted = append(a.accepted, AcceptedWrite{Epoch: 11}) },
		"double execution": func(a *audit) {
			a.sent = append(a.sent, sentWrite{Worker: "A", Result: WriteResult{Outcome: Accepted, Sent: a.lostAt.Add(time.Millisecond)}})
		},
		"sidecar blocked nothing":   func(a *audit) { a.sent = a.sent[:1] },
		"downstream fenced nothing": func(a *audit) { a.rejectedStale = 0 },
		"epoch not higher":          func(a *audit) { a.epochB = a.epochA },
		"not resumed":               func(a *audit) { a.resumed = false },
		"retry not replayed":        func(a *audit) { a.retryReplayed = false },
		"sent after the latest possible deadline": func(a *audit) {
			a.lostAt = time.Time{}
			a.latestDeadline = a.sent[0].Result.Sent.Add(time.Second)
			a.sent = append(a.sent, sentWrite{Worker: "A", Result: WriteResult{Outcome: Accepted, Sent: a.latestDeadline}})
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			a := goodAudit()
			breakIt(&a)
			var s Summary
			a.judge(&s)
			require.False(t, s.OK)
			require.NotEmpty(t, s.Reasons)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	require.NoError(t, Config{TTL: 10 * time.Second}.Validate())
	require.Error(t, Config{TTL: time.Second}.Validate())
	require.Error(t, Config{WriteEvery: time.Millisecond}.Validate())
	require.Error(t, Config{TTL: 2 * time.Second, WriteEvery: time.Second}.Validate())
	require.Error(t, Config{Downstream: "ruby"}.Validate())
}
