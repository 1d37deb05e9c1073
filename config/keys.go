package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// EnvPrefix starts every environment variable this package reads.
const EnvPrefix = "FENCEPOST_"

// EnvConfigPath names the variable holding the config file path when neither
// Source.Path nor --config is given. It is not a key and never an error.
const EnvConfigPath = EnvPrefix + "CONFIG"

// The variables of `fencepost ctl`, a client that loads no role
// configuration: its --cluster, --clusters, --ca, --cert and --key. Every role skips
// them as it skips another role's keys (EnvCluster is also the sidecar's
// cluster key), so a shell that exports them for ctl can still start a
// server or fenced.
const (
	EnvCluster  = EnvPrefix + "CLUSTER"
	EnvClusters = EnvPrefix + "CLUSTERS"
	EnvCAFile   = EnvPrefix + "CA_FILE"
	EnvCertFile = EnvPrefix + "CERT_FILE"
	EnvKeyFile  = EnvPrefix + "KEY_FILE"
)

// clientEnv lists the ctl variables every role tolerates.
var clientEnv = []string{EnvCluster, EnvClusters, EnvCAFile, EnvCertFile, EnvKeyFile}

// Key describes one configuration key of a role, for help texts and docs.
type Key struct {
	// Name is the dotted YAML path. A "*" stands for the name of a map entry,
	// as in "leases.profiles.*.ttl".
	Name string
	// Env is the environment variable, with "*" where the upper-cased entry
	// name goes.
	Env string
	// Flag is the flag name without dashes; empty when the key is reachable
	// only with --set (map entries, lists of records).
	Flag string
	// Doc is a one-line description.
	Doc string
	// Default is the default value as text; empty when there is none or it
	// is derived at load time (node_id from the host name, for example).
	Default string
}

// keyDef is the internal form of Key, with the Go type of the value.
type keyDef struct {
	name string
	doc  string
	typ  reflect.Type
	flag bool // a dedicated --flag exists
}

// Keys lists every key of role in schema order. It returns nil for an unknown
// role.
func Keys(role Role) []Key {
	def := Default(role)
	if def == nil {
		return nil
	}
	root := reflect.ValueOf(def).Elem()
	var out []Key
	for _, k := range keysOf(root.Type(), "") {
		key := Key{Name: k.name, Env: envName(k.name), Doc: k.doc}
		if k.flag && !strings.Contains(k.name, "*") {
			key.Flag = flagName(k.name)
		}
		if !strings.Contains(k.name, "*") {
			if v, ok := lookup(root, strings.Split(k.name, ".")); ok && isScalarish(v.Type()) {
				key.Default = formatValue(v)
			}
		}
		out = append(out, key)
	}
	return out
}

// keysOf walks struct type t and lists its keys. Maps of records also list
// their fields under "*"; lists of records are one key, set as inline YAML.
func keysOf(t reflect.Type, prefix string) []keyDef {
	var out []keyDef
	for _, f := range fieldsOf(t) {
		ft := t.Field(f.index).Type
		full := join(prefix, f.name)
		switch {
		case isScalarish(ft):
			out = append(out, keyDef{name: full, doc: f.doc, typ: ft, flag: true})
		case ft.Kind() == reflect.Struct:
			out = append(out, keysOf(ft, full)...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, keyDef{name: full, doc: f.doc, typ: ft})
			out = append(out, keysOf(ft.Elem(), full+".*")...)
		default:
			out = append(out, keyDef{name: full, doc: f.doc, typ: ft})
		}
	}
	return out
}

// isScalarish reports whether t is set from one flag value: a scalar, a
// pointer to one (an optional bool) or a list of strings.
func isScalarish(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		return isLeaf(t.Elem())
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String {
		return true
	}
	return isLeaf(t)
}

// envName maps a dotted key to its environment variable.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagName maps a dotted key to its flag name: raft.election_timeout becomes
// raft-election-timeout.
func flagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// envToKey finds the key of role that environment variable name sets.
func envToKey(defs []keyDef, name string) (string, bool) {
	for _, k := range defs {
		pattern := envName(k.name)
		before, after, wild := strings.Cut(pattern, "*")
		if !wild {
			if pattern == name {
				return k.name, true
			}
			continue
		}
		if len(name) > len(before)+len(after) && strings.HasPrefix(name, before) && strings.HasSuffix(name, after) {
			entry := strings.ToLower(name[len(before) : len(name)-len(after)])
			return strings.Replace(k.name, "*", entry, 1), true
		}
	}
	return "", false
}

// knownKey reports whether the concrete dotted key exists in defs (map entry
// names match "*").
func knownKey(defs []keyDef, key string) bool {
	segs := strings.Split(key, ".")
	return slices.ContainsFunc(defs, func(k keyDef) bool {
		ps := strings.Split(k.name, ".")
		if len(ps) != len(segs) {
			return false
		}
		for i := range ps {
			if ps[i] != "*" && ps[i] != segs[i] {
				return false
			}
			if ps[i] == "*" && segs[i] == "" {
				return false
			}
		}
		return true
	})
}

// lookup walks v along the dotted path segs without creating anything.
func lookup(v reflect.Value, segs []string) (reflect.Value, bool) {
	for _, s := range segs {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Struct:
			f, ok := fieldByName(fieldsOf(v.Type()), s)
			if !ok {
				return reflect.Value{}, false
			}
			v = v.Field(f.index)
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(s))
			if !v.IsValid() {
				return reflect.Value{}, false
			}
		default:
			return reflect.Value{}, false
		}
	}
	return v, true
}

// setPath assigns the text s to the key segs below v, creating map entries
// and optional values on the way. It reports false if the path does not
// exist in the schema.
func (w walker) setPath(v reflect.Value, segs []string, key, s string) bool {
	if len(segs) == 0 {
		if v.Kind() == reflect.Pointer && isLeaf(v.Type().Elem()) {
			nv := reflect.New(v.Type().Elem())
			w.setString(nv.Elem(), key, s)
			v.Set(nv)
			return true
		}
		w.setString(v, key, s)
		return true
	}
	switch v.Kind() {
	case reflect.Struct:
		f, ok := fieldByName(fieldsOf(v.Type()), segs[0])
		if !ok {
			return false
		}
		return w.setPath(v.Field(f.index), segs[1:], key, s)
	case reflect.Map:
		if segs[0] == "" {
			return false
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		mk := reflect.ValueOf(segs[0])
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(mk); old.IsValid() {
			elem.Set(old)
		}
		if !w.setPath(elem, segs[1:], key, s) {
			return false
		}
		v.SetMapIndex(mk, elem)
		return true
	}
	return false
}

// formatValue renders a scalar-ish value the way it would be written in a
// file or flag.
func formatValue(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	if v.Kind() == reflect.Slice {
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}
