# test_vindex_cli.sh - the vindex commands end to end on stories260K: build
# (exit 0, summary line), verify ok, run -m DIR equals run -m GGUF (greedy),
# --ffn walk with every feature equals dense text, so do the walk and DESCRIBE
# via HNSW with ef >= features, bad --hnsw options exit 2, the HNSW graph cache
# (`vindex hnsw`: thread-independent bytes, verified, mapped with the same
# text, damaged or truncated refused naming the file; `vindex info` and SHOW
# STATS list it with its parameters and size, and say whether it is for these gates,
# truncated or stale), audit prints a row per
# layer and K, lql -e prints tables and --json objects; an INSERT saved as a
# patch makes run --patch and the compiled GGUF say the target; --ffn walk on a
# mixture of experts exits 1 saying so; bad options exit 2,
# damaged or foreign directories exit 1 with one line naming the file.
bin=${MINFER_BIN:-build/bin/minfer}
model=../shared/models/stories260K.gguf
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-vindex-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }

"$bin" vindex build "$model" -o "$tmp/v" --level inference -t 2 2>"$tmp/err" || die "build: $(cat "$tmp/err")"
grep -q "5 layers x 172 features (f32), level inference" "$tmp/err" || die "build summary: $(cat "$tmp/err")"
[ "$("$bin" vindex verify "$tmp/v" 2>&1)" = "$tmp/v: ok" ] || die "verify of a good vindex"

a=$("$bin" run -m "$model" -p "Once upon a time" -n 16 --temp 0 -t 2 2>/dev/null)
b=$("$bin" run -m "$tmp/v" -p "Once upon a time" -n 16 --temp 0 -t 2 2>/dev/null)
c=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 100% -p "Once upon a time" -n 16 --temp 0 -t 2 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] || die "run from the vindex: '$b' vs '$a'"
[ "$a" = "$c" ] || die "walk over every feature: '$c' vs '$a'"

# HNSW: with ef >= the 172 features it is exhaustive, so the walk and DESCRIBE equal brute force's
a=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 10% -p "Once upon a time" -n 16 --temp 0 -t 2 2>/dev/null)
b=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 10% --hnsw --hnsw-ef 172 -p "Once upon a time" -n 16 --temp 0 -t 2 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] || die "walk via HNSW with ef = features: '$b' vs '$a'"
a=$("$bin" lql "$tmp/v" -e 'DESCRIBE "girl" LAYERS 0-4 TOP 5')
b=$("$bin" lql "$tmp/v" --hnsw --hnsw-m 4 --hnsw-ef 1000 -e 'DESCRIBE "girl" LAYERS 0-4 TOP 5')
[ -n "$a" ] && [ "$a" = "$b" ] || die "lql DESCRIBE via HNSW with ef >= features differs"
"$bin" vindex audit "$tmp/v" -p "Once upon a time" --walk-k 10% --hnsw -t 2 >/dev/null || die "audit --hnsw exit"
err=$("$bin" lql "$tmp/v" --hnsw --hnsw-m 1 -e 'SHOW STATS' 2>&1); rc=$?
[ $rc = 2 ] && [ "$err" = "minfer lql: --hnsw-m expects an integer in [2, 128], got '1'" ] || die "--hnsw-m 1 ($rc): $err"
err=$("$bin" vindex audit "$tmp/v" -p x --hnsw-ef 8 2>&1); rc=$?
[ $rc = 2 ] && [ "$err" = "minfer vindex audit: --hnsw-m, --hnsw-ef, --hnsw-efc and --hnsw-no-cache need --hnsw" ] || die "--hnsw-ef without --hnsw ($rc): $err"
"$bin" run -m "$tmp/v" --hnsw -p x 2>/dev/null; [ $? = 2 ] || die "run --hnsw without --ffn walk not refused"
"$bin" run -m "$tmp/v" --ffn walk --hnsw --hnsw-efc 0 -p x 2>/dev/null; [ $? = 2 ] || die "--hnsw-efc 0 not refused"

# the HNSW graph cache: saved by `vindex hnsw`, the same bytes on 1 and 2 threads, verified, mapped by
# --hnsw with the same answers as graphs built in memory; damaged, it is refused by run and verify naming it
out=$("$bin" vindex info "$tmp/v") || die "info exit"
printf '%s\n' "$out" | grep -qx 'hnsw cache  none (minfer vindex hnsw DIR saves one)' || die "info without a cache: $out"
"$bin" vindex hnsw "$tmp/v" --hnsw-m 4 -t 2 2>"$tmp/err" || die "vindex hnsw: $(cat "$tmp/err")"
# info lists the cache from its header: parameters, shape, size, and that it is for these gate vectors
sz=$(wc -c < "$tmp/v/hnsw_m4_efc128.bin" | tr -d ' ')
want="hnsw cache  hnsw_m4_efc128.bin: M 4, efc 128, 5 layers x 172 features, $sz bytes ($(awk "BEGIN{printf \"%.2f\", $sz/1048576}") MiB), gate_vectors.bin sha256 matches"
out=$("$bin" vindex info "$tmp/v") || die "info exit with a cache"
[ "$(printf '%s\n' "$out" | grep '^hnsw cache')" = "$want" ] || die "info with a cache: $out (want '$want')"
"$bin" lql "$tmp/v" -e 'SHOW STATS' | grep -qx "hnsw_cache  *${want#hnsw cache  }" || die "SHOW STATS lists no cache: $("$bin" lql "$tmp/v" -e 'SHOW STATS')"
grep -q "5 layers x 172 features, M 4, efc 128: built in .* saved $tmp/v/hnsw_m4_efc128.bin" "$tmp/err" || die "vindex hnsw summary: $(cat "$tmp/err")"
"$bin" vindex hnsw "$tmp/v" --hnsw-m 4 -t 1 -o "$tmp/t1.bin" 2>/dev/null && cmp -s "$tmp/t1.bin" "$tmp/v/hnsw_m4_efc128.bin" || die "vindex hnsw on 1 thread wrote other bytes"
[ "$("$bin" vindex verify "$tmp/v" 2>&1)" = "$tmp/v: ok" ] || die "verify with an HNSW cache"
a=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 10% --hnsw --hnsw-m 4 --hnsw-ef 12 -p "Once upon a time" -n 16 --temp 0 -t 2 2>"$tmp/err")
grep -q "HNSW graphs of 5 layers mapped from $tmp/v/hnsw_m4_efc128.bin" "$tmp/err" || die "run --hnsw did not map the cache: $(cat "$tmp/err")"
b=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 10% --hnsw --hnsw-m 4 --hnsw-ef 12 --hnsw-no-cache -p "Once upon a time" -n 16 --temp 0 -t 2 2>"$tmp/err")
grep -q "mapped" "$tmp/err" && die "--hnsw-no-cache mapped the cache"
[ -n "$a" ] && [ "$a" = "$b" ] || die "walk with the mapped graphs: '$a', built in memory: '$b'"
"$bin" run -m "$tmp/v" --hnsw-no-cache -p x 2>/dev/null; [ $? = 2 ] || die "--hnsw-no-cache without --hnsw not refused"
"$bin" vindex hnsw "$tmp/v" --hnsw-m 8 --hnsw-efc 4 2>/dev/null; [ $? = 2 ] || die "vindex hnsw with efc < M not refused with 2"
cp "$tmp/v/hnsw_m4_efc128.bin" "$tmp/good.bin"
printf '\001' | dd of="$tmp/v/hnsw_m4_efc128.bin" bs=1 seek=3000 conv=notrunc 2>/dev/null
err=$("$bin" run -m "$tmp/v" --ffn walk --walk-k 10% --hnsw --hnsw-m 4 -p x -n 1 -t 2 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$err" = "minfer run: $tmp/v/hnsw_m4_efc128.bin: checksum mismatch: the file is damaged" ] || die "a damaged cache in run ($rc): $err"
err=$("$bin" vindex verify "$tmp/v" 2>&1); rc=$?
[ $rc = 1 ] && [ "$err" = "minfer vindex verify: $tmp/v/hnsw_m4_efc128.bin: checksum mismatch: the file is damaged" ] || die "a damaged cache in verify ($rc): $err"
head -c 2000 "$tmp/good.bin" > "$tmp/v/hnsw_m4_efc128.bin"
err=$("$bin" vindex verify "$tmp/v" 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$err" | grep -q "hnsw_m4_efc128.bin: 2000 bytes, the header says .* (truncated or extended)" || die "a truncated cache in verify ($rc): $err"
out=$("$bin" vindex info "$tmp/v") || die "info exit with a truncated cache"
printf '%s\n' "$out" | grep -qx "hnsw cache  hnsw_m4_efc128.bin: M 4, efc 128, 5 layers x 172 features, 2000 bytes (0.00 MiB), gate_vectors.bin sha256 matches; unusable: 2000 bytes, the header says $sz (truncated or extended)" || die "info with a truncated cache: $out"
# the sha256 of other gate vectors in the header: info calls it stale
cp "$tmp/good.bin" "$tmp/v/hnsw_m4_efc128.bin"
printf 'X' | dd of="$tmp/v/hnsw_m4_efc128.bin" bs=1 seek=56 conv=notrunc 2>/dev/null
out=$("$bin" vindex info "$tmp/v") || die "info exit with a stale cache"
printf '%s\n' "$out" | grep -q "^hnsw cache  hnsw_m4_efc128.bin: M 4, efc 128, 5 layers x 172 features, $sz bytes (.*), gate_vectors.bin sha256 differs; unusable: built for other gate vectors (sha256 X.*): stale, rebuild it with \`minfer vindex hnsw\`$" || die "info with a stale cache: $out"
rm -f "$tmp/v/hnsw_m4_efc128.bin"

out=$("$bin" vindex audit "$tmp/v" -p "Once upon a time there was a dog" --walk-k 10%,100% -t 2) || die "audit exit"
[ "$(printf '%s\n' "$out" | grep -cE '^ +(18|172) +[0-4] ')" = 10 ] || die "audit rows: $out"
printf '%s\n' "$out" | grep -qE '^ +172 +all +100\.0% +100\.0%$' || die "audit with every feature is not 100%: $out"

out=$("$bin" lql "$tmp/v" -e 'SHOW LAYERS; DESCRIBE "girl" AT LAYER 1 TOP 2') || die "lql exit"
printf '%s\n' "$out" | grep -q '^layer  features  type  labels_per_feature$' || die "lql table header: $out"
[ "$("$bin" lql "$tmp/v" --json -e 'DESCRIBE "girl" AT LAYER 1 TOP 2' | grep -o '"layer":1' | wc -l)" = 2 ] || die "lql json"
err=$("$bin" lql "$tmp/v" -e 'SHOW STATS; SELEKT' 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$err" = "minfer lql: line 1, column 13: unknown statement (DESCRIBE, WALK, SELECT, INFER, EXPLAIN, SHOW, INSERT, UPDATE, DELETE, BEGIN, SAVE, APPLY, COMPILE)" ] || die "lql syntax error ($rc): $err"

# an edit: INSERT in lql, the patch saved; run --patch (dense) and the compiled GGUF say it
"$bin" lql "$tmp/v" -t 2 -e "BEGIN PATCH \"$tmp/tim\"; INSERT INTO EDGES VALUES (\"Tim\", \"was a\", \"happy\"); SAVE PATCH; COMPILE INTO MODEL \"$tmp/tim.gguf\"" >/dev/null 2>"$tmp/err" || die "lql insert: $(cat "$tmp/err")"
d=$("$bin" run -m "$tmp/v" --patch "$tmp/tim.vlp" -p "Tim was a" -n 1 --temp 0 -t 2 2>/dev/null)
e=$("$bin" run -m "$tmp/tim.gguf" -p "Tim was a" -n 1 --temp 0 -t 2 2>/dev/null)
[ "$d" = " happy" ] && [ "$e" = " happy" ] || die "the edit: --patch says '$d', the compiled model '$e'"
"$bin" run -m "$model" --vindex "$tmp/v" -p x 2>/dev/null; [ $? = 2 ] || die "--vindex without --ffn walk or --patch not refused"
printf '{"format": "minfer-vindex-patch", "version": 1, "base": "00", "ops": []}' > "$tmp/bad.vlp"
"$bin" run -m "$tmp/v" --patch "$tmp/bad.vlp" -p x 2>"$tmp/err"; [ $? = 1 ] && grep -q "is not this vindex's model" "$tmp/err" || die "a foreign patch: $(cat "$tmp/err")"

"$bin" vindex build "$model" -o "$tmp/x" --gate q4_0 2>/dev/null; [ $? = 2 ] || die "--gate q4_0 not refused with 2"
"$bin" run -m "$model" --walk-k 5 -p x 2>/dev/null; [ $? = 2 ] || die "--walk-k without --ffn walk not refused"
"$bin" run -m "$model" --ffn walk -p x 2>"$tmp/err"; [ $? = 1 ] && grep -q "not a vindex directory" "$tmp/err" || die "walk with a GGUF as the vindex: $(cat "$tmp/err")"
# the walk is of dense FFNs: a mixture of experts is refused with one line saying so
"$bin" vindex build ../shared/models/zoo/qwen3moe.gguf -o "$tmp/moe" --level inference --down-top-k 0 -t 2 2>/dev/null || die "build of a MoE vindex"
err=$("$bin" run -m "$tmp/moe" --ffn walk --walk-k 8 -p x -n 1 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$err" = "minfer run: walk FFN: qwen3moe has a mixture of experts; only dense FFNs walk so far" ] || die "walk on a MoE model ($rc): $err"

printf 'x' >> "$tmp/v/down_meta.bin"
err=$("$bin" vindex verify "$tmp/v" 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$err" | grep -q "down_meta.bin" && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || die "damaged file ($rc): $err"
mkdir "$tmp/empty"
err=$("$bin" vindex info "$tmp/empty" 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$err" | grep -q "index.json" || die "foreign directory ($rc): $err"
exit $fail
