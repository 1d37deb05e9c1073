// Package reply is how the sidecar refuses: the table of its problem
// codes and the one HTTP status of each (the worker-facing contract
// scripts branch on), the Reply a
// refusal is, and writing it as problem+json. Every part that answers a
// worker (the request path, the tunnels, the control API) writes its
// refusals here, so a code and its header rules live in one place.
//
// It is a leaf: it imports nothing of the sidecar, and decides nothing
// about leases or requests.
package reply
