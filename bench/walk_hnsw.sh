#!/bin/sh
# walk_hnsw.sh - the walk FFN at 64k features with and without --hnsw
# (docs/PERFORMANCE.md "Vindex walk FFN at 64k features"): decode time per
# token and top-1 / top-5 agreement with the dense model, per K. Needs a
# Release build (make).
#   bench/walk_hnsw.sh [DIR]
# Without DIR: `minfer synth --preset wide-ffn --type Q8_0` (2 layers, FFN
# 65,536 x 512, random weights) is built into an f16 vindex of level
# inference and its HNSW graphs are saved (`minfer vindex hnsw`, M 16, efc
# 128, timed); with DIR that vindex (and its saved graphs) is used.
# Then per K (KS, default 5%,10%,25%): RUNS runs (default 3) of `minfer run
# --ffn walk --walk-k K` without and with --hnsw (default ef 64, raised to K),
# and `minfer vindex audit` without and with --hnsw on
# tests/vindex/prompts.txt; and RUNS dense runs.
set -e
bin=${MINFER_BIN:-build/bin/minfer}
ks=${KS:-5%,10%,25%}
n=${N_PREDICT:-32}
runs=${RUNS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-walk-hnsw.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
dir=$1
if [ -z "$dir" ]; then
    dir=$tmp/w.vindex
    "$bin" synth --preset wide-ffn --type Q8_0 --vocab ../shared/models/stories260K.gguf -o "$tmp/w.gguf" -t 2 >/dev/null 2>&1
    "$bin" vindex build "$tmp/w.gguf" -o "$dir" --level inference --gate f16 --down-top-k 0 -t 2 2>&1 | tail -1
    rm -f "$tmp/w.gguf"
    "$bin" vindex hnsw "$dir" -t 2
fi
# decode ms per token of one run
run_one() {
    "$bin" run -m "$dir" -p "Once upon a time there was" -n "$n" --temp 0 --ignore-eos -t 2 "$@" 2>"$tmp/err" >/dev/null
    tps=$(sed -n 's/^decode: .*(\([0-9.]*\) tok\/s).*/\1/p' "$tmp/err")
    echo "${*:-dense} : decode $tps tok/s, $(awk "BEGIN{printf \"%.1f\", 1000/$tps}") ms/token"
}
for r in $(seq "$runs"); do run_one; done
for k in $(echo "$ks" | tr ',' ' '); do
    for r in $(seq "$runs"); do run_one --ffn walk --walk-k "$k"; done
    for r in $(seq "$runs"); do run_one --ffn walk --walk-k "$k" --hnsw; done
done
echo "# audit, brute-force KNN"
/usr/bin/env time -f "%e s" "$bin" vindex audit "$dir" -f tests/vindex/prompts.txt --walk-k "$ks" -t 2
echo "# audit, --hnsw"
/usr/bin/env time -f "%e s" "$bin" vindex audit "$dir" -f tests/vindex/prompts.txt --walk-k "$ks" -t 2 --hnsw
echo "# done $(date -u '+%H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
