package netfault

import "go.uber.org/goleak"

// LeakOptions are the goleak options for packages whose tests run
// fasthttp servers and clients (the cluster API, the sidecar). fasthttp
// leaves a few housekeeping goroutines behind after Shutdown and
// CloseIdleConnections — the server-date ticker, idle worker cleaners,
// client connection cleaners — that sleep out their interval and exit on
// their own; they hold no sockets. Everything else must still be gone.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	}
}
