package sqlstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/fence"
)

// Dialect selects the SQL spelling for one database family.
type Dialect int

const (
	// SQLite uses "?" placeholders (modernc.org/sqlite, mattn/go-sqlite3).
	// Open the database with "_txlock=immediate" and a busy timeout, so a
	// transaction takes the write lock at BEGIN instead of failing with
	// SQLITE_BUSY when it upgrades.
	SQLite Dialect = iota + 1
	// Postgres uses "$1" placeholders (pgx stdlib, lib/pq). The default
	// READ COMMITTED isolation is enough: the UPDATE's row lock serialises
	// writes to a task.
	Postgres
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) valid() bool { return d == SQLite || d == Postgres }

// rebind rewrites "?" placeholders into the dialect's form. The package's
// own queries contain no other question marks.
func (d Dialect) rebind(q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// blobType is the column type for response bodies.
func (d Dialect) blobType() string {
	if d == Postgres {
		return "BYTEA"
	}
	return "BLOB"
}

// epochType is the column type for epochs: text, zero-padded to 20 digits
// (see encodeEpoch). Postgres gets the "C" collation so comparison is
// bytewise whatever the database's default collation is.
func (d Dialect) epochType() string {
	if d == Postgres {
		return `TEXT COLLATE "C"`
	}
	return "TEXT"
}

// epochDigits is the width of a stored epoch: len("18446744073709551615").
const epochDigits = 20

// encodeEpoch stores an epoch as 20 zero-padded decimal digits. Neither
// SQLite nor Postgres has an unsigned 64-bit integer, and epochs use the
// whole range; at a fixed width, text order is numeric order, so
// "lease_epoch <= ?" compares correctly and the column stays readable.
func encodeEpoch(e uint64) string {
	s := strconv.FormatUint(e, 10)
	return strings.Repeat("0", epochDigits-len(s)) + s
}

func decodeEpoch(s string) (uint64, error) {
	if len(s) != epochDigits {
		return 0, fmt.Errorf("%w: stored epoch %q is not %d digits", fence.ErrStore, s, epochDigits)
	}
	e, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: stored epoch %q: %v", fence.ErrStore, s, err)
	}
	return e, nil
}
