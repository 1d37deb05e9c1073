package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
)

// Config is implemented by the four role structs (*Server, *Sidecar,
// *Fenced, *Dev). The unexported method keeps the set closed.
type Config interface {
	// Role returns the role the struct configures.
	Role() Role
	// Validate checks every rule that does not depend on the host and
	// returns all broken rules joined, one line each.
	Validate() error
	// CheckRuntime checks what only the host can tell: directories
	// writable, ports free, files readable. Errors wrap ErrRuntime.
	CheckRuntime() error
	// fill sets the defaults that depend on other keys (data_dir from
	// node_id, for example) once all layers are applied.
	fill()
}

// Source says where Load reads from. Every field is optional.
type Source struct {
	// Path is the YAML file. When empty, Flags' --config is used, then the
	// FENCEPOST_CONFIG variable from Env; with none of them only defaults,
	// environment and flags apply.
	Path string
	// Env holds KEY=VALUE pairs, normally os.Environ(). Only FENCEPOST_*
	// entries are read.
	Env []string
	// Flags are the flags bound with BindFlags and already parsed.
	Flags *Flags
}

// Default returns the defaults of role, before the values derived from other
// keys are filled in, or nil for an unknown role. Each call returns a fresh
// value.
func Default(role Role) Config {
	switch role {
	case RoleServer:
		return DefaultServer()
	case RoleSidecar:
		return DefaultSidecar()
	case RoleFenced:
		return DefaultFenced()
	case RoleDev:
		return DefaultDev()
	}
	return nil
}

// Load builds the configuration of role from defaults, the file, the
// environment and the flags, in that order of precedence (flags win), then
// validates it. On error the returned Config is nil and the error joins every
// problem found, each a one-line *FieldError.
func Load(role Role, src Source) (Config, error) {
	cfg := Default(role)
	if cfg == nil {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrRole, role, roleList())
	}
	var p problems
	if err := layers(role, cfg, src, &p); err != nil {
		return nil, err
	}
	return finish(cfg, &p)
}

// layers applies the file, the environment and the flags of src to cfg.
// The error is a file that cannot be read; other problems go to p.
func layers(role Role, cfg Config, src Source, p *problems) error {
	if path := src.path(); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return &FieldError{Where: path, Msg: "cannot read config file: " + unwrapPathError(err), Kind: ErrSyntax}
		}
		decodeFile(data, path, cfg, p)
	}
	applyOTelEnv(cfg, src.Env, p)
	applyEnv(role, cfg, src.Env, p)
	if src.Flags != nil {
		src.Flags.apply(role, cfg, p)
	}
	return nil
}

// Parse loads role from YAML bytes alone (no environment, no flags) and
// validates the result; name labels messages, e.g. "server.yaml".
func Parse(role Role, data []byte, name string) (Config, error) {
	cfg := Default(role)
	if cfg == nil {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrRole, role, roleList())
	}
	var p problems
	decodeFile(data, name, cfg, &p)
	return finish(cfg, &p)
}

// finish validates cfg after decoding and returns it, or every problem in
// one pass: the decoding problems (syntax, types, unknown keys) followed by
// the broken rules, so a user fixes a file in one round instead of
// discovering rule errors only after the type errors are gone. A rule error
// on a key whose value could not be decoded is left out (the key still holds
// its default, so the rule would judge a value nobody wrote), and nothing is
// validated when the file as a whole could not be read or parsed.
func finish(cfg Config, p *problems) (Config, error) {
	failed := map[string]bool{}
	for _, e := range p.list.All() {
		fe, ok := e.(*FieldError)
		if !ok || fe.Key == "" && !errors.Is(fe, ErrUnknownKey) {
			return nil, p.err() // a whole file or the role is wrong
		}
		if fe.Key != "" && !errors.Is(fe, ErrUnknownKey) {
			failed[fe.Key] = true
		}
	}
	cfg.fill()
	for _, e := range Errors(cfg.Validate()) {
		if fe, ok := e.(*FieldError); ok && coveredBy(fe.Key, failed) {
			continue
		}
		p.add(e)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// coveredBy reports whether key, or a key it is part of, already has a
// decoding problem: "writes.rules[0].write" is covered by itself and by
// "writes.rules[0]" and "writes.rules".
func coveredBy(key string, failed map[string]bool) bool {
	for k := key; k != ""; {
		if failed[k] {
			return true
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			return false
		}
		k = k[:i]
	}
	return false
}

// LoadServer is Load for the server role.
func LoadServer(src Source) (*Server, error) { return loadAs[*Server](RoleServer, src) }

// LoadSidecar is Load for the sidecar role.
func LoadSidecar(src Source) (*Sidecar, error) { return loadAs[*Sidecar](RoleSidecar, src) }

// LoadFenced is Load for the fenced role.
func LoadFenced(src Source) (*Fenced, error) { return loadAs[*Fenced](RoleFenced, src) }

// LoadDev is Load for the dev role.
func LoadDev(src Source) (*Dev, error) { return loadAs[*Dev](RoleDev, src) }

// loadAs is Load with the concrete type.
func loadAs[T Config](role Role, src Source) (T, error) {
	var zero T
	cfg, err := Load(role, src)
	if err != nil {
		return zero, err
	}
	return cfg.(T), nil
}

// path resolves the config file path: Path, then --config, then
// FENCEPOST_CONFIG.
func (s Source) path() string {
	if s.Path != "" {
		return s.Path
	}
	if s.Flags != nil && s.Flags.path != "" {
		return s.Flags.path
	}
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, EnvConfigPath+"="); ok {
			return v
		}
	}
	return ""
}

// applyEnv applies FENCEPOST_* variables. A variable that is a key of another
// role is skipped, because one environment (a compose env_file) often serves
// several roles; a variable no role knows is an error, because it is almost
// always a typo that would otherwise be silently ignored.
func applyEnv(role Role, cfg Config, env []string, p *problems) {
	defs := keysOf(reflect.TypeOf(cfg).Elem(), "")
	type setting struct{ name, key, value string }
	var sets []setting
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigPath {
			continue
		}
		if key, ok := envToKey(defs, name); ok {
			// Templated manifests often render an unset value as an
			// empty variable; treat it as unset rather than as "".
			if value != "" {
				sets = append(sets, setting{name, key, value})
			}
			continue
		}
		if otherRoleHas(role, name) || slices.Contains(clientEnv, name) {
			continue
		}
		p.add(&FieldError{Where: "env " + name, Msg: "unknown variable: no " + string(role) +
			" key maps to it" + suggestEnv(defs, name), Kind: ErrUnknownKey})
	}
	// Whole maps before their entries, so FENCEPOST_LEASES_PROFILES and
	// FENCEPOST_LEASES_PROFILES_SHORT_TTL compose instead of racing.
	slices.SortStableFunc(sets, func(a, b setting) int {
		if c := strings.Count(a.key, ".") - strings.Count(b.key, "."); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	root := reflect.ValueOf(cfg).Elem()
	for _, s := range sets {
		w := walker{where: "env " + s.name, p: p}
		if !w.setPath(root, strings.Split(s.key, "."), s.key, s.value) {
			p.add(&FieldError{Where: w.where, Key: s.key, Msg: "unknown key", Kind: ErrUnknownKey})
		}
	}
}

// otherRoleHas reports whether an environment variable sets a key of a role
// other than role.
func otherRoleHas(role Role, name string) bool {
	for _, r := range Roles() {
		if r == role {
			continue
		}
		if _, ok := envToKey(keysOf(reflect.TypeOf(Default(r)).Elem(), ""), name); ok {
			return true
		}
	}
	return false
}

// suggestEnv proposes the closest variable name of defs.
func suggestEnv(defs []keyDef, name string) string {
	var names []string
	for _, k := range defs {
		if !strings.Contains(k.name, "*") {
			names = append(names, envName(k.name))
		}
	}
	s := suggest(name, names)
	if strings.HasPrefix(s, " (did you mean") {
		return s
	}
	return ""
}

// Flags holds the configuration flags of one role registered on a
// flag.FlagSet by BindFlags. After FlagSet.Parse, pass it in Source.Flags.
type Flags struct {
	role Role
	path string
	sets []flagSetting // in command-line order, so the last one wins
}

// flagSetting is one flag occurrence.
type flagSetting struct {
	flag, key, value string
}

// BindFlags registers on fs, for role: --config FILE, one flag per scalar key
// (--raft-election-timeout=500ms, --join=a:7400,b:7400, --bootstrap) and a
// repeatable --set KEY=VALUE that reaches every key, map entries included
// (--set leases.profiles.batch.ttl=2m). Each flag's help names its
// environment variable and shows its default. It panics for an unknown role,
// which is a programming error.
func BindFlags(fs *flag.FlagSet, role Role) *Flags {
	if Default(role) == nil {
		panic(fmt.Sprintf("config: BindFlags for unknown role %q", role))
	}
	f := &Flags{role: role}
	fs.StringVar(&f.path, "config", "", "YAML config `file` (env "+EnvConfigPath+")")
	fs.Var(&setFlag{f: f}, "set", "set any `key=value`, e.g. --set leases.profiles.batch.ttl=2m (repeatable)")
	defs := keysOf(reflect.TypeOf(Default(role)).Elem(), "")
	for i, k := range Keys(role) {
		if k.Flag == "" {
			continue
		}
		kf := &keyFlag{f: f, flag: k.Flag, key: k.Name, def: k.Default}
		t := defs[i].typ
		if t.Kind() == reflect.Bool || t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool {
			if kf.def == "false" {
				kf.def = "" // the flag package prints no "(default false)" for ""
			}
			fs.Var(&boolKeyFlag{kf}, k.Flag, k.Doc+" (env "+k.Env+")")
			continue
		}
		// The flag package shows the first `quoted` word as the value's
		// placeholder: "-raft-election-timeout duration".
		fs.Var(kf, k.Flag, k.Doc+" (`"+placeholder(t)+"`; env "+k.Env+")")
	}
	return f
}

// placeholder names the kind of value a flag takes, for its help line.
func placeholder(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Duration]():
		return "duration"
	case t == reflect.TypeFor[ByteSize]():
		return "size"
	case t.Kind() == reflect.Slice:
		return "list"
	case t.Kind() == reflect.Float64:
		return "fraction"
	case t.Kind() == reflect.String:
		return "string"
	}
	return "number"
}

// Path returns the --config value.
func (f *Flags) Path() string { return f.path }

// apply sets every recorded flag on cfg.
func (f *Flags) apply(role Role, cfg Config, p *problems) {
	if f.role != role {
		p.add(&FieldError{Msg: fmt.Sprintf("flags bound for role %s used to load role %s", f.role, role), Kind: ErrRole})
		return
	}
	root := reflect.ValueOf(cfg).Elem()
	for _, s := range f.sets {
		w := walker{where: "flag --" + s.flag, p: p}
		if !w.setPath(root, strings.Split(s.key, "."), s.key, s.value) {
			p.add(&FieldError{Where: w.where, Key: s.key, Msg: "unknown key", Kind: ErrUnknownKey})
		}
	}
}

// keyFlag is the flag.Value of one key. It only records the text; parsing
// happens in Load so flags, environment and file share one parser and one
// error format.
type keyFlag struct {
	f         *Flags
	flag, key string
	def       string
}

// String returns the default for the help text.
func (k *keyFlag) String() string {
	if k == nil {
		return ""
	}
	return k.def
}

// Set records one occurrence.
func (k *keyFlag) Set(s string) error {
	k.f.sets = append(k.f.sets, flagSetting{flag: k.flag, key: k.key, value: s})
	return nil
}

// boolKeyFlag lets a boolean key be given as a bare --flag.
type boolKeyFlag struct{ *keyFlag }

// IsBoolFlag tells the flag package that --flag alone means true.
func (b *boolKeyFlag) IsBoolFlag() bool { return true }

// String returns the default for the help text.
func (b *boolKeyFlag) String() string {
	if b == nil || b.keyFlag == nil {
		return ""
	}
	return b.keyFlag.String()
}

// setFlag implements --set KEY=VALUE.
type setFlag struct{ f *Flags }

// String is empty: --set has no default.
func (s *setFlag) String() string { return "" }

// Set checks that the key exists for the role and records it.
func (s *setFlag) Set(kv string) error {
	key, value, ok := strings.Cut(kv, "=")
	if !ok || key == "" {
		return fmt.Errorf("want key=value")
	}
	def := Default(s.f.role)
	if def == nil || !knownKey(keysOf(reflect.TypeOf(def).Elem(), ""), key) {
		return fmt.Errorf("unknown %s key %q", s.f.role, key)
	}
	s.f.sets = append(s.f.sets, flagSetting{flag: "set " + key, key: key, value: value})
	return nil
}

// unwrapPathError drops the repeated path from an *os.PathError message.
func unwrapPathError(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
