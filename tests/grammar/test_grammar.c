/* test_grammar.c - the GBNF parser and matcher without a model: accepted and
 * rejected strings per construct, parser errors with line and column, the
 * grammar files of tests/grammar/data, and hostile grammars refused fast. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minfer.h"
#include "testutil.h"

/* 1: text is a complete match; 0: rejected or incomplete; -1: grammar error */
static int match(const char *gbnf, const char *text, size_t len) {
    mf_grammar *g = NULL;
    if (mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g)) {
        fprintf(stderr, "  grammar error: %s\n", mf_last_error());
        return -1;
    }
    mf_grammar_state *s = NULL;
    int r = -1;
    if (!mf_grammar_state_new(g, NULL, &s)) r = !mf_grammar_accept_text(s, text, len) && mf_grammar_done(s);
    mf_grammar_state_free(s);
    mf_grammar_free(g);
    return r;
}

#define YES(g, t) CHECK(match(g, t, strlen(t)) == 1, "%s should accept \"%s\"", g, t)
#define NO(g, t) CHECK(match(g, t, strlen(t)) == 0, "%s should reject \"%s\"", g, t)

static void test_constructs(void) {
    const char *lit = "root ::= \"abc\"";
    YES(lit, "abc"); NO(lit, "ab"); NO(lit, "abcd"); NO(lit, ""); NO(lit, "abd");
    const char *esc = "root ::= \"a\\n\\t\\r\\\\\\\"\\x41\\u00e9\\U0001F600\"";
    YES(esc, "a\n\t\r\\\"A\xc3\xa9\xf0\x9f\x98\x80"); NO(esc, "a\n\t\r\\\"A");
    const char *alt = "root ::= \"a\" | \"bc\"";
    YES(alt, "a"); YES(alt, "bc"); NO(alt, "b"); NO(alt, "abc");
    const char *star = "root ::= (\"ab\")* \"c\"";
    YES(star, "c"); YES(star, "abc"); YES(star, "ababc"); NO(star, "abac"); NO(star, "ab");
    const char *strstar = "root ::= \"ab\"*";
    YES(strstar, ""); YES(strstar, "abab"); NO(strstar, "aba");
    const char *plus = "root ::= [0-9]+";
    YES(plus, "7"); YES(plus, "123"); NO(plus, ""); NO(plus, "12a");
    const char *opt = "root ::= \"a\"? \"b\"";
    YES(opt, "b"); YES(opt, "ab"); NO(opt, "aab");
    const char *exact = "root ::= \"x\"{3}";
    YES(exact, "xxx"); NO(exact, "xx"); NO(exact, "xxxx");
    const char *atleast = "root ::= \"x\"{2,}";
    YES(atleast, "xx"); YES(atleast, "xxxxx"); NO(atleast, "x");
    const char *range = "root ::= \"x\"{1,3} \"y\"";
    YES(range, "xy"); YES(range, "xxxy"); NO(range, "y"); NO(range, "xxxxy");
    const char *zero = "root ::= \"x\"{0} \"y\" [ab]{ 0 , 2 }";
    YES(zero, "y"); YES(zero, "yab"); NO(zero, "xy"); NO(zero, "yaba");
    const char *cls = "root ::= [a-cx]+";
    YES(cls, "abcx"); NO(cls, "abd");
    const char *neg = "root ::= [^a-c]+";
    YES(neg, "xyz"); YES(neg, "\xc3\xa9"); NO(neg, "xa");
    const char *clsesc = "root ::= [\\]\\[\\-\\\\\\n]+";
    YES(clsesc, "]"); YES(clsesc, "[-\\\n"); NO(clsesc, "a");
    const char *uni = "root ::= [\\u4e00-\\u9fff]+ \"\xc3\xa9\"";
    YES(uni, "\xe4\xb8\xad\xe6\x96\x87\xc3\xa9"); NO(uni, "a\xc3\xa9");
    const char *any = "root ::= . \"z\"";
    YES(any, "az"); YES(any, "\xf0\x9f\x98\x80z"); NO(any, "z"); NO(any, "abz");
    const char *cmt = "# leading\nroot ::= \"a\" # trailing\n  # alone\n\n";
    YES(cmt, "a"); NO(cmt, "");
    const char *refs = "root ::= greet \" \" name\ngreet ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]*\n";
    YES(refs, "hi Bob"); YES(refs, "hello X"); NO(refs, "hi bob");
    const char *multi = "root ::=\n  (\n    \"a\"\n  | \"b\"\n  ) \"c\"\n";
    YES(multi, "ac"); YES(multi, "bc"); NO(multi, "c");
    const char *nested = "root ::= ( \"[\" root \"]\" )* ";
    YES(nested, ""); YES(nested, "[[]][]"); NO(nested, "[[]"); NO(nested, "]");
    const char *empty_alt = "root ::= | \"a\"";
    YES(empty_alt, ""); YES(empty_alt, "a");
    NO("root ::= \"a\"", "\xff"); /* bytes that are not UTF-8 */
}

/* Text arriving in pieces (as tokens do), split inside UTF-8 characters;
 * a rejected piece leaves the state as it was. */
static void test_incremental(void) {
    const char *gb = "root ::= \"h\xc3\xa9llo \" [\\U0001F600-\\U0001F64F]";
    mf_grammar *g = NULL;
    mf_grammar_state *s = NULL;
    CHECK(!mf_grammar_parse(gb, strlen(gb), NULL, &g), "parse: %s", mf_last_error());
    if (!g) return;
    CHECK(!mf_grammar_state_new(g, NULL, &s), "state");
    CHECK(!mf_grammar_accept_text(s, "h\xc3", 2), "h + first byte of e-acute");
    CHECK(mf_grammar_accept_text(s, "\xa8", 1) == MF_ERR_FORMAT, "e-grave's second byte is rejected");
    CHECK(mf_grammar_accept_text(s, "x", 1) == MF_ERR_FORMAT, "ascii inside a character is rejected");
    CHECK(!mf_grammar_accept_text(s, "\xa9ll", 3), "rest of e-acute");
    CHECK(!mf_grammar_done(s), "not complete yet");
    CHECK(!mf_grammar_accept_text(s, "o \xf0\x9f", 4), "start of an emoji");
    CHECK(mf_grammar_accept_text(s, "\x9a", 1) == MF_ERR_FORMAT, "prefix 0x9a (U+1F680..) is outside the range");
    CHECK(!mf_grammar_accept_text(s, "\x98", 1) && !mf_grammar_done(s), "U+1F600 prefix, still partial");
    CHECK(!mf_grammar_accept_text(s, "\x80", 1) && mf_grammar_done(s), "complete after U+1F600");
    CHECK(mf_grammar_accept_text(s, "!", 1) == MF_ERR_FORMAT && mf_grammar_done(s), "nothing after the end");
    CHECK(!mf_grammar_state_reset(s) && !mf_grammar_done(s), "reset");
    mf_grammar_state_free(s);
    mf_grammar_free(g);
}

/* The parse error's message contains `want` (line and column). */
static void bad(const char *gbnf, const char *want) {
    mf_grammar *g = NULL;
    mf_status st = mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g);
    CHECK(st == MF_ERR_FORMAT && !g, "%s: should fail to parse", gbnf);
    CHECK(strstr(mf_last_error(), want) != NULL, "%s: message \"%s\" lacks \"%s\"", gbnf, mf_last_error(), want);
    mf_grammar_free(g);
}

static void test_errors(void) {
    bad("root ::= \"abc", "line 1, column 10: string literal not closed");
    bad("root ::= foo", "line 1, column 10: undefined rule 'foo'");
    bad("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' defined twice");
    bad("root ::= \"a\" )", "line 1, column 14: unexpected ')'");
    bad("root ::= \"\\q\"", "line 1, column 11: unknown escape \\q");
    /* a byte that is not printable is named by its code: the message stays one line (found by grammar_fuzz) */
    bad("root ::= \"a\\\n\"", "line 1, column 12: unknown escape '\\' before byte 0x0A");
    CHECK(strchr(mf_last_error(), '\n') == NULL, "escape message spans lines: %s", mf_last_error());
    bad("root \"a\"", "line 1, column 6: expected '::='");
    bad("\n\nroot ::= [z-a]", "line 3, column 12: range end before its start");
    bad("root ::= *", "line 1, column 10: '*' has nothing before it");
    bad("root ::= \"x\"{3,1}", "line 1, column 16: repetition maximum below its minimum");
    bad("root ::= \"x\"{2", "line 1, column 15: expected '}'");
    bad("root ::= (\"a\" \"b\"", "line 1, column 18: expected ')'");
    bad("root ::= [abc", "line 1, column 10: character class not closed");
    bad("root ::= []", "line 1, column 10: empty character class");
    bad("root ::= \"\\x4\"", "line 1, column 11: escape \\x needs hex digits");
    bad("root ::= \"\\U00110000\"", "line 1, column 11: code point beyond U+10FFFF");
    bad("x ::= \"a\"", "no rule named 'root'");
    bad("root ::= \"\xc3\xa9\" \xc3\xa9", "line 1, column 14: unexpected '\xc3\xa9'");
    bad("root ::= \"a\"\n  | \"b\"", "line 2, column 3: expected a rule name");
    mf_grammar *g = NULL;
    CHECK(!mf_grammar_parse("start ::= \"a\"", 13, "start", &g) && g, "a named start rule");
    mf_grammar_free(g);
}

static double now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Refused with a message, quickly (well under a second each, even under ASan). */
static void hostile(const char *what, const char *gbnf, const char *want, const char *text) {
    double t0 = now();
    mf_grammar *g = NULL;
    mf_status st = mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g);
    if (!st && text) { /* parses, but matching must fail with a message, not hang */
        mf_grammar_state *s = NULL;
        st = mf_grammar_state_new(g, NULL, &s);
        if (!st) st = mf_grammar_accept_text(s, text, strlen(text));
        mf_grammar_state_free(s);
    }
    double dt = now() - t0;
    CHECK(st == MF_ERR_FORMAT, "%s: should be refused (got %d)", what, st);
    CHECK(strstr(mf_last_error(), want) != NULL, "%s: message \"%s\" lacks \"%s\"", what, mf_last_error(), want);
    CHECK(dt < 2.0, "%s: took %.2f s", what, dt);
    mf_grammar_free(g);
}

static void test_hostile(void) {
    hostile("direct left recursion", "root ::= root \"a\" | \"a\"", "left recursion in rule 'root'", NULL);
    hostile("indirect left recursion", "root ::= a\na ::= b \"x\"\nb ::= \"y\"? root", "left recursion", NULL);
    hostile("left recursion through a group", "root ::= ( \"a\"* root ) | \"b\"", "left recursion", NULL);
    size_t n = 20000;
    char *deep = malloc(n * 2 + 32);
    strcpy(deep, "root ::= ");
    size_t k = strlen(deep);
    for (size_t i = 0; i < n / 2; i++) deep[k++] = '(';
    deep[k++] = '"', deep[k++] = 'a', deep[k++] = '"';
    for (size_t i = 0; i < n / 2; i++) deep[k++] = ')';
    deep[k] = 0;
    hostile("deep nesting", deep, "groups nested more than 256 deep", NULL);
    free(deep);
    hostile("huge count", "root ::= \"a\"{100000}", "repetition count above 10000", NULL);
    char big[700] = "root ::= \"";
    for (int i = 0; i < 300; i++) strcat(big, "ab");
    strcat(big, "\"{9999}");
    hostile("huge expansion", big, "too large", NULL);
    /* 3000 nested optional levels of a nullable rule: every level is a live stack */
    hostile("stack explosion", "root ::= x{0,3000} \"b\"\nx ::= \"a\" | \"\"", "parse stacks", "a");
    /* a long chain of rules each starting with the next */
    size_t nr = 6000;
    char *chain = malloc(nr * 40 + 64);
    k = (size_t)sprintf(chain, "root ::= r0\n");
    for (size_t i = 0; i + 1 < nr; i++) k += (size_t)sprintf(chain + k, "r%zu ::= r%zu \"x\"\n", i, i + 1);
    sprintf(chain + k, "r%zu ::= \"y\"\n", nr - 1);
    hostile("long left chain", chain, "rules each starting with the next", NULL);
    free(chain);
}

/* Own copies of the kinds of grammars llama.cpp ships: each compiles and
 * accepts a sample and rejects a near miss. */
static void file_case(const char *name, const char *yes, const char *no) {
    char path[256];
    snprintf(path, sizeof path, "tests/grammar/data/%s", name);
    size_t len = 0;
    char *text = test_read_file(path, &len);
    CHECK(text != NULL, "%s missing", path);
    if (!text) return;
    char *t = realloc(text, len + 1);
    t[len] = 0;
    CHECK(match(t, yes, strlen(yes)) == 1, "%s should accept \"%s\"", name, yes);
    CHECK(match(t, no, strlen(no)) == 0, "%s should reject \"%s\"", name, no);
    free(t);
}

static void test_files(void) {
    file_case("arithmetic.gbnf", "a+2*(b-c)= 7\n", "a+=1\n");
    file_case("list.gbnf", "- eggs\n- milk\n", "- eggs\nmilk\n");
    file_case("chess.gbnf", "1. e4 e5\n2. Nf3 Nc6\n3. O-O exd4+\n", "1. e4 e5\n2. Nf9 Nc6\n");
    file_case("c.gbnf", "int main(){int x = 1+2;while(x<3){x = x+1;}return x;}",
              "int main(){x = ;}");
    file_case("japanese.gbnf", "\xe3\x81\x93\xe3\x82\x93 \xe4\xb8\xad\xe6\x96\x87\n", "abc\n");
    file_case("json_arr.gbnf", "[1, \"a\\n\", {\"k\": [true, null]}, -0.5e3]", "[1, 2,]");
    const char *json = mf_grammar_json();
    YES(json, "{\"a\": [1, 2.5, -3e+2, \"x\\u00e9\"], \"b\": {\"c\": null}}");
    YES(json, "42"); YES(json, "\"str\""); YES(json, "[]"); YES(json, "{ }");
    NO(json, "{\"a\": }"); NO(json, "01"); NO(json, "[1,]"); NO(json, "\"\\ud800\""); NO(json, "{\"a\" 1}");
}

int main(void) {
    test_constructs();
    test_incremental();
    test_errors();
    test_hostile();
    test_files();
    return test_summary("test_grammar");
}
