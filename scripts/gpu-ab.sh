#!/usr/bin/env bash
# gpu-ab.sh - a CUDA change against a base commit in one run on one GPU:
# both trees built side by side, then the products alone (bench_mmvq) and
# decode (minfer bench) of each, interleaved base / head / base / head, so
# every ratio compares runs of the same machine minutes apart (cards of one
# kind differ by 5-11% between machines, more than most kernel changes).
#
#   scripts/gpu-ab.sh BASE
# BASE: a commit (the head is the working tree, changes included).
# Environment:
#   ROWS="1 16 64"    bench_mmvq row counts
#   BATCH=1,16,32,64  minfer bench --batch sequences (empty: skip)
#   PRESET=qwen3-4b:Q4_K_M  the synth model of the decode runs
#   MODELS=dir        where it is written once (/tmp/minfer-gpu-models)
#   MMVQ_ARGS, BENCH_ARGS  more arguments for every bench_mmvq / minfer bench
#   DEPS=dir          as in gpu-check.sh
#   LLAMA_BATCHED_BENCH=path  llama-batched-bench on the same file, once
#   WORK=dir STAGE=build|run  build into WORK only, or run what a STAGE=build
#                     left there (builds beside tests that hold the GPU)
#   NO_PTX=1          neither tree compiles the portable PTX (compute_80):
#                     on an sm_90 device only the sm_90a code runs, and the
#                     builds take about a third less
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# = 1 ] || { echo "usage: scripts/gpu-ab.sh BASE"; exit 2; }
base=$(git rev-parse --verify --short "$1^{commit}" 2>/dev/null) || { echo "gpu-ab: no commit $1"; exit 2; }
ROWS=${ROWS:-"1 16 64"}
BATCH=${BATCH-1,16,32,64}
PRESET=${PRESET:-qwen3-4b:Q4_K_M}
MODELS=${MODELS:-/tmp/minfer-gpu-models}
JOBS=$(nproc)
if [ -n "${DEPS:-}" ]; then
    exports=$(scripts/offline-deps.sh unpack "$DEPS") || { echo "DEPS=$DEPS: unpack failed"; exit 1; }
    eval "$exports"
fi
STAGE=${STAGE:-all}
case $STAGE in all|build|run) ;; *) echo "gpu-ab: STAGE=$STAGE: build, run or all"; exit 2;; esac
W=${WORK:-$(mktemp -d /tmp/gpu-ab.XXXXXX)}
mkdir -p "$W" "$MODELS"
if [ "$STAGE" != run ]; then
rm -rf "$W/base"; mkdir -p "$W/base"
git archive "$base" | tar -x -C "$W/base" || { echo "gpu-ab: git archive $base failed"; exit 1; }
if [ -n "${NO_PTX:-}" ]; then
    rm -rf "$W/head"; mkdir -p "$W/head"
    # the head as the tree is now, changes and untracked files included
    git ls-files -co --exclude-standard -z | tar -c --null --ignore-failed-read -T - 2>/dev/null | tar -x -C "$W/head" ||
        { echo "gpu-ab: copying the tree failed"; exit 1; }
    for t in base head; do sed -i 's/;-gencode=arch=compute_80,code=compute_80//' "$W/$t/CMakeLists.txt"; done
    src=$W/head
else
    src=.
fi

# both builds at once, half the cores each
build() { # src dir
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release >"$2.configure.log" 2>&1 &&
        cmake --build "$2" -j $(( JOBS / 2 > 0 ? JOBS / 2 : 1 )) --target minfer-cli bench_mmvq >"$2.build.log" 2>&1
}
build "$W/base" "$W/build-base" & pb=$!
build "$src" "$W/build-head" & ph=$!
wait $pb || { tail -20 "$W/build-base.build.log"; echo "gpu-ab: base build failed"; exit 1; }
wait $ph || { tail -20 "$W/build-head.build.log"; echo "gpu-ab: head build failed"; exit 1; }
fi
[ "$STAGE" != build ] || { echo "gpu-ab: built in $W"; exit 0; }
for t in base head; do
    [ -x "$W/build-$t/tests/bench_mmvq" ] || { echo "gpu-ab: no $t build in $W (STAGE=build first)"; exit 1; }
done
echo "gpu-ab: base $base, head $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)'); builds in $W"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | sed 's/^/gpu: /'

for r in $ROWS; do
    for round in 1 2; do
        for t in base head; do
            echo "== bench_mmvq -r $r ${MMVQ_ARGS:-} ($t, round $round)"
            "$W/build-$t/tests/bench_mmvq" -r "$r" ${MMVQ_ARGS:-} 2>&1 | grep -v '^copy' || true
        done
    done
done

[ -n "$BATCH" ] || exit 0
preset=${PRESET%%:*} type=${PRESET##*:}
f=$MODELS/$preset-$type.gguf
if [ ! -s "$f" ]; then
    "$W/build-head/bin/minfer" synth --preset "$preset" --type "$type" -o "$f.tmp" >/dev/null 2>&1 && mv "$f.tmp" "$f" ||
        { echo "gpu-ab: synth $PRESET failed"; exit 1; }
fi
for round in 1 2; do
    for t in base head; do
        echo "== minfer bench --batch $BATCH ${BENCH_ARGS:-} ($t, round $round)"
        "$W/build-$t/bin/minfer" bench -m "$f" -ngl all --batch "$BATCH" -p 128 -n 128 -r 2 ${BENCH_ARGS:-} 2>&1 | grep '^|'
    done
done
if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
    echo "== llama-batched-bench, same file"
    "$LLAMA_BATCHED_BENCH" -m "$f" -ngl 99 -fa 1 -c 17408 -b 2048 -ub 512 -npp 128 -ntg 128 -npl "$BATCH" 2>&1 | grep '^|'
fi
