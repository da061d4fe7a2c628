#!/bin/sh
# hnsw.sh - HNSW gate KNN against brute force: recall@10 and median query
# time per feature count and width, to find where the graph starts to pay
# (docs/PERFORMANCE.md "Vindex HNSW"). Needs a Release build (make).
#   bench/hnsw.sh [random] [synth]     (default: both)
# random: one-layer vindexes of random f16 gate rows (norms spread +-50%),
#         Gaussian queries, 1k..64k features x 512 and 2048.
# synth:  `minfer synth` models (random weights, real shapes) built into
#         f16 vindexes; queries are the model's FFN inputs at a middle layer.
# Brute force runs on 2 threads, a one-query HNSW search on one.
set -e
bin=${MINFER_BIN:-build/bin/minfer}
bench=${BENCH_HNSW:-build/tests/bench_hnsw}
efs=${EFS:-10,32,64,128,256,512,1024,2048}
q=${QUERIES:-200}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-hnsw.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
what=${*:-random synth}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for w in $what; do
    case $w in
    random)
        for e in 512 2048; do
            for f in 1024 4096 16384 65536; do
                "$bench" -f "$f" -e "$e" --type f16 -m 16 --efc 128 --ef "$efs" -q "$q" -t 2
            done
        done
        ;;
    synth)
        for p in qwen2.5-0.5b:12 llama-3.2-1b:8; do
            name=${p%%:*} layer=${p##*:}
            "$bin" synth --preset "$name" --type Q8_0 --vocab ../shared/models/stories260K.gguf -o "$tmp/$name.gguf" >/dev/null 2>&1
            "$bin" vindex build "$tmp/$name.gguf" -o "$tmp/$name.vindex" --level inference --gate f16 --down-top-k 0 -t 2 2>/dev/null
            rm -f "$tmp/$name.gguf"
            "$bench" --dir "$tmp/$name.vindex" --layer "$layer" -m 16 --efc 128 --ef "$efs" -q "$q" -t 2
            rm -rf "$tmp/$name.vindex"
        done
        ;;
    *) echo "hnsw.sh: unknown part '$w' (random, synth)" >&2; exit 2 ;;
    esac
done
echo "# done $(date -u '+%H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
