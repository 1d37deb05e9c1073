// Command serve runs the fake control API (package fakectl) on a fresh
// 127.0.0.1 port for the Python and TypeScript SDK tests: it prints
// "listening http://127.0.0.1:PORT" and serves until its standard input
// closes.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/fencepost/fencepost/proxy/worker/internal/fakectl"
)

func main() {
	url, stop, err := fakectl.New().Listen()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakectl:", err)
		os.Exit(1)
	}
	fmt.Println("listening", url)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
}
