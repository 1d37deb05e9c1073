package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// decodeFile parses one YAML document into dst (a pointer to a role struct
// already holding defaults). It walks the node tree itself instead of calling
// yaml.Unmarshal so that every problem is reported with its full dotted key
// and line, all of them at once, and so a file only replaces the keys it
// names: defaults survive and map entries merge.
func decodeFile(data []byte, name string, dst any, p *problems) {
	// Decoding into a yaml.Node and walking it does what KnownFields does
	// (unknown keys are errors) but reports every key, not only the first.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file means "all defaults"
		}
		p.add(&FieldError{Where: name, Msg: yamlMsg(err), Kind: ErrSyntax})
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.add(&FieldError{Where: name, Msg: "holds more than one YAML document; use one file per role", Kind: ErrSyntax})
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	d := walker{where: name, p: p}
	d.value(root, reflect.ValueOf(dst).Elem(), "")
}

// yamlMsg strips the package prefix from a yaml.v3 error and keeps it on one
// line.
func yamlMsg(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.Join(strings.Fields(s), " ")
}

// walker decodes a node tree into a reflect.Value, collecting problems.
type walker struct {
	where string // file name, or "env X" / "flag --x"
	p     *problems
}

// at formats the location of node n for messages.
func (w walker) at(n *yaml.Node) string {
	if strings.HasPrefix(w.where, "env ") || strings.HasPrefix(w.where, "flag ") {
		return w.where
	}
	return fmt.Sprintf("%s:%d", w.where, n.Line)
}

// fail records a problem at node n.
func (w walker) fail(n *yaml.Node, key string, kind error, format string, args ...any) {
	w.p.add(&FieldError{Where: w.at(n), Key: key, Msg: fmt.Sprintf(format, args...), Kind: kind})
}

// value decodes n into v; key is the dotted path of v.
func (w walker) value(n *yaml.Node, v reflect.Value, key string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with no value keeps the default
	}
	if isLeaf(v.Type()) {
		if n.Kind != yaml.ScalarNode {
			w.fail(n, key, ErrSyntax, "must be a single value (got a %s)", kindName(n))
			return
		}
		if err := setLeaf(v, n.Value); err != nil {
			w.fail(n, key, ErrSyntax, "%s", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		w.value(n, v.Elem(), key)
	case reflect.Struct:
		w.structure(n, v, key)
	case reflect.Map:
		w.mapping(n, v, key)
	case reflect.Slice:
		w.list(n, v, key)
	default:
		// Every schema field is one of the kinds above; reaching here is a
		// bug in the schema, not in the user's file.
		panic(fmt.Sprintf("config: unsupported field kind %s at %s", v.Kind(), key))
	}
}

// structure decodes a mapping node into a struct, rejecting unknown keys.
func (w walker) structure(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		w.fail(n, key, ErrSyntax, "must be a mapping of keys (got a %s)", kindName(n))
		return
	}
	w.merges(n, func(m *yaml.Node) { w.structure(m, v, key) })
	fields := fieldsOf(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Tag == "!!merge" {
			continue
		}
		name := kn.Value
		full := join(key, name)
		if seen[name] {
			w.fail(kn, full, ErrSyntax, "appears more than once")
			continue
		}
		seen[name] = true
		f, ok := fieldByName(fields, name)
		if !ok {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.name
			}
			w.fail(kn, full, ErrUnknownKey, "unknown key%s", suggest(name, names))
			continue
		}
		w.value(vn, v.Field(f.index), full)
	}
}

// mapping decodes a mapping node into a map, merging into existing entries so
// that a file can change one field of a default profile.
func (w walker) mapping(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		w.fail(n, key, ErrSyntax, "must be a mapping (got a %s)", kindName(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	w.merges(n, func(m *yaml.Node) { w.mapping(m, v, key) })
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Tag == "!!merge" {
			continue
		}
		full := join(key, kn.Value)
		if seen[kn.Value] {
			w.fail(kn, full, ErrSyntax, "appears more than once")
			continue
		}
		seen[kn.Value] = true
		mk := reflect.ValueOf(kn.Value)
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(mk); old.IsValid() {
			elem.Set(old)
		}
		w.value(vn, elem, full)
		v.SetMapIndex(mk, elem)
	}
}

// merges applies the YAML merge keys ("<<: *defaults") of mapping n through
// apply before the mapping's own keys, so explicit keys win as YAML says.
func (w walker) merges(n *yaml.Node, apply func(*yaml.Node)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Tag != "!!merge" {
			continue
		}
		src := n.Content[i+1]
		for src.Kind == yaml.AliasNode {
			src = src.Alias
		}
		if src.Kind == yaml.SequenceNode {
			for _, m := range src.Content {
				for m.Kind == yaml.AliasNode {
					m = m.Alias
				}
				apply(m)
			}
			continue
		}
		apply(src)
	}
}

// list decodes a sequence node, replacing the whole list.
func (w walker) list(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		w.fail(n, key, ErrSyntax, "must be a list (got a %s)", kindName(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		w.value(item, out.Index(i), fmt.Sprintf("%s[%d]", key, i))
	}
	v.Set(out)
}

// textUnmarshaler is the interface Duration and ByteSize implement.
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// isLeaf reports whether values of t are written as one scalar.
func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		return true
	}
	return false
}

// setLeaf parses s into the scalar v. The same parser serves YAML scalars,
// environment variables and flags, so "20s" means the same everywhere.
func setLeaf(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("must be true or false (got %q)", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("must be a whole number (got %q)", s)
		}
		v.SetInt(i)
	case reflect.Uint64:
		u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("must be a whole number >= 0 (got %q)", s)
		}
		v.SetUint(u)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("must be a number (got %q)", s)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("cannot be set from a single value")
	}
	return nil
}

// setString applies one environment or flag value to v. Scalars use setLeaf;
// a list of strings also takes the comma-separated form ("a:1,b:2"); anything
// else (and any value starting with "[" or "{") is read as inline YAML, e.g.
// '[{host: api.example.com, write: false}]'.
func (w walker) setString(v reflect.Value, key, s string) {
	t := v.Type()
	if isLeaf(t) {
		if err := setLeaf(v, s); err != nil {
			w.p.add(&FieldError{Where: w.where, Key: key, Msg: err.Error(), Kind: ErrSyntax})
		}
		return
	}
	trimmed := strings.TrimSpace(s)
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String && !strings.HasPrefix(trimmed, "[") {
		var items []string
		for part := range strings.SplitSeq(trimmed, ",") {
			if part = strings.TrimSpace(part); part != "" {
				items = append(items, part)
			}
		}
		v.Set(reflect.ValueOf(items).Convert(t))
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil {
		w.p.add(&FieldError{Where: w.where, Key: key, Msg: "not valid inline YAML: " + yamlMsg(err), Kind: ErrSyntax})
		return
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		w.value(n.Content[0], v, key)
	}
}

// field is one YAML-visible struct field.
type field struct {
	name  string // YAML key
	index int
	doc   string // one-line help from the doc tag
}

// fieldsOf lists the YAML-tagged fields of struct type t in declaration
// order.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		out = append(out, field{name: name, index: i, doc: sf.Tag.Get("doc")})
	}
	return out
}

// fieldByName finds the field with YAML key name.
func fieldByName(fields []field, name string) (field, bool) {
	i := slices.IndexFunc(fields, func(f field) bool { return f.name == name })
	if i < 0 {
		return field{}, false
	}
	return fields[i], true
}

// join appends name to a dotted key.
func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

// suggest returns " (did you mean "x"?)" for the closest known name, or the
// list of known names when nothing is close.
func suggest(name string, known []string) string {
	best, bestDist := "", 1<<30
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && bestDist <= max(2, len(name)/3) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(known) == 0 {
		return ""
	}
	return " (known keys: " + strings.Join(known, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b, used only for
// "did you mean" hints on short key names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
