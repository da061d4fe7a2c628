# Writes OUT, a C file defining SYMBOL (the bytes of IN) and SYMBOL_len.
# Run with: cmake -DIN=... -DOUT=... -DSYMBOL=... -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN}: do not edit */\n#include <stddef.h>\nconst unsigned char ${SYMBOL}[] = {\n${bytes}0x00};\nconst size_t ${SYMBOL}_len = ${len};\n")
