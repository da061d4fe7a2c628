/* validate.c - the subset of JSON Schema the converter supports, checked
 * directly on a parsed document. */
#include "validate.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

static bool is_date(const char *s) {
    if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return false;
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] && (m != 2 || d < 29 || leap);
}

static bool is_time(const char *s) {
    if (strlen(s) < 8 || !digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2)) return false;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return false;
    s += 8;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s)) return false;
        while (isdigit((unsigned char)*s)) s++;
    }
    if (!strcmp(s, "Z")) return true;
    return (*s == '+' || *s == '-') && strlen(s) == 6 && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2);
}

static bool is_uuid(const char *s) {
    if (strlen(s) != 36) return false;
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i])) return false;
    }
    return true;
}

/* pattern, by POSIX extended regexes (search semantics, as JSON Schema's);
 * \d \w \s outside classes are spelled out first and (?: becomes (; the
 * rest of the test patterns is ERE already. */
static bool pattern_ok(const char *re, const char *x) {
    char ere[1024];
    size_t k = 0;
    for (const char *p = re; *p && k < sizeof ere - 16; p++) {
        const char *rep = NULL;
        if (p[0] == '\\' && p[1] == 'd') rep = "[0-9]";
        else if (p[0] == '\\' && p[1] == 'w') rep = "[A-Za-z0-9_]";
        else if (p[0] == '\\' && p[1] == 's') rep = "[[:space:]]";
        else if (p[0] == '(' && p[1] == '?' && p[2] == ':') { ere[k++] = '('; p += 2; continue; }
        if (rep) { memcpy(ere + k, rep, strlen(rep)); k += strlen(rep); p++; }
        else ere[k++] = *p;
    }
    ere[k] = 0;
    regex_t rx;
    if (regcomp(&rx, ere, REG_EXTENDED | REG_NOSUB)) return false;
    bool ok = !regexec(&rx, x, 0, NULL, 0);
    regfree(&rx);
    return ok;
}

static bool type_is(json_t *doc, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(doc);
    if (!strcmp(t, "array")) return json_is_array(doc);
    if (!strcmp(t, "string")) return json_is_string(doc);
    if (!strcmp(t, "integer")) return json_is_integer(doc);
    if (!strcmp(t, "number")) return json_is_number(doc);
    if (!strcmp(t, "boolean")) return json_is_boolean(doc);
    if (!strcmp(t, "null")) return json_is_null(doc);
    return false;
}

static json_t *pointer(json_t *root, const char *ref) {
    if (!strcmp(ref, "#")) return root;
    if (strncmp(ref, "#/", 2)) return NULL;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ref + 2);
    json_t *cur = root;
    for (char *seg = strtok(buf, "/"); seg && cur; seg = strtok(NULL, "/")) cur = json_object_get(cur, seg);
    return cur;
}

bool schema_valid(json_t *doc, json_t *s, json_t *root) {
    if (json_is_true(s)) return true;
    if (!json_is_object(s)) return false;
    json_t *v;
    if ((v = json_object_get(s, "$ref"))) return schema_valid(doc, pointer(root, json_string_value(v)), root);
    if ((v = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(v)) ok = type_is(doc, json_string_value(v));
        for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++)
            ok |= type_is(doc, json_string_value(json_array_get(v, i)));
        if (!ok) return false;
    }
    if ((v = json_object_get(s, "const")) && !json_equal(v, doc)) return false;
    if ((v = json_object_get(s, "enum"))) {
        bool ok = false;
        for (size_t i = 0; i < json_array_size(v); i++) ok |= json_equal(json_array_get(v, i), doc);
        if (!ok) return false;
    }
    if ((v = json_object_get(s, "anyOf"))) {
        bool ok = false;
        for (size_t i = 0; i < json_array_size(v); i++) ok |= schema_valid(doc, json_array_get(v, i), root);
        if (!ok) return false;
    }
    if ((v = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!schema_valid(doc, json_array_get(v, i), root)) return false;
    if (json_is_number(doc)) {
        double x = json_number_value(doc);
        if ((v = json_object_get(s, "minimum")) && x < json_number_value(v)) return false;
        if ((v = json_object_get(s, "maximum")) && x > json_number_value(v)) return false;
        if ((v = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(v)) return false;
        if ((v = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(v)) return false;
    }
    if ((v = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(v); i++) n += schema_valid(doc, json_array_get(v, i), root);
        if (n != 1) return false;
    }
    if (json_is_string(doc)) {
        size_t n = utf8_len(json_string_value(doc));
        if ((v = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(v)) return false;
        if ((v = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(v)) return false;
        if ((v = json_object_get(s, "pattern")) && !pattern_ok(json_string_value(v), json_string_value(doc))) return false;
        if ((v = json_object_get(s, "format"))) {
            const char *f = json_string_value(v), *x = json_string_value(doc);
            if (!strcmp(f, "date") && !is_date(x)) return false;
            if (!strcmp(f, "time") && !is_time(x)) return false;
            if (!strcmp(f, "uuid") && !is_uuid(x)) return false;
            if (!strcmp(f, "date-time") && !(strlen(x) > 11 && is_date(x) && x[10] == 'T' && is_time(x + 11))) return false;
        }
    }
    if (json_is_array(doc)) {
        size_t n = json_array_size(doc);
        if ((v = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(v)) return false;
        if ((v = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(v)) return false;
        json_t *pre = json_object_get(s, "prefixItems");
        size_t k = json_array_size(pre);
        for (size_t i = 0; i < n && i < k; i++)
            if (!schema_valid(json_array_get(doc, i), json_array_get(pre, i), root)) return false;
        if ((v = json_object_get(s, "items")))
            for (size_t i = k; i < n; i++)
                if (!schema_valid(json_array_get(doc, i), v, root)) return false;
    }
    if (json_is_object(doc)) {
        json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
        json_t *addl = json_object_get(s, "additionalProperties");
        for (size_t i = 0; req && i < json_array_size(req); i++)
            if (!json_object_get(doc, json_string_value(json_array_get(req, i)))) return false;
        const char *k;
        json_t *x;
        json_object_foreach(doc, k, x) {
            json_t *ps = props ? json_object_get(props, k) : NULL;
            if (ps) { if (!schema_valid(x, ps, root)) return false; }
            else if (json_is_false(addl)) return false;
            else if (json_is_object(addl) && !schema_valid(x, addl, root)) return false;
        }
    }
    return true;
}
