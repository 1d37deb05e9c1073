package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profiler captures CPU profiles of the fencepost server processes while a
// measurement runs (--profile DIR), so a missed target can be followed by
// pprof on exactly the run that missed it. Nodes serve /debug/pprof/ on
// their API port when the harness starts them with profiling on.
type profiler struct {
	dir string

	mu    sync.Mutex
	seq   int
	addrs map[int]string // pid → "name@host:port"
}

// prof is nil unless --profile is set; profileDur is how long each
// capture lasts (the whole seconds of one measurement).
var (
	prof       *profiler
	profileDur time.Duration
)

// register records that pid serves pprof at addr under name.
func (p *profiler) register(pid int, name, addr string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addrs == nil {
		p.addrs = map[int]string{}
	}
	p.addrs[pid] = name + "@" + addr
}

// capture starts one CPU profile of d on every pid that serves pprof and
// returns a function that waits for them and reports the files written.
func (p *profiler) capture(pids []int, d time.Duration) func() {
	if p == nil || d < time.Second {
		return func() {}
	}
	p.mu.Lock()
	p.seq++
	seq := p.seq
	var targets []string
	for _, pid := range pids {
		if a, ok := p.addrs[pid]; ok {
			targets = append(targets, a)
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range targets {
		name, addr := splitAt(t)
		path := filepath.Join(p.dir, fmt.Sprintf("%03d-%s.pprof", seq, name))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fetchProfile(addr, d, path); err != nil {
				logf("profile %s: %v", path, err)
				return
			}
			logf("profile %s", path)
		}()
	}
	return wg.Wait
}

// fetchProfile saves a CPU profile of whole seconds ≤ d from addr to path.
func fetchProfile(addr string, d time.Duration, path string) error {
	secs := int(d / time.Second)
	c := &http.Client{Timeout: d + 10*time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// splitAt splits "name@addr".
func splitAt(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '@' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}
