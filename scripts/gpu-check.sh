#!/usr/bin/env bash
# gpu-check.sh - the CUDA backend checked in one go on a machine with an
# NVIDIA GPU: a Release build with the backend, the ctest tests labelled
# `cuda`, the kernel benchmarks (bench_mmvq, bench_attn),
# then `minfer bench -ngl all` (pp512 / tg128, decode as a share of the
# device copy bandwidth the bench measures itself) on synthetic models of
# real shapes, many sequences at once with a 64-sequence op profile, and one
# summary at the end.
#
#   scripts/gpu-check.sh
# Environment:
#   BUILD=dir          build folder (build-gpu)
#   JOBS=n             build jobs (all CPUs)
#   MODELS=dir         where the benchmark models are written by `minfer synth`
#                      (once, on the CPUs while the GPU runs the tests; their
#                      times in BUILD/synth.log; later runs reuse them)
#                      (/tmp/minfer-gpu-models)
#   PRESETS="p:T ..."  synth preset and type of each benchmark model
#                      ("qwen3-4b:Q4_K_M llama-3-8b:Q4_K_M qwen3-4b:Q8_0 qwen3-4b:Q6_K")
#   REPS=n             timed runs per test (3)
#   SANITIZE=1         also run the cuda tests under compute-sanitizer memcheck
#   LLAMA_BENCH=path   also run llama.cpp's llama-bench on the same files (pp512,
#                      tg128, tg128 at depth 4096, flash attention on)
#   LLAMA_BATCHED_BENCH=path  also run llama-batched-bench beside the aggregate
#                      decode of 1, 16, 32 and 64 sequences (BATCH_PRESETS)
#   BATCH_PRESETS="p:T ..."  the presets whose files also decode many sequences
#                      at once (the first preset and every Q8_0 one of PRESETS:
#                      Q8_0's int8 mma path differs from the K-quants')
#   DEPS=dir           .deb files of the build's libraries for a machine
#                      without them (scripts/offline-deps.sh fetch dir), unpacked
#                      into dir/root and built against
#   SPLIT=1            also run the first preset split between CPU and GPU:
#                      -ngl auto on a device faked to hold about half of it
#                      (MINFER_CUDA_MEM_MIB), and -ngl N for half the layers
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
MODELS=${MODELS:-/tmp/minfer-gpu-models}
PRESETS=${PRESETS:-"qwen3-4b:Q4_K_M llama-3-8b:Q4_K_M qwen3-4b:Q8_0 qwen3-4b:Q6_K"}
REPS=${REPS:-3}
mkdir -p "$BUILD" "$MODELS"
if [ -n "${DEPS:-}" ]; then
    exports=$(scripts/offline-deps.sh unpack "$DEPS") || { echo "DEPS=$DEPS: unpack failed"; exit 1; }
    eval "$exports"
fi
SUMMARY=$BUILD/gpu-check.summary
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
    sed 's/^/gpu: /' | tee -a "$SUMMARY"
say "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"

if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1 &&
       cmake --build "$BUILD" -j "$JOBS" >"$BUILD/build.log" 2>&1; }; then
    tail -30 "$BUILD/configure.log" "$BUILD/build.log"
    say "build: FAILED (logs in $BUILD)"
    exit 1
fi
grep -q "CUDA backend enabled" "$BUILD/configure.log" || { say "build: no CUDA backend (nvcc not found)"; exit 1; }
say "build: ok"

# The benchmark models are synthesized on the host's CPUs while the GPU
# runs the tests and kernel benchmarks below (a 4B Q4_K_M file takes
# minutes); each is written to .tmp and renamed, so a killed run leaves no
# file that a later run would take for whole. The bench loop waits for them,
# so `minfer bench` and llama.cpp never share the host with a synth; the
# cuda tests and the kernel benchmarks (graph replays, little host work) do.
MINFER=$BUILD/bin/minfer
(
    for pt in $PRESETS; do
        preset=${pt%%:*} type=${pt##*:}
        f=$MODELS/$preset-$type.gguf
        [ -s "$f" ] && continue
        t0=$(date +%s)
        if "$MINFER" synth --preset "$preset" --type "$type" -o "$f.tmp" >/dev/null 2>&1 && mv "$f.tmp" "$f"; then
            echo "synth $preset $type: $(($(date +%s) - t0)) s"
        else
            echo "synth $preset $type: FAILED"
        fi
    done
) >"$BUILD/synth.log" 2>&1 &
SYNTH_PID=$!

(cd "$BUILD" && ctest -L cuda --output-on-failure) >"$BUILD/cuda-tests.log" 2>&1
rc=$?
grep -E "max\|d\||greedy|bitwise|skip|FAIL|files compared" "$BUILD/cuda-tests.log" | sed 's/^/  /'
if [ $rc = 0 ] && ! grep -q "Skipped\|Not Run" "$BUILD/cuda-tests.log"; then say "cuda tests: passed"
else say "cuda tests: FAILED or skipped (rc $rc, log $BUILD/cuda-tests.log)"; fi

if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for t in test_cuda test_cuda_kernels test_cuda_attn; do
        MINFER_BIN=$PWD/$BUILD/bin/minfer compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/$t" \
            >"$BUILD/memcheck-$t.log" 2>&1
        if [ $? = 0 ]; then say "compute-sanitizer memcheck ($t): clean"
        else say "compute-sanitizer memcheck ($t): ERRORS (log $BUILD/memcheck-$t.log)"; fi
    done
fi

if [ -x "$BUILD/tests/bench_mmvq" ]; then
    for r in 1 16 64; do
        "$BUILD/tests/bench_mmvq" -r $r >"$BUILD/bench-mmvq-$r.log" 2>&1
        say "products alone (bench_mmvq -r $r):"
        sed 's/^/  /' "$BUILD/bench-mmvq-$r.log" | tee -a "$SUMMARY"
    done
fi
if [ -x "$BUILD/tests/bench_attn" ]; then
    "$BUILD/tests/bench_attn" >"$BUILD/bench-attn.log" 2>&1
    say "decode attention alone, and an empty kernel (bench_attn):"
    sed 's/^/  /' "$BUILD/bench-attn.log" | tee -a "$SUMMARY"
fi

wait "$SYNTH_PID"
sed 's/^/  /' "$BUILD/synth.log" | tee -a "$SUMMARY"
for pt in $PRESETS; do
    preset=${pt%%:*} type=${pt##*:}
    f=$MODELS/$preset-$type.gguf
    [ -s "$f" ] || { say "$preset $type: no model (synth failed)"; continue; }
    out=$("$MINFER" bench -m "$f" -ngl all -p 512 -n 128 -r "$REPS" 2>&1)
    deep=$("$MINFER" bench -m "$f" -ngl all -p 0 -n 128 -d 4096 -r 1 --no-bandwidth 2>&1 | awk -F"|" '/ tg128 /{gsub(/ /,"",$9); print $9}')
    echo "$out" >"$BUILD/bench-$preset-$type.log"
    pp=$(echo "$out" | awk -F'|' '/ pp512 /{gsub(/ /,"",$9); print $9}')
    tg=$(echo "$out" | awk -F'|' '/ tg128 /{gsub(/ /,"",$9); if ($9 != "") print $9}' | tail -1)
    bw=$(echo "$out" | sed -n 's/.*= \([0-9.]*%\) of the \([0-9.]*\) GB\/s device copy.*/\1 of \2 GB\/s copy/p')
    say "minfer $preset $type: pp512 ${pp:-?} t/s, tg128 ${tg:-?} t/s, decode ${bw:-?}; tg128 @ d4096 ${deep:-?} t/s"
    if [ -n "${LLAMA_BENCH:-}" ]; then
        { "$LLAMA_BENCH" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -r "$REPS"
          "$LLAMA_BENCH" -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 4096 -r 1; } >"$BUILD/llama-bench-$preset-$type.log" 2>&1
        awk -F'|' '/ pp512 | tg128 /{print "llama.cpp '"$preset $type"': " $(NF-2) " " $(NF-1)}' \
            "$BUILD/llama-bench-$preset-$type.log" | tee -a "$SUMMARY"
    fi
done

# aggregate decode with many sequences
first=${PRESETS%% *}
BATCH_PRESETS=${BATCH_PRESETS:-$(for pt in $PRESETS; do [ "$pt" = "$first" ] || [ "${pt##*:}" = Q8_0 ] && printf '%s ' "$pt"; done)}
for pt in $BATCH_PRESETS; do
    f=$MODELS/${pt%%:*}-${pt##*:}.gguf
    [ -s "$f" ] || continue
    say "aggregate decode, $pt (minfer bench --batch 1,16,32,64 -p 128 -n 128):"
    "$MINFER" bench -m "$f" -ngl all --batch 1,16,32,64 -p 128 -n 128 -r 2 2>&1 | grep '^|' | sed 's/^/  /' | tee -a "$SUMMARY"
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
        say "llama-batched-bench, same file:"
        "$LLAMA_BATCHED_BENCH" -m "$f" -ngl 99 -fa 1 -c 17408 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,16,32,64 2>&1 |
            grep '^|' | sed 's/^/  /' | tee -a "$SUMMARY"
    fi
done
pt=${PRESETS%% *}
f=$MODELS/${pt%%:*}-${pt##*:}.gguf
if [ -s "$f" ]; then
    # where a 64-sequence step goes: each op's device time (CUDA events), decode steps only
    MINFER_OP_PROFILE=1 "$MINFER" bench -m "$f" -ngl all --batch 64 -p 128 -n 64 -r 1 >"$BUILD/profile-64.log" 2>&1
    say "op profile, 64 sequences, decode steps (MINFER_OP_PROFILE=1; log $BUILD/profile-64.log):"
    grep -E "^op profile|\(decode\)" "$BUILD/profile-64.log" | head -16 | sed 's/^/  /' | tee -a "$SUMMARY"
fi
# partial offload: the first layers on the CPU (-t all host cores)
if [ "${SPLIT:-0}" = 1 ] && [ -s "$f" ]; then
    mib=$(( $(stat -c %s "$f") / 2097152 + 768 ))
    out=$(MINFER_CUDA_MEM_MIB=$mib "$MINFER" bench -m "$f" -ngl auto -p 512 -n 128 -r 2 --no-bandwidth 2>&1)
    echo "$out" >"$BUILD/bench-split-auto.log"
    say "split, $pt: -ngl auto under MINFER_CUDA_MEM_MIB=$mib: $(echo "$out" | grep -o '[0-9]* of [0-9]* layers fit' | head -1)"
    echo "$out" | grep '^|' | sed 's/^/  /' | tee -a "$SUMMARY"
    L=$("$MINFER" info -m "$f" 2>/dev/null | awk '/\.block_count /{print $NF; exit}')
    for n in $(( ${L:-36} / 2 )) $(( ${L:-36} - 1 )); do
        say "split, $pt: -ngl $n of ${L:-?}"
        "$MINFER" bench -m "$f" -ngl $n -p 512 -n 128 -r 2 --no-bandwidth 2>&1 | grep '^|' | sed 's/^/  /' | tee -a "$SUMMARY"
    done
fi

echo
echo "== summary ($SUMMARY)"
cat "$SUMMARY"
