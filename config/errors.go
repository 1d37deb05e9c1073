package config

import (
	"github.com/fencepost/fencepost/config/problem"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can tell a bad file from a bad host with errors.Is. They
// are package problem's classes, which config's sections with rules of
// their own (config/tracing) report with too.
var (
	// ErrInvalid means a value breaks a validation rule.
	ErrInvalid = problem.ErrInvalid
	// ErrUnknownKey means the file, the environment or a flag names a key
	// the role does not have.
	ErrUnknownKey = problem.ErrUnknownKey
	// ErrSyntax means a file or a value could not be parsed at all.
	ErrSyntax = problem.ErrSyntax
	// ErrRole means the role is unknown or could not be inferred.
	ErrRole = problem.ErrRole
	// ErrRuntime means the host cannot run the configuration: a directory
	// is not writable, a port is taken, a file cannot be read.
	ErrRuntime = problem.ErrRuntime
)

// FieldError is one problem with one key. Its message is a single line:
// "config: <where>: <key>: <rule>". It is package problem's Error.
type FieldError = problem.Error

// problems collects FieldErrors so validation reports all of them at once.
type problems struct {
	list problem.List
}

// invalid records a broken rule on key.
func (p *problems) invalid(key, format string, args ...any) { p.list.Invalid(key, format, args...) }

// runtime records a host problem on key.
func (p *problems) runtime(key, format string, args ...any) { p.list.Runtime(key, format, args...) }

// add records an already built error.
func (p *problems) add(err error) { p.list.Add(err) }

// err joins the collected errors; each one prints on its own line.
func (p *problems) err() error { return p.list.Err() }

// Errors splits an error returned by this package into its one-line parts,
// in the order they were found. A nil error gives nil.
func Errors(err error) []error { return problem.Split(err) }
