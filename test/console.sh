#!/usr/bin/env bash
# The operator console in a real browser (test/console): headless chromium,
# driven by chromedp, against a real `fencepost dev` and a reader's console.
# Screenshots of every page go to $CONSOLE_SCREENSHOTS (default
# bin/console-screenshots, which git ignores): artifacts, not sources.
# Without chromium the tests skip and say so; test/run.sh installs it as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONSOLE_SCREENSHOTS=${CONSOLE_SCREENSHOTS:-$PWD/bin/console-screenshots}
mkdir -p "$CONSOLE_SCREENSHOTS"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
code=0
go test -count=1 -v ./test/console/ >"$log" 2>&1 || code=$?
if [ "$code" = 0 ]; then grep -E '^\s*--- |^ok|SKIP|skip' "$log"; else cat "$log"; fi
echo "screenshots: $CONSOLE_SCREENSHOTS"
exit "$code"
