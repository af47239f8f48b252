#!/usr/bin/env bash
# fuzz/run.sh TARGET SECONDS [libFuzzer flags...]: builds the libFuzzer binary fuzz_TARGET in
# build-fuzz (clang-14, SANDGLASS_FUZZ=ON) and fuzzes it for SECONDS on a copy of its seed
# corpus in build-fuzz/corpus/TARGET (the repo's corpus is never written). Crash inputs land in
# build-fuzz/artifacts/TARGET/; add one to fuzz/corpus/TARGET once the bug is fixed.
# Targets: wire_budget job_request daemon_config http_request.
#
#   fuzz/run.sh http_request 600
#   FUZZ_BUILD=/tmp/fz fuzz/run.sh wire_budget 30 -jobs=2
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target=$1 seconds=$2
shift 2
build=${FUZZ_BUILD:-build-fuzz}
[ -d "fuzz/corpus/$target" ] || { echo "no such target: $target" >&2; exit 2; }

if [ ! -f "$build/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSANDGLASS_FUZZ=ON -DSANDGLASS_TESTS=OFF -DSANDGLASS_BENCH=OFF -DSANDGLASS_INSTALL_TEST=OFF
fi
cmake --build "$build" --target "fuzz_$target"

corpus="$build/corpus/$target"
artifacts="$build/artifacts/$target"
mkdir -p "$corpus" "$artifacts"
cp -n "fuzz/corpus/$target/"* "$corpus/"
dict=()
[ -f "fuzz/dict/$target.dict" ] && dict=(-dict="fuzz/dict/$target.dict")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# An input that takes over 30 s counts as a hang, which fails the run like a crash.
"$build/fuzz/fuzz_$target" "${dict[@]}" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$@" "$corpus"
