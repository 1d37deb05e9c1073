//go:build fencepost_broken_authz

package httpapi

// authzOff, in this deliberately broken build, makes every caller the dev
// identity: no roles, no session owners. The authorization tests must
// fail under it (test/run.sh).
const authzOff = true
