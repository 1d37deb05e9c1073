package fence

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkMemStoreCheck measures the in-memory fencing check of one
// write (stale check, slot, re-check, handler call) on a single task.
func BenchmarkMemStoreCheck(b *testing.B) {
	s, err := NewMemStore(MemStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	w := Write{Key: TaskKey{Task: "task-1"}, Epoch: 7}
	ctx := context.Background()
	resp := &Response{Status: 200}
	fn := func(context.Context) (*Response, error) { return resp, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Do(ctx, w, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemStoreCheckParallel spreads writes over 1024 tasks from all
// procs.
func BenchmarkMemStoreCheckParallel(b *testing.B) {
	s, err := NewMemStore(MemStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]TaskKey, 1024)
	for i := range keys {
		keys[i] = TaskKey{Task: "task-" + strconv.Itoa(i)}
	}
	resp := &Response{Status: 200}
	fn := func(context.Context) (*Response, error) { return resp, nil }
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		ctx := context.Background()
		for pb.Next() {
			i++
			w := Write{Key: keys[i%len(keys)], Epoch: 7}
			if _, _, err := s.Do(ctx, w, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkValidatorCheck is the whole decision table without HTTP:
// parsing the headers, then the store.
func BenchmarkValidatorCheck(b *testing.B) {
	s, err := NewMemStore(MemStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewValidator(Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	input := Input{Token: []string{"7"}, Task: []string{"task-1"}, Method: "POST", RequestURI: "/"}
	resp := &Response{Status: 200}
	fn := func(context.Context) (*Response, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := v.Check(ctx, input, fn); r.Problem != nil {
			b.Fatal(r.Problem.Detail)
		}
	}
}

// BenchmarkValidatorCheckSigned adds Ed25519 verification, which dominates.
func BenchmarkValidatorCheckSigned(b *testing.B) {
	priv := testKey(b, 0)
	s, err := NewMemStore(MemStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewValidator(Config{Store: s, Keys: NewStaticKeys(pubOf(priv))})
	if err != nil {
		b.Fatal(err)
	}
	input := Input{Token: []string{"7"}, Task: []string{"task-1"}, Holder: []string{"w"},
		Signature: []string{Sign(priv, "task-1", 7, "w")}, Method: "POST", RequestURI: "/"}
	resp := &Response{Status: 200}
	fn := func(context.Context) (*Response, error) { return resp, nil }
	ctx := context.Background()
	for b.Loop() {
		if r := v.Check(ctx, input, fn); r.Problem != nil {
			b.Fatal(r.Problem.Detail)
		}
	}
}
