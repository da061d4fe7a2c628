# test_info_cli.sh - `minfer info` on stories260K.gguf prints the expected
# version, metadata, tensor table, parameter count and size; bad files exit
# non-zero with one line on stderr that says what is wrong.
bin=${MINFER_BIN:-build/bin/minfer}
model=../shared/models/stories260K.gguf
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minfer-info-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

out=$("$bin" info "$model" 2>"$tmp/err")
rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: minfer info $model exited $rc: $(cat "$tmp/err")"
    exit 1
fi

# expect REGEX: some line of the output matches (grep -E)
expect() {
    if ! printf '%s\n' "$out" | grep -Eq -- "$1"; then
        echo "FAIL: no output line matches /$1/"
        fail=1
    fi
}
expect '^GGUF version: 3$'
expect '^metadata: 19 keys$'
expect '^  general\.architecture +string +"llama"$'
expect '^  llama\.block_count +u32 +5$'
expect '^  llama\.context_length +u32 +2048$'
expect '^  llama\.attention\.layer_norm_rms_epsilon +f32 +1e-05$'
expect '^  tokenizer\.ggml\.tokens +array\[string\] +\[512 strings: "<unk>", "<s>", "</s>", \.\.\.\]$'
expect '^  tokenizer\.ggml\.scores +array\[f32\] +\[512 f32: '
expect '^tensors: 48$'
expect '^  token_embd\.weight +f32 +\[64, 512\] +131072 '
expect '^  blk\.4\.ffn_down\.weight +f32 +\[172, 64\] +44032 '
expect '^parameters: 292800 \(0\.29M\)$'
expect '^file size: 1185376 bytes \(1\.13 MiB\)$'
n=$(printf '%s\n' "$out" | grep -Ec '^  (token_embd|output|output_norm|blk\.[0-9]+\.[a-z_]+)\.weight ')
if [ "$n" -ne 48 ]; then
    echo "FAIL: tensor table has $n rows, expected 48"
    fail=1
fi
if [ -s "$tmp/err" ]; then
    echo "FAIL: minfer info wrote to stderr on a good file: $(cat "$tmp/err")"
    fail=1
fi

# refuse FILE REGEX: exit status 1, nothing on stdout, one stderr line naming
# the file and matching REGEX (grep -E)
refuse() {
    "$bin" info "$1" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 1 ]; then
        echo "FAIL: minfer info $1 exited $rc, expected 1"
        fail=1
    elif [ -s "$tmp/out" ]; then
        echo "FAIL: minfer info $1 printed to stdout: $(head -c 200 "$tmp/out")"
        fail=1
    elif [ "$lines" -ne 1 ]; then
        echo "FAIL: minfer info $1 wrote $lines lines to stderr: $(cat "$tmp/err")"
        fail=1
    elif ! grep -qE -- "$2" "$tmp/err" || ! grep -qF -- "$1" "$tmp/err"; then
        echo "FAIL: minfer info $1: message lacks '$2' or the file name: $(cat "$tmp/err")"
        fail=1
    fi
}
refuse ../shared/models/no-such-model.gguf "No such file"
refuse ../shared/models/tinyllamas-stories-260k-f32-header.gguf "version 1"
refuse ../shared/models/tinyllamas-stories-260k-q8_0.gguf "tensor 'blk\.0\.ffn_down\.weight': row length 172 is not a multiple"
head -c 5000 "$model" >"$tmp/truncated.gguf"
refuse "$tmp/truncated.gguf" "truncated|past the end"
printf 'not a model at all\n' >"$tmp/text.gguf"
refuse "$tmp/text.gguf" "not a GGUF file"
: >"$tmp/empty.gguf"
refuse "$tmp/empty.gguf" "not a GGUF file"

# usage errors
if "$bin" info >/dev/null 2>&1; then
    echo "FAIL: minfer info without a file succeeded"
    fail=1
fi
if "$bin" info --bogus "$model" >/dev/null 2>&1; then
    echo "FAIL: minfer info --bogus succeeded"
    fail=1
fi

if [ $fail -ne 0 ]; then
    exit 1
fi
echo "gguf_info_cli: all checks passed"
