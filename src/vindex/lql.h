/* lql.h - LQL, the vindex's query language: lexer and parser (lql_parse.c)
 * into one statement struct per statement, run by lql_exec.c.
 *
 *   DESCRIBE "entity" [AT LAYER n | LAYERS a-b] [TOP k]
 *   WALK "prompt" [LAYERS a-b] [TOP k]
 *   SELECT * FROM FEATURES [WHERE cond [AND cond]...] [NEAREST TO "x" AT LAYER n] [LIMIT k]
 *       cond: layer = n | feature = n | token = "text"
 *   INFER "prompt" [TOP k] [WALK k | DENSE | COMPARE [k]]
 *   SHOW LAYERS | FEATURES [AT LAYER n] [LIMIT k] | STATS | PATCHES
 *   DELETE FROM FEATURES WHERE layer = n AND feature = f
 *   INSERT INTO EDGES [(entity, relation, target)] VALUES ("e", "r", "t") [AT LAYER n] [ALPHA a]
 *   UPDATE FEATURES SET down = "token" [ALPHA a] WHERE layer = n AND feature = f
 *   BEGIN PATCH "name" | SAVE PATCH ["file.vlp"] | APPLY PATCH "file.vlp"
 *   COMPILE INTO VINDEX "dir" | COMPILE INTO MODEL "file.gguf"
 *   EXPLAIN INFER "prompt" [TOP k]
 * Keywords are case-insensitive; statements end with ';' (optional at the
 * end); -- starts a comment to the end of the line. */
#ifndef MF_VINDEX_LQL_H
#define MF_VINDEX_LQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"

typedef enum lql_kind {
    LQL_DESCRIBE, LQL_WALK, LQL_SELECT, LQL_INFER, LQL_SHOW_LAYERS, LQL_SHOW_FEATURES, LQL_SHOW_STATS,
    LQL_DELETE, LQL_SAVE_PATCH, LQL_APPLY_PATCH, LQL_SHOW_PATCHES,
    LQL_INSERT, LQL_UPDATE, LQL_BEGIN_PATCH, LQL_COMPILE_VINDEX, LQL_COMPILE_MODEL, LQL_EXPLAIN,
} lql_kind;
typedef enum lql_mode { LQL_DENSE, LQL_WALKK, LQL_COMPARE } lql_mode;

typedef struct lql_stmt {
    lql_kind kind;
    int line, col;          /* where the statement starts */
    char *text;             /* the string argument (entity, prompt, file; NULL if none), malloc'd */
    char *rel, *target;     /* INSERT's relation and target, UPDATE's token (target), malloc'd */
    double alpha;           /* ALPHA a (0 = default) */
    int layer0, layer1;     /* layer range, -1 = all */
    int top;                /* TOP / LIMIT, -1 = default */
    int feature;            /* WHERE feature = n, -1 = any */
    char *token;            /* WHERE token = "...", malloc'd or NULL */
    char *nearest;          /* NEAREST TO "...", malloc'd or NULL */
    lql_mode mode;
    int walk_k;             /* WALK k / COMPARE k (0 = default) */
} lql_stmt;

typedef struct lql_prog {
    lql_stmt *s;
    int n;
} lql_prog;

/* Parses a whole text; errors are MF_ERR_FORMAT "line L, column C: ...". */
mf_status lql_parse(const char *text, size_t len, lql_prog *out);
void lql_prog_free(lql_prog *p);

#endif
