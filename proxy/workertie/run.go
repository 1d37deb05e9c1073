package workertie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// ErrNoCommand reports a Supervisor without a command to run.
var ErrNoCommand = errors.New("workertie: no command to run")

// Supervisor runs a parented worker (`fencepost run -- CMD`): the child's
// lifetime is its leases' (doc.go). It is used once: call Run.
type Supervisor struct {
	// Config is the tie's configuration (defaults applied by Run).
	Config Config
	// Keeper is the sidecar's lease keeper.
	Keeper Keeper
	// Argv is the command and its arguments (no shell).
	Argv []string
	// Env builds the child's environment for a grant; its Vars are
	// appended to the sidecar's own environment.
	Env func(Grant) Env
	// Signals delivers the signals sent to the sidecar; each is forwarded
	// to the child's process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT
	// also mean the run ends with this child (no restart). Nil: none.
	Signals <-chan os.Signal
	// Stdin, Stdout and Stderr are the child's; nil is /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Log receives the supervisor's decisions; nil discards them.
	Log *zap.Logger
	// Credential, when set, is the uid and gid the child runs as:
	// fencepost run --capture starts it under the uid its capture rules
	// match, so that only the child's connections are captured. Nil: the
	// sidecar's own.
	Credential *syscall.Credential
	// Started, when set, is told each child's pid once it runs (tests,
	// nemesis).
	Started func(pid int, g Grant)

	// ended are the leases this supervisor ended itself: their events
	// must not terminate the next child.
	endedMu sync.Mutex
	ended   map[Lease]bool
}

// exit is how one child ended.
type exit struct {
	code    int
	lost    bool // its lease was lost while it ran
	stopped bool // a stop signal was forwarded: the run ends
	ctxDone bool
}

// Run starts the child and supervises it until the run ends: the child
// exited and is not restarted, a stop signal was forwarded, or ctx ended
// (the child is terminated). It returns the exit code the sidecar should
// exit with: the last child's (128 + signal number for a child killed by
// a signal, 127 when the command could not be started).
func (s *Supervisor) Run(ctx context.Context) (int, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return 2, ErrNoCommand
	}
	cfg := s.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return 2, err
	}
	log := s.Log
	if log == nil {
		log = zap.NewNop()
	}
	backoff := cfg.RestartBackoff
	for {
		g, err := s.Keeper.Acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil
			}
			return 1, fmt.Errorf("workertie: acquire for the worker: %w", err)
		}
		began := time.Now()
		ex, err := s.runOnce(ctx, cfg, g, log)
		if err != nil {
			s.endAll(ctx, log, lease.ReasonWorkerExited)
			return 127, err
		}
		log.Info("worker exited", zap.Int("code", ex.code), zap.Bool("leaseLost", ex.lost),
			zap.String("task", g.Task), zap.Uint64("epoch", g.Epoch))
		if ex.code == 0 && !ex.lost && !ex.ctxDone {
			s.endSuccess(ctx, cfg, log)
			return 0, nil
		}
		s.endAll(ctx, log, lease.ReasonWorkerExited)
		// A lost lease ends the run too: a revoke must stick, and a lease
		// that expired under a live child says the sidecar, not the
		// child, failed.
		if ex.stopped || ex.ctxDone || ex.lost || cfg.Restart != RestartOnFailure {
			return ex.code, nil
		}
		if time.Since(began) > cfg.RestartMax {
			backoff = cfg.RestartBackoff // it ran a good while: not a crash loop
		}
		log.Info("restarting the worker", zap.Duration("after", backoff))
		select {
		case <-ctx.Done():
			return ex.code, nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cfg.RestartMax)
	}
}

// endSuccess ends the leases of a child that exited 0, as configured.
func (s *Supervisor) endSuccess(ctx context.Context, cfg Config, log *zap.Logger) {
	if cfg.OnSuccess == OnSuccessGiveBack {
		s.endAll(ctx, log, lease.ReasonWorkerExited)
		return
	}
	for _, l := range s.Keeper.Held() {
		s.markEnded(l)
		if err := s.Keeper.Complete(ctx, l); err != nil {
			log.Warn("completing the worker's lease failed", zap.String("task", l.Task), zap.Error(err))
		}
	}
}

// endAll gives back every lease still held, with reason.
func (s *Supervisor) endAll(ctx context.Context, log *zap.Logger, reason string) {
	if DeathIgnored {
		return
	}
	for _, l := range s.Keeper.Held() {
		s.markEnded(l)
	}
	if done, err := GiveBackAll(context.WithoutCancel(ctx), s.Keeper, reason); err != nil {
		log.Warn("giving back the worker's leases failed", zap.Error(err))
	} else if len(done) > 0 {
		log.Info("worker's leases given back", zap.String("reason", reason), zap.Int("leases", len(done)))
	}
}

func (s *Supervisor) markEnded(l Lease) {
	s.endedMu.Lock()
	defer s.endedMu.Unlock()
	if s.ended == nil {
		s.ended = map[Lease]bool{}
	}
	s.ended[l] = true
}

// concerns reports whether a Stop event must end the child started under
// g: not one this supervisor caused, and not about an older grant of g's
// task.
func (s *Supervisor) concerns(ev Event, g Grant) bool {
	if !ev.Stop {
		return false
	}
	s.endedMu.Lock()
	mine := s.ended[ev.Lease]
	s.endedMu.Unlock()
	if mine {
		return false
	}
	return g.Task == "" || ev.Task != g.Task || ev.Epoch >= g.Epoch
}

// runOnce starts one child under g and waits for it.
func (s *Supervisor) runOnce(ctx context.Context, cfg Config, g Grant, log *zap.Logger) (exit, error) {
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	var env Env
	if s.Env != nil {
		env = s.Env(g)
	} else {
		env = Env{Grant: g}
	}
	cmd.Env = append(os.Environ(), env.Vars()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.SysProcAttr = childAttr()
	cmd.SysProcAttr.Credential = s.Credential
	if err := cmd.Start(); err != nil {
		return exit{}, fmt.Errorf("workertie: start %q: %w", s.Argv[0], err)
	}
	pid := cmd.Process.Pid
	log.Info("worker started", zap.Int("pid", pid), zap.String("task", g.Task), zap.Uint64("epoch", g.Epoch))
	if s.Started != nil {
		s.Started(pid, g)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		// Whatever the child left in its group (grandchildren) goes with
		// it: nothing may run on under a lease that ended.
		killGroup(pid, syscall.SIGKILL)
		close(done)
	}()
	var (
		ex   exit
		kill <-chan time.Time
	)
	terminate := func(why string) {
		if kill != nil {
			return
		}
		log.Info("terminating the worker", zap.Int("pid", pid), zap.String("why", why), zap.Duration("killGrace", cfg.KillGrace))
		killGroup(pid, syscall.SIGTERM)
		kill = time.After(cfg.KillGrace)
	}
	ctxDone := ctx.Done()
	for {
		select {
		case <-done:
			ex.code = exitCode(cmd.ProcessState)
			return ex, nil
		case ev := <-s.Keeper.Lost():
			if !s.concerns(ev, g) {
				continue
			}
			ex.lost = true
			if cfg.OnLost == OnLostTerminate {
				terminate("lease " + ev.Kind + ": " + ev.Reason)
			} else {
				log.Warn("worker's lease lost; worker left running (worker.on_lost: none)", zap.String("task", ev.Task))
			}
		case sig := <-s.Signals:
			ss, _ := sig.(syscall.Signal)
			if stopSignal(ss) {
				ex.stopped = true
			}
			killGroup(pid, ss)
		case <-ctxDone:
			ctxDone = nil
			ex.ctxDone = true
			terminate("sidecar shutting down")
		case <-kill:
			log.Warn("worker outlived its kill grace; killing it", zap.Int("pid", pid))
			killGroup(pid, syscall.SIGKILL)
			kill = nil
		}
	}
}

// stopSignal reports whether sig, sent to the sidecar, ends the run.
func stopSignal(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

// exitCode is a shell's view of how a process ended: its code, or
// 128 + the signal that killed it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
