/* pystr.h - Python str semantics the templates rely on: case mapping, strip/split,
 * splitlines, replace, printf-style `%` and str.format. */
#ifndef MF_CHAT_PYSTR_H
#define MF_CHAT_PYSTR_H

#include "chat/eval.h"

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' str.title, 'j' Jinja's |title */
jval py_case(jctx *c, jval s, char mode);
/* which: 'b' both, 'l' left, 'r' right; chars NULL = whitespace */
jval py_strip(jctx *c, jval s, const jval *chars, char which);
jval py_split(jctx *c, jval s, const jval *sep, int64_t maxsplit, bool from_right);
jval py_splitlines(jctx *c, jval s, bool keepends);
jval py_replace(jctx *c, jval s, jval old, jval rep, int64_t count);
jval jpercent_format(jctx *c, jval fmt, jval args);
jval py_format(jctx *c, jval fmt, jargs *args);
jval jescape(jctx *c, jval v);

#endif
