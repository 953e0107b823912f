/*
 * jsonutil: small checks shared by every reader of JSON from untrusted
 * files (safetensors headers, shard indexes, map and rule files): UTF-8
 * validity, duplicate keys, exact non-negative integers.  Works on cJSON
 * trees; owns nothing.
 */
#ifndef TB_JSONUTIL_H
#define TB_JSONUTIL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

bool tb_utf8_valid(const unsigned char *s, size_t n);
/* Name of the first key that appears twice in object, or NULL. */
const char *tb_json_duplicate_key(const cJSON *object);
/* A JSON number that is an exact integer in [0, 2^53]. */
bool tb_json_uint(const cJSON *item, uint64_t *out);
/* Parse len bytes as one JSON value, allowing whitespace around it.  Returns
 * NULL and sets err (naming path) when invalid. */
cJSON *tb_json_parse(const char *text, size_t len, const char *path, const char *what, tb_err *err);
/* Read and parse a whole JSON file (capped at max_bytes). */
cJSON *tb_json_load(const char *path, size_t max_bytes, const char *what, tb_err *err);

#endif
