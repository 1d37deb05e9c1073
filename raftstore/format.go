package raftstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// The formats this build writes and reads (DESIGN.md, "Formats and
// versions"). A log entry's layout is entryFormat: one entryType byte,
// then that type's JSON body, whose unknown fields an older reader
// ignores; an entry type this build does not know is either ignorable
// (ignorableFlag, skipped) or stops the member (halt). A snapshot's
// layout is snapshotFormat (snapshot.go), a backup's backupFormat
// (backup.go). API bodies are versioned by their path (/v1/).
const (
	// entryFormat versions the layout of raft.Log.Data. A build reads only
	// its own; a new layout would be a new number, written only once every
	// member reads it.
	entryFormat = 1
)

// entryStamp is written into raft.Log.Extensions of every entry this
// build proposes: "<entryFormat>/<version>". It costs a dozen bytes per
// entry and lets a member that cannot read an entry name the build that
// wrote it. Builds before v0.1.0 leave Extensions empty; raft carries the
// field through its log store and transport untouched, and those builds
// ignore it, so a stamped entry still reads on them.
func entryStamp(version string) []byte {
	if version == "" {
		version = "unknown"
	}
	return []byte(strconv.Itoa(entryFormat) + "/" + version)
}

// writerOf describes who wrote an entry, from its stamp.
func writerOf(ext []byte) string {
	if len(ext) == 0 {
		return "a build that stamps no version (before v0.1.0)"
	}
	f, v, ok := strings.Cut(string(ext), "/")
	if !ok {
		return fmt.Sprintf("an unrecognised writer (stamp %q)", ext)
	}
	return fmt.Sprintf("fencepost %s (entry format %s)", v, f)
}

// ErrHalted reports a member that met a log entry it cannot read and
// stopped applying (HaltError says which). It stays halted until it is
// restarted with a build that reads the entry, or its data dir is
// replaced (README, "A member stopped applying").
var ErrHalted = errors.New("raftstore: stopped applying the log")

// HaltError is why a member stopped applying: the entry's index, its type
// byte and who wrote it.
type HaltError struct {
	Index   uint64
	Type    uint8
	Writer  string
	Version string // this build's
	Cause   string
}

// Error implements error.
func (e *HaltError) Error() string {
	return fmt.Sprintf("raftstore: stopped applying the log at index %d: entry type %d written by %s: %s; this build (fencepost %s, entry format %d) cannot read it",
		e.Index, e.Type, e.Writer, e.Cause, e.Version, entryFormat)
}

// Unwrap makes errors.Is(err, ErrHalted) true.
func (e *HaltError) Unwrap() error { return ErrHalted }

// halter is the fsm's stop switch. Once set, Apply applies nothing more and
// does not count entries as applied, Snapshot refuses (a snapshot would
// claim the skipped entries), and onHalt runs once. Nothing is written,
// so the data dir is unchanged: restarting with the same build stops at
// the same entry with the same error (no crash loop, no panic), and a
// build that reads the entry resumes from it.
type halter struct {
	err    atomic.Pointer[HaltError]
	onHalt func(*HaltError)
}

func (h *halter) halted() *HaltError { return h.err.Load() }

// stop halts at entry l for cause and returns the error.
func (f *fsm) stop(l *raft.Log, cause string) *HaltError {
	e := &HaltError{Index: l.Index, Writer: writerOf(l.Extensions), Version: f.version, Cause: cause}
	if len(l.Data) > 0 {
		e.Type = l.Data[0]
	}
	if f.halt.err.CompareAndSwap(nil, e) {
		f.log.Error("stopped applying the raft log: an entry this build cannot read; the member serves no reads or writes until it runs a build that reads it (README: A member stopped applying)",
			zap.Uint64("index", e.Index), zap.Uint8("type", e.Type), zap.String("writer", e.Writer),
			zap.String("cause", cause), zap.String("version", f.version))
		if f.halt.onHalt != nil {
			f.halt.onHalt(e)
		}
	}
	return f.halt.halted()
}

// onHalt is the Store's reaction to its fsm halting: raft is shut down
// (from another goroutine: Shutdown waits for the FSM loop that called
// this), so the member neither leads nor votes with a state it cannot
// bring up to date, and the metric and /readyz report it.
// The goroutine is not in s.wg (Add must not race Close's Wait); Close
// waits for it on haltDone.
func (s *Store) onHalt(*HaltError) {
	go func() {
		defer close(s.haltDone)
		r := s.raftRef.Load()
		if r == nil {
			// Open has not stored raft yet (a halt while it starts); it
			// checks Halted itself once it has.
			return
		}
		s.drainProposals()
		if err := r.Shutdown().Error(); err != nil {
			s.log.Warn("raft shutdown after halt", zap.Error(err))
		}
	}()
}

func (s *Store) haltedGauge() float64 {
	if s.fsm.halt.halted() != nil {
		return 1
	}
	return 0
}

// Halted returns why this member stopped applying the log, nil when it
// has not.
func (s *Store) Halted() error {
	if e := s.fsm.halt.halted(); e != nil {
		return e
	}
	return nil
}
