package workertie

import (
	"context"
	"errors"
)

// Lease names one lease: a task and the epoch it is held under.
type Lease struct {
	Task  string
	Epoch uint64
}

// Grant is the lease a parented worker is started under, with what it
// needs to resume.
type Grant struct {
	Lease
	// Checkpoint is the handed-over checkpoint data as JSON text, empty
	// when there is none.
	Checkpoint string
}

// Event is a change to a lease the tie acts on. Stop is the control API's
// "stop now" rule: the lease (that epoch) is over for the worker, and the
// worker did not ask for it.
type Event struct {
	Lease
	Kind   string
	Reason string
	Stop   bool
}

// Releaser is what an attachment needs of the sidecar's leases.
type Releaser interface {
	// Held lists the leases the sidecar holds now.
	Held() []Lease
	// GiveBack gives lease l back with reason if the sidecar still holds
	// it under that epoch; a lease it no longer holds is not an error.
	GiveBack(ctx context.Context, l Lease, reason string) error
}

// Keeper is what a parented worker's supervisor needs of the sidecar's
// lease keeper.
type Keeper interface {
	Releaser
	// Complete completes lease l if the sidecar still holds it.
	Complete(ctx context.Context, l Lease) error
	// Lost delivers every Stop event of the sidecar's leases; the
	// supervisor owns the receiving end for its whole run.
	Lost() <-chan Event
	// Acquire returns the lease the next child runs under: in one-task
	// mode the one held now, else the task acquired again (a new, higher
	// epoch), waiting until it is granted or ctx ends; a zero Grant when
	// the sidecar is not in one-task mode (the worker claims its own
	// tasks through the control API).
	Acquire(ctx context.Context) (Grant, error)
}

// GiveBackAll gives back every lease r holds with reason; it returns the
// leases given back and the first error (it tries them all).
func GiveBackAll(ctx context.Context, r Releaser, reason string) ([]Lease, error) {
	var (
		done []Lease
		errs []error
	)
	for _, l := range r.Held() {
		if err := r.GiveBack(ctx, l, reason); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, l)
	}
	return done, errors.Join(errs...)
}
