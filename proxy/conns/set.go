package conns

import (
	"io"
	"sync"
)

// Set is a set of open connections that can all be closed at once:
// the request path's shared upstream connections, the tunnels' worker
// sides. Once closed it refuses new ones.
type Set struct {
	mu     sync.Mutex
	closed bool
	m      map[io.Closer]struct{}
}

// Track registers c; false (and c must be closed) after CloseAll.
func (s *Set) Track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = make(map[io.Closer]struct{})
	}
	s.m[c] = struct{}{}
	return true
}

// Untrack forgets c.
func (s *Set) Untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// CloseAll closes every tracked connection and refuses new ones.
func (s *Set) CloseAll() {
	s.mu.Lock()
	s.closed = true
	m := s.m
	s.m = nil
	s.mu.Unlock()
	for c := range m {
		_ = c.Close()
	}
}
