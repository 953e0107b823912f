#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/mapfile.h"

bool tb_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *tb_json_duplicate_key(const cJSON *object)
{
	static const char oom[] = "(out of memory)";
	const cJSON *it;
	const char **keys, *dup = NULL;
	size_t n = 0, i = 0;

	for (it = object->child; it; it = it->next)
		n++;
	if (n < 2)
		return NULL;
	keys = malloc(n * sizeof *keys);
	if (!keys)
		return oom;
	for (it = object->child; it; it = it->next)
		keys[i++] = it->string ? it->string : "";
	qsort(keys, n, sizeof *keys, cmp_cstr);
	for (i = 1; i < n && !dup; i++)
		if (!strcmp(keys[i - 1], keys[i]))
			dup = keys[i];
	free(keys);
	return dup;
}

bool tb_json_uint(const cJSON *item, uint64_t *out)
{
	double v;

	if (!cJSON_IsNumber(item))
		return false;
	v = item->valuedouble;
	if (!(v >= 0) || v > 9007199254740992.0 || floor(v) != v)
		return false;
	*out = (uint64_t)v;
	return true;
}

cJSON *tb_json_parse(const char *text, size_t len, const char *path, const char *what, tb_err *err)
{
	const char *end = NULL;
	char *copy;
	cJSON *root;

	if (!tb_utf8_valid((const unsigned char *)text, len)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "%s is not valid UTF-8", what);
		return NULL;
	}
	/* JSON allows no raw control characters but these; cJSON would skip
	 * others as whitespace. */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
			tb_err_setc(err, TB_ERR_FORMAT, path, c ? "%s contains a control character (byte %zu)" : "%s contains a NUL byte (byte %zu)",
				   what, i);
			return NULL;
		}
	}
	/* A private NUL-terminated copy: the input may end exactly at the end
	 * of a mapping, and cJSON must never read past it. */
	copy = malloc(len + 1);
	if (!copy) {
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory reading %s", what);
		return NULL;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	root = cJSON_ParseWithOpts(copy, &end, false);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();
		size_t off = at && at >= copy && at <= copy + len ? (size_t)(at - copy) : 0;
		free(copy);
		tb_err_setc(err, TB_ERR_FORMAT, path, "%s is not valid JSON (near byte %zu)", what, off);
		return NULL;
	}
	for (; end && *end; end++) {
		if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
			cJSON_Delete(root);
			free(copy);
			tb_err_setc(err, TB_ERR_FORMAT, path, "%s has trailing bytes after the JSON value", what);
			return NULL;
		}
	}
	free(copy);
	return root;
}

cJSON *tb_json_load(const char *path, size_t max_bytes, const char *what, tb_err *err)
{
	tb_file *f;
	cJSON *root;

	if (tb_file_open(path, &f, err) < 0)
		return NULL;
	if (f->size > max_bytes) {
		tb_file_free(f);
		tb_err_setc(err, TB_ERR_LIMIT, path, "%s larger than %zu bytes", what, max_bytes);
		return NULL;
	}
	root = tb_json_parse(f->data ? (const char *)f->data : "", (size_t)f->size, path, what, err);
	tb_file_free(f);
	return root;
}
