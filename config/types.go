package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Role names one kind of fencepost process; each role has its own file schema.
type Role string

// The roles. Each one loads into its own struct: Server, Sidecar, Fenced, Dev.
const (
	RoleServer  Role = "server"
	RoleSidecar Role = "sidecar"
	RoleFenced  Role = "fenced"
	RoleDev     Role = "dev"
)

// Roles lists every role in the order help texts show them.
func Roles() []Role { return []Role{RoleServer, RoleSidecar, RoleFenced, RoleDev} }

// ParseRole turns a role name into a Role; unknown names wrap ErrRole.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles() {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrRole, s, roleList())
}

// roleList renders the roles for messages: "server|sidecar|fenced|dev".
func roleList() string {
	names := make([]string, 0, len(Roles()))
	for _, r := range Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, "|")
}

// Duration is a time.Duration written as a Go duration string ("20s",
// "500ms") in YAML, environment variables and flags. Bare numbers are
// rejected because "20" could mean seconds or nanoseconds.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration does, minus trailing zero units:
// "10m" rather than "10m0s", "1h" rather than "1h0m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText writes d as a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("must be a duration such as \"20s\" or \"500ms\" (got %q)", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML parses a scalar duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a duration such as \"20s\" (got a %s)", kindName(n))
	}
	return d.UnmarshalText([]byte(n.Value))
}

// ByteSize is a size in bytes. It accepts a plain integer or a number with a
// unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000).
type ByteSize int64

// sizeUnits are ordered largest first so String picks the biggest exact unit.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// Int returns b as an int, saturating at the largest int.
func (b ByteSize) Int() int {
	if int64(b) > math.MaxInt {
		return math.MaxInt
	}
	return int(b)
}

// String formats b with the largest binary unit that divides it exactly,
// so a value survives a round trip unchanged.
func (b ByteSize) String() string {
	if b == 0 {
		return "0"
	}
	for _, u := range sizeUnits[:3] {
		if int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText writes b like String.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText parses "1048576", "1MiB", "64 KiB" or "10MB".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	bad := fmt.Errorf("must be a size such as \"1MiB\", \"64KiB\" or \"4096\" (got %q)", s)
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.name) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.name)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return bad
	}
	*b = ByteSize(n * mult)
	return nil
}

// MarshalYAML writes b like String, as a plain number when no unit fits.
func (b ByteSize) MarshalYAML() (any, error) {
	s := b.String()
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	return s, nil
}

// UnmarshalYAML parses a scalar size.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a size such as \"1MiB\" (got a %s)", kindName(n))
	}
	return b.UnmarshalText([]byte(n.Value))
}

// Log is the logging section shared by every role.
type Log struct {
	// Level is the minimum level written: debug, info, warn or error.
	Level string `yaml:"level" doc:"minimum log level: debug, info, warn, error"`
	// Format is json (one object per line, the default) or console.
	Format string `yaml:"format" doc:"log format: json or console"`
}

// defaultLog is the logging every role starts from.
func defaultLog() Log { return Log{Level: "info", Format: "json"} }

// validate checks the level and format names.
func (l Log) validate(p *problems) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		p.invalid("log.level", "must be one of debug, info, warn, error (got %q)", l.Level)
	}
	switch l.Format {
	case "json", "console":
	default:
		p.invalid("log.format", "must be json or console (got %q)", l.Format)
	}
}

// kindName names a YAML node kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	default:
		return "scalar"
	}
}
