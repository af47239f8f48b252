#!/usr/bin/env bash
# Fails when sandglassd's config parser knows a key that PAGE (docs/operations.md) does not name.
#
#   config_keys_named.sh SANDGLASSD PAGE
#
# The keys come from the parser itself: a file with an unknown key in a table is refused with
# "unknown key; known keys here: a, b, ..." (and at the top level with "known tables: ..."),
# which `sandglassd --check-config` prints. A table of named entries ([commands.NAME]) is asked
# about one entry. PAGE must name each key in backquotes with its table: `server.listen`,
# `commands.NAME.argv`.
set -euo pipefail

sandglassd=$1 page=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The parser's answer to FILE's text: the list after "known keys here: " or "known tables: ".
known() {
  printf '%s\n' "$1" > "$work/probe.toml"
  "$sandglassd" --config "$work/probe.toml" --check-config 2>&1 |
    sed -n 's/.*unknown key; known \(keys here\|tables\): //p' | tr -d ',' || true
}

tables=$(known 'sandglass_probe_key = 1')
[ -n "$tables" ] || { echo "sandglassd listed no tables" >&2; exit 1; }

count=0
missing=()
for table in $tables; do
  prefix=$table
  keys=$(known "$(printf '[%s]\nsandglass_probe_key = 1' "$table")")
  if [ -z "$keys" ]; then
    prefix=$table.NAME
    keys=$(known "$(printf '[%s.probe]\nsandglass_probe_key = 1' "$table")")
  fi
  [ -n "$keys" ] || { echo "sandglassd listed no keys for [$table]" >&2; exit 1; }
  for key in $keys; do
    count=$((count + 1))
    grep -qF "\`$prefix.$key\`" "$page" || missing+=("$prefix.$key")
  done
done

echo "config keys the parser knows: $count, not named in $page: ${#missing[@]}"
for key in "${missing[@]}"; do echo "  $key" >&2; done
[ "${#missing[@]}" -eq 0 ]
