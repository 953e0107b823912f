/*
 * ggmltext: llama.cpp's tensor dumps as text, as llama-eval-callback and
 * llama-debug print every node of the graph they compute (common/debug.cpp,
 * and before it examples/eval-callback), usually captured with the
 * program's logs around them.  Each node is a header line
 *
 *     common_debug_cb_eval:   attn_norm-0 = (f32)   MUL(norm-0{8, 4, 1, 1}, ...}) = {8, 4, 1, 1}
 *
 * ("ggml_debug:" in older versions), then its values nested by ne3, ne2
 * and ne1, a row of ne0 values per line, printed "%12.4f".  An axis longer
 * than six shows its first and last three entries around a "...": the
 * tensor read holds the printed values only, 1-D, with a tb_partial saying
 * where in the whole tensor they sit (ne0 is the fastest axis: the whole
 * shape is [ne3, ne2, ne1, ne0]).  A tensor printed in full is an ordinary
 * tensor of that shape.  Quantized tensors print their header only and
 * are skipped with a note; views (names ending " (view)", " (reshaped)",
 * ...) are skipped.  A graph name printed more than once keeps its last
 * write (Qcur-N after RoPE), except ffn_out-N, whose first write is the
 * MLP's output; the final norm before its weight ("norm") gives way to
 * result_norm.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"

/* Values a file may hold in all (each takes 12 bytes: the value and its index). */
#define MAX_VALUES (1u << 28)
/* How much of a line an error message quotes. */
#define QUOTE_MAX 40

/* Claimed by content when the sniffer sees a header; a log whose first
 * header comes later is claimed by these suffixes, and skipped with a note
 * when it holds none. */
static const char *const ggml_suffixes[] = {".log", ".txt", NULL};

/* What starts a header: the printing function's name (current, older). */
static const char *const header_starts[] = {"common_debug_cb_eval: ", "ggml_debug: "};

/* Element types whose values are printed; any other type (the quantized
 * ones) gets its header only. */
static const char *const printed_types[] = {"f32", "f16", "bf16", "i64", "i32", "i16", "i8"};

/* Graph names whose first write is the tap: llama's graph names the MLP's
 * output ffn_out-N, and the residual sum after it too when a control
 * vector takes the l_out-N name. */
static const char *const first_write_names[] = {"ffn_out-"};

/* Graph names of an intermediate that the dump also holds finished under
 * another name, which alone is the tap: llama's final norm is "norm"
 * before its weight and "result_norm" after it (both would claim the
 * final_norm cell). */
static const struct {
	const char *name, *finished;
} superseded[] = {
	{"norm", "result_norm"},
};

/* One line of the file. */
typedef struct cursor {
	const char *p, *end;   /* what is left after the current line */
	const char *line, *le; /* the current line, without its newline (and CR) */
	bool unended;          /* the current line is the last and has no newline */
	size_t lineno;
	const char *path;
} cursor;

static bool next_line(cursor *c)
{
	const char *nl;

	if (c->p >= c->end)
		return false;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	c->line = c->p;
	c->le = nl ? nl : c->end;
	c->p = nl ? nl + 1 : c->end;
	c->unended = !nl;
	if (c->le > c->line && c->le[-1] == '\r')
		c->le--;
	c->lineno++;
	return true;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t';
}

static void trim(const char **p, const char **end)
{
	while (*p < *end && is_space(**p))
		(*p)++;
	while (*end > *p && is_space((*end)[-1]))
		(*end)--;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Is [p, end) exactly the string s? */
static bool equals(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(end - p) == n && !memcmp(p, s, n);
}

/* Past what the common log writes before a line with --log-timestamps
 * ("0.01.234.567 ") and --log-prefix (a level letter: "I ", "W ", ...). */
static const char *skip_log_prefix(const char *p, const char *end)
{
	const char *q = p;

	while (q < end && (is_digit(*q) || *q == '.'))
		q++;
	if (q > p && q < end && *q == ' ')
		p = q + 1;
	if (end - p >= 2 && p[0] && strchr("IWED", p[0]) && p[1] == ' ')
		p += 2;
	return p;
}

/* The first occurrence of s in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	for (; (size_t)(end - p) >= n; p++)
		if (!memcmp(p, s, n))
			return p;
	return NULL;
}

/* The last occurrence of s in [p, end), or NULL. */
static const char *find_last(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	for (size_t k = (size_t)(end - p); k >= n; k--)
		if (!memcmp(p + k - n, s, n))
			return p + k - n;
	return NULL;
}

typedef struct header {
	const char *name, *type;
	size_t name_len, type_len;
	int64_t ne[4];
	bool ne_overflow; /* an ne does not fit in 63 bits */
} header;

enum { HDR_NO, HDR_YES, HDR_CUT };

/* "8, 4, 1, 1": ggml's four dims. */
static bool parse_ne(const char *p, const char *end, header *h)
{
	for (int d = 0; d < 4; d++) {
		if (d > 0) {
			if (end - p < 2 || p[0] != ',' || p[1] != ' ')
				return false;
			p += 2;
		}
		if (p == end || !is_digit(*p))
			return false;
		h->ne[d] = 0;
		for (; p < end && is_digit(*p); p++) {
			if (h->ne[d] > (INT64_MAX - 9) / 10)
				h->ne_overflow = true;
			else
				h->ne[d] = h->ne[d] * 10 + (*p - '0');
		}
	}
	return p == end;
}

/* A header line "FN: NAME = (TYPE) OP(SRCS) = {NE}" in [p, end).  cut: the
 * line goes on past end (the sniffer's head stops there); then HDR_CUT
 * when it is a header as far as the type. */
static int parse_header(const char *p, const char *end, bool cut, header *h)
{
	const char *sep, *close, *shape;
	size_t k = 0;

	memset(h, 0, sizeof *h);
	p = skip_log_prefix(p, end);
	while (k < sizeof header_starts / sizeof *header_starts &&
	       ((size_t)(end - p) < strlen(header_starts[k]) || memcmp(p, header_starts[k], strlen(header_starts[k]))))
		k++;
	if (k == sizeof header_starts / sizeof *header_starts)
		return HDR_NO;
	p += strlen(header_starts[k]);
	while (p < end && *p == ' ')
		p++;
	sep = find(p, end, " = (");
	if (!sep)
		return HDR_NO;
	h->name = p;
	h->name_len = (size_t)(sep - p);
	for (const char *q = p; q < sep; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return HDR_NO;
	h->type = sep + 4;
	close = memchr(h->type, ')', (size_t)(end - h->type));
	if (!close)
		return HDR_NO;
	h->type_len = (size_t)(close - h->type);
	shape = find_last(close, end, " = {");
	if (!shape)
		return cut ? HDR_CUT : HDR_NO;
	while (end > shape && is_space(end[-1]))
		end--;
	if (end[-1] != '}' || shape[-1] != ')')
		return cut ? HDR_CUT : HDR_NO;
	return parse_ne(shape + 4, end - 1, h) ? HDR_YES : HDR_NO;
}

static bool ggml_sniff(const unsigned char *head, size_t n)
{
	const char *p = (const char *)head, *end = p + n;
	header h;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
		if (le > p && le[-1] == '\r')
			le--;
		if (parse_header(p, le, !nl, &h) != HDR_NO)
			return true;
		if (!nl)
			break;
		p = nl + 1;
	}
	return false;
}

/* 10^e, for e >= 0 (exact to 10^22). */
static double pow10_of(int e)
{
	double v = 1;

	for (; e > 0; e--)
		v *= 10;
	return v;
}

/* A value as printf's %f writes it, or nan, -nan, inf, -inf.  Up to 19
 * significant digits the decimal is rounded once, as strtod would. */
static bool parse_value(const char *p, const char *end, float *out)
{
	bool neg = p < end && *p == '-', point = false;
	uint64_t m = 0; /* the first 19 digits */
	int kept = 0, frac = 0, scale = 0, after = 0;
	double v;

	p += neg;
	if (equals(p, end, "nan") || equals(p, end, "inf")) {
		v = *p == 'n' ? (double)__builtin_nanf("") : (double)__builtin_inff();
		*out = (float)(neg ? -v : v);
		return true;
	}
	if (p == end || !is_digit(*p))
		return false;
	for (; p < end; p++) {
		if (*p == '.' && !point) {
			point = true;
			continue;
		}
		if (!is_digit(*p))
			return false;
		after += point;
		if (kept < 19) {
			m = m * 10 + (uint64_t)(*p - '0');
			kept++;
			frac += point;
		} else if (!point) {
			scale++;
		}
	}
	if (point && !after)
		return false;
	v = (double)m * pow10_of(scale) / pow10_of(frac);
	*out = (float)(neg ? -v : v);
	return true;
}

/* One tensor's dump: its header and the values printed. */
typedef struct record {
	header h;
	size_t line;      /* of the header */
	size_t seq;       /* order in the file */
	float *v;         /* malloc'd */
	uint64_t *ix;     /* flat indices of v, malloc'd */
	uint64_t n, cap;
	double sum;
	bool has_sum;
} record;

/* What one file's parse keeps. */
typedef struct parse {
	cursor c;
	record *rec;      /* kept dumps, malloc'd */
	size_t n_rec, cap_rec;
	uint64_t values;  /* in all, against MAX_VALUES */
	size_t quantized; /* headers without values */
	char first_quantized[64];
	bool any_header;
} parse;

/* [p, end) for an error message: at most QUOTE_MAX bytes, control
 * characters as '?', so the message stays one line. */
static void quote(const char *p, const char *end, char *buf, size_t size)
{
	size_t n = 0;

	for (; p < end && n + 4 < size && n < QUOTE_MAX; p++)
		buf[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
	if (p < end && n + 4 < size) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
}

/* what went wrong in r's values; on a last line with no newline, that
 * the dump was cut there. */
static int name_error(parse *ps, const record *r, tb_err *err, const char *what)
{
	if (ps->c.unended)
		what = "the file ends inside the values (the dump was cut short)";
	return tb_err_set(err, ps->c.path, "line %zu: %s in the dump of '%.*s' (line %zu)", ps->c.lineno, what,
			  (int)(r->h.name_len < 256 ? r->h.name_len : 256), r->h.name, r->line);
}

/* The next line of a tensor's values, or the error of a dump cut short. */
static int values_line(parse *ps, const record *r, tb_err *err)
{
	header h;

	if (!next_line(&ps->c))
		return name_error(ps, r, err, "the file ends inside the values (the dump was cut short)");
	if (parse_header(ps->c.line, ps->c.le, false, &h) == HDR_YES)
		return name_error(ps, r, err, "another tensor starts inside the values (the dump was cut short)");
	return 0;
}

/* The current line must be want (its indentation aside). */
static int expect(parse *ps, const record *r, const char *want, tb_err *err)
{
	const char *p = ps->c.line, *end = ps->c.le;
	char got[QUOTE_MAX + 4], what[128];

	trim(&p, &end);
	if (equals(p, end, want))
		return 0;
	quote(p, end, got, sizeof got);
	snprintf(what, sizeof what, "expected '%s', found '%s'", want, got);
	return name_error(ps, r, err, what);
}

/* An elision ("...") after k entries of an axis of ne: the printer went on
 * at ne - k.  *i is the entry it stood before; *elided says an axis has
 * had its one. */
static int elide(parse *ps, const record *r, int64_t *i, int64_t ne, bool *elided, tb_err *err)
{
	int64_t k = *i;

	if (*elided || k < 1 || ne <= 2 * k)
		return name_error(ps, r, err, "'...' where its shape elides nothing");
	*elided = true;
	*i = ne - k;
	return 0;
}

static bool is_elision(const char *p, const char *end)
{
	trim(&p, &end);
	return equals(p, end, "...,");
}

static int push(parse *ps, record *r, float v, uint64_t index, tb_err *err)
{
	if (ps->values >= MAX_VALUES)
		return tb_err_setc(err, TB_ERR_LIMIT, ps->c.path, "line %zu: more than %u values", ps->c.lineno,
				   MAX_VALUES);
	if (r->n == r->cap) {
		uint64_t cap = r->cap ? r->cap * 2 : 64;
		float *v2 = realloc(r->v, (size_t)cap * sizeof *v2);
		if (v2)
			r->v = v2;
		uint64_t *ix2 = v2 ? realloc(r->ix, (size_t)cap * sizeof *ix2) : NULL;
		if (!ix2)
			return tb_err_setc(err, TB_ERR_NOMEM, ps->c.path, "out of memory");
		r->ix = ix2;
		r->cap = cap;
	}
	r->v[r->n] = v;
	r->ix[r->n++] = index;
	ps->values++;
	return 0;
}

/* One row "[ v, v, ..., v ]," of ne0 values; base: the flat index of its
 * first element. */
static int parse_row(parse *ps, record *r, uint64_t base, tb_err *err)
{
	const char *p = ps->c.line, *end = ps->c.le;
	int64_t ne0 = r->h.ne[0], i0 = 0, k = 0;
	uint64_t got = 0;
	bool elided = false;
	char what[160], q[QUOTE_MAX + 4];

	trim(&p, &end);
	if (end - p < 3 || p[0] != '[' || end[-2] != ']' || end[-1] != ',')
		return expect(ps, r, "[ values ],", err);
	p++;
	end -= 2;
	trim(&p, &end);
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p)), *te = comma ? comma : end, *tp = p;
		float v;
		trim(&tp, &te);
		if (equals(tp, te, "...")) {
			k = i0;
			if (elide(ps, r, &i0, ne0, &elided, err) < 0)
				return -1;
		} else if (parse_value(tp, te, &v)) {
			if (i0 < ne0 && push(ps, r, v, base + (uint64_t)i0, err) < 0)
				return -1;
			i0++;
			got++;
		} else {
			quote(tp, te, q, sizeof q);
			snprintf(what, sizeof what, "'%s' is not a number", q);
			return name_error(ps, r, err, what);
		}
		p = comma ? comma + 1 : end;
		if (comma && p == end)
			return name_error(ps, r, err, "a row ends in a comma");
	}
	if (i0 != ne0) {
		snprintf(what, sizeof what, "a row of %llu values where ne0 = %lld prints %lld",
			 (unsigned long long)got, (long long)ne0, (long long)(elided ? 2 * k : ne0));
		return name_error(ps, r, err, what);
	}
	return 0;
}

/* An optional "sum = X" (and llama-debug's "sum_sq = X") after a block of
 * ne3. */
static int parse_sums(parse *ps, record *r, tb_err *err)
{
	for (;;) {
		cursor at = ps->c;
		const char *p, *end;
		bool sq;
		float v;
		if (!next_line(&ps->c))
			break;
		p = ps->c.line;
		end = ps->c.le;
		trim(&p, &end);
		sq = (size_t)(end - p) >= 9 && !memcmp(p, "sum_sq = ", 9);
		if (!sq && ((size_t)(end - p) < 6 || memcmp(p, "sum = ", 6))) {
			ps->c = at;
			break;
		}
		p += sq ? 9 : 6;
		if (!parse_value(p, end, &v))
			return name_error(ps, r, err, "its sum is not a number");
		if (!sq) {
			r->sum = v;
			r->has_sum = true;
		}
	}
	return 0;
}

/* The values after a header, nested as the printer nests them: a block per
 * i3, in it one per i2, in that a row per i1; an axis of more than 2n
 * entries prints n, "...", and the last n. */
static int parse_values(parse *ps, record *r, tb_err *err)
{
	const int64_t *ne = r->h.ne;

	for (int64_t i3 = 0; i3 < ne[3]; i3++) {
		bool el2 = false;
		if (values_line(ps, r, err) < 0 || expect(ps, r, "[", err) < 0)
			return -1;
		for (int64_t i2 = 0; i2 < ne[2]; i2++) {
			bool el1 = false;
			if (values_line(ps, r, err) < 0)
				return -1;
			if (is_elision(ps->c.line, ps->c.le) &&
			    (elide(ps, r, &i2, ne[2], &el2, err) < 0 || values_line(ps, r, err) < 0))
				return -1;
			if (expect(ps, r, "[", err) < 0)
				return -1;
			for (int64_t i1 = 0; i1 < ne[1]; i1++) {
				if (values_line(ps, r, err) < 0)
					return -1;
				if (is_elision(ps->c.line, ps->c.le) &&
				    (elide(ps, r, &i1, ne[1], &el1, err) < 0 || values_line(ps, r, err) < 0))
					return -1;
				uint64_t base = (((uint64_t)i3 * (uint64_t)ne[2] + (uint64_t)i2) * (uint64_t)ne[1] +
						 (uint64_t)i1) * (uint64_t)ne[0];
				if (parse_row(ps, r, base, err) < 0)
					return -1;
			}
			if (values_line(ps, r, err) < 0 || expect(ps, r, "],", err) < 0)
				return -1;
		}
		if (values_line(ps, r, err) < 0 || expect(ps, r, "]", err) < 0 || parse_sums(ps, r, err) < 0)
			return -1;
	}
	return 0;
}

static bool in_list(const char *p, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (equals(p, p + n, list[i]))
			return true;
	return false;
}

/* A view of another node ("Qcur-0 (reshaped)", "kv (view)"), or no name. */
static bool skipped_name(const header *h)
{
	return h->name_len == 0 || (h->name[h->name_len - 1] == ')' && find(h->name, h->name + h->name_len, " ("));
}

/* Does the first write of this name count (ffn_out-N)? */
static bool first_write_wins(const header *h)
{
	for (size_t i = 0; i < sizeof first_write_names / sizeof *first_write_names; i++) {
		size_t n = strlen(first_write_names[i]), k = n;
		if (h->name_len <= n || memcmp(h->name, first_write_names[i], n))
			continue;
		while (k < h->name_len && is_digit(h->name[k]))
			k++;
		if (k == h->name_len)
			return true;
	}
	return false;
}

static bool same_name(const record *a, const record *b)
{
	return a->h.name_len == b->h.name_len && !memcmp(a->h.name, b->h.name, a->h.name_len);
}

/* Is r an intermediate whose finished tensor the dump holds too? */
static bool is_superseded(const parse *ps, const record *r)
{
	for (size_t i = 0; i < sizeof superseded / sizeof *superseded; i++) {
		if (!equals(r->h.name, r->h.name + r->h.name_len, superseded[i].name))
			continue;
		for (size_t k = 0; k < ps->n_rec; k++)
			if (equals(ps->rec[k].h.name, ps->rec[k].h.name + ps->rec[k].h.name_len, superseded[i].finished))
				return true;
	}
	return false;
}

static int cmp_record(const void *a, const void *b)
{
	const record *x = *(record *const *)a, *y = *(record *const *)b;
	size_t n = x->h.name_len < y->h.name_len ? x->h.name_len : y->h.name_len;
	int c = memcmp(x->h.name, y->h.name, n);

	if (c)
		return c;
	if (x->h.name_len != y->h.name_len)
		return x->h.name_len < y->h.name_len ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Keep r in ps (which takes its buffers). */
static int keep_record(parse *ps, record *r, tb_err *err)
{
	if (ps->n_rec == ps->cap_rec) {
		size_t cap = ps->cap_rec ? ps->cap_rec * 2 : 64;
		record *v = realloc(ps->rec, cap * sizeof *v);
		if (!v)
			return tb_err_setc(err, TB_ERR_NOMEM, ps->c.path, "out of memory");
		ps->rec = v;
		ps->cap_rec = cap;
	}
	ps->rec[ps->n_rec++] = *r;
	r->v = NULL;
	r->ix = NULL;
	return 0;
}

/* One header and what follows it. */
static int parse_tensor(parse *ps, const header *h, tb_err *err)
{
	uint64_t numel = 1;
	record r = {.h = *h, .line = ps->c.lineno, .seq = ps->n_rec};
	int rc;

	ps->any_header = true;
	if (!in_list(h->type, h->type_len, printed_types, sizeof printed_types / sizeof *printed_types)) {
		if (!skipped_name(h) && !ps->quantized++)
			snprintf(ps->first_quantized, sizeof ps->first_quantized, "%.*s (%.*s)",
				 (int)(h->name_len < 40 ? h->name_len : 40), h->name, (int)(h->type_len < 16 ? h->type_len : 16),
				 h->type);
		return 0;
	}
	for (int d = 0; d < 4 && !r.h.ne_overflow; d++)
		r.h.ne_overflow = __builtin_mul_overflow(numel, (uint64_t)h->ne[d], &numel);
	if (r.h.ne_overflow || numel > INT64_MAX / sizeof(float))
		return name_error(ps, &r, err, "its shape {ne0, ne1, ne2, ne3} overflows");
	rc = parse_values(ps, &r, err);
	if (rc == 0 && !skipped_name(h))
		rc = keep_record(ps, &r, err);
	free(r.v);
	free(r.ix);
	return rc;
}

/* The tree tensor of a dump: the printed values, 1-D with a tb_partial,
 * or the whole tensor when nothing was elided. */
static int add_record(tb_builder *b, const tb_file *f, const char *prefix, record *r, tb_err *err)
{
	char name[TB_MAX_NAME + 1];
	int64_t whole[4] = {r->h.ne[3], r->h.ne[2], r->h.ne[1], r->h.ne[0]};
	uint64_t numel = (uint64_t)whole[0] * (uint64_t)whole[1] * (uint64_t)whole[2] * (uint64_t)whole[3];
	int64_t n = (int64_t)r->n;
	tb_tensor *t;
	tb_blob *blob;

	if (r->h.name_len > TB_MAX_NAME)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "line %zu: tensor name longer than %d bytes", r->line,
				   TB_MAX_NAME);
	memcpy(name, r->h.name, r->h.name_len);
	name[r->h.name_len] = '\0';
	t = tb_builder_add(b, f->path, prefix, name, err);
	blob = t ? tb_builder_blob(b, err) : NULL;
	if (!blob)
		return -1;
	t->dtype = TB_DT_F32;
	if (r->n == numel) {
		if (tb_tensor_set_shape(t, 4, whole, f->path, err) < 0)
			return -1;
	} else {
		tb_partial *pa = tb_builder_alloc(b, sizeof *pa);
		uint64_t *ix = tb_builder_alloc(b, (size_t)r->n * sizeof *ix);
		if (!pa || !ix)
			return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		memcpy(ix, r->ix, (size_t)r->n * sizeof *ix);
		pa->ndim = 4;
		memcpy(pa->shape, whole, sizeof whole);
		pa->n = r->n;
		pa->index = ix;
		pa->sum = r->sum;
		pa->has_sum = r->has_sum;
		t->partial = pa;
		if (tb_tensor_set_shape(t, 1, &n, f->path, err) < 0)
			return -1;
	}
	/* The blob takes the values (a 1-byte buffer when there are none). */
	if (!r->v && !(r->v = malloc(1)))
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	tb_blob_set_owned(blob, (unsigned char *)r->v, r->n * sizeof(float));
	r->v = NULL;
	t->blob = blob;
	return tb_tensor_check_bounds(t, f->path, err);
}

/* Add the dump that counts for each name: the last write, or the first
 * for first_write_names. */
static int add_records(tb_builder *b, const tb_file *f, const char *prefix, parse *ps, tb_err *err)
{
	record **order = malloc((ps->n_rec ? ps->n_rec : 1) * sizeof *order);
	int rc = 0;

	if (!order)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	for (size_t i = 0; i < ps->n_rec; i++)
		order[i] = &ps->rec[i];
	qsort(order, ps->n_rec, sizeof *order, cmp_record);
	for (size_t i = 0; i < ps->n_rec && rc == 0; i++) {
		size_t j = i;
		while (j + 1 < ps->n_rec && same_name(order[j + 1], order[i]))
			j++;
		if (!is_superseded(ps, order[i]))
			rc = add_record(b, f, prefix, first_write_wins(&order[i]->h) ? order[i] : order[j], err);
		i = j;
	}
	free(order);
	return rc;
}

static void free_parse(parse *ps)
{
	for (size_t i = 0; i < ps->n_rec; i++) {
		free(ps->rec[i].v);
		free(ps->rec[i].ix);
	}
	free(ps->rec);
}

static int ggml_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	/* An empty file is mapped as no data at all. */
	const char *data = f->size ? (const char *)f->data : "";
	parse ps = {.c = {.p = data, .end = data + f->size, .path = f->path}};
	header h;
	int rc = 0;

	(void)stem;
	while (rc == 0 && next_line(&ps.c))
		if (parse_header(ps.c.line, ps.c.le, false, &h) == HDR_YES)
			rc = parse_tensor(&ps, &h, err);
	/* A log or text file with no dump is skipped as any file no reader claims. */
	if (rc == 0 && !ps.any_header)
		tb_builder_note(b, "skipped %s: not a tensor file", f->path);
	if (rc == 0 && ps.quantized)
		tb_builder_note(b, "skipped %zu quantized tensor%s of %s, %s%s: llama.cpp prints their header only",
				ps.quantized, ps.quantized == 1 ? "" : "s", f->path, ps.first_quantized,
				ps.quantized > 1 ? " and others" : "");
	if (rc == 0)
		rc = add_records(b, f, prefix, &ps, err);
	free_parse(&ps);
	return rc;
}

const tb_format tb_fmt_ggmltext = {
	.name = "llama.cpp text dump",
	.suffixes = ggml_suffixes,
	.sniff = ggml_sniff,
	.index = ggml_index,
};
