package request

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
)

// limitSignature removes the token's signature from a request to a target
// not in Settings.SignatureHosts (when that list is set). The signature is
// what makes a token believable to a fenced service that requires it; a
// third-party API that received one could replay it there for the rest of
// the epoch. The epoch, task and holder headers stay: alone they prove
// nothing to a service that requires signatures.
func (p *Pipeline) limitSignature(h *fasthttp.RequestHeader, hostPort string) {
	if p.cfg.SignatureHosts == nil {
		return
	}
	for _, allowed := range p.cfg.SignatureHosts {
		if strings.EqualFold(allowed, hostPort) {
			return
		}
	}
	h.Del(fence.HeaderSignature)
}
