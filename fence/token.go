package fence

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Header names of the wire format (SPEC.md section 2). Each must appear at
// most once on a fenced write; a repeated header is malformed.
const (
	// HeaderToken carries the lease epoch (the fencing token) as a plain
	// decimal uint64 in 1..2^64-1: no sign, no leading zeros, no spaces.
	HeaderToken = "X-Fencing-Token"
	// HeaderTask carries the task id the token belongs to: 1..256 bytes of
	// UTF-8 with no control characters.
	HeaderTask = "X-Fencing-Task"
	// HeaderHolder carries the worker id of the lease holder; it is part of
	// the signed message. Same syntax as the task id; optional when
	// signatures are not checked.
	HeaderHolder = "X-Fencing-Holder"
	// HeaderSignature carries "ed25519=<keyID>:<base64url, no padding, of
	// the 64-byte signature>" over SigningMessage(task, epoch, holder).
	HeaderSignature = "X-Fencing-Signature"
	// HeaderIdempotencyKey carries the idempotency key: 1..255 visible
	// ASCII characters (0x21-0x7E).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response replayed from the
	// idempotency store instead of being produced by the handler.
	HeaderReplayed = "Idempotent-Replayed"
)

// Length limits of the wire format.
const (
	// MaxTaskLen is the maximum length in bytes of a task id or holder id.
	MaxTaskLen = 256
	// MaxIdempotencyKeyLen is the maximum length of an Idempotency-Key.
	MaxIdempotencyKeyLen = 255
	// maxEpochDigits is len("18446744073709551615").
	maxEpochDigits = 20
)

// ParseEpoch parses a fencing token strictly: one to twenty ASCII digits,
// no leading zero, value in 1..2^64-1. Anything else ("0", "007", " 5",
// "+5", "5,6", "-1", "", 2^64) is rejected with an error wrapping
// ErrMalformedToken, so two parties can never disagree about which epoch a
// header value names.
func ParseEpoch(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrMalformedToken)
	}
	if len(s) > maxEpochDigits {
		return 0, fmt.Errorf("%w: more than %d digits", ErrMalformedToken, maxEpochDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: byte %d is not a decimal digit", ErrMalformedToken, i)
		}
	}
	if s[0] == '0' {
		// Covers "0" (epoch 0 is never granted) and leading zeros.
		return 0, fmt.Errorf("%w: zero or leading zero", ErrMalformedToken)
	}
	e, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: out of range", ErrMalformedToken)
	}
	return e, nil
}

// FormatEpoch renders an epoch in the canonical form ParseEpoch accepts.
func FormatEpoch(e uint64) string {
	return strconv.FormatUint(e, 10)
}

// ValidTask reports whether s is a well-formed task id: 1..MaxTaskLen bytes
// of valid UTF-8 without control characters. The error wraps
// ErrMalformedTask. Control characters are excluded because the signed
// message separates its fields with newlines.
func ValidTask(s string) error {
	if err := ValidID(s, MaxTaskLen); err != nil {
		return fmt.Errorf("%w: %s", ErrMalformedTask, err)
	}
	return nil
}

// ValidHolder reports whether s is a well-formed holder id; same syntax as
// a task id. The error wraps ErrMalformedHolder.
func ValidHolder(s string) error {
	if err := ValidID(s, MaxTaskLen); err != nil {
		return fmt.Errorf("%w: %s", ErrMalformedHolder, err)
	}
	return nil
}

// idError is a plain reason string; the exported validators wrap it.
type idError string

// Error implements error.
func (e idError) Error() string { return string(e) }

// ValidID reports why s is not a well-formed identifier (nil when it is):
// 1..maxBytes bytes of valid UTF-8 without control characters. It is the
// one statement of that rule; task and holder ids (ValidTask, ValidHolder)
// and the lease cluster's ids (sessions, workers, keys) all use it.
func ValidID(s string, maxBytes int) error {
	if s == "" {
		return idError("empty")
	}
	if len(s) > maxBytes {
		return idError(fmt.Sprintf("longer than %d bytes", maxBytes))
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return idError(fmt.Sprintf("invalid UTF-8 at byte %d", i))
			}
		}
		if unicode.IsControl(r) {
			return idError(fmt.Sprintf("control character at byte %d", i))
		}
	}
	return nil
}

// ValidIdempotencyKey reports whether k is a well-formed Idempotency-Key:
// 1..255 bytes, each visible ASCII (0x21-0x7E). The error wraps
// ErrInvalidIdempotencyKey.
func ValidIdempotencyKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrInvalidIdempotencyKey)
	}
	if len(k) > MaxIdempotencyKeyLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidIdempotencyKey, MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return fmt.Errorf("%w: byte %d is not visible ASCII", ErrInvalidIdempotencyKey, i)
		}
	}
	return nil
}
