package fence

import (
	"strings"
)

// The conformance vectors' inputs. vectors_test.go runs them through the
// Go implementation and writes (with -update) or checks the expected
// answers in testdata/vectors.json, which the Python and TypeScript
// validators replay. A case added here reaches all three languages.

// vKeySeed is the seed byte of vector key i (testKey): key 0 is SPEC.md's
// worked example and the only key the vector verifiers know; key 1 is a
// well-formed key they do not know.
var vKeySeeds = []byte{0, 100}

// vHeader is one header line; a name may repeat.
type vHeader [2]string

// vStep is one request of a sequence and, once generated, its answer.
type vStep struct {
	Method  string    `json:"method"`
	Target  string    `json:"target"`
	Headers []vHeader `json:"headers"`
	Body    string    `json:"body"`
	// Handler is what the service's handler answers if it runs.
	Handler *vHandler `json:"handler,omitempty"`
	// During are requests sent while this step's handler runs.
	During []*vStep `json:"during,omitempty"`
	Expect *vExpect `json:"expect,omitempty"`
}

// vHandler is a handler's response: status, headers and body.
type vHandler struct {
	Status  int       `json:"status"`
	Headers []vHeader `json:"headers"`
	Body    string    `json:"body"`
}

// vExpect is the answer the Go middleware gave.
type vExpect struct {
	Status int `json:"status"`
	// Outcome: "executed" (handler ran), "replayed" or "rejected".
	Outcome string `json:"outcome"`
	// Problem is the rejection (type, title, status, max_seen_epoch).
	Problem *Problem `json:"problem,omitempty"`
	// Body is the response body when not rejected.
	Body string `json:"body,omitempty"`
	// Headers: for each header the handler set plus Idempotent-Replayed,
	// the value the client saw ("" = absent).
	Headers map[string]string `json:"headers,omitempty"`
}

// vConfig selects the validator configuration of a sequence.
type vConfig struct {
	// Signatures: "off" (no key set), "required" (key 0's document),
	// "allow_unsigned" (key 0's document, unsigned writes accepted).
	Signatures   string `json:"signatures"`
	MaxTasks     int    `json:"max_tasks,omitempty"`
	MaxBodyBytes int64  `json:"max_body_bytes,omitempty"`
}

// vSequence is a list of steps against one fresh store.
type vSequence struct {
	Name   string  `json:"name"`
	Config vConfig `json:"config"`
	// MemoryOnly marks sequences whose answer depends on the memory
	// store's visible in-flight claims (409 in progress) or bounds; a SQL
	// store serialises the same requests instead (SPEC.md section 5).
	MemoryOnly bool `json:"memory_only,omitempty"`
	// RawOnly marks sequences with header values an HTTP client will not
	// send as they are (leading or trailing whitespace, control bytes): they
	// test the validator on values as a parser delivers them, not over HTTP.
	RawOnly bool     `json:"raw_only,omitempty"`
	Steps   []*vStep `json:"steps"`
}

// fenceHdr builds the usual header list; empty values are left out.
func fenceHdr(token, task, holder, sig, key string) []vHeader {
	var h []vHeader
	for _, p := range []vHeader{{HeaderToken, token}, {HeaderTask, task}, {HeaderHolder, holder}, {HeaderSignature, sig}, {HeaderIdempotencyKey, key}} {
		if p[1] != "" {
			h = append(h, p)
		}
	}
	return h
}

func created(body string) *vHandler {
	return &vHandler{Status: 201, Headers: []vHeader{{"Content-Type", "application/json"}}, Body: body}
}

func post(headers []vHeader, body string, h *vHandler) *vStep {
	return &vStep{Method: "POST", Target: "/v1/tasks/t1/writes", Headers: headers, Body: body, Handler: h}
}

// requestCases are single requests on a fresh store: every malformed
// token, task, holder, signature and key of the Go validator, and a few
// that pass. sign(k, task, epoch, holder) is filled in by the generator.
func requestCases(sign func(key int, task string, epoch uint64, holder string) string) []vSequence {
	good := sign(0, "t1", 5, "w1")
	one := func(name, sigs string, h []vHeader) vSequence {
		return vSequence{Name: name, Config: vConfig{Signatures: sigs}, Steps: []*vStep{post(h, `{"n":1}`, created(`{"ok":true}`))}}
	}
	tok := func(name, token string) vSequence {
		return one("token "+name, "off", fenceHdr(token, "t1", "", "", ""))
	}
	task := func(name, task string) vSequence { return one("task "+name, "off", fenceHdr("5", task, "", "", "")) }
	holder := func(name, h string) vSequence { return one("holder "+name, "off", fenceHdr("5", "t1", h, "", "")) }
	key := func(name, k string) vSequence {
		return one("idempotency key "+name, "off", fenceHdr("5", "t1", "", "", k))
	}
	sig := func(name, sigs string, h []vHeader) vSequence { return one("signature "+name, sigs, h) }
	cases := []vSequence{
		one("no fencing headers", "off", nil),
		tok("valid 1", "1"), tok("valid max uint64", "18446744073709551615"),
		tok("zero", "0"), tok("leading zero", "007"), tok("leading space", " 5"), tok("plus", "+5"),
		tok("negative", "-1"), tok("list", "5,6"), tok("exponent", "1e3"), tok("letters", "abc"),
		one("token empty value", "off", []vHeader{{HeaderToken, ""}, {HeaderTask, "t1"}}), tok("2^64", "18446744073709551616"), tok("21 digits", "100000000000000000000"),
		tok("trailing space", "5 "), tok("tab", "5\t"), tok("non-ascii digit", "\xd9\xa5"),
		one("token repeated equal", "off", []vHeader{{HeaderToken, "5"}, {HeaderToken, "5"}, {HeaderTask, "t1"}}),
		one("token missing, task present", "off", []vHeader{{HeaderTask, "t1"}}),
		one("task missing", "off", []vHeader{{HeaderToken, "5"}}),
		task("valid utf-8", "t\xc3\xa4sk-\xe2\x82\xac"), task("256 bytes", strings.Repeat("t", 256)),
		task("257 bytes", strings.Repeat("t", 257)), task("newline", "a\nb"), task("nul", "a\x00"),
		task("del", "a\x7f"), task("c1 control", "a\xc2\x85"), task("invalid utf-8", "a\xff"),
		task("truncated utf-8", "a\xe2\x82"), task("overlong utf-8", "\xc0\xaf"), task("surrogate", "\xed\xa0\x80"),
		task("space inside", "a b"),
		one("task repeated", "off", []vHeader{{HeaderToken, "5"}, {HeaderTask, "t1"}, {HeaderTask, "t1"}}),
		holder("valid", "worker-1"), holder("control", "w\x01"), holder("257 bytes", strings.Repeat("h", 257)),
		holder("invalid utf-8", "w\x80"),
		one("holder repeated", "off", []vHeader{{HeaderToken, "5"}, {HeaderTask, "t1"}, {HeaderHolder, "w1"}, {HeaderHolder, "w1"}}),
		one("holder empty value", "off", []vHeader{{HeaderToken, "5"}, {HeaderTask, "t1"}, {HeaderHolder, ""}}),
		key("valid", "k-1:abc~"), key("255 bytes", strings.Repeat("k", 255)), key("256 bytes", strings.Repeat("k", 256)),
		key("space", "a b"), key("non-ascii", "k\xc3\xa4"), key("control", "k\x7f"),
		one("idempotency key empty value", "off", []vHeader{{HeaderToken, "5"}, {HeaderTask, "t1"}, {HeaderIdempotencyKey, ""}}),
		one("idempotency key repeated", "off", append(fenceHdr("5", "t1", "", "", "k"), vHeader{HeaderIdempotencyKey, "k"})),
		sig("valid", "required", fenceHdr("5", "t1", "w1", good, "")),
		sig("valid without holder", "required", fenceHdr("5", "t1", "", sign(0, "t1", 5, ""), "")),
		sig("ignored when off", "off", fenceHdr("5", "t1", "w1", "garbage", "")),
		sig("missing", "required", fenceHdr("5", "t1", "w1", "", "")),
		sig("missing but unsigned allowed", "allow_unsigned", fenceHdr("5", "t1", "w1", "", "")),
		sig("bad but unsigned allowed", "allow_unsigned", fenceHdr("6", "t1", "w1", good, "")),
		sig("forged higher epoch", "required", fenceHdr("6", "t1", "w1", good, "")),
		sig("another task", "required", fenceHdr("5", "t2", "w1", good, "")),
		sig("another holder", "required", fenceHdr("5", "t1", "w2", good, "")),
		sig("holder dropped", "required", fenceHdr("5", "t1", "", good, "")),
		sig("unknown key", "required", fenceHdr("5", "t1", "w1", sign(1, "t1", 5, "w1"), "")),
		sig("repeated", "required", append(fenceHdr("5", "t1", "w1", good, ""), vHeader{HeaderSignature, good})),
		sig("other prefix", "required", fenceHdr("5", "t1", "w1", "ed448="+strings.TrimPrefix(good, "ed25519="), "")),
		sig("upper-case prefix", "required", fenceHdr("5", "t1", "w1", "ED25519="+strings.TrimPrefix(good, "ed25519="), "")),
		sig("upper-case key id", "required", fenceHdr("5", "t1", "w1", "ed25519="+strings.ToUpper(good[8:24])+good[24:], "")),
		sig("short key id", "required", fenceHdr("5", "t1", "w1", "ed25519="+good[9:], "")),
		sig("no colon", "required", fenceHdr("5", "t1", "w1", strings.Replace(good, ":", "", 1), "")),
		sig("padded", "required", fenceHdr("5", "t1", "w1", good+"==", "")),
		sig("standard alphabet", "required", fenceHdr("5", "t1", "w1", strings.NewReplacer("-", "+", "_", "/").Replace(good), "")),
		sig("truncated", "required", fenceHdr("5", "t1", "w1", good[:len(good)-2], "")),
		sig("non-canonical last char", "required", fenceHdr("5", "t1", "w1", good[:len(good)-1]+nonCanonical(good[len(good)-1]), "")),
		sig("empty value", "required", []vHeader{{HeaderToken, "5"}, {HeaderTask, "t1"}, {HeaderHolder, "w1"}, {HeaderSignature, ""}}),
		sig("checked before idempotency key", "required", fenceHdr("6", "t1", "w1", good, "a b")),
		one("token checked before task", "off", fenceHdr("x", "a\nb", "", "", "")),
		one("read passes unfenced", "required", nil),
	}
	cases[len(cases)-1].Steps[0].Method = "GET"
	cases[len(cases)-1].Steps[0].Handler = &vHandler{Status: 200, Headers: []vHeader{{"Content-Type", "text/plain"}}, Body: "read"}
	return cases
}

// nonCanonical returns a base64url character that decodes to the same
// bits as c in the last position of an 86-character signature but sets
// unused low bits, which the strict decoder rejects.
func nonCanonical(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return string(alphabet[i^1])
}
