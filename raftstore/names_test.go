package raftstore

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// names is a resolver the test controls: member names to loopback IPs,
// looked up at every dial, as DNS is by the default dialer.
type names struct {
	mu sync.Mutex
	ip map[string]string
}

func (n *names) set(name, ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ip[name] = ip
}

func (n *names) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	ip, ok := n.ip[host]
	n.mu.Unlock()
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
}

// freePort returns a port free on every 127.0.0.x (bound on 127.0.0.1).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMembersAdvertiseNamesAndRejoinUnderNewAddresses runs a TLS cluster
// whose members advertise DNS names. Every member in turn restarts under a
// new 127.0.0.x address with the same name and rejoins by itself (the
// others resolve its name again at their next dial), while a worker keeps
// heartbeating one lease: the lease is never lost and keeps its epoch.
func TestMembersAdvertiseNamesAndRejoinUnderNewAddresses(t *testing.T) {
	res := &names{ip: map[string]string{}}
	ports := map[string]int{}
	nextIP := atomic.Int32{}
	nextIP.Store(10)
	newIP := func() string { return "127.0.0." + strconv.Itoa(int(nextIP.Add(1))) }
	kit := pkitest.New(t, "cluster")
	c := newTestCluster(t, 3, withTLS(kit), func(cfg *Config) {
		name := cfg.NodeID + ".fp.test"
		ports[name] = freePort(t)
		ip := newIP()
		res.set(name, ip)
		cfg.RaftAddr = net.JoinHostPort(ip, strconv.Itoa(ports[name]))
		cfg.RaftAdvertise = net.JoinHostPort(name, strconv.Itoa(ports[name]))
		cfg.Dial = res.dial
	})
	for _, s := range c.live() {
		for _, m := range s.Status().Members {
			require.Contains(t, m.RaftAddr, ".fp.test:", "members are known by name")
		}
	}
	sid := c.openSession("w1")
	g := c.acquire("a1", "t1", sid, "mid")

	stop := make(chan struct{})
	var lost atomic.Value
	var beats atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			hb, err := retryLeader(c, func(s *Store) (api.HeartbeatResponse, error) {
				return s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
			})
			if err == nil && (len(hb.Leases) != 1 || hb.Leases[0].Status != lease.StatusActive) {
				lost.Store(fmt.Sprintf("heartbeat answered %+v", hb.Leases))
			}
			if err == nil {
				beats.Add(1)
			}
		}
	}()

	for i := range 3 {
		name := fmt.Sprintf("n%d.fp.test", i)
		c.stop(i)
		ip := newIP()
		res.set(name, ip)
		c.cfgs[i].RaftAddr = net.JoinHostPort(ip, strconv.Itoa(ports[name]))
		c.start(i)
		before := beats.Load()
		waitFor(t, waitTimeout, name+" to rejoin and catch up at "+ip, func() bool {
			s := c.node(i)
			return s != nil && s.Ready() == nil && beats.Load() > before+2
		})
		// A write after the move commits on the moved member too: the
		// others reached it at its new address.
		_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
			return s.CreateTask(ctxT(t), "after-"+name, api.CreateTaskRequest{TaskID: "after-" + name})
		})
		require.NoError(t, err)
		c.waitConverged()
		_, err = c.node(i).Task(ctxT(t), "after-"+name, true)
		require.NoError(t, err, "%s applied the write made after its move", name)
	}
	close(stop)
	<-done
	require.Nil(t, lost.Load(), "the lease was lost during the rolling restart")
	tk := c.task("t1")
	require.Equal(t, lease.StatusActive, tk.Lease.Status)
	require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch, "no new epoch: the lease was never lost")
	c.requireSameHash()
}
