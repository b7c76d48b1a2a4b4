#!/usr/bin/env bash
# Prints the README's example block of LANG (the fenced block after the
# line `<!-- README example: LANG ...-->`), or writes it to OUT.
#   test/docs/readme_extract.sh LANG README.md [OUT]
set -euo pipefail
lang=$1 readme=$2 out=${3:-/dev/stdout}
text=$(awk -v lang="$lang" '
  index($0, "<!-- README example: " lang " ") == 1 { found = 1; next }
  found && $0 == "```" lang { inside = 1; next }
  inside && $0 == "```" { exit }
  inside { print }' "$readme")
[ -n "$text" ] || { echo "readme_extract: no '$lang' example in $readme" >&2; exit 1; }
printf '%s\n' "$text" >"$out"
