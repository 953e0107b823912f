#include "config.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"
#include "base/jsonutil.h"
#include "formats/pickle.h"

/* JSON nesting skipped over in fields we do not read. */
#define GJ_MAX_DEPTH 128
/* Longest number token (Python's float repr needs 24). */
#define GJ_MAX_NUMBER 64
/* Longest key compared (ours are short; longer keys are skipped). */
#define GJ_MAX_KEY 64

static const char *const golden_suffixes[] = {".jsonl", ".pkl", ".pickle", NULL};

/* Claimed by suffix only: plenty of JSON and pickle files are not golden
 * records (dtypes.json, shard indexes, legacy torch files). */
static bool golden_sniff(const unsigned char *head, size_t n)
{
	(void)head;
	(void)n;
	return false;
}

/* ---- JSON lines ---------------------------------------------------------- */

typedef struct jcur {
	const unsigned char *p, *start, *end;
	const char *path;
	int record;
} jcur;

__attribute__((format(printf, 3, 4))) static int jfail(const jcur *c, tb_err *err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return tb_err_setc(err, TB_ERR_FORMAT, c->path, "golden record %d: %s (at byte %llu)", c->record, msg,
			  (unsigned long long)(c->p - c->start));
}

/* jfail for a record that is no golden record: another program's JSON
 * lines (a log), skipped in a tree. */
static int jforeign(const jcur *c, tb_err *err, const char *what)
{
	jfail(c, err, "%s", what);
	err->code = TB_ERR_NO_TENSOR;
	return -1;
}

static void jws(jcur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
		c->p++;
}

static bool jeat(jcur *c, unsigned char ch)
{
	jws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A number token (JSON, plus Python's NaN, Infinity, -Infinity); its
 * length, or 0 when there is none.  integer: only an optional '-' and digits. */
static size_t number_len(const unsigned char *p, const unsigned char *end, bool integer)
{
	const unsigned char *q = p;
	size_t left = (size_t)(end - p);

	if (!integer && left >= 3 && !memcmp(p, "NaN", 3))
		return 3;
	if (q < end && *q == '-')
		q++;
	if (!integer && (size_t)(end - q) >= 8 && !memcmp(q, "Infinity", 8))
		return (size_t)(q + 8 - p);
	if (q == end || *q < '0' || *q > '9')
		return 0;
	if (*q == '0') {
		/* JSON has no leading zeros: "007" is not a number. */
		q++;
		if (q < end && *q >= '0' && *q <= '9')
			return 0;
	}
	while (q < end && *q >= '0' && *q <= '9')
		q++;
	if (integer)
		return (size_t)(q - p);
	if (q < end && *q == '.') {
		q++;
		if (q == end || *q < '0' || *q > '9')
			return 0;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q == end || *q < '0' || *q > '9')
			return 0;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	return (size_t)(q - p);
}

/* A JSON string; its decoded bytes go to out (truncated to size-1, *len set
 * to the full decoded length) when out is not NULL. */
static int jstring(jcur *c, char *out, size_t size, size_t *len, tb_err *err)
{
	size_t n = 0;

	if (!jeat(c, '"'))
		return jfail(c, err, "expected a string");
	while (c->p < c->end && *c->p != '"') {
		unsigned char ch = *c->p++;
		if (ch < 0x20)
			return jfail(c, err, "control character in a string");
		if (ch == '\\') {
			if (c->p == c->end)
				break;
			ch = *c->p++;
			if (ch == 'u') {
				for (int i = 0; i < 4; i++, c->p++)
					if (c->p == c->end || !strchr("0123456789abcdefABCDEF", *c->p) || !*c->p)
						return jfail(c, err, "bad \\u escape");
				ch = '?';
			} else if (!strchr("\"\\/bfnrt", ch) || !ch) {
				return jfail(c, err, "bad escape in a string");
			}
		}
		if (out && n + 1 < size)
			out[n] = (char)ch;
		n++;
	}
	if (c->p == c->end)
		return jfail(c, err, "unterminated string");
	c->p++;
	if (out)
		out[n < size ? n : size - 1] = '\0';
	if (len)
		*len = n;
	return 0;
}

/* Skip any value, nesting bounded. */
static int jskip(jcur *c, tb_err *err)
{
	bool obj[GJ_MAX_DEPTH];
	int depth = 0;

	for (;;) {
		size_t n;
		bool closed = false;

		jws(c);
		if (c->p == c->end)
			return jfail(c, err, "record ends inside a value");
		if (*c->p == '{' || *c->p == '[') {
			bool o = *c->p++ == '{';
			if (depth == GJ_MAX_DEPTH)
				return jfail(c, err, "nested deeper than %d", GJ_MAX_DEPTH);
			obj[depth++] = o;
			if (jeat(c, o ? '}' : ']')) {
				depth--;
				closed = true;
			} else if (o) {
				if (jstring(c, NULL, 0, NULL, err) < 0)
					return -1;
				if (!jeat(c, ':'))
					return jfail(c, err, "expected ':'");
			}
			if (!closed)
				continue;
		} else if (*c->p == '"') {
			if (jstring(c, NULL, 0, NULL, err) < 0)
				return -1;
		} else if ((n = number_len(c->p, c->end, false)) > 0) {
			c->p += n;
		} else if ((size_t)(c->end - c->p) >= 4 && (!memcmp(c->p, "true", 4) || !memcmp(c->p, "null", 4))) {
			c->p += 4;
		} else if ((size_t)(c->end - c->p) >= 5 && !memcmp(c->p, "false", 5)) {
			c->p += 5;
		} else {
			return jfail(c, err, "unexpected character '%c'", *c->p >= 0x20 && *c->p < 0x7f ? *c->p : '?');
		}
		/* A value ended: close what ends here, or move to the next item. */
		for (;;) {
			if (depth == 0)
				return 0;
			if (jeat(c, ',')) {
				if (obj[depth - 1]) {
					if (jstring(c, NULL, 0, NULL, err) < 0)
						return -1;
					if (!jeat(c, ':'))
						return jfail(c, err, "expected ':'");
				}
				break;
			}
			if (!jeat(c, obj[depth - 1] ? '}' : ']'))
				return jfail(c, err, "expected ',' or a closing bracket");
			depth--;
		}
	}
}

/* Where a numeric array lies in the record, and its shape. */
typedef struct jarray {
	uint64_t start, end; /* byte offsets in the file */
	int ndim;
	int64_t shape[TB_MAX_DIMS];
	uint64_t numel;
} jarray;

/* Scan a rectangular nested array of numbers in one pass, checking its
 * syntax and recording its shape (no number is converted here). */
static int jscan_array(jcur *c, bool integer, jarray *a, tb_err *err)
{
	int64_t count[TB_MAX_DIMS];
	bool known[TB_MAX_DIMS] = {false};
	int depth = 0, ndim = -1;

	jws(c);
	if (c->p == c->end || *c->p != '[')
		return jfail(c, err, "expected an array of numbers");
	a->start = (uint64_t)(c->p - c->start);
	c->p++;
	count[0] = 0;
	for (;;) {
		jws(c);
		if (c->p == c->end)
			return jfail(c, err, "record ends inside an array");
		if (*c->p == ']') {
			/* Close the array at this depth. */
			if (count[depth] == 0 && ndim < 0)
				ndim = depth + 1;
			if (known[depth] && a->shape[depth] != count[depth])
				return jfail(c, err, "ragged array: %lld items where %lld were expected",
					     (long long)count[depth], (long long)a->shape[depth]);
			if (count[depth] == 0 && ndim != depth + 1)
				return jfail(c, err, "ragged array: an empty array where arrays were expected");
			a->shape[depth] = count[depth];
			known[depth] = true;
			c->p++;
			if (depth == 0)
				break;
			depth--;
		} else {
			if (count[depth] > 0) {
				if (*c->p != ',')
					return jfail(c, err, "expected ',' or ']' in an array");
				c->p++;
				jws(c);
				if (c->p == c->end)
					return jfail(c, err, "record ends inside an array");
			}
			if (count[depth] == INT64_MAX)
				return jfail(c, err, "array too long");
			count[depth]++;
			if (*c->p == '[') {
				if (ndim >= 0 && depth + 1 >= ndim)
					return jfail(c, err, "ragged array: an array where a number was expected");
				if (depth + 1 >= TB_MAX_DIMS)
					return jfail(c, err, "array nested deeper than %d", TB_MAX_DIMS);
				c->p++;
				count[++depth] = 0;
				continue;
			}
			size_t n = number_len(c->p, c->end, integer);
			if (n == 0)
				return jfail(c, err, integer ? "expected an integer" : "expected a number");
			if (n > GJ_MAX_NUMBER)
				return jfail(c, err, "number longer than %d characters", GJ_MAX_NUMBER);
			if (ndim < 0)
				ndim = depth + 1;
			else if (depth + 1 != ndim)
				return jfail(c, err, "ragged array: a number where an array was expected");
			c->p += n;
			continue;
		}
		/* After a closed inner array, the next thing is ',' or ']' at its parent. */
	}
	a->end = (uint64_t)(c->p - c->start);
	a->ndim = ndim;
	a->numel = 1;
	for (int i = 0; i < ndim; i++)
		if (__builtin_mul_overflow(a->numel, (uint64_t)a->shape[i], &a->numel))
			return jfail(c, err, "array element count overflows");
	return 0;
}

/* "C"-locale number parsing, whatever the program's locale. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static float parse_float(const unsigned char *p, size_t n)
{
	char buf[GJ_MAX_NUMBER + 1];
	bool neg = p[0] == '-';

	if (n == 3 && !memcmp(p, "NaN", 3))
		return NAN;
	if (p[neg] == 'I')
		return neg ? -INFINITY : INFINITY;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return strtof_l(buf, NULL, c_locale);
}

/* A JSON array as a lazy float32 blob: numbers are converted on acquire. */
typedef struct jlazy {
	const tb_file *file;
	uint64_t start, end, numel;
} jlazy;

static int jlazy_load(void *ctx, uint64_t size, unsigned char **data, tb_err *err)
{
	jlazy *j = ctx;
	const unsigned char *p = j->file->data + j->start, *end = j->file->data + j->end;
	uint64_t k = 0;
	float *out;

	pthread_once(&c_locale_once, c_locale_init);
	if (size != j->numel * sizeof(float) || !(out = malloc(size ? (size_t)size : 1)))
		return tb_err_setc(err, TB_ERR_NOMEM, j->file->path, "out of memory reading golden logits");
	while (p < end) {
		size_t n;
		if (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '\t' || *p == '\r') {
			p++;
			continue;
		}
		n = number_len(p, end, false);
		if (n == 0 || k == j->numel) {
			free(out);
			return tb_err_setc(err, TB_ERR_FORMAT, j->file->path, "golden array changed since it was indexed");
		}
		out[k++] = parse_float(p, n);
		p += n;
	}
	if (k != j->numel) {
		free(out);
		return tb_err_setc(err, TB_ERR_FORMAT, j->file->path, "golden array changed since it was indexed");
	}
	*data = (unsigned char *)out;
	return 0;
}

static const tb_blob_ops jlazy_ops = {
	.load = jlazy_load,
	.free_ctx = free,
};

static int add_json_tensor(tb_builder *b, const tb_file *f, const char *prefix, const char *name, const jarray *a,
			   tb_err *err)
{
	tb_tensor *t = tb_builder_add(b, f->path, prefix, name, err);
	tb_blob *blob;
	jlazy *j;

	if (!t)
		return -1;
	t->dtype = TB_DT_F32;
	if (tb_tensor_set_shape(t, a->ndim, a->shape, f->path, err) < 0)
		return -1;
	blob = tb_builder_blob(b, err);
	if (!blob)
		return -1;
	j = malloc(sizeof *j);
	if (!j)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	*j = (jlazy){f, a->start, a->end, a->numel};
	tb_blob_set_lazy(blob, &jlazy_ops, j, a->numel * sizeof(float));
	t->blob = blob;
	return tb_tensor_check_bounds(t, f->path, err);
}

static int json_tokens(tb_builder *b, jcur *c, tb_err *err)
{
	jarray a;
	const unsigned char *p, *end;
	int64_t *tok;
	size_t k = 0;

	if (jscan_array(c, true, &a, err) < 0)
		return -1;
	if (a.ndim != 1)
		return jfail(c, err, "\"tokens\" is not a flat array of integers");
	tok = malloc(a.numel ? (size_t)a.numel * sizeof *tok : 1);
	if (!tok)
		return tb_err_setc(err, TB_ERR_NOMEM, c->path, "out of memory");
	p = c->start + a.start;
	end = c->start + a.end;
	while (p < end) {
		size_t n = number_len(p, end, true);
		if (n == 0) {
			p++;
			continue;
		}
		char buf[GJ_MAX_NUMBER + 1];
		memcpy(buf, p, n);
		buf[n] = '\0';
		errno = 0;
		long long v = strtoll(buf, NULL, 10);
		if (errno) {
			free(tok);
			return jfail(c, err, "token id %s is out of range", buf);
		}
		tok[k++] = v;
		p += n;
	}
	tb_builder_set_tokens(b, tok, k);
	return 0;
}

static int json_hidden(tb_builder *b, const tb_file *f, jcur *c, const char *prefix, tb_err *err)
{
	char name[64];
	int i = 0;

	if (!jeat(c, '['))
		return jfail(c, err, "\"layer_hidden_states\" is not an array");
	if (jeat(c, ']'))
		return 0;
	do {
		jarray a;
		if (jscan_array(c, false, &a, err) < 0)
			return -1;
		snprintf(name, sizeof name, "layer_hidden_states[%d]", i++);
		if (add_json_tensor(b, f, prefix, name, &a, err) < 0)
			return -1;
	} while (jeat(c, ','));
	if (!jeat(c, ']'))
		return jfail(c, err, "expected ',' or ']' in \"layer_hidden_states\"");
	return 0;
}

static int json_record(tb_builder *b, const tb_file *f, jcur *c, const char *prefix, tb_err *err)
{
	bool seen_logits = false, seen_hidden = false, seen_tokens = false, any = false;
	char key[GJ_MAX_KEY + 1];
	size_t klen;

	if (!jeat(c, '{'))
		return jforeign(c, err, "record is not a JSON object");
	if (!jeat(c, '}')) {
		do {
			if (jstring(c, key, sizeof key, &klen, err) < 0)
				return -1;
			if (!jeat(c, ':'))
				return jfail(c, err, "expected ':' after a key");
			bool *seen = klen > GJ_MAX_KEY ? NULL
				     : !strcmp(key, "logits") ? &seen_logits
				     : !strcmp(key, "layer_hidden_states") ? &seen_hidden
				     : !strcmp(key, "tokens") ? &seen_tokens : NULL;
			if (seen && *seen)
				return jfail(c, err, "duplicate key \"%s\"", key);
			if (seen)
				*seen = true;
			if (seen == &seen_logits) {
				jarray a;
				if (jscan_array(c, false, &a, err) < 0 || add_json_tensor(b, f, prefix, "logits", &a, err) < 0)
					return -1;
			} else if (seen == &seen_hidden) {
				if (json_hidden(b, f, c, prefix, err) < 0)
					return -1;
			} else if (seen == &seen_tokens) {
				if (json_tokens(b, c, err) < 0)
					return -1;
			} else if (jskip(c, err) < 0) {
				return -1;
			}
			any = any || seen;
		} while (jeat(c, ','));
		if (!jeat(c, '}'))
			return jfail(c, err, "expected ',' or '}' after a value");
	}
	jws(c);
	if (c->p != c->end)
		return jfail(c, err, "trailing bytes after the record");
	if (!seen_logits && !seen_hidden)
		return jforeign(c, err, "no \"logits\" or \"layer_hidden_states\"");
	return 0;
}

static bool blank(const unsigned char *p, const unsigned char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != 0x1e)
			return false;
	return true;
}

static int golden_json(tb_builder *b, const tb_file *f, const char *prefix, tb_err *err)
{
	const unsigned char *p = f->data, *end = f->data + f->size;
	int want = tb_builder_opts(b)->record, k = 0;

	while (p < end) {
		const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
		const unsigned char *line_end = nl ? nl : end;
		if (!blank(p, line_end)) {
			if (k == want) {
				jcur c = {p, f->data, line_end, f->path, k};
				if (!tb_utf8_valid(p, (size_t)(line_end - p)))
					return tb_err_setc(err, TB_ERR_FORMAT, f->path, "golden record %d is not valid UTF-8", k);
				if (*c.p == 0x1e) /* RFC 7464 record separator */
					c.p++;
				return json_record(b, f, &c, prefix, err);
			}
			k++;
		}
		p = nl ? nl + 1 : end;
	}
	if (k == 0)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "golden file holds no records");
	return tb_err_setc(err, TB_ERR_USAGE, f->path, "golden file holds %d record%s; --record %d is out of range", k,
			  k == 1 ? "" : "s", want);
}

/* ---- the pickle variant: a list of dicts of numpy arrays ---------------- */

enum { N_RECONSTRUCT, N_NDARRAY, N_DTYPE, N_FROMBUFFER };
enum { OBJ_ARRAY = 1, OBJ_DTYPE };

static const tb_pk_global numpy_globals[] = {
	{"numpy.core.multiarray", "_reconstruct", N_RECONSTRUCT},
	{"numpy._core.multiarray", "_reconstruct", N_RECONSTRUCT},
	{"numpy", "ndarray", N_NDARRAY},
	{"numpy", "dtype", N_DTYPE},
	{"numpy.core.numeric", "_frombuffer", N_FROMBUFFER},
	{"numpy._core.numeric", "_frombuffer", N_FROMBUFFER},
	{NULL, NULL, 0},
};

typedef struct np_dtype {
	tb_dtype dt;
	bool big;
} np_dtype;

typedef struct np_array {
	bool set;
	np_dtype dtype;
	bool fortran;
	int ndim;
	int64_t shape[TB_MAX_DIMS];
	const tb_pk_value *data; /* bytes */
} np_array;

static const struct {
	const char *code;
	tb_dtype dt;
} np_codes[] = {
	{"f8", TB_DT_F64}, {"f4", TB_DT_F32}, {"f2", TB_DT_F16}, {"i8", TB_DT_I64}, {"i4", TB_DT_I32},
	{"i2", TB_DT_I16}, {"i1", TB_DT_I8},  {"u8", TB_DT_U64}, {"u4", TB_DT_U32}, {"u2", TB_DT_U16},
	{"u1", TB_DT_U8},  {"b1", TB_DT_BOOL},
};

static tb_pk_value *np_make_dtype(tb_pk *pk, tb_pk_value *args, tb_err *err)
{
	tb_pk_value *code = args->u.seq.n >= 1 ? args->u.seq.v[0] : NULL, *v;
	np_dtype *d;

	if (!code || code->kind != TB_PK_STR) {
		tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy.dtype without a type code");
		return NULL;
	}
	for (size_t i = 0; i < sizeof np_codes / sizeof *np_codes; i++) {
		if (tb_pk_is_str(code, np_codes[i].code)) {
			v = tb_pk_object(pk, OBJ_DTYPE, sizeof *d, err);
			if (v)
				((np_dtype *)v->u.obj.p)->dt = np_codes[i].dt;
			return v;
		}
	}
	if (code->u.s.n && strchr("OUSVMm", code->u.s.p[0])) {
		tb_err_setc(err, TB_ERR_NO_TENSOR, tb_pk_path(pk),
			    "pickle: numpy dtype '%.*s' is not a numeric tensor type",
			    (int)(code->u.s.n > 32 ? 32 : code->u.s.n), (const char *)code->u.s.p);
		return NULL;
	}
	tb_err_setc(err, TB_ERR_UNSUPPORTED, tb_pk_path(pk), "pickle: numpy dtype '%.*s' is not supported",
		    (int)(code->u.s.n > 32 ? 32 : code->u.s.n), (const char *)code->u.s.p);
	return NULL;
}

/* Check an array's bytes against its shape and dtype. */
static int np_set(tb_pk *pk, np_array *a, const tb_pk_value *shape, const tb_pk_value *dtype, bool fortran,
		  const tb_pk_value *data, tb_err *err)
{
	const np_dtype *d = tb_pk_as(dtype, OBJ_DTYPE);
	uint64_t n = 1, bytes;

	if (!d)
		return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy array without a dtype");
	if (data->kind != TB_PK_BYTES)
		return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy array data is a %s (object arrays are refused)",
				  tb_pk_kind_name(data->kind));
	a->ndim = tb_pk_get_dims(pk, shape, "numpy array shape", a->shape, TB_MAX_DIMS, err);
	if (a->ndim < 0)
		return -1;
	for (int i = 0; i < a->ndim; i++)
		if (__builtin_mul_overflow(n, (uint64_t)a->shape[i], &n))
			return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy array element count overflows");
	if (__builtin_mul_overflow(n, (uint64_t)tb_dtype_size(d->dt), &bytes) || bytes != data->u.s.n)
		return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy array holds %zu bytes, its shape and dtype need more or fewer",
				  data->u.s.n);
	a->dtype = *d;
	a->fortran = fortran;
	a->data = data;
	a->set = true;
	return 0;
}

static tb_pk_value *np_reduce(tb_pk *pk, int id, tb_pk_value *args, tb_err *err)
{
	tb_pk_value **v = args->u.seq.v, *out;
	size_t n = args->u.seq.n;

	switch (id) {
	case N_RECONSTRUCT:
		if (n < 1 || v[0]->kind != TB_PK_GLOBAL || v[0]->u.g.id != N_NDARRAY) {
			tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: _reconstruct of something other than numpy.ndarray");
			return NULL;
		}
		return tb_pk_object(pk, OBJ_ARRAY, sizeof(np_array), err);
	case N_DTYPE:
		return np_make_dtype(pk, args, err);
	case N_FROMBUFFER:
		if (n != 4 || !(tb_pk_is_str(v[3], "C") || tb_pk_is_str(v[3], "F"))) {
			tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: _frombuffer takes (buffer, dtype, shape, 'C' or 'F')");
			return NULL;
		}
		out = tb_pk_object(pk, OBJ_ARRAY, sizeof(np_array), err);
		if (!out || np_set(pk, out->u.obj.p, v[2], v[1], tb_pk_is_str(v[3], "F"), v[0], err) < 0)
			return NULL;
		return out;
	default:
		tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy.ndarray cannot be called directly");
		return NULL;
	}
}

static int np_build(tb_pk *pk, tb_pk_value *obj, tb_pk_value *state, tb_err *err)
{
	np_dtype *d = tb_pk_as(obj, OBJ_DTYPE);
	np_array *a = tb_pk_as(obj, OBJ_ARRAY);
	tb_pk_value **s = state->u.seq.v;
	size_t n = state->kind == TB_PK_TUPLE ? state->u.seq.n : 0;

	if (d) {
		/* (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata]) */
		if (n < 2 || s[1]->kind != TB_PK_STR || s[1]->u.s.n != 1 || !strchr("<>|=", s[1]->u.s.p[0]))
			return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy dtype state is not understood");
		if (n >= 4 && (s[2]->kind != TB_PK_NONE || s[3]->kind != TB_PK_NONE))
			return tb_err_setc(err, TB_ERR_UNSUPPORTED, tb_pk_path(pk),
					   "pickle: structured numpy dtypes are not supported");
		d->big = s[1]->u.s.p[0] == '>';
		return 0;
	}
	if (a && !a->set) {
		/* (version, shape, dtype, is_fortran, data) or without the version */
		if (n == 5)
			s++, n--;
		if (n != 4 || s[2]->kind != TB_PK_BOOL)
			return tb_err_setc(err, TB_ERR_FORMAT, tb_pk_path(pk), "pickle: numpy array state is not understood");
		return np_set(pk, a, s[0], s[1], s[2]->u.b, s[3], err);
	}
	return tb_err_setc(err, TB_ERR_UNSUPPORTED, tb_pk_path(pk), "pickle: BUILD on this object is not supported");
}

/* A tree tensor over an unpickled array (or over one index of its first axis). */
static int add_np_tensor(tb_builder *b, const tb_file *f, const char *prefix, const char *name, const np_array *a,
			 int64_t sub, tb_err *err)
{
	tb_tensor *t = tb_builder_add(b, f->path, prefix, name, err);
	size_t es = tb_dtype_size(a->dtype.dt);
	int64_t shape[TB_MAX_DIMS], stride[TB_MAX_DIMS], s = 1;
	int nd = a->ndim, skip = sub >= 0;
	tb_blob *blob;

	if (!t)
		return -1;
	t->dtype = a->dtype.dt;
	t->big_endian = a->dtype.big && es > 1;
	for (int i = 0; i < nd; i++) {
		int k = a->fortran ? i : nd - 1 - i;
		stride[k] = s;
		s *= a->shape[k] ? a->shape[k] : 1;
	}
	memcpy(shape, a->shape, sizeof shape);
	if (tb_tensor_set_shape(t, nd - skip, shape + skip, f->path, err) < 0)
		return -1;
	memcpy(t->stride, stride + skip, sizeof(int64_t) * (size_t)(nd - skip));
	t->offset = skip ? (uint64_t)sub * (uint64_t)stride[0] * es : 0;
	blob = tb_builder_blob(b, err);
	if (!blob)
		return -1;
	if (a->data->u.s.at >= 0) {
		tb_blob_set_mapped(blob, f, (uint64_t)a->data->u.s.at, a->data->u.s.n);
	} else {
		unsigned char *copy = malloc(a->data->u.s.n ? a->data->u.s.n : 1);
		if (!copy)
			return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		memcpy(copy, a->data->u.s.p, a->data->u.s.n);
		tb_blob_set_owned(blob, copy, a->data->u.s.n);
	}
	t->blob = blob;
	return tb_tensor_check_bounds(t, f->path, err);
}

static const tb_pk_value *dict_get(const tb_pk_value *d, const char *key)
{
	for (size_t i = 0; i + 1 < d->u.seq.n; i += 2)
		if (tb_pk_is_str(d->u.seq.v[i], key))
			return d->u.seq.v[i + 1];
	return NULL;
}

static const np_array *want_array(const tb_pk_value *v, const char *path, const char *what, tb_err *err)
{
	const np_array *a = v ? tb_pk_as(v, OBJ_ARRAY) : NULL;

	if (!a || !a->set) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "golden pickle: \"%s\" is not a numpy array", what);
		return NULL;
	}
	return a;
}

static int np_tokens(tb_builder *b, const tb_file *f, const np_array *a, tb_err *err)
{
	uint64_t n = 1;
	size_t es = tb_dtype_size(a->dtype.dt);
	int64_t *tok;

	for (int i = 0; i < a->ndim; i++)
		n *= (uint64_t)a->shape[i];
	if (tb_dtype_is_float(a->dtype.dt) || a->ndim != 1)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "golden pickle: \"tokens\" is not a flat integer array");
	tok = malloc(n ? (size_t)n * sizeof *tok : 1);
	if (!tok)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *p = a->data->u.s.p + i * es;
		uint64_t u = 0;
		for (size_t k = 0; k < es; k++)
			u |= (uint64_t)p[a->dtype.big ? es - 1 - k : k] << (8 * k);
		if (a->dtype.dt == TB_DT_I32)
			u = (uint64_t)(int64_t)(int32_t)u;
		else if (a->dtype.dt == TB_DT_I16)
			u = (uint64_t)(int64_t)(int16_t)u;
		else if (a->dtype.dt == TB_DT_I8)
			u = (uint64_t)(int64_t)(int8_t)u;
		tok[i] = (int64_t)u;
	}
	tb_builder_set_tokens(b, tok, (size_t)n);
	return 0;
}

/* Not golden logits, but a well-formed pickle of something else. */
__attribute__((format(printf, 3, 4))) static int foreign(tb_err *err, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return tb_err_setc(err, TB_ERR_NO_TENSOR, path, "%s", msg);
}

static int golden_pickle(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	tb_pk_hooks hooks = {.globals = numpy_globals, .reduce = np_reduce, .build = np_build};
	const tb_pk_value *rec, *v;
	int want = tb_builder_opts(b)->record, rc = -1;
	tb_pk_value *root;
	const np_array *a;
	char name[64];
	tb_pk *pk = tb_pk_new(f->path, &hooks);

	if (!pk)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	if (tb_pk_run(pk, f->data, (size_t)f->size, 0, &root, err) < 0) {
		/* Objects other than numpy arrays: another program's pickle. */
		if (err->code == TB_ERR_UNSUPPORTED)
			err->code = TB_ERR_NO_TENSOR;
		goto out;
	}
	/* One array, pickled by itself (pickle.dump(a), a.dump()): the tensor. */
	a = tb_pk_as(root, OBJ_ARRAY);
	if (a && a->set) {
		rc = add_np_tensor(b, f, "", stem, a, -1, err);
		goto out;
	}
	if (root->kind == TB_PK_LIST || root->kind == TB_PK_TUPLE) {
		if ((size_t)want >= root->u.seq.n) {
			tb_err_setc(err, TB_ERR_USAGE, f->path, "golden file holds %zu record%s; --record %d is out of range", root->u.seq.n,
				   root->u.seq.n == 1 ? "" : "s", want);
			goto out;
		}
		rec = root->u.seq.v[want];
	} else if (root->kind == TB_PK_DICT && want == 0) {
		rec = root;
	} else {
		foreign(err, f->path, "golden pickle is a %s, not a list of records", tb_pk_kind_name(root->kind));
		goto out;
	}
	if (rec->kind != TB_PK_DICT) {
		foreign(err, f->path, "golden record %d is a %s, not a dict", want, tb_pk_kind_name(rec->kind));
		goto out;
	}
	v = dict_get(rec, "logits");
	if (v && (!(a = want_array(v, f->path, "logits", err)) || add_np_tensor(b, f, prefix, "logits", a, -1, err) < 0))
		goto out;
	if (!v && !dict_get(rec, "layer_hidden_states")) {
		foreign(err, f->path, "golden record %d has no \"logits\" or \"layer_hidden_states\"", want);
		goto out;
	}
	v = dict_get(rec, "layer_hidden_states");
	if (v && (v->kind == TB_PK_LIST || v->kind == TB_PK_TUPLE)) {
		for (size_t i = 0; i < v->u.seq.n; i++) {
			snprintf(name, sizeof name, "layer_hidden_states[%zu]", i);
			if (!(a = want_array(v->u.seq.v[i], f->path, name, err)) ||
			    add_np_tensor(b, f, prefix, name, a, -1, err) < 0)
				goto out;
		}
	} else if (v) {
		/* One stacked array: entry i is index i of its first axis. */
		if (!(a = want_array(v, f->path, "layer_hidden_states", err)))
			goto out;
		if (a->ndim < 1) {
			tb_err_setc(err, TB_ERR_FORMAT, f->path, "golden pickle: \"layer_hidden_states\" is a scalar");
			goto out;
		}
		for (int64_t i = 0; i < a->shape[0]; i++) {
			snprintf(name, sizeof name, "layer_hidden_states[%lld]", (long long)i);
			if (add_np_tensor(b, f, prefix, name, a, i, err) < 0)
				goto out;
		}
	}
	v = dict_get(rec, "tokens");
	if (v && (!(a = want_array(v, f->path, "tokens", err)) || np_tokens(b, f, a, err) < 0))
		goto out;
	rc = 0;
out:
	tb_pk_free(pk);
	return rc;
}

static int golden_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	/* The generator writes a pickle even into a file named .jsonl. */
	if (f->size > 0 && f->data[0] == 0x80)
		return golden_pickle(b, f, stem, prefix, err);
	if (f->size == 0)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "golden file holds no records");
	return golden_json(b, f, prefix, err);
}

const tb_format tb_fmt_golden = {
	.name = "golden",
	.label = ".jsonl, .pkl, .pickle (MaxText golden logits)",
	.suffixes = golden_suffixes,
	.sniff = golden_sniff,
	.index = golden_index,
};
