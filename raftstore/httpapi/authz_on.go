//go:build !fencepost_broken_authz

package httpapi

// authzOff is false in every real build. The fencepost_broken_authz build
// switches authorization off so test/run.sh can prove the authorization
// tests fail without it.
const authzOff = false
