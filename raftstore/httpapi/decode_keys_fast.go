package httpapi

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/fencepost/fencepost/fence/jsonscan"
)

// errSlow sends scanKeys' caller to the token walk: a key with an escape
// sequence (the raw bytes are not the key), or an object with so many
// keys that pairwise comparison would cost more than a map.
var errSlow = fmt.Errorf("slow path")

// maxFastKeys bounds the keys of one object the fast scan compares
// pairwise.
const maxFastKeys = 32

// keyScanner checks keys over the raw bytes, without allocating: the
// requests of the hot routes (acquire, checkpoint, release) are small
// objects of plain keys. Anything unusual returns errSlow or errSyntax.
type keyScanner struct {
	b []byte
	i int
}

func (p *keyScanner) ws() { p.i = jsonscan.SkipSpace(p.b, p.i) }

// str consumes a string and returns its raw bytes; escaped reports a
// backslash inside.
func (p *keyScanner) str() (raw []byte, escaped bool, err error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false, errSyntax
	}
	p.i++
	start := p.i
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			raw = p.b[start:p.i]
			p.i++
			return raw, escaped, nil
		case '\\':
			escaped = true
			p.i++
		}
		p.i++
	}
	return nil, false, errSyntax
}

func (p *keyScanner) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p.ws()
	if p.i >= len(p.b) {
		return errSyntax
	}
	switch p.b[p.i] {
	case '{':
		return p.object(t)
	case '[':
		p.i++
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.value(elem); err != nil {
				return err
			}
			if done, err := p.next(']'); done || err != nil {
				return err
			}
		}
	case '"':
		_, _, err := p.str()
		return err
	}
	// A number, true, false or null: up to the next delimiter.
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return nil
		}
		p.i++
	}
	return nil
}

func (p *keyScanner) object(t reflect.Type) error {
	p.i++ // '{'
	fields, elem := objectTypes(t)
	var seen [maxFastKeys][]byte
	n := 0
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		key, escaped, err := p.str()
		if err != nil {
			return err
		}
		if escaped || n == maxFastKeys {
			return errSlow
		}
		for _, k := range seen[:n] {
			if bytes.Equal(k, key) {
				return fmt.Errorf("%w: key %q given twice in one object", ErrBadRequest, key)
			}
		}
		seen[n] = key
		n++
		next := elem
		if fields != nil {
			// string(key) as a map index does not allocate; fieldType's
			// error path may.
			var err error
			if next, err = fieldType(fields, string(key)); err != nil {
				return err
			}
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return errSyntax
		}
		p.i++
		if err := p.value(next); err != nil {
			return err
		}
		if done, err := p.next('}'); done || err != nil {
			return err
		}
	}
}

// next consumes what follows a member of an array or object: ',' (more
// to come) or the closing byte (done).
func (p *keyScanner) next(closing byte) (done bool, err error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, errSyntax
	}
	p.i++
	switch p.b[p.i-1] {
	case ',':
		return false, nil
	case closing:
		return true, nil
	}
	return false, errSyntax
}
