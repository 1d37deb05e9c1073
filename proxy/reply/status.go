package reply

import (
	"net/http"

	"github.com/fencepost/fencepost/fence/lease"
)

// statuses is the sidecar's error table: the one HTTP status of each
// code, so a code never arrives with two statuses and no caller picks
// one. A code means one thing; two situations that deserve different
// statuses (a too-large request body, 413, and a too-large upstream
// response, 502) have two codes. The SDKs' error tables are generated
// from it (go run ./proxy/worker/internal/gen).
var statuses = map[string]int{
	CodeLeaseExpired:          http.StatusConflict,
	CodeLeaseSuspect:          http.StatusConflict,
	CodeLeaseRevoked:          http.StatusConflict,
	CodeLeaseWaiting:          http.StatusConflict,
	CodeNoLease:               http.StatusConflict,
	CodeAmbiguousTask:         http.StatusConflict,
	CodeEffectInDoubt:         http.StatusConflict,
	CodeNotProxyRequest:       http.StatusBadRequest,
	CodeBadRequest:            http.StatusBadRequest,
	CodeConnectFenced:         http.StatusForbidden,
	CodeSelfTarget:            http.StatusForbidden,
	CodeControlRefused:        http.StatusForbidden,
	CodeNotFound:              http.StatusNotFound,
	CodeMethod:                http.StatusMethodNotAllowed,
	CodeRequestTimeout:        http.StatusRequestTimeout,
	CodeTooLarge:              http.StatusRequestEntityTooLarge,
	CodeControlNotJSON:        http.StatusUnsupportedMediaType,
	CodeHostMismatch:          http.StatusMisdirectedRequest,
	CodeWriteAlreadyPerformed: http.StatusUnprocessableEntity,
	CodeHeaderTooLarge:        http.StatusRequestHeaderFieldsTooLarge,
	CodeInternal:              http.StatusInternalServerError,
	CodeUpgrade:               http.StatusNotImplemented,
	CodeUpstreamError:         http.StatusBadGateway,
	CodeUpstreamTooLarge:      http.StatusBadGateway,
	CodeUpstreamTLS:           http.StatusBadGateway,
	CodeLeaseLostMid:          http.StatusBadGateway,
	CodeClusterError:          http.StatusBadGateway,
	CodeNoSession:             http.StatusServiceUnavailable,
	CodeJournalUnavailable:    http.StatusServiceUnavailable,
	CodeUpstreamTimeout:       http.StatusGatewayTimeout,
	CodeClusterTimeout:        http.StatusGatewayTimeout,
}

// StatusOf is the HTTP status a problem with code is answered with: the
// sidecar's table, else the model's (fence/lease), whose codes the
// control API passes on as the cluster answered them. An unknown code is
// a bug and answers 500.
func StatusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	for _, e := range lease.Errors() {
		if e.Code == code {
			return e.Status
		}
	}
	return http.StatusInternalServerError
}

// Codes lists every code of the sidecar's table with its status.
func Codes() map[string]int {
	out := make(map[string]int, len(statuses))
	for c, s := range statuses {
		out[c] = s
	}
	return out
}
