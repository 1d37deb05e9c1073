package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/capture"
)

// resolvConf lists the DNS servers whose TCP port 53 a captured child
// keeps reaching directly.
const resolvConf = "/etc/resolv.conf"

// errRunCapture wraps the reasons fencepost run --capture refuses to start
// before anything is installed: each is a one-line usage error (exit 2).
var errRunCapture = errors.New("--capture")

// childCapture is fencepost run --capture: the uid the child runs as and the
// rules that capture only that uid's connections. The run process is the
// sidecar and runs as root, which the rules never match (they jump only
// for the child's uid), so its own upstream dials and heartbeats leave
// uncaptured.
type childCapture struct {
	uid      int
	cred     *syscall.Credential
	tables   capture.Tables
	families []capture.Family
	plan     capture.Plan // set by install
	log      *zap.Logger
}

// prepareRunCapture, before the sidecar starts and once the caller has
// checked the privileges (capture.CheckPrivileges), resolves the child's uid
// (--capture-uid, else capture.worker_uid, else capture.DefaultRunWorkerUID)
// and turns the transparent listener on (capture.listen, an ephemeral
// loopback port when unset).
func prepareRunCapture(cfg *config.Sidecar, uidFlag int, log *zap.Logger) (*childCapture, error) {
	uid := capture.DefaultRunWorkerUID
	switch {
	case uidFlag >= 0:
		uid = uidFlag
	case cfg.Capture.WorkerUID > 0:
		uid = cfg.Capture.WorkerUID
	}
	if uid <= 0 || uid == os.Geteuid() {
		return nil, fmt.Errorf("%w: --capture-uid must be a uid > 0 other than this process's (%d): the child's connections are told from the sidecar's by uid (got %d)", errRunCapture, os.Geteuid(), uid)
	}
	if uid == cfg.Capture.SidecarUID {
		return nil, fmt.Errorf("%w: --capture-uid %d is capture.sidecar_uid, whose connections are never captured", errRunCapture, uid)
	}
	tables, err := capture.Detect(capture.Backend(cfg.Capture.Backend), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRunCapture, err)
	}
	if cfg.Capture.Listen == "" {
		cfg.Capture.Listen = "127.0.0.1:0"
	}
	return &childCapture{uid: uid, cred: childCredential(uid), tables: tables, families: capture.Families(), log: log}, nil
}

// childCredential is uid with its passwd entry's primary group, or a gid
// of the same number when it has none (a dedicated uid needs no entry);
// no supplementary groups (root's are dropped).
func childCredential(uid int) *syscall.Credential {
	gid := uid
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if g, err := strconv.Atoi(u.Gid); err == nil {
			gid = g
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// install puts the child's rules in, once the sidecar's listeners are up
// (so from the first captured connection there is a listener; before the
// sidecar holds a lease the listener blocks it). It refuses a uid that
// already has rules: another run captures it, or a killed one left them
// (fencepost capture --remove --capture-worker-uid N takes them out).
func (rc *childCapture) install(ctx context.Context, cfg *config.Sidecar, sc *proxy.Sidecar) error {
	listen, err := netip.ParseAddrPort(sc.CaptureAddr())
	if err != nil {
		return fmt.Errorf("%w: the transparent listener: %v", config.ErrRuntime, err)
	}
	var keep []netip.AddrPort
	for _, a := range []string{sc.ProxyAddr(), sc.ControlAddr(), sc.MetricsAddr()} {
		keep = append(keep, ownListener(a)...)
	}
	keep = append(keep, capture.Nameservers(resolvConf)...)
	plan := capture.RunPlan(cfg.Capture.Plan(), rc.uid, int(listen.Port()), keep)
	if held := rc.tables.RunInstalled(plan, rc.families); len(held) > 0 {
		return fmt.Errorf("%w: uid %d already has capture rules (chain %s): another fencepost run captures it, or a killed one left them; pick another --capture-uid, or remove them with fencepost capture --remove --capture-worker-uid %d",
			errRunCapture, rc.uid, plan.Chain, rc.uid)
	}
	if plan, err = installCapture(ctx, rc.tables, cfg, plan, rc.families); err != nil {
		return err
	}
	rc.plan = plan
	rc.log.Info("capture rules installed", zap.Int("uid", rc.uid), zap.String("chain", plan.Chain),
		zap.String("listen", listen.String()), zap.String("backend", string(rc.tables.Backend)))
	return nil
}

// remove takes out exactly the rules install put in (nothing when it
// installed none).
func (rc *childCapture) remove() {
	if rc.plan.Chain == "" {
		return
	}
	if err := rc.tables.Remove(rc.plan, rc.families); err != nil {
		rc.log.Error("removing the capture rules failed; remove them with fencepost capture --remove --capture-worker-uid "+strconv.Itoa(rc.uid), zap.Error(err))
		return
	}
	rc.log.Info("capture rules removed", zap.String("chain", rc.plan.Chain))
}

// ownListener is where the child reaches one of the sidecar's listeners
// at addr (host:port; "" when that listener is off): addr itself, or both
// loopbacks for a listener on every address.
func ownListener(addr string) []netip.AddrPort {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	if ap.Addr().IsUnspecified() {
		return []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()), netip.AddrPortFrom(netip.IPv6Loopback(), ap.Port())}
	}
	return []netip.AddrPort{netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
}
