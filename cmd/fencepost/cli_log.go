package main

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost/fencepost/config"
)

// newLogger builds the process logger from a role's log section: JSON lines
// (the default, for log collectors) or console text (for people), at the
// configured level, written to w (normally stderr, leaving stdout to the
// command's own output). The config package has already checked level and
// format; the errors here are a second line of defence for callers that
// build a config.Log by hand.
func newLogger(cfg config.Log, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	var enc zapcore.Encoder
	switch cfg.Format {
	case "json", "":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log.format: must be json or console (got %q)", cfg.Format)
	}
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(enc, sink, zap.NewAtomicLevelAt(level))
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(sink)), nil
}
