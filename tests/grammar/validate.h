/* validate.h - a small JSON Schema validator for the tests, written apart
 * from the converter (src/grammar/schema.c) so the two check each other. */
#ifndef MF_TEST_VALIDATE_H
#define MF_TEST_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>

/* doc valid under schema (root: the document $refs resolve against). */
bool schema_valid(json_t *doc, json_t *schema, json_t *root);

#endif
