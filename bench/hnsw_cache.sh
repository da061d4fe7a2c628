#!/bin/sh
# hnsw_cache.sh - the HNSW graph cache (docs/PERFORMANCE.md "Vindex HNSW
# graph cache"): build time against load time, and the walk FFN with HNSW
# against brute force. Needs a Release build (make).
#   bench/hnsw_cache.sh [random] [walk]     (default: both)
# random: build/tests/bench_hnsw_cache on one-layer vindexes of random f16
#         gates, 65,536 x 512 and 65,536 x 2048, and 4 layers of 16,384 x 512
#         (M 16, efc 128, 2 threads).
# walk:   `minfer synth --preset qwen2.5-0.5b --type Q8_0` built into an f16
#         vindex of level inference; `minfer vindex hnsw` times the build of
#         all 24 graphs; then `minfer run --ffn walk --walk-k K` with and
#         without --hnsw (graphs mapped from the cache), RUNS runs each (3), and one
#         --hnsw run without the cache (graphs built during the run).
set -e
bin=${MINFER_BIN:-build/bin/minfer}
bench=${BENCH_HNSW_CACHE:-build/tests/bench_hnsw_cache}
vocab=${VOCAB:-../shared/tokenizer/ggml-vocab-qwen2.gguf}
n=${N_PREDICT:-32}
runs=${RUNS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-hnsw-cache.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
what=${*:-random walk}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
# decode tok/s and wall seconds of one run
run_walk() {
    /usr/bin/env time -f "%e" "$bin" run -m "$tmp/q.vindex" -p "Once upon a time there was" -n "$n" --temp 0 --ignore-eos \
        -t 2 "$@" 2>"$tmp/err" >/dev/null
    tps=$(sed -n 's/^decode: .*(\([0-9.]*\) tok\/s).*/\1/p' "$tmp/err")
    echo "$* : decode $tps tok/s, wall $(tail -1 "$tmp/err") s"
}
for w in $what; do
    case $w in
    random)
        echo "| shape | build | file | write | load (median, min-max of 7) | first query | build / load | answers |"
        "$bench" -f 65536 -e 512 -l 1 -t 2
        "$bench" -f 16384 -e 512 -l 4 -t 2
        "$bench" -f 65536 -e 2048 -l 1 -t 2
        ;;
    walk)
        "$bin" synth --preset qwen2.5-0.5b --type Q8_0 --vocab "$vocab" -o "$tmp/q.gguf" -t 2 >/dev/null 2>&1
        "$bin" vindex build "$tmp/q.gguf" -o "$tmp/q.vindex" --level inference --gate f16 --down-top-k 0 -t 2 2>&1 | tail -1
        rm -f "$tmp/q.gguf"
        "$bin" vindex hnsw "$tmp/q.vindex" -t 2
        for k in 5% 10%; do
            for r in $(seq "$runs"); do run_walk --ffn walk --walk-k $k; done
            for r in $(seq "$runs"); do run_walk --ffn walk --walk-k $k --hnsw; done
        done
        for r in $(seq "$runs"); do run_walk; done
        run_walk --ffn walk --walk-k 10% --hnsw --hnsw-no-cache
        ;;
    *) echo "hnsw_cache.sh: unknown part '$w' (random, walk)" >&2; exit 2 ;;
    esac
done
echo "# done $(date -u '+%H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
