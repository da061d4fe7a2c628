#!/bin/bash
# vindex_zen5.sh - the gate KNN at larql's shape and the walk FFN per token
# (docs/PERFORMANCE.md "Vindex on AVX-512 (Zen 5)"). Needs a Release build
# (make). ROUNDS rounds (default 3), each in this order:
#   build/tests/bench_knn -l 14 -r 56 -t 2 / -t 1, f32 f16 q8_0 (the default kernels)
#   the same for q8_0 with the integer pre-scan (MINFER_KNN_INT8=1)
#   the same for f16 and q8_0 with the AVX2 kernels (MINFER_NO_AVX512=1)
#   minfer run -m DIR -n 16 -t 2, dense and --ffn walk --walk-k 1%, 5%, 10%
# DIR: a vindex of level inference of `minfer synth --preset gemma3-4b-ffn`;
# without it one is made (Q8_0 model, --gate q8_0) under $TMPDIR.
#   bench/vindex_zen5.sh [DIR]
set -e
bin=${MINFER_BIN:-build/bin/minfer}
knn=build/tests/bench_knn
rounds=${ROUNDS:-3}
dir=$1
if [ -z "$dir" ]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-zen5.XXXXXX")
  "$bin" synth --preset gemma3-4b-ffn --type Q8_0 --vocab ../shared/models/stories260K.gguf -t 2 -o "$tmp/m.gguf"
  "$bin" vindex build "$tmp/m.gguf" -o "$tmp/m.vindex" --level inference --gate q8_0 --down-top-k 0 -t 2
  dir=$tmp/m.vindex
fi
say() { echo "== $1 $(date -u +%T) $(uptime | sed 's/.*load/load/')"; }
for r in $(seq 1 "$rounds"); do
  for t in 2 1; do say "r$r knn t$t"; $knn -l 14 -r 56 -t $t f32 f16 q8_0; done
  for t in 2 1; do say "r$r knn q8_0 pre-scan t$t"; MINFER_KNN_INT8=1 $knn -l 14 -r 56 -t $t q8_0; done
  for t in 2 1; do say "r$r knn avx2 t$t"; MINFER_NO_AVX512=1 $knn -l 14 -r 56 -t $t f16 q8_0; done
  for k in dense 1% 5% 10%; do
    if [ $k = dense ]; then a=""; else a="--ffn walk --walk-k $k"; fi
    say "r$r run $k"
    "$bin" run -m "$dir" -p "Once upon a time there was" -n 16 --temp 0 --ignore-eos -t 2 $a 2>&1 | grep -E '^decode'
  done
done
