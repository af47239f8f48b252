#!/usr/bin/env bash
# Runs the daemon examples of a page (docs/daemon.md) as written, against a real sandglassd, and
# checks each answer against the one the page shows.
#
#   docs_examples.sh SANDGLASSD PAGE CONFIG
#
# The examples are the `$ ` command lines (with their `\` continuations) of the page's sections
# from "Submit a job and wait for its outcome" to "Database queries" and from "Status codes" to
# "The command-line client" (headings of any level): one session against one daemon started
# with CONFIG (the shipped default), whose upstream `next` is a second daemon, as the page
# says. Each command runs with 127.0.0.1:8080 and 127.0.0.1:9000 replaced by the two daemons'
# ephemeral loopback ports, in one shell, so `&`, `wait` and files carry over.
#
# What is compared: the status line (`HTTP/1.1 NNN`) and the values of "id", "state", "reason",
# "cause", "field" and "error" that the page shows after a command must appear, in that order,
# in what the command printed (which may say more: the page elides with `...`; timings differ
# from run to run and are not compared). A GET (a curl without -X or -d) or a DELETE is asked
# again for up to 20 s until it matches, as a person would look again at a job that has not
# started yet, or DELETE again a job whose DELETE was answered 202 cancelling because it had not
# ended within the DELETE's wait (a loaded machine); no other command is repeated.
set -euo pipefail

sandglassd=$1 page=$2 config=$3
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Starts sandglassd with the given flags on an ephemeral port; sets `port`.
start_daemon() {
  local name=$1
  shift
  # In a subshell, so that the examples' `wait` does not wait for the daemons.
  ("$sandglassd" --listen 127.0.0.1:0 "$@" > "$work/$name.out" 2> "$work/$name.err" &
   echo $! > "$work/$name.pid")
  pids+=("$(cat "$work/$name.pid")")
  for _ in $(seq 300); do
    if grep -q '^listening on ' "$work/$name.out"; then
      port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/$name.out")
      return
    fi
    sleep 0.1
  done
  echo "sandglassd ($name) did not report its port; its log:" >&2
  cat "$work/$name.err" >&2
  exit 1
}

start_daemon down
down_port=$port
sed "s|127\.0\.0\.1:9000|127.0.0.1:$down_port|" "$config" > "$work/sandglassd.toml"
start_daemon main --config "$work/sandglassd.toml"
main_port=$port

# The examples: one command per line (continuations joined), its expected output after it.
awk '
  /^#+ Submit a job and wait for its outcome/ || /^#+ Status codes/ { on = 1 }
  /^#+ Database queries/ || /^#+ The command-line client/ { on = 0 }
  !on { next }
  /^```/ { in_block = !in_block; if (!in_block) print "@@END"; next }
  !in_block { next }
  joining { command = command " " $0; if ($0 !~ /\\$/) { joining = 0; print "@@CMD " command }; next }
  /^\$ / { command = substr($0, 3); if ($0 ~ /\\$/) { joining = 1 } else { print "@@CMD " command }; next }
  { print }
' "$page" | sed 's/\\ \+/ /g' > "$work/examples"

# What the comparison looks at, one item a line.
tokens() {
  grep -oE 'HTTP/1\.1 [0-9]{3}|"(id|state|reason|cause|field|error)":("([^"\\]|\\.)*"|[0-9]+|null)' || true
}

# True when the lines of file $1 appear, in order, among the lines of file $2.
in_order() {
  awk 'BEGIN { i = 0; n = 0 } NR == FNR { want[n++] = $0; next } i < n && $0 == want[i] { i++ }
       END { exit (i < n) }' "$1" "$2"
}

cd "$work"
count=0
failed=0
check() {
  [ -n "$command" ] || return 0
  count=$((count + 1))
  local run=${command//127.0.0.1:8080/127.0.0.1:$main_port}
  run=${run//127.0.0.1:9000/127.0.0.1:$down_port}
  tokens < expected > want
  if [[ $run == *"&" ]]; then
    eval "${run%&} &"
    command=""
    : > expected
    return 0
  fi
  local tries=1
  if [[ $run == curl* && ( $run == *" -X DELETE "* || ( $run != *" -X "* && $run != *" -d "* ) ) ]]; then
    tries=100
  fi
  for _ in $(seq "$tries"); do
    eval "$run" > got 2> err || true
    tokens < got > have
    if in_order want have; then
      command=""
      : > expected
      return 0
    fi
    sleep 0.2
  done
  failed=$((failed + 1))
  {
    echo "example does not answer as shown: \$ $command"
    echo "--- shown (compared: status line, id, state, reason, cause, field, error) ---"
    cat want
    echo "--- answered ---"
    cat got err
    echo
  } >&2
  command=""
  : > expected
}

command=""
: > expected
while IFS= read -r line; do
  case $line in
    "@@CMD "*) check; command=${line#@@CMD }; : > expected ;;
    "@@END") check ;;
    *) printf '%s\n' "$line" >> expected ;;
  esac
done < "$work/examples"

echo "examples run: $count, not as shown: $failed"
[ "$count" -gt 10 ] || { echo "too few examples found in $page" >&2; exit 1; }
[ "$failed" -eq 0 ]
