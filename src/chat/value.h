/* value.h - the value type of the chat-template interpreter (Python semantics as Jinja sees them).
 *
 * Values are small structs passed by value; the containers they point to live
 * in the render's arena. Lists and dicts are never mutated once built (the
 * sandbox transformers uses refuses list.append & co.), so sharing them is
 * safe; only namespace() objects change, through {% set ns.attr = ... %}. */
#ifndef MF_CHAT_VALUE_H
#define MF_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/arena.h"

typedef enum jtype {
    JV_UNDEF = 0, /* Jinja Undefined: prints "", falsy, raises when used further */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,      /* list, tuple, or a dict view (see jlist_kind) */
    JV_DICT,
    JV_GEN,       /* one-shot Python generator (map/select/... results) */
    JV_NS,        /* namespace() */
    JV_FUNC,      /* builtin function, macro, bound method */
    JV_LOOP,      /* the `loop` object of a for */
} jtype;

/* f bits */
#define JF_MARKUP 1   /* JV_STR: a markupsafe.Markup (|safe); `+` escapes plain strings */
#define JF_UNSAFE 1   /* JV_UNDEF: a sandbox refusal; using it raises SecurityError */

typedef enum jlist_kind { JL_LIST = 0, JL_TUPLE, JL_ITEMS, JL_KEYS, JL_VALUES } jlist_kind;

struct jlist;
struct jdict;
struct jgen;
struct jfunc;
struct jloop;

typedef struct jval {
    uint8_t t;
    uint8_t f;
    union {
        bool b;
        int64_t i;
        double d;
        struct {
            const char *p; /* JV_STR text (not NUL-terminated); JV_UNDEF: message */
            size_t n;
        } s;
        struct jlist *l;
        struct jdict *m;   /* JV_DICT, JV_NS */
        struct jgen *g;
        struct jfunc *fn;
        struct jloop *lp;
    };
} jval;

typedef struct jlist {
    size_t n, cap;
    jval *v;
} jlist;

typedef struct jdict {
    size_t n, cap;
    jval *k, *v;
    uint32_t *idx;   /* open-addressing index (slot -> entry+1), built past a few entries */
    size_t idx_cap;
} jdict;

typedef struct jgen {
    jlist *items;
    size_t pos;      /* items already consumed */
    const char *origin;
    const char *err;  /* raised as a TypeError when first iterated (lazy failure) */
} jgen;

/* constructors */
static inline jval jv_none(void) { jval v = {.t = JV_NONE}; return v; }
static inline jval jv_bool(bool b) { jval v = {.t = JV_BOOL, .b = b}; return v; }
static inline jval jv_int(int64_t i) { jval v = {.t = JV_INT, .i = i}; return v; }
static inline jval jv_float(double d) { jval v = {.t = JV_FLOAT, .d = d}; return v; }
static inline jval jv_strn(const char *p, size_t n) { jval v = {.t = JV_STR}; v.s.p = p; v.s.n = n; return v; }
jval jv_str(const char *p); /* NUL-terminated, not copied */
jval jv_undef(const char *msg); /* msg: what to say when the value is used */
jval jv_undeff(jarena *a, const char *fmt, ...) MF_PRINTF(2, 3);
jval jv_list(jarena *a, size_t cap);
jval jv_dict(jarena *a);

void jl_push(jarena *a, jlist *l, jval v);
/* Dict operations; keys compare with Python == (1 == 1.0 == True). */
jval *jd_get(const jdict *d, jval key);
jval *jd_get_str(const jdict *d, const char *key);
void jd_set(jarena *a, jdict *d, jval key, jval val);

/* Python semantics */
bool jv_truthy(jval v);
bool jv_eq(jval a, jval b);
/* <0, 0, >0; *ok = false when the types do not order (TypeError). */
int jv_cmp(jval a, jval b, bool *ok);
const char *jv_type_name(jval v);     /* Python's type(x).__name__ ("str", "NoneType") */
const char *jv_object_repr(jval v);   /* Jinja's object_type_repr ("dict object", "None") */
bool jv_is_num(jval v);               /* bool, int or float */
double jv_num(jval v);

/* str(v) / repr(v) appended to b. */
void jv_str_append(jsb *b, jval v);
void jv_repr_append(jsb *b, jval v);
jval jv_to_str(jarena *a, jval v); /* str(v) as a value (no copy for strings) */
void fmt_float(double d, char out[40]); /* Python repr(float) */

/* json.dumps with Python's rules; returns false and sets *bad to the
 * offending type name when something is not serializable. indent < 0: none. */
typedef struct jjson_opts {
    int indent;           /* < 0: no newlines */
    const char *indent_str; /* used instead of spaces when not NULL */
    const char *item_sep, *key_sep;
    bool sort_keys, ensure_ascii;
} jjson_opts;
bool jv_tojson(jsb *b, jval v, const jjson_opts *o, const char **bad, int depth);

/* UTF-8 helpers (invalid bytes count as one code point each). */
size_t u8_decode(const char *s, size_t n, size_t i, uint32_t *cp); /* bytes used */
size_t u8_len(const char *s, size_t n);       /* number of code points */
size_t u8_offset(const char *s, size_t n, size_t k); /* byte offset of code point k */
bool u8_is_space(uint32_t cp);                /* Python str.isspace() */

#endif
