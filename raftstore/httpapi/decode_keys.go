package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// checkKeys walks body (already known to be valid UTF-8) beside the Go type
// it will decode into and refuses what encoding/json would silently
// accept: a key given twice in one object (encoding/json keeps the last,
// so a proxy or log that reads the first sees another request), and a key
// that matches a field only case-insensitively ("SessionId" for
// "sessionId"). Keys of maps are free-form and only checked for repeats.
// Syntax errors are left to the decoder, which words them.
//
// The raw-byte scan (decode_keys_fast.go) decides for plain bodies; a key
// with an escape sequence or a very large object takes the token walk.
func checkKeys(body []byte, t reflect.Type) error {
	sc := keyScanner{b: body}
	switch err := sc.value(t); err {
	case nil, errSyntax:
		return nil
	case errSlow:
	default:
		return err
	}
	return walkKeys(body, t)
}

// walkKeys is checkKeys over encoding/json's tokens: slower, but it sees
// keys unescaped.
func walkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkValue(dec, t); err != nil && err != errSyntax {
		return err
	}
	return nil
}

// errSyntax stops the walk on malformed JSON; decodeBody reports it.
var errSyntax = fmt.Errorf("syntax")

func walkValue(dec *json.Decoder, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walkValue(dec, elem); err != nil {
				return err
			}
		}
	case '{':
		if err := walkObject(dec, t); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errSyntax
	}
	return nil
}

// objectTypes returns what an object decoding into t holds: the fields of
// a struct, or the element type of a map (nil, nil when unknown).
func objectTypes(t reflect.Type) (fields map[string]reflect.Type, elem reflect.Type) {
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			return jsonFields(t), nil
		case reflect.Map:
			return nil, t.Elem()
		}
	}
	return nil, nil
}

// fieldType returns the type of key in a struct's fields, refusing a key
// that names a field in another case (nil for an unknown key, which the
// decoder refuses).
func fieldType(fields map[string]reflect.Type, key string) (reflect.Type, error) {
	if ft, ok := fields[key]; ok {
		return ft, nil
	}
	for name := range fields {
		if strings.EqualFold(name, key) {
			return nil, fmt.Errorf("%w: key %q must be spelled %q (field names are case-sensitive)", ErrUnknownField, key, name)
		}
	}
	return nil, nil
}

func walkObject(dec *json.Decoder, t reflect.Type) error {
	fields, elem := objectTypes(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errSyntax
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%w: key %q given twice in one object", ErrBadRequest, key)
		}
		seen[key] = true
		next := elem
		if fields != nil {
			var err error
			if next, err = fieldType(fields, key); err != nil {
				return err
			}
		}
		if err := walkValue(dec, next); err != nil {
			return err
		}
	}
	return nil
}

// fieldCache holds the JSON field names of each struct type decoded.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of t's exported fields to their types
// (embedded structs are not used by the API's request types).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if v, ok := fieldCache.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}
