#!/usr/bin/env bash
# The admission table (docs/performance.md, "Admission"): sandglass-overload's sandglass policy
# over the scenarios admission must hold, one run per command, into one file.
#   bench/admission_table.sh BUILD_DIR [OUT_FILE]      (make bench runs it; OUT_FILE defaults to
#                                                     bench/results/admission-table.txt)
# Rows: three service-time shapes with fixed deadlines, a deadline mix, the CPU-bound case
# (2 spin workers on 2 cores), bimodal sizes with and without size hints, a stalled process, and
# the HTTP daemon with client and daemon pinned to one core each. Take it on a quiet machine:
# each run prints the load average at its start and end.
set -euo pipefail
build=${1:?usage: bench/admission_table.sh BUILD_DIR [OUT_FILE]}
out=${2:-bench/results/admission-table.txt}
bench="$build/bench/sandglass-overload"
daemon="$build/daemon/sandglassd"
run() { echo; "$bench" --policies sandglass --duration 3s "$@"; }

{
  echo "# bench/admission_table.sh $build: sandglass-overload --policies sandglass, one run per command"
  run --workers 8 --body sleep --service exp:2ms --deadline 20ms --load 2,5,10
  run --workers 8 --body sleep --service lognormal:2ms:0.8 --deadline 40ms --load 2,5,10
  run --workers 8 --body sleep --service lognormal:20ms:0.8 --deadline 200ms --load 0.5,1,2,5,10
  run --workers 8 --body sleep --service lognormal:2ms:0.8 --deadline mix:10ms@0.5,1s@0.5 --load 2,5,10
  run --workers 2 --body spin --service exp:1ms --deadline 20ms --load 2,5,10
  run --workers 8 --body sleep --service mix:1ms@0.5,500ms@0.5 --deadline 1s --load 0.5,2 --hints exact
  run --workers 8 --body sleep --service mix:1ms@0.5,500ms@0.5 --deadline 1s --load 0.5,2
  run --workers 8 --body sleep --service exp:2ms --deadline 20ms --load 2 --stall 50ms@1s

  # Over HTTP: the daemon on core 0, the client on core 1.
  log=$(mktemp)
  taskset -c 0 "$daemon" --listen 127.0.0.1:0 --workers 8 --capacity 1024 --log-level warn >"$log" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
  for _ in $(seq 100); do grep -q '^listening on' "$log" && break; sleep 0.1; done
  url="http://$(sed -n 's/^listening on //p' "$log")"
  echo
  echo "# HTTP: taskset -c 0 sandglassd --workers 8 --capacity 1024; the client below on core 1"
  taskset -c 1 "$bench" --policies sandglass --duration 3s --target "$url" --workers 8 \
    --body sleep --service lognormal:2ms:0.8 --deadline 40ms --load 2,5,10
} | tee "$out"
