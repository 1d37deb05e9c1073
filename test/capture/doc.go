// Package capture holds the end-to-end test of transparent capture with
// the real binary and real clients: in a network namespace the test
// creates, fencepost capture installs its rules, the sidecar runs under
// its own uid (so its own upstream dials and heartbeats are excluded by
// the uid rule, as in a pod), and workers that ignore every proxy setting
// — Go with Proxy: nil, curl --noproxy '*', Python with trust_env=False,
// a raw TCP client — are fenced all the same. A second test does the same
// for a local worker: fencepost run --capture against fencepost dev, whose
// child (curl --noproxy '*') runs under a uid of its own, and checks that
// the run's rules are gone however the run ends.
package capture
