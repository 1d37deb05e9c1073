// Package console drives the operator console in a real browser: Debian's
// headless chromium, through chromedp, against a real `fencepost dev` and a
// second console run with a reader's certificate. Without chromium the
// tests skip and say so; CI (root) installs it (test/run.sh).
//
// Screenshots of every page are written to $CONSOLE_SCREENSHOTS when set,
// else to the test's temporary directory; they are artifacts, never
// committed.
package console
