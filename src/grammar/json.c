/* json.c - the built-in JSON grammar (--json). Whitespace runs, numbers and
 * exponents are bounded so that a sampled value always ends, and the numbers
 * stay inside what common parsers accept (64-bit integers, finite doubles);
 * \u escapes exclude lone surrogates for the same reason. */
#include "minfer.h"

static const char json_gbnf[] =
    "# one JSON value\n"
    "root    ::= value\n"
    "value   ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object  ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"
    "member  ::= string ws \":\" ws value ws\n"
    "array   ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string  ::= \"\\\"\" char* \"\\\"\"\n"
    "char    ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" uhex )\n"
    "uhex    ::= [0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex\n"
    "hex     ::= [0-9a-fA-F]\n"
    "number  ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?\n"
    "ws      ::= [ \\t\\n]{0,4}\n";

const char *mf_grammar_json(void) { return json_gbnf; }
