package config

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can tell a bad file from a bad host with errors.Is.
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

// FieldError is one problem with one key. Its message is a single line:
// "config: <where>: <key>: <rule>".
type FieldError struct {
	// Where says which layer the value came from ("server.yaml:12",
	// "env FENCEPOST_RAFT_ELECTION_TIMEOUT", "flag --log-level"); empty for
	// validation of the merged result.
	Where string
	// Key is the dotted key, e.g. "leases.profiles.short.heartbeat".
	Key string
	// Msg states the rule that was broken and the offending value.
	Msg string
	// Kind is the sentinel the error wraps.
	Kind error
}

// Error returns the one-line message.
func (e *FieldError) Error() string {
	s := "config: "
	if e.Where != "" {
		s += e.Where + ": "
	}
	if e.Key != "" {
		s += e.Key + ": "
	}
	return s + e.Msg
}

// Unwrap returns the sentinel so errors.Is works.
func (e *FieldError) Unwrap() error { return e.Kind }

// problems collects FieldErrors so validation reports all of them at once.
type problems struct {
	errs []error
}

// invalid records a broken rule on key.
func (p *problems) invalid(key, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...), Kind: ErrInvalid})
}

// runtime records a host problem on key.
func (p *problems) runtime(key, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...), Kind: ErrRuntime})
}

// add records an already built error.
func (p *problems) add(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// err joins the collected errors; each one prints on its own line.
func (p *problems) err() error {
	return errors.Join(p.errs...)
}

// Errors splits an error returned by this package into its one-line parts,
// in the order they were found. A nil error gives nil.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		out = append(out, e)
	}
	walk(err)
	return out
}
