package main

import (
	"os"
	"strings"
)

// keptBegin starts the hand-written tail of BENCHMARKS.md: measurements
// made on their own (go test benchmarks, single-workload runs) that no
// harness pass produces. A run rewrites everything before it and keeps the
// tail as it is, so regenerating the file never drops them.
const keptBegin = "<!-- kept: the sections below are written by hand from their own runs; test/bench keeps them as they are -->"

// splitKept splits a file's text into what the harness renders and the
// hand-written tail ("" when it has no marker).
func splitKept(s string) (head, kept string) {
	i := strings.Index(s, keptBegin)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimRight(s[i:], "\n") + "\n"
}

// storedKept returns the hand-written tail of the file at path.
func storedKept(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, kept := splitKept(string(b))
	return kept
}

// withKept appends the kept tail to a rendered file.
func withKept(out, kept string) string {
	if kept == "" {
		return out
	}
	return strings.TrimRight(out, "\n") + "\n\n" + kept
}
