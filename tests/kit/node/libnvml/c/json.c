/* A small JSON tree for the NVML stand-in's state file (test code only); see json.h. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *p, *end;
    int depth;
} reader;

static jv *make(jtype type) {
    jv *v = calloc(1, sizeof *v);
    if (v) v->type = type;
    return v;
}

jv *json_null(void) { return make(J_NULL); }
jv *json_arr(void) { return make(J_ARR); }
jv *json_obj(void) { return make(J_OBJ); }

jv *json_int(long long n) {
    jv *v = make(J_NUM);
    if (v) v->number = (double)n;
    return v;
}

jv *json_str(const char *s) {
    jv *v = make(J_STR);
    if (v && !(v->string = strdup(s))) {
        free(v);
        return NULL;
    }
    return v;
}

void json_free(jv *v) {
    if (!v) return;
    for (int i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

static int grow(jv *v) {
    if (v->count < v->cap) return 1;
    int cap = v->cap ? v->cap * 2 : 8;
    jv **items = realloc(v->items, cap * sizeof *items);
    if (!items) return 0;
    v->items = items;
    if (v->type == J_OBJ) {
        char **keys = realloc(v->keys, cap * sizeof *keys);
        if (!keys) return 0;
        v->keys = keys;
    }
    v->cap = cap;
    return 1;
}

/* ---- parsing ------------------------------------------------------------------------------- */

static void skip_space(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static int hex4(reader *r, unsigned *out) {
    if (r->end - r->p < 4) return 0;
    unsigned n = 0;
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        n <<= 4;
        if (c >= '0' && c <= '9') n |= c - '0';
        else if (c >= 'a' && c <= 'f') n |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') n |= c - 'A' + 10;
        else return 0;
    }
    *out = n;
    return 1;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string at r->p (after its opening quote), malloc'd; escapes decoded. */
static char *parse_string(reader *r) {
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    while (r->p < r->end && *r->p != '"') {
        if (cap - n < 8) {
            char *bigger = realloc(s, cap *= 2);
            if (!bigger) goto fail;
            s = bigger;
        }
        char c = *r->p++;
        if ((unsigned char)c < 0x20) goto fail;
        if (c != '\\') {
            s[n++] = c;
            continue;
        }
        if (r->p >= r->end) goto fail;
        c = *r->p++;
        switch (c) {
        case '"': case '\\': case '/': s[n++] = c; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u': {
            unsigned cp, low;
            if (!hex4(r, &cp)) goto fail;
            if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' &&
                r->p[1] == 'u') {
                r->p += 2;
                if (!hex4(r, &low) || low < 0xDC00 || low > 0xDFFF) goto fail;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            n += put_utf8(s + n, cp);
            break;
        }
        default: goto fail;
        }
    }
    if (r->p >= r->end) goto fail;
    r->p++; /* closing quote */
    s[n] = '\0';
    return s;
fail:
    free(s);
    return NULL;
}

static jv *parse_value(reader *r);

static jv *parse_container(reader *r, int object) {
    jv *v = make(object ? J_OBJ : J_ARR);
    char close = object ? '}' : ']';
    if (!v || ++r->depth > MAX_DEPTH) goto fail;
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        r->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_space(r);
        if (object) {
            if (r->p >= r->end || *r->p != '"') goto fail;
            r->p++;
            if (!(key = parse_string(r))) goto fail;
            skip_space(r);
            if (r->p >= r->end || *r->p != ':') { free(key); goto fail; }
            r->p++;
        }
        jv *item = parse_value(r);
        if (!item || !grow(v)) { free(key); json_free(item); goto fail; }
        if (object) v->keys[v->count] = key;
        v->items[v->count++] = item;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') { r->p++; continue; }
        if (r->p < r->end && *r->p == close) { r->p++; break; }
        goto fail;
    }
    r->depth--;
    return v;
fail:
    json_free(v);
    return NULL;
}

static jv *parse_value(reader *r) {
    skip_space(r);
    if (r->p >= r->end) return NULL;
    char c = *r->p;
    if (c == '{' || c == '[') return parse_container(r, c == '{');
    if (c == '"') {
        r->p++;
        char *s = parse_string(r);
        jv *v = s ? make(J_STR) : NULL;
        if (!v) { free(s); return NULL; }
        v->string = s;
        return v;
    }
    static const struct { const char *word; jtype type; int boolean; } words[] = {
        {"null", J_NULL, 0}, {"true", J_BOOL, 1}, {"false", J_BOOL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(r->end - r->p) >= n && !memcmp(r->p, words[i].word, n)) {
            r->p += n;
            jv *v = make(words[i].type);
            if (v) v->boolean = words[i].boolean;
            return v;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buffer[64];
        size_t n = 0;
        while (r->p < r->end && n < sizeof buffer - 1 && strchr("+-0123456789.eE", *r->p))
            buffer[n++] = *r->p++;
        buffer[n] = '\0';
        char *stop;
        double number = strtod(buffer, &stop);
        if (*stop != '\0' || !isfinite(number)) return NULL;
        jv *v = make(J_NUM);
        if (v) v->number = number;
        return v;
    }
    return NULL;
}

jv *json_parse(const char *text, size_t length) {
    reader r = {text, text + length, 0};
    jv *v = parse_value(&r);
    skip_space(&r);
    if (v && r.p != r.end) {
        json_free(v);
        return NULL;
    }
    return v;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct {
    char *text;
    size_t length, cap;
    int failed;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->failed) return;
    if (w->length + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (w->length + n + 1 > cap) cap *= 2;
        char *bigger = realloc(w->text, cap);
        if (!bigger) { w->failed = 1; return; }
        w->text = bigger;
        w->cap = cap;
    }
    memcpy(w->text + w->length, s, n);
    w->length += n;
    w->text[w->length] = '\0';
}

static void put_string(writer *w, const char *s) {
    put(w, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            put(w, escaped, 2);
        } else if (c < 0x20) {
            char escaped[8];
            snprintf(escaped, sizeof escaped, "\\u%04x", c);
            put(w, escaped, 6);
        } else {
            put(w, (const char *)&c, 1);
        }
    }
    put(w, "\"", 1);
}

static void put_value(writer *w, const jv *v) {
    char number[40];
    switch (v->type) {
    case J_NULL: put(w, "null", 4); break;
    case J_BOOL: v->boolean ? put(w, "true", 4) : put(w, "false", 5); break;
    case J_NUM:
        if (v->number == floor(v->number) && fabs(v->number) < 9e15)
            snprintf(number, sizeof number, "%lld", (long long)v->number);
        else
            snprintf(number, sizeof number, "%.17g", v->number);
        put(w, number, strlen(number));
        break;
    case J_STR: put_string(w, v->string); break;
    case J_ARR:
    case J_OBJ:
        put(w, v->type == J_OBJ ? "{" : "[", 1);
        for (int i = 0; i < v->count; i++) {
            if (i) put(w, ", ", 2);
            if (v->type == J_OBJ) {
                put_string(w, v->keys[i]);
                put(w, ": ", 2);
            }
            put_value(w, v->items[i]);
        }
        put(w, v->type == J_OBJ ? "}" : "]", 1);
        break;
    }
}

char *json_dump(const jv *v) {
    writer w = {0};
    put_value(&w, v);
    if (w.failed) {
        free(w.text);
        return NULL;
    }
    return w.text;
}

/* ---- reading and changing ------------------------------------------------------------------ */

int json_is(const jv *v, jtype type) { return v && v->type == type; }

jv *json_get(const jv *obj, const char *key) {
    if (!json_is(obj, J_OBJ)) return NULL;
    for (int i = 0; i < obj->count; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

jv *json_at(const jv *arr, int index) {
    if (!json_is(arr, J_ARR) || index < 0 || index >= arr->count) return NULL;
    return arr->items[index];
}

int json_len(const jv *arr) { return json_is(arr, J_ARR) ? arr->count : 0; }

long long json_num(const jv *v, long long fallback) {
    if (json_is(v, J_NUM)) return (long long)v->number;
    if (json_is(v, J_BOOL)) return v->boolean;
    if (json_is(v, J_STR) && v->string[0]) { /* "0x233510DE": IDs as statefile.py writes them */
        char *stop;
        long long n = strtoll(v->string, &stop, 0);
        if (*stop == '\0') return n;
    }
    return fallback;
}

long long json_key_num(const jv *obj, const char *key, long long fallback) {
    return json_num(json_get(obj, key), fallback);
}

const char *json_key_str(const jv *obj, const char *key) {
    jv *v = json_get(obj, key);
    return json_is(v, J_STR) ? v->string : NULL;
}

void json_set(jv *obj, const char *key, jv *value) {
    if (!json_is(obj, J_OBJ) || !value) {
        json_free(value);
        return;
    }
    for (int i = 0; i < obj->count; i++) {
        if (!strcmp(obj->keys[i], key)) {
            json_free(obj->items[i]);
            obj->items[i] = value;
            return;
        }
    }
    char *copy = strdup(key);
    if (!copy || !grow(obj)) {
        free(copy);
        json_free(value);
        return;
    }
    obj->keys[obj->count] = copy;
    obj->items[obj->count++] = value;
}

void json_push(jv *arr, jv *value) {
    if (!json_is(arr, J_ARR) || !value || !grow(arr)) {
        json_free(value);
        return;
    }
    arr->items[arr->count++] = value;
}

void json_remove(jv *arr, int index) {
    if (!json_is(arr, J_ARR) || index < 0 || index >= arr->count) return;
    json_free(arr->items[index]);
    memmove(arr->items + index, arr->items + index + 1, (arr->count - index - 1) * sizeof *arr->items);
    arr->count--;
}
