package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// InferRole guesses the role of a YAML file from its top-level keys: the
// role whose schema knows every key. When several roles fit (an empty file,
// or only keys they share such as log and data_dir) it returns an error
// wrapping ErrRole asking for an explicit role. When none fits it returns the
// role knowing the most keys, so validation can report the unknown ones.
// Errors are *FieldError values wrapping ErrRole, or ErrSyntax for a file
// that is not YAML.
func InferRole(data []byte) (Role, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%w: %s", ErrSyntax, yamlMsg(err))
	}
	var keys []string
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i < len(m.Content); i += 2 {
			keys = append(keys, m.Content[i].Value)
		}
	}
	var fits []Role
	best, bestCount, tie := Role(""), -1, false
	for _, r := range Roles() {
		fields := fieldsOf(reflect.TypeOf(Default(r)).Elem())
		count := 0
		for _, k := range keys {
			if slices.ContainsFunc(fields, func(f field) bool { return f.name == k }) {
				count++
			}
		}
		if count == len(keys) {
			fits = append(fits, r)
		}
		switch {
		case count > bestCount:
			best, bestCount, tie = r, count, false
		case count == bestCount:
			tie = true
		}
	}
	switch {
	case len(fits) == 1:
		return fits[0], nil
	case len(fits) > 1:
		names := make([]string, len(fits))
		for i, r := range fits {
			names[i] = string(r)
		}
		return "", &FieldError{Msg: "cannot tell the role from the keys: they fit " + strings.Join(names, ", "), Kind: ErrRole}
	case tie || bestCount == 0:
		return "", &FieldError{Msg: "cannot tell the role from the keys: " + strings.Join(keys, ", ") + " fit no role", Kind: ErrRole}
	}
	return best, nil
}
