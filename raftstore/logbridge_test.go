package raftstore

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestHCLogBridge(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := newHCLog(zap.New(core)).Named("raft").With("node", "n1")

	l.Debug("too chatty") // below the bridge's Info default
	l.Info("election won", "term", 3, "tally", 2)
	l.Warn("odd", "lonely")
	l.Error("fmt", "v", hclog.Fmt("%d-%s", 7, "x"))
	l.StandardLogger(nil).Print("[WARN] raft: from the std logger")
	l.StandardLogger(nil).Print("no level")

	entries := logs.AllUntimed()
	require.Len(t, entries, 5)
	require.Equal(t, "election won", entries[0].Message)
	require.Equal(t, zapcore.InfoLevel, entries[0].Level)
	require.Equal(t, "raft", entries[0].LoggerName)
	ctx := entries[0].ContextMap()
	require.Equal(t, "n1", ctx["node"])
	require.EqualValues(t, 3, ctx["term"])
	require.Equal(t, "lonely", entries[1].ContextMap()["extra"])
	require.Equal(t, "7-x", entries[2].ContextMap()["v"])
	require.Equal(t, zapcore.ErrorLevel, entries[2].Level)
	require.Equal(t, zapcore.WarnLevel, entries[3].Level)
	require.Equal(t, "raft: from the std logger", entries[3].Message)
	require.Equal(t, zapcore.InfoLevel, entries[4].Level)

	l.SetLevel(hclog.Debug)
	require.True(t, l.IsDebug())
	l.Debug("now visible")
	require.Len(t, logs.AllUntimed(), 6)
	require.Equal(t, "raft.sub", l.Named("sub").Name())
}
