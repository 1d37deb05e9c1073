// Package problem owns the one shape of a configuration problem: a
// one-line error naming where a value came from, its key and the rule it
// broke, wrapping a sentinel for errors.Is. Package config and its
// sections with rules of their own (config/tracing) report through it, so
// every bad setting reads and unwraps the same way whichever package
// checked it.
//
// It is a leaf: config/tracing cannot import config (config imports it),
// so the shared shape lives below both.
package problem

import (
	"errors"
	"fmt"
)

// The classes of problem. Every Error wraps exactly one of them as its
// Kind; package config re-exports them under its own names.
var (
	// ErrInvalid means a value breaks a validation rule.
	ErrInvalid = errors.New("config: invalid value")
	// ErrUnknownKey means the file, the environment or a flag names a key
	// the role does not have.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrSyntax means a file or a value could not be parsed at all.
	ErrSyntax = errors.New("config: syntax error")
	// ErrRole means the role is unknown or could not be inferred.
	ErrRole = errors.New("config: unknown role")
	// ErrRuntime means the host cannot run the configuration: a directory
	// is not writable, a port is taken, a file cannot be read.
	ErrRuntime = errors.New("config: runtime check failed")
)

// Error is one problem with one key. Its message is a single line:
// "config: <where>: <key>: <rule>".
type Error struct {
	// Where says which layer the value came from ("server.yaml:12",
	// "env FENCEPOST_RAFT_ELECTION_TIMEOUT", "flag --log-level"); empty for
	// validation of the merged result.
	Where string
	// Key is the dotted key, e.g. "leases.profiles.short.heartbeat", or,
	// from a section that mirrors environment variables, the variable
	// (config re-labels it with its key).
	Key string
	// Msg states the rule that was broken and the offending value.
	Msg string
	// Kind is the class the error wraps (ErrInvalid, ...).
	Kind error
	// Rule, when set, is the checking package's own sentinel for the rule
	// (tracing.ErrExporter, say), wrapped too.
	Rule error
}

// Error returns the one-line message.
func (e *Error) Error() string {
	s := "config: "
	if e.Where != "" {
		s += e.Where + ": "
	}
	if e.Key != "" {
		s += e.Key + ": "
	}
	return s + e.Msg
}

// Unwrap returns the class and the rule's sentinel, so errors.Is works
// with either.
func (e *Error) Unwrap() []error {
	if e.Rule == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Rule}
}

// List collects problems so validation reports all of them at once. The
// zero List is empty.
type List struct {
	errs []error
}

// Invalid records a broken rule on key.
func (l *List) Invalid(key, format string, args ...any) {
	l.errs = append(l.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...), Kind: ErrInvalid})
}

// Rule records a broken rule on key that the caller names with its own
// sentinel as well.
func (l *List) Rule(key string, rule error, format string, args ...any) {
	l.errs = append(l.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...), Kind: ErrInvalid, Rule: rule})
}

// Runtime records a host problem on key.
func (l *List) Runtime(key, format string, args ...any) {
	l.errs = append(l.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...), Kind: ErrRuntime})
}

// Add records an already built error; nil is ignored.
func (l *List) Add(err error) {
	if err != nil {
		l.errs = append(l.errs, err)
	}
}

// All returns the collected errors, in the order they were found.
func (l *List) All() []error { return l.errs }

// Err joins the collected errors; each one prints on its own line. An
// empty List gives nil.
func (l *List) Err() error {
	return errors.Join(l.errs...)
}

// Split splits an error built from a List into its one-line parts, in the
// order they were found. A nil error gives nil.
func Split(err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			if _, one := e.(*Error); !one {
				for _, x := range j.Unwrap() {
					walk(x)
				}
				return
			}
		}
		out = append(out, e)
	}
	walk(err)
	return out
}
