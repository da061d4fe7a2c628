#!/bin/sh
# bench/amx_check.sh - one short run on an AMX machine (Sapphire Rapids or
# later) that says whether the AMX prefill kernels are correct there and how
# fast they are against the VNNI path. About 4-6 minutes on 16 cores, plus the bf16 part
# (two 2.5 GB synth models; pp512 of F16/BF16 on vec_dot is slow).
#
#   bench/amx_check.sh [bf16] [BUILD_DIR] [MODEL_DIR]     (defaults: build-amx, /tmp/amx_check)
#
# Prints, in order:
#   1. the tests: cpu_gemm on the real tile instructions (every AMX kind and
#      its tile-mins variant bitwise against vec_dot), the matmul op on the
#      AMX kinds (MINFER_AMX=1, vector mins and MINFER_AMX_MINS=tile);
#   2. tile instruction costs (bench_amx) and the AMX kernel's two halves
#      alone (bench_amx_tiles, bench_amx_vec) at each prefetch level;
#   3. the kernels alone, one thread (bench_gemm -K: VNNI, AMX, AMX tile
#      mins; the "8-tile calls" figure is the order the matmul uses);
#   4. end to end: minfer bench -p 512 -n 0 on a synth llama-3.2-1b Q4_K_M,
#      MINFER_AMX=0 / 1 / 1 with tile mins, at 2 and 8 threads, interleaved;
#   5. the bf16 tiles (F16 / BF16 weights): cpu_gemm_amx_bf16 on the real
#      TDPBF16PS (within the stated bound of vec_dot; it prints the largest
#      error seen), then pp512 on synth llama-3.2-1b BF16 and F16 with
#      MINFER_AMX=1 against MINFER_AMX=1 MINFER_AMX_BF16=0 (BF16: vec_dot,
#      F16: the f32 FMA GEMM), at 2 and 8 threads, interleaved.
# Only the build and step 5 if the first argument is "bf16" (then BUILD_DIR and
# MODEL_DIR move one place right). With "quick" instead: the build of
# minfer-cli and cpu_gemm alone, the tests of step 1 and the pp512 of step 4
# at 2 threads (twice) and 8 (once): about a minute and a half on 16 cores
# beside a build that is already there, short enough to share a device call
# with other work.
# Knobs it does not vary (for a follow-up): MINFER_AMX_PF=0|1|2 (software
# prefetch), MINFER_GEMM_CHUNK_KB (weight bytes packed per chunk).
set -u
cd "$(dirname "$0")/.." || exit 1
ONLY_BF16=0 QUICK=0
if [ "${1:-}" = bf16 ]; then ONLY_BF16=1; shift; fi
if [ "${1:-}" = quick ]; then QUICK=1; shift; fi
B=${1:-build-amx}
M=${2:-/tmp/amx_check}
J=$(nproc)
t0=$(date +%s)
say() { printf '\n== %s (%ss)\n' "$*" "$(( $(date +%s) - t0 ))"; }

say "build ($B, -j$J), commit $(git rev-parse --short HEAD 2>/dev/null)"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
if [ $QUICK = 1 ]; then
    cmake --build "$B" -j "$J" --target minfer-cli cpu_gemm >/dev/null || exit 1
else
    cmake --build "$B" -j "$J" --target minfer-cli cpu_gemm cpu_gemm_amx_bf16 bench_gemm bench_amx bench_amx_tiles bench_amx_vec >/dev/null || exit 1
fi
grep -m1 'model name' /proc/cpuinfo
grep -o -w 'amx_tile\|amx_int8\|amx_bf16\|avx512_vnni' /proc/cpuinfo | sort | uniq -c

bf16_part() {
    say "tests: cpu_gemm_amx_bf16 (the bf16 kinds on TDPBF16PS, within the bound)"
    "$B"/tests/cpu_gemm_amx_bf16 > /tmp/amx_cpu_gemm_bf16.log 2>&1
    echo "rc $?"; grep -E 'kernel cases|note|FAIL|checks' /tmp/amx_cpu_gemm_bf16.log | head -20
    mkdir -p "$M"
    for T in BF16 F16; do
        FB="$M/llama-3.2-1b-$T.gguf"
        [ -s "$FB" ] || "$B"/bin/minfer synth --preset llama-3.2-1b --type $T -o "$FB" -t "$J" >/dev/null || exit 1
        for th in 2 8; do
            for rep in 1 2; do
                for bf in 1 0; do
                    say "pp512 $T, -t $th, MINFER_AMX=1 MINFER_AMX_BF16=$bf (pass $rep)"
                    MINFER_AMX=1 MINFER_AMX_BF16=$bf "$B"/bin/minfer bench -m "$FB" -p 512 -n 0 -r 1 -t $th --no-bandwidth 2>&1 |
                        grep -E 'pp512' | head -2
                done
            done
        done
    done
}
if [ $ONLY_BF16 = 1 ]; then bf16_part; say "done"; exit 0; fi

# the synth Q4_K_M file of step 4, once
q4km() {
    mkdir -p "$M"
    F="$M/llama-3.2-1b-q4_k_m.gguf"
    [ -s "$F" ] || "$B"/bin/minfer synth --preset llama-3.2-1b --type Q4_K_M -o "$F" -t "$J" >/dev/null || exit 1
}
if [ $QUICK = 1 ]; then
    say "tests: cpu_gemm (quick)"
    "$B"/tests/cpu_gemm > /tmp/amx_cpu_gemm.log 2>&1
    echo "rc $?"; grep -E 'FAIL|checks' /tmp/amx_cpu_gemm.log | head -10
    q4km
    for th in 2 2 8; do
        for amx in 0 1; do
            say "pp512, -t $th, MINFER_AMX=$amx"
            MINFER_AMX=$amx "$B"/bin/minfer bench -m "$F" -p 512 -n 0 -r 2 -t $th --no-bandwidth 2>&1 | grep -E 'pp512'
        done
    done
    say "done"
    exit 0
fi

say "tests: cpu_gemm (kernels on the tile instructions; summary lines)"
"$B"/tests/cpu_gemm > /tmp/amx_cpu_gemm.log 2>&1
echo "rc $?"; grep -E 'AMX|FAIL|checks' /tmp/amx_cpu_gemm.log | head -60
for mins in vector tile; do
    say "tests: the matmul op on the AMX kinds, mins $mins"
    MINFER_AMX=1 MINFER_AMX_MINS=$mins "$B"/tests/cpu_gemm > /tmp/amx_cpu_gemm_op.log 2>&1
    echo "rc $?"; grep -E 'FAIL|checks' /tmp/amx_cpu_gemm_op.log | head -20
done

say "tile instruction costs (bench_amx)"
"$B"/tests/bench_amx
for pf in 0 1 2; do
    say "halves alone, MINFER_AMX_PF=$pf (2048 x 2048, 128 tokens)"
    MINFER_AMX_PF=$pf "$B"/tests/bench_amx_tiles 2048 2048 128
    MINFER_AMX_PF=$pf "$B"/tests/bench_amx_vec 2048 2048 128
done

for T in q4_K q6_K q8_0; do
    say "kernels alone, one thread: bench_gemm -K -k 2048 -n 8192 -t 512 -T $T"
    "$B"/tests/bench_gemm -K -r 2 -k 2048 -n 8192 -t 512 -T $T | grep -E '^\| '"$T"'|kernel only|AMX'
done
say "q4_K kernels alone at k 8192 (ffn_down's shape)"
"$B"/tests/bench_gemm -K -r 1 -k 8192 -n 2048 -t 512 -T q4_K | grep -E 'kernel only'

say "synth llama-3.2-1b Q4_K_M"
q4km
ls -l "$F"
for th in 2 8; do
    for rep in 1 2; do
        for cfg in "0 vector" "1 vector" "1 tile"; do
            set -- $cfg
            say "pp512, -t $th, MINFER_AMX=$1 mins $2 (pass $rep)"
            MINFER_AMX=$1 MINFER_AMX_MINS=$2 "$B"/bin/minfer bench -m "$F" -p 512 -n 0 -r 2 -t $th --no-bandwidth 2>&1 |
                grep -E 'pp512|AMX|amx' | head -4
        done
    done
done
say "pp512, -t 8, MINFER_AMX=1, 1 MiB chunks (MINFER_GEMM_CHUNK_KB=1024: the activation blocks reused over more weight groups)"
MINFER_AMX=1 MINFER_GEMM_CHUNK_KB=1024 "$B"/bin/minfer bench -m "$F" -p 512 -n 0 -r 2 -t 8 --no-bandwidth 2>&1 | grep -E 'pp512'
bf16_part
say "done"
