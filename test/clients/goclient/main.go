// Command goclient is a worker's Go net/http client as a user runs it:
// the default transport, with the proxy (HTTPS_PROXY) and the CA bundle
// (SSL_CERT_FILE) taken only from the environment.
//
// Usage: goclient write|sse|hold URL
//
// It prints one JSON object like the Python and Node clients of the
// real-client matrix (package clients).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

type result struct {
	Status  int     `json:"status,omitempty"`
	CType   string  `json:"ctype,omitempty"`
	Retry   string  `json:"retry,omitempty"`
	Body    string  `json:"body"`
	FirstMs float64 `json:"first_ms,omitempty"`
	TotalMs float64 `json:"total_ms"`
	Error   string  `json:"error,omitempty"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goclient write|sse|hold URL")
		os.Exit(2)
	}
	mode, url := os.Args[1], os.Args[2]
	method, body := http.MethodPost, map[string]string{"write": "amount=5", "hold": "go"}[mode]
	if mode == "sse" {
		method = http.MethodGet
	}
	t0 := time.Now()
	ms := func() float64 { return float64(time.Since(t0).Microseconds()) / 1000 }
	var out result
	if err := run(method, url, body, &out, ms); err != nil {
		out.Error = err.Error()
	}
	out.TotalMs = ms()
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func run(method, url, body string, out *result, ms func() float64) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out.Status, out.CType, out.Retry = resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Should-Retry")
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && out.FirstMs == 0 {
			out.FirstMs = ms()
		}
		sb.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			out.Body = sb.String()
			return err
		}
	}
	out.Body = sb.String()
	return nil
}
