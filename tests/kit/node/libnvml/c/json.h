/* A small JSON tree for the NVML stand-in's state file (test code only).
 *
 * Owns: parsing a document into a tree, reading and changing it, and writing it back.
 * Objects keep their keys in order and unknown keys survive a load-change-save cycle, so
 * fields other writers add (tests/kit/node/libnvml/statefile.py and its users) are kept.
 * Must not: know what the document means (node.c does).
 */
#ifndef SIM_JSON_H
#define SIM_JSON_H

#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
    jtype type;
    int boolean;
    double number;
    char *string;
    struct jv **items; /* array items or object values */
    char **keys;       /* object keys, parallel to items */
    int count, cap;
} jv;

jv *json_parse(const char *text, size_t length); /* NULL on malformed input */
char *json_dump(const jv *value);                /* malloc'd text; NULL when out of memory */
void json_free(jv *value);

jv *json_null(void);
jv *json_int(long long n);
jv *json_str(const char *s);
jv *json_arr(void);
jv *json_obj(void);

jv *json_get(const jv *obj, const char *key);             /* NULL when absent or not an object */
jv *json_at(const jv *arr, int index);                    /* NULL when out of range */
int json_len(const jv *arr);                              /* 0 for anything but an array */
long long json_num(const jv *value, long long fallback);  /* a number's value, or fallback */
long long json_key_num(const jv *obj, const char *key, long long fallback);
const char *json_key_str(const jv *obj, const char *key); /* NULL when absent */
int json_is(const jv *value, jtype type);

void json_set(jv *obj, const char *key, jv *value); /* replaces (and frees) an existing value */
void json_push(jv *arr, jv *value);
void json_remove(jv *arr, int index); /* frees the item */

#endif
