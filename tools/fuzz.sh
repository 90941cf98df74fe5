#!/usr/bin/env bash
# fuzz.sh - builds the compiler fuzzer (tests/fuzz/fuzz_front.c: the front
# end for every input; for inputs it accepts, the tile lowering for sm_90, sm_80
# and the CPU, and code generation) with clang-14, libFuzzer, ASan and UBSan in
# its own build folder, runs front_test there (under the sanitizers too), and
# fuzzes for $1 seconds of CPU time (default 60), starting from a copy of tests/fuzz/corpus
# (SIMT and tile kernel seeds, and past findings) plus every front_test case.
# Exits non-zero when front_test fails or the fuzzer finds a crash, a sanitizer
# report, a leak or a hang; the input that did it is left in
# $OXIDE_FUZZ_DIR/artifacts/ (make it a regression case: a front_test case, or
# a file in tests/fuzz/corpus, which every run executes first).
#
# Time is counted in CPU time, not wall time, so that a loaded machine neither
# shortens the run nor reports false hangs: the fuzzer runs again until it has
# used SECONDS of CPU (or three times that in wall time has passed), and the
# target aborts an input that takes more than $OXIDE_FUZZ_CPU_LIMIT seconds of
# CPU (default 30); libFuzzer's own wall-clock timeout is only a backstop for
# inputs that wait without computing.
#
#   tools/fuzz.sh [SECONDS]
#   environment: OXIDE_FUZZ_DIR (default build-fuzz/ in the repository), JOBS (build jobs, default 2),
#                FUZZ_ARGS (more libFuzzer flags, e.g. -jobs=8 -workers=8)
set -eu
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${OXIDE_FUZZ_DIR:-$root/build-fuzz}
cc=${CC_FUZZ:-clang-14}
cxx=${CXX_FUZZ:-clang++-14}

command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
CC=$cc CXX=$cxx cmake -S "$root" -B "$dir/build" -DOXIDE_FUZZ=ON -DOXIDE_SANITIZE=ON \
  -DOXIDE_LLVM_SHARED=ON -DOXIDE_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir/build" --target fuzz_front front_test -j "${JOBS:-2}"

# Work on a copy of the corpus: what the fuzzer adds stays out of the tree, and
# is kept for the next run (rm -rf "$dir/corpus" to start from the seeds).
mkdir -p "$dir/corpus" "$dir/artifacts"
cp "$root"/tests/fuzz/corpus/* "$dir/corpus/"
"$dir/build/tests/front_test" >/dev/null
"$dir/build/tests/front_test" --write-corpus "$dir/corpus"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export OXIDE_FUZZ_CPU_LIMIT=${OXIDE_FUZZ_CPU_LIMIT:-30}
echo "fuzz.sh: fuzzing for ${secs}s of CPU (corpus $dir/corpus, artifacts $dir/artifacts)"
cpu_ms() { # CPU time of this shell's finished children, in ms
  awk '{ printf "%d", ($16 + $17) * 1000 / '"$(getconf CLK_TCK)"' }' /proc/$$/stat
}
start=$(date +%s)
base=$(cpu_ms) # the build and front_test above
used=0
# (another run only for 15 s or more: each one first replays the whole corpus)
while [ "$used" -lt $((secs * 1000 - 15000)) ] && [ $(($(date +%s) - start)) -lt $((secs * 3)) ]; do
  left=$(( (secs * 1000 - used + 999) / 1000 ))
  # shellcheck disable=SC2086
  "$dir/build/tests/fuzz_front" -max_len=4096 -timeout=600 -max_total_time="$left" \
    -dict="$root/tests/fuzz/oxk.dict" -artifact_prefix="$dir/artifacts/" -print_final_stats=1 \
    ${FUZZ_ARGS:-} "$dir/corpus"
  used=$(($(cpu_ms) - base))
done
echo "fuzz.sh: $((used / 1000))s of CPU in $(($(date +%s) - start))s"
