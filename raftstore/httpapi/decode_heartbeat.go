package httpapi

import (
	"github.com/fencepost/fencepost/fence/api"
)

// decodeHeartbeat decodes a heartbeat body exactly as decodeBody would:
// the plain shape sidecars send is parsed by hand (api.ParseHeartbeatRequest,
// which says why), anything else goes to decodeBody, which decides and
// words the error. FuzzDecodeHeartbeat holds the two to the same result.
func decodeHeartbeat(body []byte, req *api.HeartbeatRequest) error {
	if r, ok := api.ParseHeartbeatRequest(body); ok {
		*req = r
		return nil
	}
	return decodeBody(body, req)
}
