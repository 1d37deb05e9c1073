package main

import (
	"errors"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/refsvc"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/node"
)

// libraryConfigErrors are the sentinels with which the packages a role
// starts refuse their configuration. Such a refusal is a configuration
// mistake the config package's rules did not catch, so it exits 2 like any
// other (the README's promise), not 1 like a host or network failure.
var libraryConfigErrors = []error{
	proxy.ErrInvalidConfig, cluster.ErrConfig,
	raftstore.ErrConfig, node.ErrConfig, httpapi.ErrConfig,
	refsvc.ErrInvalidConfig, fence.ErrInvalidConfig,
}

// startError classifies an error from starting a role's parts: a library's
// configuration refusal wraps config.ErrInvalid, anything else (a port
// taken, a cluster unreachable) config.ErrRuntime. Its message is err's
// own, without the sentinel's text in front.
func startError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, config.ErrInvalid) || errors.Is(err, config.ErrRuntime) {
		return err
	}
	for _, s := range libraryConfigErrors {
		if errors.Is(err, s) {
			return &classified{kind: config.ErrInvalid, err: err}
		}
	}
	return &classified{kind: config.ErrRuntime, err: err}
}

// classified is an error that also matches kind with errors.Is, so
// exitCode can map it, while printing only its own message (and staying
// one error, one line, for reportError).
type classified struct {
	kind, err error
}

// Error returns the wrapped error's message.
func (c *classified) Error() string { return c.err.Error() }

// Is reports whether target is the kind.
func (c *classified) Is(target error) bool { return target == c.kind }

// Unwrap returns the error.
func (c *classified) Unwrap() error { return c.err }
