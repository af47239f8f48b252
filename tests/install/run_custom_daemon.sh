#!/usr/bin/env bash
# Runs examples/custom_daemon (built against the installed package) on a free port, sends it one
# job of its own kind `primes` and one with a bad argument, then drains it with SIGTERM.
# Usage: run_custom_daemon.sh BINARY. Exits 0 only if every answer is the expected one.
set -euo pipefail
binary=$1

coproc daemon { exec "$binary" --listen 127.0.0.1:0; }
pid=$daemon_PID
exec {from_daemon}<&"${daemon[0]}"
trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT

# Blocks until the daemon prints a line starting with $1 (log lines in between are echoed), at
# most 30 s; sets $line.
read_until() {
  while read -r -t 30 -u "$from_daemon" line; do
    echo "custom_daemon: $line"
    [[ $line == "$1"* ]] && return 0
  done
  echo "no line starting with '$1' from $binary"
  exit 1
}

read_until "listening on 127.0.0.1:"
address=${line#listening on }

post() {
  curl -sS --max-time 30 -w ' HTTP %{http_code}' -X POST "http://$address/v1/jobs" \
       -H 'x-request-timeout-ms: 20000' -d "$1"
}
answer=$(post '{"kind":"primes","args":{"below":100000}}')
echo "primes below 100000: $answer"
[[ $answer == *'"state":"completed"'* && $answer == *'"result":{"count":9592}'* &&
   $answer == *' HTTP 200' ]] || { echo "unexpected answer"; exit 1; }
answer=$(post '{"kind":"primes","args":{"below":-1}}')
echo "primes below -1: $answer"
[[ $answer == *'"field":"args.below"'* && $answer == *' HTTP 400' ]] ||
  { echo "unexpected answer"; exit 1; }

kill -TERM "$pid"
read_until "drained:"
[[ $line == "drained: submitted=1 in_time=yes" ]] || { echo "unexpected drain line"; exit 1; }
status=0
wait "$pid" || status=$?
trap - EXIT
[[ $status == 0 ]] || { echo "custom_daemon exited with $status"; exit 1; }
echo "custom_daemon: served its own kind and drained"
