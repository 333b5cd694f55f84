#!/usr/bin/env bash
# Runs every fuzz target of the workspace for $FUZZTIME each (default 10s).
# A target is a `func FuzzXxx(f *testing.F)` in a _test.go file; its
# committed corpus lives in testdata/fuzz/FuzzXxx/ next to it.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
fail=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    echo "fuzz: $dir $target ($FUZZTIME)" >&2
    log=$(mktemp)
    if (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" . > "$log" 2>&1); then
      tail -n 2 "$log"
    else
      # The whole output: the failing input, the panic, or the engine's complaint.
      cat "$log"
      fail=1
    fi
    rm -f "$log"
  done
done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' lib tools)
exit $fail
