package httpapi

import (
	"encoding/json"
	"strconv"

	"github.com/fencepost/fencepost/fence/api"
)

// The heartbeat is the cluster's hottest route (one per sidecar per
// interval, each answered with every lease of the session), and
// encoding/json's reflection was a tenth of the leader's CPU per
// heartbeat. Its reply is therefore appended by hand. The output is
// byte-for-byte what json.Marshal writes (TestAppendHeartbeatMatchesJSON
// and FuzzAppendHeartbeat hold it to that), so clients see no difference.

// appendHeartbeat appends r as JSON to b.
func appendHeartbeat(b []byte, r *api.HeartbeatResponse) []byte {
	b = append(b, `{"validForMs":`...)
	b = strconv.AppendInt(b, r.ValidForMs, 10)
	b = append(b, `,"leases":`...)
	if r.Leases == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i := range r.Leases {
		l := &r.Leases[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"taskId":`...)
		b = appendString(b, l.TaskID)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, l.Epoch, 10)
		b = append(b, `,"status":`...)
		b = appendString(b, string(l.Status))
		b = append(b, `,"validForMs":`...)
		b = strconv.AppendInt(b, l.ValidForMs, 10)
		if l.Signal != "" {
			b = append(b, `,"signal":`...)
			b = appendString(b, l.Signal)
		}
		if l.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendString(b, l.Reason)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendString appends s as a JSON string. Printable ASCII that
// encoding/json leaves alone is copied; anything else (escapes, HTML
// characters, non-ASCII) goes through encoding/json, so the bytes stay
// identical to json.Marshal's.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
