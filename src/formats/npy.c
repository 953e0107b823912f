#include "config.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/reader.h"
#include "base/jsonutil.h"
#include "formats/npy.h"

#define MANIFEST_NAME "dtypes.json"
#define MANIFEST_MAX (1024 * 1024)

static const char *const npy_suffixes[] = {".npy", NULL};

static bool npy_sniff(const unsigned char *head, size_t n)
{
	return n >= 6 && !memcmp(head, "\x93NUMPY", 6);
}

/* The parsed header dict. */
typedef struct npy_header {
	char descr[64];
	bool fortran;
	int ndim;
	int64_t shape[TB_MAX_DIMS];
} npy_header;

typedef struct cursor {
	const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static bool eat(cursor *c, char ch)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A Python string literal without escapes (npy keys and descr never need them). */
static int parse_str(cursor *c, char *out, size_t size)
{
	char q;
	size_t n = 0;

	skip_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return -1;
	q = *c->p++;
	while (c->p < c->end && *c->p != q) {
		if (*c->p == '\\' || n + 1 >= size)
			return -1;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return -1;
	c->p++;
	out[n] = '\0';
	return 0;
}

static int parse_int(cursor *c, int64_t *out)
{
	int64_t v = 0;
	const char *start;

	skip_ws(c);
	start = c->p;
	if (c->p < c->end && *c->p == '-')
		return -2;
	/* A Python 3 int literal has no leading zeros ("01" does not parse). */
	if (c->end - c->p >= 2 && c->p[0] == '0' && c->p[1] >= '0' && c->p[1] <= '9')
		return -1;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (v > (INT64_MAX - 9) / 10)
			return -3;
		v = v * 10 + (*c->p++ - '0');
	}
	if (c->p == start)
		return -1;
	if (c->p < c->end && *c->p == 'L') /* Python 2 long */
		c->p++;
	*out = v;
	return 0;
}

static int parse_header(const char *text, size_t len, npy_header *h, const char *path, tb_err *err)
{
	cursor c = {text, text + len};
	bool seen_descr = false, seen_fortran = false, seen_shape = false;
	char key[32];

	memset(h, 0, sizeof *h);
	if (!eat(&c, '{'))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header is not a dict");
	for (;;) {
		if (eat(&c, '}'))
			break;
		if (parse_str(&c, key, sizeof key) < 0)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: bad key");
		if (!eat(&c, ':'))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: missing ':' after '%s'", key);
		if (!strcmp(key, "descr")) {
			if (seen_descr)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: duplicate key 'descr'");
			seen_descr = true;
			skip_ws(&c);
			if (c.p < c.end && (*c.p == '[' || *c.p == '('))
				return tb_err_setc(err, TB_ERR_UNSUPPORTED, path,
						   "structured or subarray dtypes are not supported");
			if (parse_str(&c, h->descr, sizeof h->descr) < 0)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: 'descr' is not a dtype string");
		} else if (!strcmp(key, "fortran_order")) {
			if (seen_fortran)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: duplicate key 'fortran_order'");
			seen_fortran = true;
			skip_ws(&c);
			if ((size_t)(c.end - c.p) >= 4 && !memcmp(c.p, "True", 4)) {
				h->fortran = true;
				c.p += 4;
			} else if ((size_t)(c.end - c.p) >= 5 && !memcmp(c.p, "False", 5)) {
				c.p += 5;
			} else {
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: 'fortran_order' must be True or False");
			}
		} else if (!strcmp(key, "shape")) {
			if (seen_shape)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: duplicate key 'shape'");
			seen_shape = true;
			if (!eat(&c, '('))
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: 'shape' is not a tuple");
			while (!eat(&c, ')')) {
				int64_t v;
				int rc;
				if (h->ndim >= TB_MAX_DIMS)
					return tb_err_setc(err, TB_ERR_LIMIT, path, "npy header: more than %d dimensions",
							   TB_MAX_DIMS);
				rc = parse_int(&c, &v);
				if (rc == -2)
					return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: negative dimension in 'shape'");
				if (rc == -3)
					return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: dimension too large in 'shape'");
				if (rc < 0)
					return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: 'shape' must hold integers");
				h->shape[h->ndim++] = v;
				if (!eat(&c, ',')) {
					if (!eat(&c, ')'))
						return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: malformed 'shape' tuple");
					break;
				}
			}
		} else {
			return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: unexpected key '%s'", key);
		}
		if (!eat(&c, ',')) {
			if (!eat(&c, '}'))
				return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: expected ',' or '}'");
			break;
		}
	}
	skip_ws(&c);
	if (c.p != c.end)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: trailing bytes after the dict");
	if (!seen_descr || !seen_fortran || !seen_shape)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header: missing key '%s'",
				  !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
	return 0;
}

/* Look the file up in a sibling dtypes.json: {"x.npy": "bf16", "*": "bf16"}. */
/* The last manifest read, kept parsed: a bf16 tree of 500 files shares one
 * dtypes.json, and re-reading it per file was most of the time to open the
 * tree.  Keyed by path and the file's identity, so an edit is seen. */
static struct {
	pthread_mutex_t lock;
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	cJSON *root;
} manifest_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A private copy of the manifest at mpath (NULL when absent or invalid). */
static cJSON *load_manifest(const char *mpath)
{
	struct stat st;
	cJSON *root = NULL;
	tb_err ignore;

	if (stat(mpath, &st) < 0)
		return NULL;
	pthread_mutex_lock(&manifest_cache.lock);
	if (manifest_cache.root && !strcmp(manifest_cache.path, mpath) && manifest_cache.dev == st.st_dev &&
	    manifest_cache.ino == st.st_ino && manifest_cache.size == st.st_size &&
	    manifest_cache.mtime.tv_sec == st.st_mtim.tv_sec && manifest_cache.mtime.tv_nsec == st.st_mtim.tv_nsec) {
		root = cJSON_Duplicate(manifest_cache.root, true);
	} else {
		root = tb_json_load(mpath, MANIFEST_MAX, "dtype manifest", &ignore);
		if (cJSON_IsObject(root)) {
			cJSON_Delete(manifest_cache.root);
			manifest_cache.root = cJSON_Duplicate(root, true);
			snprintf(manifest_cache.path, sizeof manifest_cache.path, "%s", mpath);
			manifest_cache.dev = st.st_dev;
			manifest_cache.ino = st.st_ino;
			manifest_cache.size = st.st_size;
			manifest_cache.mtime = st.st_mtim;
		}
	}
	pthread_mutex_unlock(&manifest_cache.lock);
	return root;
}

/* The manifest's dtype for the file at path: 0 and *out set; -1 when it
 * names none.  *named: the file's own entry (not "*") gave it; *bad: that
 * entry is no dtype name (left in *out's stead in bad[0..size)). */
static int manifest_dtype(const char *path, tb_dtype *out, bool *named, char *bad, size_t size)
{
	char mpath[PATH_MAX], base[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *fname = slash ? slash + 1 : path;
	const cJSON *hit = NULL;
	cJSON *root;
	int rc = -1;

	*named = false;
	bad[0] = '\0';

	if ((size_t)snprintf(mpath, sizeof mpath, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path,
			     MANIFEST_NAME) >= sizeof mpath)
		return -1;
	root = load_manifest(mpath);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -1;
	}
	snprintf(base, sizeof base, "%s", fname);
	hit = cJSON_GetObjectItemCaseSensitive(root, base);
	if (!hit && tb_has_suffix(base, ".npy")) {
		base[strlen(base) - 4] = '\0';
		hit = cJSON_GetObjectItemCaseSensitive(root, base);
	}
	*named = hit != NULL;
	if (!hit)
		hit = cJSON_GetObjectItemCaseSensitive(root, "*");
	if (cJSON_IsString(hit) && tb_dtype_parse(hit->valuestring, out) == 0)
		rc = 0;
	else if (*named)
		snprintf(bad, size, "%s", cJSON_IsString(hit) ? hit->valuestring : "(not a string)");
	cJSON_Delete(root);
	return rc;
}

/* An integer file its manifest entry names a float dtype of the same width
 * for holds that dtype's bits (bf16 saved as x.view(np.uint16)); an entry
 * that contradicts the file is an error, never silently ignored.  Only the
 * file's own entry counts here: "*" speaks for void files. */
static int manifest_override(const char *path, const char *descr, tb_dtype *dt, tb_err *err)
{
	char bad[64];
	bool named;
	tb_dtype m;

	if (manifest_dtype(path, &m, &named, bad, sizeof bad) < 0) {
		if (named && bad[0])
			return tb_err_setc(err, TB_ERR_FORMAT, path, "%s names '%s' for it, which is not a dtype", MANIFEST_NAME, bad);
		return 0;
	}
	if (!named || m == *dt)
		return 0;
	if (tb_dtype_size(m) != tb_dtype_size(*dt))
		return tb_err_setc(err, TB_ERR_FORMAT, path,
				  "%s names %s (%zu-byte elements) for it, but its npy dtype '%s' has %zu-byte ones",
				  MANIFEST_NAME, tb_dtype_name(m), tb_dtype_size(m), descr, tb_dtype_size(*dt));
	if (tb_dtype_is_float(*dt) || *dt == TB_DT_BOOL)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "%s names %s for it, but it holds npy dtype '%s', not raw bits",
				  MANIFEST_NAME, tb_dtype_name(m), descr);
	*dt = m;
	return 0;
}

static int descr_dtype(const char *descr, const tb_open_opts *opts, const char *path, tb_dtype *dt,
		       bool *big, tb_err *err)
{
	char order = '|', kind;
	const char *p = descr;
	long size;
	char *end;

	*big = false;
	if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
		order = *p++;
	kind = *p;
	/* Long double by its type character, as hand-written headers name it
	 * (np.save itself writes '<f16' or '<f12'). */
	if (kind == 'g' && !p[1])
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "long double npy dtype '%s' is not supported", descr);
	/* '?' and 'O' may come without a size: np.save writes objects as '|O'. */
	if (!kind || !strchr("fiubcVOSUMm?", kind) || (kind != '?' && kind != 'O' && (p[1] < '0' || p[1] > '9'))) {
		/* Hand-written files sometimes name the type ('bfloat16'). */
		if (tb_dtype_parse(descr, dt) == 0)
			return 0;
		return tb_err_setc(err, TB_ERR_FORMAT, path, "unknown npy dtype '%s'", descr);
	}
	if (kind == '?' && p[1])
		return tb_err_setc(err, TB_ERR_FORMAT, path, "unknown npy dtype '%s'", descr);
	size = kind == '?' ? 1 : strtol(p + 1, &end, 10);
	/* Dates carry their unit: '<M8[ns]'. */
	if (kind != '?' && *end && !((kind == 'M' || kind == 'm') && *end == '['))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "unknown npy dtype '%s'", descr);
	*big = order == '>';
	switch (kind) {
	case 'f':
		if (size == 8) *dt = TB_DT_F64;
		else if (size == 4) *dt = TB_DT_F32;
		else if (size == 2) *dt = TB_DT_F16;
		else if (size == 1) *dt = TB_DT_F8_E5M2; /* ml_dtypes writes float8_e5m2 as '<f1' */
		else if (size == 12 || size == 16)
			return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "long double npy dtype '%s' is not supported", descr);
		else return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "unsupported float size in npy dtype '%s'", descr);
		return manifest_override(path, descr, dt, err);
	case 'i':
		if (size == 8) *dt = TB_DT_I64;
		else if (size == 4) *dt = TB_DT_I32;
		else if (size == 2) *dt = TB_DT_I16;
		else if (size == 1) *dt = TB_DT_I8;
		else return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "unsupported integer size in npy dtype '%s'", descr);
		return manifest_override(path, descr, dt, err);
	case 'u':
		if (size == 8) *dt = TB_DT_U64;
		else if (size == 4) *dt = TB_DT_U32;
		else if (size == 2) *dt = TB_DT_U16;
		else if (size == 1) *dt = TB_DT_U8;
		else return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "unsupported integer size in npy dtype '%s'", descr);
		return manifest_override(path, descr, dt, err);
	case 'b':
	case '?':
		if (size != 1)
			return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "unsupported bool size in npy dtype '%s'", descr);
		*dt = TB_DT_BOOL;
		return manifest_override(path, descr, dt, err);
	case 'V': {
		char bad[64];
		bool named;
		int forced = size == 2 ? opts->npy_void2 : size == 1 ? opts->npy_void1 : -1;
		if (forced >= 0) {
			*dt = (tb_dtype)forced;
		} else if (size > 2 || manifest_dtype(path, dt, &named, bad, sizeof bad) < 0) {
			if (size == 2)
				return tb_err_setc(err, TB_ERR_FORMAT, path,
						  "dtype '%s' is raw 2-byte void (bfloat16 from ml_dtypes?): pass --npy-void2 bf16 or add a dtypes.json manifest",
						  descr);
			if (size == 1)
				return tb_err_setc(err, TB_ERR_FORMAT, path,
						  "dtype '%s' is raw 1-byte void (float8 from ml_dtypes?): pass --npy-void1 f8_e4m3fn or add a dtypes.json manifest",
						  descr);
			return tb_err_setc(err, TB_ERR_FORMAT, path, "void dtype '%s' is not a tensor type", descr);
		}
		if (tb_dtype_size(*dt) != (size_t)size)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "dtype %s does not fit void dtype '%s'", tb_dtype_name(*dt), descr);
		*big = false;
		return 0;
	}
	case 'c':
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "complex dtype '%s' is not supported", descr);
	case 'O':
		return tb_err_setc(err, TB_ERR_NO_TENSOR, path, "object array (pickled data) refused");
	default: /* strings, dates: valid arrays, not tensors */
		return tb_err_setc(err, TB_ERR_NO_TENSOR, path, "npy dtype '%s' is not a numeric tensor type", descr);
	}
}

int tb_npy_parse(const unsigned char *d, uint64_t size, const char *path, const tb_open_opts *opts,
		 tb_npy_info *info, tb_err *err)
{
	uint64_t hlen, pre;
	npy_header h;

	memset(info, 0, sizeof *info);
	if (size < 6 || memcmp(d, "\x93NUMPY", 6))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "not an npy file (bad magic)");
	if (size < 10)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy file truncated in its preamble");
	if (d[6] == 1 && d[7] == 0) {
		hlen = (uint64_t)d[8] | (uint64_t)d[9] << 8;
		pre = 10;
	} else if ((d[6] == 2 || d[6] == 3) && d[7] == 0) {
		if (size < 12)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "npy file truncated in its preamble");
		hlen = (uint64_t)d[8] | (uint64_t)d[9] << 8 | (uint64_t)d[10] << 16 | (uint64_t)d[11] << 24;
		pre = 12;
	} else {
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "unsupported npy format version %u.%u", d[6], d[7]);
	}
	if (hlen > TB_NPY_MAX_HEADER)
		return tb_err_setc(err, TB_ERR_LIMIT, path, "npy header of %llu bytes exceeds the %d-byte cap",
				   (unsigned long long)hlen, TB_NPY_MAX_HEADER);
	if (hlen > size - pre)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header length %llu runs past the end of the file",
				  (unsigned long long)hlen);
	for (uint64_t i = 0; i < hlen; i++)
		if (d[pre + i] == 0)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "npy header contains a NUL byte");
	if (parse_header((const char *)d + pre, (size_t)hlen, &h, path, err) < 0)
		return -1;
	if (descr_dtype(h.descr, opts, path, &info->dtype, &info->big_endian, err) < 0)
		return -1;
	info->data_off = pre + hlen;
	info->fortran = h.fortran;
	info->ndim = h.ndim;
	memcpy(info->shape, h.shape, sizeof h.shape);
	return 0;
}

int tb_npy_apply(tb_tensor *t, const tb_npy_info *info, const char *path, tb_err *err)
{
	t->dtype = info->dtype;
	t->big_endian = info->big_endian;
	if (tb_tensor_set_shape(t, info->ndim, info->shape, path, err) < 0)
		return -1;
	if (info->fortran) {
		int64_t s = 1;
		for (int i = 0; i < t->ndim; i++) {
			t->stride[i] = s;
			s *= t->shape[i] ? t->shape[i] : 1;
		}
	}
	return 0;
}

int tb_npy_apply_sized(tb_tensor *t, const tb_npy_info *info, uint64_t size, const char *path, uint64_t *data_bytes,
		       tb_err *err)
{
	if (tb_npy_apply(t, info, path, err) < 0)
		return -1;
	*data_bytes = t->numel * tb_dtype_size(t->dtype);
	if (*data_bytes > size - info->data_off)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npy data truncated: %llu bytes expected, %llu present",
				  (unsigned long long)*data_bytes, (unsigned long long)(size - info->data_off));
	return 0;
}

static int npy_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	uint64_t data_bytes;
	tb_npy_info info;
	tb_tensor *t;
	tb_blob *blob;

	(void)prefix;
	if (tb_npy_parse(f->data, f->size, f->path, tb_builder_opts(b), &info, err) < 0)
		return -1;
	t = tb_builder_add(b, f->path, "", stem, err);
	if (!t || tb_npy_apply_sized(t, &info, f->size, f->path, &data_bytes, err) < 0)
		return -1;
	blob = tb_builder_blob(b, err);
	if (!blob)
		return -1;
	tb_blob_set_mapped(blob, f, info.data_off, data_bytes);
	t->blob = blob;
	t->offset = 0;
	return tb_tensor_check_bounds(t, f->path, err);
}

static const char *const npy_companions[] = {MANIFEST_NAME, NULL};

const tb_format tb_fmt_npy = {
	.name = "npy",
	.label = ".npy",
	.suffixes = npy_suffixes,
	.sniff = npy_sniff,
	.index = npy_index,
	.companions = npy_companions,
};
