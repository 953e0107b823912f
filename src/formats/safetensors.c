#include "config.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"
#include "base/jsonutil.h"

/* The reference implementation's cap on the JSON header. */
#define ST_MAX_HEADER 100000000ull
#define ST_INDEX_MAX (256u * 1024 * 1024)

static const char *const st_suffixes[] = {".safetensors", NULL};
static const char *const st_index_suffixes[] = {".safetensors.index.json", NULL};

static const struct {
	const char *name;
	int dtype; /* tb_dtype, or -1: known but unsupported */
} st_dtypes[] = {
	{"F64", TB_DT_F64}, {"F32", TB_DT_F32}, {"F16", TB_DT_F16}, {"BF16", TB_DT_BF16},
	{"F8_E4M3", TB_DT_F8_E4M3FN}, {"F8_E5M2", TB_DT_F8_E5M2},
	{"F8_E4M3FNUZ", TB_DT_F8_E4M3FNUZ}, {"F8_E5M2FNUZ", TB_DT_F8_E5M2FNUZ},
	{"I64", TB_DT_I64}, {"I32", TB_DT_I32}, {"I16", TB_DT_I16}, {"I8", TB_DT_I8},
	{"U64", TB_DT_U64}, {"U32", TB_DT_U32}, {"U16", TB_DT_U16}, {"U8", TB_DT_U8},
	{"BOOL", TB_DT_BOOL},
	{"F8_E8M0", -1}, {"F4", -1}, {"F6_E2M3", -1}, {"F6_E3M2", -1}, {"C64", -1},
};

static bool st_sniff(const unsigned char *head, size_t n)
{
	uint64_t len = 0;
	size_t i;

	if (n < 10)
		return false;
	for (i = 0; i < 8; i++)
		len |= (uint64_t)head[i] << (8 * i);
	if (len < 2 || len > ST_MAX_HEADER)
		return false;
	for (i = 8; i < n && i < 8 + len; i++) {
		if (head[i] == '{')
			return true;
		if (head[i] != ' ' && head[i] != '\t' && head[i] != '\n' && head[i] != '\r')
			return false;
	}
	return false;
}

/* One header entry, before it becomes a tensor. */
typedef struct st_entry {
	const char *name;
	tb_dtype dtype;
	int ndim;
	int64_t shape[TB_MAX_DIMS];
	uint64_t begin, end;
} st_entry;

static int cmp_entry(const void *a, const void *b)
{
	const st_entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

static int parse_entry(const cJSON *item, st_entry *e, const char *path, tb_err *err)
{
	const cJSON *dt, *shape, *offs, *dim;
	size_t k;

	e->name = item->string;
	if (!cJSON_IsObject(item))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: entry '%s' is not an object", e->name);
	dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
	shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
	offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
	if (!cJSON_IsString(dt))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s' has no dtype string", e->name);
	for (k = 0; k < sizeof st_dtypes / sizeof *st_dtypes; k++)
		if (!strcmp(st_dtypes[k].name, dt->valuestring))
			break;
	if (k == sizeof st_dtypes / sizeof *st_dtypes)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s' has unknown dtype '%s'", e->name, dt->valuestring);
	if (st_dtypes[k].dtype < 0)
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "safetensors: tensor '%s': dtype %s is not supported",
				   e->name, dt->valuestring);
	e->dtype = (tb_dtype)st_dtypes[k].dtype;
	if (!cJSON_IsArray(shape))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s' has no shape array", e->name);
	e->ndim = 0;
	cJSON_ArrayForEach(dim, shape) {
		uint64_t v;
		if (e->ndim >= TB_MAX_DIMS)
			return tb_err_setc(err, TB_ERR_LIMIT, path, "safetensors: tensor '%s' has more than %d dimensions",
					   e->name, TB_MAX_DIMS);
		if (!tb_json_uint(dim, &v))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s': shape entries must be non-negative integers",
					  e->name);
		e->shape[e->ndim++] = (int64_t)v;
	}
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    !tb_json_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
	    !tb_json_uint(cJSON_GetArrayItem(offs, 1), &e->end))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s': data_offsets must be two non-negative integers",
				  e->name);
	if (e->end < e->begin)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: tensor '%s': data_offsets end before they begin", e->name);
	return 0;
}

static int check_metadata(const cJSON *meta, const char *path, tb_err *err)
{
	const cJSON *it;

	/* The reference reader's metadata is an Option: null means none
	 * (mlx-examples writes it so). */
	if (cJSON_IsNull(meta))
		return 0;
	if (!cJSON_IsObject(meta))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: __metadata__ is not an object");
	cJSON_ArrayForEach(it, meta)
		if (!cJSON_IsString(it))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "safetensors: __metadata__ value '%s' is not a string", it->string);
	return 0;
}

/* Every number in a header is a shape entry or an offset, which the
 * reference reader parses as an integer: 5.0 or 5e0 is refused there.
 * cJSON keeps only the double, so look at the text (valid JSON by now). */
static int check_integers(const char *text, size_t len, const char *path, tb_err *err)
{
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '"') {
			for (i++; i < len && text[i] != '"'; i++)
				if (text[i] == '\\')
					i++;
			continue;
		}
		if (text[i] != '-' && (text[i] < '0' || text[i] > '9'))
			continue;
		size_t start = i;
		bool integer = true;
		while (i < len && strchr("0123456789+-.eE", text[i])) {
			integer &= text[i] != '.' && text[i] != 'e' && text[i] != 'E';
			i++;
		}
		if (!integer)
			return tb_err_setc(err, TB_ERR_FORMAT, path,
					  "safetensors: number %.*s at header byte %zu is not an integer (shapes and data_offsets hold integers)",
					  (int)(i - start < 32 ? i - start : 32), text + start, start);
	}
	return 0;
}

/* Decides, per tensor of a shard, whether the tree takes it. */
typedef struct st_filter {
	const cJSON *weight_map; /* name -> shard file name, or NULL: take all */
	const char *shard;       /* this shard's file name */
} st_filter;

/* Parse one safetensors file and add its tensors (all, or those the
 * filter assigns to it). */
static int st_load(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, const st_filter *flt,
		   tb_err *err)
{
	const unsigned char *d = f->data;
	uint64_t hlen = 0, data_start, data_size, pos = 0;
	st_entry *entries = NULL;
	size_t n = 0, cap;
	const char *dup;
	cJSON *root, *item;
	tb_blob *blob;
	int rc = -1;

	if (f->size < 8)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: file shorter than its 8-byte header length");
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)d[i] << (8 * i);
	if (hlen > ST_MAX_HEADER)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "safetensors: header length %llu exceeds the 100 MB cap",
				   (unsigned long long)hlen);
	if (hlen > f->size - 8)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: header length %llu runs past the end of the file",
				  (unsigned long long)hlen);
	root = tb_json_parse((const char *)d + 8, (size_t)hlen, f->path, "safetensors header", err);
	if (!root)
		return -1;
	if (!cJSON_IsObject(root)) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: header is not a JSON object");
		goto out;
	}
	if (check_integers((const char *)d + 8, (size_t)hlen, f->path, err) < 0)
		goto out;
	dup = tb_json_duplicate_key(root);
	if (dup) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: duplicate tensor name '%s'", dup);
		goto out;
	}
	cap = (size_t)cJSON_GetArraySize(root);
	if (cap > TB_MAX_TENSORS) {
		tb_err_setc(err, TB_ERR_LIMIT, f->path, "safetensors: more than %d tensors", TB_MAX_TENSORS);
		goto out;
	}
	entries = calloc(cap ? cap : 1, sizeof *entries);
	if (!entries) {
		tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		if (!strcmp(item->string, "__metadata__")) {
			if (check_metadata(item, f->path, err) < 0)
				goto out;
			continue;
		}
		if (parse_entry(item, &entries[n], f->path, err) < 0)
			goto out;
		n++;
	}
	data_start = 8 + hlen;
	data_size = f->size - data_start;
	/* The reference reader's rule: sorted by offsets, the entries tile the
	 * data section exactly, no gap, no overlap, no trailing bytes. */
	qsort(entries, n, sizeof *entries, cmp_entry);
	for (size_t i = 0; i < n; i++) {
		st_entry *e = &entries[i];
		if (e->begin != pos) {
			tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: tensor '%s' %s (data_offsets begin at %llu, expected %llu)",
				   e->name, e->begin < pos ? "overlaps the previous tensor" : "leaves a gap before it",
				   (unsigned long long)e->begin, (unsigned long long)pos);
			goto out;
		}
		pos = e->end;
	}
	if (pos != data_size) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: tensors cover %llu data bytes but the file holds %llu",
			   (unsigned long long)pos, (unsigned long long)data_size);
		goto out;
	}
	blob = tb_builder_blob(b, err);
	if (!blob)
		goto out;
	tb_blob_set_mapped(blob, f, data_start, data_size);
	/* HF's model debugger writes one tensor per file under the key "data"
	 * and says what it is in the file name */
	bool by_file = !flt && stem && n == 1 && !strcmp(entries[0].name, "data");
	for (size_t i = 0; i < n; i++) {
		st_entry *e = &entries[i];
		tb_tensor *t;

		if (flt && flt->weight_map) {
			const cJSON *where = cJSON_GetObjectItemCaseSensitive(flt->weight_map, e->name);
			if (!cJSON_IsString(where)) {
				tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: tensor '%s' is not listed in the shard index", e->name);
				goto out;
			}
			if (strcmp(where->valuestring, flt->shard) != 0) {
				tb_builder_note(b, "%s: tensor '%s' also in %s; the index picks that copy", f->path,
						e->name, where->valuestring);
				continue;
			}
		}
		t = tb_builder_add(b, f->path, by_file ? "" : prefix, by_file ? stem : e->name, err);
		if (!t)
			goto out;
		t->dtype = e->dtype;
		if (tb_tensor_set_shape(t, e->ndim, e->shape, f->path, err) < 0)
			goto out;
		if (t->numel * tb_dtype_size(t->dtype) != e->end - e->begin) {
			tb_err_setc(err, TB_ERR_FORMAT, f->path, "safetensors: tensor '%s': data_offsets span %llu bytes, shape and dtype need %llu",
				   e->name, (unsigned long long)(e->end - e->begin),
				   (unsigned long long)(t->numel * tb_dtype_size(t->dtype)));
			goto out;
		}
		t->blob = blob;
		t->offset = e->begin;
		if (tb_tensor_check_bounds(t, f->path, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(entries);
	cJSON_Delete(root);
	return rc;
}

static int st_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	return st_load(b, f, stem, prefix, NULL, err);
}

static bool st_index_sniff(const unsigned char *head, size_t n)
{
	(void)head;
	(void)n;
	return false; /* JSON text: claimed by its suffix only */
}

/* A shard name from an index must be a plain file name beside the index. */
static bool plain_file_name(const char *s)
{
	return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && !strchr(s, '\\');
}

static int st_index_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	const char *slash = strrchr(f->path, '/');
	const cJSON *map, *it;
	const char *dup;
	cJSON *root;
	int rc = -1;

	(void)stem;
	if (f->size > ST_INDEX_MAX)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "shard index larger than %u bytes", ST_INDEX_MAX);
	root = tb_json_parse(f->data ? (const char *)f->data : "", (size_t)f->size, f->path, "shard index", err);
	if (!root)
		return -1;
	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map)) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "shard index has no \"weight_map\" object");
		goto out;
	}
	if (!map->child) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "shard index has an empty \"weight_map\"");
		goto out;
	}
	dup = tb_json_duplicate_key(map);
	if (dup) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "shard index lists tensor '%s' twice", dup);
		goto out;
	}
	cJSON_ArrayForEach(it, map) {
		if (!cJSON_IsString(it) || !plain_file_name(it->valuestring)) {
			tb_err_setc(err, TB_ERR_FORMAT, f->path, "shard index: tensor '%s' names a shard that is not a plain file name beside the index",
				   it->string);
			goto out;
		}
	}
	/* Load each distinct shard once, in order of first mention. */
	cJSON_ArrayForEach(it, map) {
		const cJSON *prev;
		char path[PATH_MAX];
		const tb_file *shard;
		st_filter flt = {map, it->valuestring};
		bool seen = false;

		for (prev = map->child; prev != it && !seen; prev = prev->next)
			seen = !strcmp(prev->valuestring, it->valuestring);
		if (seen)
			continue;
		if ((size_t)snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - f->path + 1) : 0, f->path,
				     it->valuestring) >= sizeof path) {
			tb_err_setc(err, TB_ERR_LIMIT, f->path, "shard path too long");
			goto out;
		}
		shard = tb_builder_open(b, path, err);
		if (!shard) {
			tb_err_prefix(err, "shard listed in %s", f->path);
			goto out;
		}
		if (st_load(b, shard, NULL, prefix, &flt, err) < 0)
			goto out;
	}
	/* Every listed tensor must have been found in its shard. */
	cJSON_ArrayForEach(it, map) {
		char name[2 * TB_MAX_NAME + 2];
		snprintf(name, sizeof name, "%s%s", prefix, it->string);
		if (!tb_builder_has(b, name)) {
			tb_err_setc(err, TB_ERR_FORMAT, f->path, "shard index lists tensor '%s' but shard %s does not hold it",
				   it->string, it->valuestring);
			goto out;
		}
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

const tb_format tb_fmt_safetensors = {
	.name = "safetensors",
	.label = ".safetensors",
	.suffixes = st_suffixes,
	.sniff = st_sniff,
	.index = st_index,
};

const tb_format tb_fmt_safetensors_index = {
	.name = "safetensors-index",
	.label = "*.safetensors.index.json",
	.suffixes = st_index_suffixes,
	.sniff = st_index_sniff,
	.index = st_index_index,
};
