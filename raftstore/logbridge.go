package raftstore

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// hclogZap implements hclog.Logger over a zap.Logger, so raft, its
// transport and its snapshot store log through the same JSON pipeline as
// the rest of the node. hclog's alternating key/value args become zap fields.
type hclogZap struct {
	z       *zap.Logger
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level; shared by loggers derived with With/Named
}

// newHCLog returns an hclog.Logger writing to z at Info and above (raft's
// Debug output is one line per RPC and would drown everything else).
func newHCLog(z *zap.Logger) hclog.Logger {
	lv := &atomic.Int32{}
	lv.Store(int32(hclog.Info))
	return &hclogZap{z: z, level: lv}
}

func (l *hclogZap) enabled(level hclog.Level) bool {
	return level >= hclog.Level(l.level.Load()) && level != hclog.Off
}

func zapLevel(level hclog.Level) zapcore.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return zapcore.DebugLevel
	case hclog.Warn:
		return zapcore.WarnLevel
	case hclog.Error:
		return zapcore.ErrorLevel
	default:
		return zapcore.InfoLevel
	}
}

// Log implements hclog.Logger.
func (l *hclogZap) Log(level hclog.Level, msg string, args ...any) {
	if !l.enabled(level) {
		return
	}
	ce := l.z.Check(zapLevel(level), msg)
	if ce == nil {
		return
	}
	ce.Write(l.fields(args)...)
}

// fields turns implied and call args (key, value, key, value, ...) into zap
// fields; a trailing odd value is kept under "extra" rather than dropped.
func (l *hclogZap) fields(args []any) []zap.Field {
	all := append(append([]any(nil), l.implied...), args...)
	out := make([]zap.Field, 0, len(all)/2+1)
	for i := 0; i < len(all); i += 2 {
		if i+1 >= len(all) {
			out = append(out, zap.Any("extra", all[i]))
			break
		}
		key, ok := all[i].(string)
		if !ok {
			key = fmt.Sprint(all[i])
		}
		v := all[i+1]
		if f, ok := v.(hclog.Format); ok {
			v = fmt.Sprintf(f[0].(string), f[1:]...)
		}
		out = append(out, zap.Any(key, v))
	}
	return out
}

func (l *hclogZap) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *hclogZap) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *hclogZap) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *hclogZap) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *hclogZap) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *hclogZap) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *hclogZap) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *hclogZap) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *hclogZap) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *hclogZap) IsError() bool { return l.enabled(hclog.Error) }

func (l *hclogZap) ImpliedArgs() []any { return l.implied }

func (l *hclogZap) With(args ...any) hclog.Logger {
	c := *l
	c.implied = append(append([]any(nil), l.implied...), args...)
	return &c
}

func (l *hclogZap) Name() string { return l.name }

func (l *hclogZap) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return l.ResetNamed(name)
}

func (l *hclogZap) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	c.z = l.z.Named(name)
	return &c
}

func (l *hclogZap) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }
func (l *hclogZap) GetLevel() hclog.Level      { return hclog.Level(l.level.Load()) }

func (l *hclogZap) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *hclogZap) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &stdWriter{l: l}
}

// stdWriter adapts *log.Logger output ("[WARN] raft: ...") to hclogZap,
// parsing the bracketed level prefix hashicorp libraries use.
type stdWriter struct{ l *hclogZap }

func (w *stdWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	level := hclog.Info
	for _, pre := range []struct {
		tag string
		lv  hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
		if len(msg) >= len(pre.tag) && msg[:len(pre.tag)] == pre.tag {
			level = pre.lv
			msg = string(bytes.TrimSpace([]byte(msg[len(pre.tag):])))
			break
		}
	}
	w.l.Log(level, msg)
	return len(p), nil
}
