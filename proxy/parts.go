package proxy

import (
	"fmt"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/proxytrace"
	"github.com/fencepost/fencepost/proxy/request"
	"github.com/fencepost/fencepost/proxy/tunnel"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// Each part of the sidecar gets its own small settings, cut here from
// the user's Config (defaults applied): no part sees the whole Config.

func (c Config) leaseSettings(tr *proxytrace.Tracer) leases.Settings {
	return leases.Settings{
		WorkerID: c.WorkerID, Task: c.Task, Profile: c.Profile,
		Drift: c.Drift, MarginFloor: c.MarginFloor, SessionHeartbeat: c.SessionHeartbeat, ClusterTimeout: c.ClusterTimeout,
		Logger: c.Logger, Registerer: c.Registerer, Clock: c.Clock, Tracer: tr,
	}
}

func (c Config) requestSettings(j Journal, tr *proxytrace.Tracer) request.Settings {
	return request.Settings{
		WorkerID: c.WorkerID, Endpoints: c.allEndpoints(), RefuseTargets: c.RefuseTargets,
		ProgressOnWrites: c.Worker.ProgressCalls == workertie.ProgressWrites || c.Worker.ProgressCalls == workertie.ProgressAll, ProgressOnReads: c.Worker.ProgressCalls == workertie.ProgressAll,
		ReadsWithoutLease: c.ReadsWithoutLease,
		WriteRules:        c.WriteRules, WritePresets: c.WritePresets, TLSOriginate: c.TLSOriginate, SignatureHosts: c.SignatureHosts,
		UpstreamCAFile: c.Intercept.UpstreamCAFile,
		JournalRules:   c.Journal, Journal: j, MaxJournalBody: c.MaxJournalBody,
		MaxRequestBody: c.MaxRequestBody, MaxResponseBody: c.MaxResponseBody, MaxHeaderBytes: c.MaxHeaderBytes,
		DialTimeout: c.DialTimeout, UpstreamTimeout: c.UpstreamTimeout, ReadTimeout: c.ReadTimeout,
		UpstreamIdleTimeout: c.UpstreamIdleTimeout, ClusterTimeout: c.ClusterTimeout,
		Logger: c.Logger, Registerer: c.Registerer, Clock: c.Clock, Tracer: tr,
	}
}

func (c Config) tunnelSettings(ca *mitm.CA, newServer func() *fasthttp.Server) tunnel.Settings {
	allow := make([]string, 0, len(c.ConnectAllow))
	for _, a := range c.ConnectAllow {
		h, port, _ := splitHostPort(a) // Validate checked each
		allow = append(allow, net.JoinHostPort(h, fmt.Sprint(port)))
	}
	return tunnel.Settings{
		Allow: allow, CA: ca, DialTimeout: c.DialTimeout, HandshakeTimeout: c.Intercept.HandshakeTimeout,
		NewServer: newServer, OtherTCP: c.Capture.OtherTCP, Logger: c.Logger, Registerer: c.Registerer,
	}
}
