/*
 * ggmltext: llama.cpp's tensor dumps as text, as llama-eval-callback and
 * llama-debug print every node of the graph they compute (common/debug.cpp,
 * and before it examples/eval-callback), usually captured with the
 * program's logs around them.  Each node is a header line
 *
 *     common_debug_cb_eval:   attn_norm-0 = (f32)   MUL(norm-0{8, 4, 1, 1}, blk.0.attn_norm.weight{8, 1, 1, 1}}) = {8, 4, 1, 1}
 *
 * ("ggml_debug:" in the 2024 tree), then its values nested by ne3, ne2
 * and ne1, a row of ne0 values per line, printed "%12.4f".  An axis longer
 * than six shows its first and last three entries around a "...": the
 * tensor read holds the printed values only, 1-D, with a tb_partial saying
 * where in the whole tensor they sit (ne0 is the fastest axis: the whole
 * shape is [ne3, ne2, ne1, ne0]).  A tensor printed in full is an ordinary
 * tensor of that shape.  Quantized tensors print their header only.
 *
 * What a node is comes from its op and operands (ggmlgraph.h), which each
 * tensor carries as its role; a node that computes no tap is a graph
 * internal.  A capture may hold several forward passes: llama-debug's
 * warmup decode is left out with a note, and the passes after it are
 * steps (step_K. before the names).  The prompt's token ids are read where
 * the program lists them.  A capture that ends before the logits with
 * nothing after its last node lost its end (llama.cpp of 2026 logs from a
 * thread of its own, which the exit does not wait for): refused, as are
 * two runs in one file, a model that failed to load, and an operand that
 * names no weight llama.cpp has.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggmlgraph.h"
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

/* Log lines (after the common log's prefix) that open a run of a
 * llama.cpp program: a second one after a tensor is a second run. */
static const char *const run_starts[] = {"build: ", "llama_model_loader: loaded meta data",
					 "common_init_result: fitting params"};

/* A log line that says the next forward pass is the warmup decode
 * (common_init_from_params, common/common.cpp). */
static const char warmup_mark[] = "warming up the model";

/* Log lines that say the model never ran, the most telling first. */
static const char *const load_failures[] = {"error loading model", "failed to load model", "failed to init"};

/* What lists the prompt's token ids: eval-callback's count, then one id
 * per line; llama-debug's count, then one line of "piece(id)". */
static const char ids_per_line[] = "number of input tokens = ";
static const char ids_in_line[] = "Token ids (";

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
	tb_span op, src[2]; /* the op and its operands' names (n == 0: none) */
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

/* An operand "NAME{a, b, c, d}" at the start of [p, end): its name into
 * *src; the end of its dims, or NULL. */
static const char *parse_operand(const char *p, const char *end, tb_span *src)
{
	for (const char *q = p; q < end; q++) {
		const char *close;
		header dims = {0};
		if (*q != '{')
			continue;
		close = memchr(q, '}', (size_t)(end - q));
		if (close && parse_ne(q + 1, close, &dims)) {
			src->p = p;
			src->n = (size_t)(q - p);
			return close + 1;
		}
	}
	return NULL;
}

/* "OP(SRC0{ne}, SRC1{ne}})" or "OP(SRC0{ne}, })" in [p, end) into h (left
 * empty when it reads otherwise: the node then computes no known tap). */
static void parse_op(const char *p, const char *end, header *h)
{
	const char *open = memchr(p, '(', (size_t)(end - p)), *q;
	header got = *h;

	if (!open)
		return;
	while (p < open && is_space(*p))
		p++;
	got.op.p = p;
	got.op.n = (size_t)(open - p);
	q = parse_operand(open + 1, end, &got.src[0]);
	if (!q || end - q < 2 || q[0] != ',' || q[1] != ' ')
		return;
	q += 2;
	if (!(q < end && *q == '}') && !parse_operand(q, end, &got.src[1]))
		return;
	*h = got;
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
	if (!parse_ne(shape + 4, end - 1, h))
		return HDR_NO;
	parse_op(close + 1, shape - 1, h);
	return HDR_YES;
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

/* One node's dump: its header and the values printed. */
typedef struct record {
	header h;
	size_t line;      /* of the header */
	bool printed;     /* its type prints values (quantized ones print the header only) */
	float *v;         /* malloc'd */
	uint64_t *ix;     /* flat indices of v, malloc'd */
	uint64_t n, cap;
} record;

/* What one file's parse keeps. */
typedef struct parse {
	cursor c;
	record *rec;      /* every node, in the file's order, malloc'd */
	size_t n_rec, cap_rec;
	uint64_t values;  /* in all, against MAX_VALUES */
	size_t quantized; /* headers without values */
	char first_quantized[64];
	bool warmup;      /* the log announced a warmup decode before the first node */
	bool ended;       /* the program printed on after the last node */
	size_t last_line; /* of the last node's values */
	size_t failed_line, failed_rank; /* the log line that says the model did not load */
	char failed[200];
	int64_t *tokens;  /* the prompt's ids, as the program listed them, malloc'd */
	size_t n_tokens;
} parse;

/* [p, end) for an error message: at most QUOTE_MAX bytes, control
 * characters as '?', so the message stays one line. */
static void quote(const char *p, const char *end, char *buf, size_t size)
{
	size_t n = 0;

	for (; p < end && n + 4 < size && n < QUOTE_MAX; p++)
		buf[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
	if (p < end && n + 4 <= size) {
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
	return tb_err_setc(err, TB_ERR_FORMAT, ps->c.path, "line %zu: %s in the dump of '%.*s' (line %zu)", ps->c.lineno, what,
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

/* An optional "sum = X" (and a "sum_sq = X") after a block of ne3: checked
 * as numbers, not kept (the 2024 printer sums the printed values only,
 * the 2026 one all of them). */
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
static bool view_name(const header *h)
{
	return h->name_len == 0 || (h->name[h->name_len - 1] == ')' && find(h->name, h->name + h->name_len, " ("));
}

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
	record r = {.h = *h, .line = ps->c.lineno};
	int rc = 0;

	r.printed = in_list(h->type, h->type_len, printed_types, sizeof printed_types / sizeof *printed_types);
	if (!r.printed) {
		if (!view_name(h) && !ps->quantized++)
			snprintf(ps->first_quantized, sizeof ps->first_quantized, "%.*s (%.*s)",
				 (int)(h->name_len < 40 ? h->name_len : 40), h->name, (int)(h->type_len < 16 ? h->type_len : 16),
				 h->type);
	} else {
		for (int d = 0; d < 4 && !r.h.ne_overflow; d++)
			r.h.ne_overflow = __builtin_mul_overflow(numel, (uint64_t)h->ne[d], &numel);
		if (r.h.ne_overflow || numel > INT64_MAX / sizeof(float))
			return name_error(ps, &r, err, "its shape {ne0, ne1, ne2, ne3} overflows");
		rc = parse_values(ps, &r, err);
	}
	if (rc == 0)
		rc = keep_record(ps, &r, err);
	free(r.v);
	free(r.ix);
	ps->last_line = ps->c.lineno;
	ps->ended = false;
	return rc;
}

/* Does the line (after the log prefix) start with one of list? */
static bool starts_any(const char *p, const char *end, const char *const *list, size_t count)
{
	p = skip_log_prefix(p, end);
	for (size_t i = 0; i < count; i++)
		if ((size_t)(end - p) >= strlen(list[i]) && !memcmp(p, list[i], strlen(list[i])))
			return true;
	return false;
}

/* Parse a non-negative integer at the start of [p, end); its end, or NULL. */
static const char *parse_count(const char *p, const char *end, int64_t *v)
{
	const char *q = p;

	*v = 0;
	for (; q < end && is_digit(*q) && *v < INT64_MAX / 10 - 9; q++)
		*v = *v * 10 + (*q - '0');
	return q > p ? q : NULL;
}

/* The ids of a token list that starts at the current line (the count line),
 * if it is one of the layouts the programs print. */
static void read_tokens(parse *ps)
{
	const char *p = skip_log_prefix(ps->c.line, ps->c.le), *at;
	int64_t n, id;
	bool per_line;

	if ((at = find(p, ps->c.le, ids_per_line)) != NULL)
		per_line = true;
	else if ((at = find(p, ps->c.le, ids_in_line)) != NULL)
		per_line = false;
	else
		return;
	at += per_line ? sizeof ids_per_line - 1 : sizeof ids_in_line - 1;
	if (!parse_count(at, ps->c.le, &n) || n <= 0 || n > (1 << 24))
		return;
	int64_t *ids = malloc((size_t)n * sizeof *ids);
	size_t got = 0;
	cursor c = ps->c;
	if (!ids)
		return;
	if (per_line) {
		/* "  1" per line, each after the log's prefix */
		while (got < (size_t)n && next_line(&c)) {
			const char *q = skip_log_prefix(c.line, c.le), *e = c.le;
			trim(&q, &e);
			if (parse_count(q, e, &id) != e)
				break;
			ids[got++] = id;
		}
	} else if (next_line(&c)) {
		/* "<s>(1) h(107) ...": an id in parentheses, then a space or the end */
		for (const char *q = c.line; q < c.le && got < (size_t)n; q++) {
			const char *e;
			if (*q != '(' || !(e = parse_count(q + 1, c.le, &id)) || e >= c.le || *e != ')' ||
			    (e + 1 < c.le && e[1] != ' '))
				continue;
			ids[got++] = id;
			q = e;
		}
	}
	if (got != (size_t)n) {
		free(ids);
		return;
	}
	free(ps->tokens);
	ps->tokens = ids;
	ps->n_tokens = got;
}

/* A log line between the nodes: what it says of the run. */
static int log_line(parse *ps, tb_err *err)
{
	const char *p = ps->c.line, *end = ps->c.le;

	trim(&p, &end);
	if (p == end)
		return 0;
	if (ps->n_rec && starts_any(ps->c.line, ps->c.le, run_starts, sizeof run_starts / sizeof *run_starts)) {
		char q[QUOTE_MAX + 4];
		quote(skip_log_prefix(p, end), end, q, sizeof q);
		return tb_err_setc(err, TB_ERR_FORMAT, ps->c.path,
				  "line %zu: another run of llama.cpp starts here ('%s') after the tensors of the first "
				  "(line %zu on): capture one run per file",
				  ps->c.lineno, q, ps->rec[0].line);
	}
	if (!ps->n_rec && find(p, end, warmup_mark))
		ps->warmup = true;
	for (size_t k = 0; k < sizeof load_failures / sizeof *load_failures; k++) {
		if (find(p, end, load_failures[k]) && (!ps->failed_line || k < ps->failed_rank)) {
			p = skip_log_prefix(p, end);
			ps->failed_line = ps->c.lineno;
			ps->failed_rank = k;
			snprintf(ps->failed, sizeof ps->failed, "%.*s", (int)((size_t)(end - p) < 190 ? end - p : 190), p);
		}
	}
	read_tokens(ps);
	ps->ended = ps->n_rec > 0;
	return 0;
}

/* The nodes of a pass, [*first, *last), of the records (as classified). */
static void pass_span(const tb_ggml_node *nodes, size_t n, int pass, size_t *first, size_t *last)
{
	size_t i = 0;

	while (i < n && nodes[i].pass < pass)
		i++;
	*first = i;
	while (i < n && nodes[i].pass == pass)
		i++;
	*last = i;
}

/* A node's canonical name ("layers.0.attn", "logits"), or "" for a graph internal. */
static const char *role_of(tb_builder *b, const tb_ggml_node *n)
{
	char buf[64];

	if (!n->tap || n->carried)
		return "";
	if (n->layer >= 0)
		snprintf(buf, sizeof buf, "layers.%d.%s", n->layer, n->tap);
	else
		snprintf(buf, sizeof buf, "%s", n->tap);
	return tb_builder_keep(b, buf, strlen(buf));
}

/* The tree tensor of a dump under name: the printed values, 1-D with a
 * tb_partial, or the whole tensor when nothing was elided and it holds
 * every position of its pass (one_position: it holds the last one only,
 * a partial dump of all its values, read at the other side's last). */
static int add_record(tb_builder *b, const tb_file *f, const char *name, record *r, const tb_ggml_node *node,
		      int qk_head_dim, bool one_position, tb_err *err)
{
	int64_t whole[4] = {r->h.ne[3], r->h.ne[2], r->h.ne[1], r->h.ne[0]};
	uint64_t numel = (uint64_t)whole[0] * (uint64_t)whole[1] * (uint64_t)whole[2] * (uint64_t)whole[3];
	int64_t n = (int64_t)r->n;
	char origin[256];
	tb_tensor *t;
	tb_blob *blob;

	t = tb_builder_add(b, f->path, "", name, err);
	blob = t ? tb_builder_blob(b, err) : NULL;
	if (!blob)
		return -1;
	t->dtype = TB_DT_F32;
	t->gguf_qk_head_dim = qk_head_dim;
	t->role = role_of(b, node);
	snprintf(origin, sizeof origin, "%.*s(%.*s%s%.*s)", (int)r->h.op.n, r->h.op.p, (int)r->h.src[0].n,
		 r->h.src[0].p, r->h.src[1].n ? ", " : "", (int)r->h.src[1].n, r->h.src[1].p);
	t->origin = tb_builder_keep(b, origin, strlen(origin));
	t->stored_as = tb_builder_keep(b, r->h.type, r->h.type_len);
	if (!t->role || !t->origin || !t->stored_as)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	if (r->n == numel && !one_position) {
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

/* Is tap a query's ('q') or a key's ('k'), before or after RoPE? */
static char qk_kind(const char *tap)
{
	if (!tap)
		return 0;
	if (!strcmp(tap, "attn.q") || !strcmp(tap, "attn.q_rope"))
		return 'q';
	if (!strcmp(tap, "attn.k") || !strcmp(tap, "attn.k_rope"))
		return 'k';
	return 0;
}

/* The channels per head of node i's query or key (0: not one, or no
 * node of its pass says): ne0 of its RoPE, or of the reshape to heads
 * that RoPE reads. */
static int head_dim(const tb_ggml_node *nodes, const parse *ps, size_t first, size_t end, size_t i)
{
	char kind = qk_kind(nodes[i].tap);

	for (size_t j = first; kind && j < end; j++) {
		const tb_ggml_node *n = &nodes[j];
		bool shaped = n->carried ? equals(n->op.p, n->op.p + n->op.n, "RESHAPE")
					 : equals(n->op.p, n->op.p + n->op.n, "ROPE");
		if (shaped && n->layer == nodes[i].layer && qk_kind(n->tap) == kind && ps->rec[j].h.ne[0] <= INT32_MAX)
			return (int)ps->rec[j].h.ne[0];
	}
	return 0;
}

/* Does node i, a tap of a pass of several positions, hold the last one
 * only?  llama.cpp computes its last layer from the stream after
 * attention (ffn_inp) on for the last token only: so does a tap of a layer
 * whose ffn_inp has one row. */
static bool last_position_only(const tb_ggml_node *nodes, const parse *ps, size_t first, size_t end, size_t i)
{
	int64_t positions = 0;

	for (size_t j = first; j < end && !positions; j++)
		if (tb_ggml_is_embed(&nodes[j]))
			positions = ps->rec[j].h.ne[1];
	for (size_t j = first; positions > 1 && nodes[i].layer >= 0 && j < i; j++)
		if (nodes[j].tap && !nodes[j].carried && nodes[j].layer == nodes[i].layer &&
		    !strcmp(nodes[j].tap, "attn.resid"))
			return ps->rec[j].h.ne[1] == 1;
	return false;
}

/* Is node i the last write of its tap in its pass (when it computes one),
 * or of its name (when it is a graph internal)? */
static bool last_write(const tb_ggml_node *nodes, size_t i, size_t end)
{
	const tb_ggml_node *n = &nodes[i];
	bool tap = n->tap && !n->carried;

	for (size_t j = i + 1; j < end; j++) {
		const tb_ggml_node *m = &nodes[j];
		if (tap ? m->tap && !m->carried && m->layer == n->layer && !strcmp(m->tap, n->tap)
			: tb_span_eq(m->name, n->name))
			return false;
	}
	return true;
}

/* The name a kept node gets in its pass: its own, or, when a node kept
 * before it has that name (Qcur-0 is the query before RoPE and after it),
 * its name and op, "Qcur-0 (ROPE)".  0, or -1 when a graph internal's
 * name is already a tap's. */
static int node_name(const tb_ggml_node *nodes, const bool *kept, size_t first, size_t i, const char *prefix,
		     char *buf, size_t size)
{
	const tb_ggml_node *n = &nodes[i];
	bool taken = false;

	for (size_t j = first; j < i && !taken; j++)
		taken = kept[j] && tb_span_eq(nodes[j].name, n->name);
	if (taken && !(n->tap && !n->carried))
		return -1;
	if (taken)
		snprintf(buf, size, "%s%.*s (%.*s)", prefix, (int)n->name.n, n->name.p, (int)n->op.n, n->op.p);
	else
		snprintf(buf, size, "%s%.*s", prefix, (int)n->name.n, n->name.p);
	return 0;
}

/* Add the nodes of passes [first_pass, n_passes) that count: each tap's
 * last write, and each graph internal's last write under its name (views
 * of other nodes and quantized headers aside). */
static int add_passes(tb_builder *b, const tb_file *f, parse *ps, const tb_ggml_node *nodes, int first_pass,
		      int n_passes, tb_err *err)
{
	bool *kept = calloc(ps->n_rec ? ps->n_rec : 1, sizeof *kept);
	int rc = 0;

	if (!kept)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	for (int pass = first_pass; pass < n_passes && rc == 0; pass++) {
		size_t first, end;
		char prefix[32] = "";
		pass_span(nodes, ps->n_rec, pass, &first, &end);
		if (n_passes - first_pass > 1)
			snprintf(prefix, sizeof prefix, "step_%d.", pass - first_pass);
		/* the taps first, so that an internal never takes a tap's name */
		for (int taps = 1; taps >= 0 && rc == 0; taps--) {
			for (size_t i = first; i < end && rc == 0; i++) {
				const tb_ggml_node *n = &nodes[i];
				char name[TB_MAX_NAME + 1];
				bool is_tap = n->tap && !n->carried;
				if (is_tap != (bool)taps || !ps->rec[i].printed || !last_write(nodes, i, end) ||
				    (!is_tap && view_name(&ps->rec[i].h)))
					continue;
				if (n->name.n + 64 > TB_MAX_NAME) {
					rc = tb_err_setc(err, TB_ERR_LIMIT, f->path, "line %zu: tensor name longer than %d bytes",
							 ps->rec[i].line, TB_MAX_NAME - 64);
					break;
				}
				if (node_name(nodes, kept, first, i, prefix, name, sizeof name) < 0)
					continue;
				kept[i] = true;
				rc = add_record(b, f, name, &ps->rec[i], n, is_tap ? head_dim(nodes, ps, first, end, i) : 0,
						is_tap && last_position_only(nodes, ps, first, end, i), err);
			}
		}
	}
	free(kept);
	return rc;
}

static void free_parse(parse *ps)
{
	for (size_t i = 0; i < ps->n_rec; i++) {
		free(ps->rec[i].v);
		free(ps->rec[i].ix);
	}
	free(ps->rec);
	free(ps->tokens);
}

/* "L1.attn_norm" or "final_norm" for a message; "" for a graph internal. */
static void cell_text(const tb_ggml_node *n, char *buf, size_t size)
{
	if (!n->tap)
		snprintf(buf, size, "%s", "");
	else if (n->layer >= 0)
		snprintf(buf, size, " (L%d.%s)", n->layer, n->tap);
	else
		snprintf(buf, size, " (%s)", n->tap);
}

/* What the whole capture says, once its nodes are classified: a refusal
 * (-1) or the passes to keep. */
static int check_capture(const tb_file *f, parse *ps, const tb_ggml_node *nodes, tb_builder *b, int *first_pass,
			 int *n_passes, tb_err *err)
{
	size_t first, end;
	bool embed = false, logits = false;
	char cell[96];

	for (size_t i = 0; i < ps->n_rec; i++) {
		tb_span w = tb_ggml_unknown_weight(&nodes[i]);
		if (w.n)
			return tb_err_setc(err, TB_ERR_FORMAT, f->path,
					  "line %zu: '%.*s' %.*s's operand '%.*s' is no weight llama.cpp's GGUF files name "
					  "(gguf-py's TENSOR_NAMES): the node's cell is unknown",
					  ps->rec[i].line, (int)(nodes[i].name.n < 64 ? nodes[i].name.n : 64), nodes[i].name.p,
					  (int)nodes[i].op.n, nodes[i].op.p, (int)(w.n < 96 ? w.n : 96), w.p);
	}
	*n_passes = nodes[ps->n_rec - 1].pass + 1;
	*first_pass = 0;
	if (ps->warmup && *n_passes > 1) {
		pass_span(nodes, ps->n_rec, 0, &first, &end);
		tb_builder_note(b,
				"left out the warmup decode of %s (lines %zu-%zu): llama.cpp runs it before the prompt "
				"(--no-warmup leaves it out)",
				f->path, ps->rec[first].line, ps->rec[end].line - 1);
		*first_pass = 1;
	}
	pass_span(nodes, ps->n_rec, *n_passes - 1, &first, &end);
	for (size_t i = first; i < end; i++) {
		embed |= tb_ggml_is_embed(&nodes[i]);
		logits |= tb_ggml_is_logits(nodes[i].tap) && !nodes[i].carried;
	}
	if (embed && !logits && !ps->ended) {
		const tb_ggml_node *last = &nodes[ps->n_rec - 1], *tap = NULL;
		char was[160] = "";
		for (size_t i = end; i-- > first && !tap;)
			if (nodes[i].tap && !nodes[i].carried)
				tap = &nodes[i];
		cell_text(last, cell, sizeof cell);
		if (tap && tap != last) {
			char tc[96];
			cell_text(tap, tc, sizeof tc);
			snprintf(was, sizeof was, "; the last cell it printed is '%.*s'%s",
				 (int)(tap->name.n < 64 ? tap->name.n : 64), tap->name.p, tc);
		}
		return tb_err_setc(err, TB_ERR_FORMAT, f->path,
				  "line %zu: the capture ends after '%.*s'%s, before the logits, with nothing after it%s: "
				  "the cells after it were never printed (llama.cpp writes its log from a thread of its own "
				  "and can lose the end when it exits): capture it again",
				  ps->last_line, (int)(last->name.n < 64 ? last->name.n : 64), last->name.p, cell, was);
	}
	return 0;
}

static int ggml_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	/* An empty file is mapped as no data at all. */
	const char *data = f->size ? (const char *)f->data : "";
	parse ps = {.c = {.p = data, .end = data + f->size, .path = f->path}};
	tb_ggml_node *nodes = NULL;
	int first_pass = 0, n_passes = 0;
	header h;
	int rc = 0;

	(void)stem;
	(void)prefix;
	while (rc == 0 && next_line(&ps.c))
		rc = parse_header(ps.c.line, ps.c.le, false, &h) == HDR_YES ? parse_tensor(&ps, &h, err)
									     : log_line(&ps, err);
	if (rc == 0 && !ps.n_rec) {
		if (ps.failed_line)
			rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "line %zu: llama.cpp did not run the model, so it printed no tensor: '%s'",
					ps.failed_line, ps.failed);
		else
			/* A log or text file with no dump is skipped as any file no reader claims. */
			tb_builder_note(b, "skipped %s: not a tensor file", f->path);
	}
	if (rc == 0 && ps.n_rec) {
		nodes = calloc(ps.n_rec, sizeof *nodes);
		if (!nodes)
			rc = tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		for (size_t i = 0; nodes && i < ps.n_rec; i++) {
			nodes[i].name = (tb_span){ps.rec[i].h.name, ps.rec[i].h.name_len};
			nodes[i].op = ps.rec[i].h.op;
			nodes[i].src[0] = ps.rec[i].h.src[0];
			nodes[i].src[1] = ps.rec[i].h.src[1];
		}
		if (nodes) {
			tb_ggml_classify(nodes, ps.n_rec);
			rc = check_capture(f, &ps, nodes, b, &first_pass, &n_passes, err);
		}
	}
	if (rc == 0 && ps.quantized)
		tb_builder_note(b, "skipped %zu quantized tensor%s of %s, %s%s: llama.cpp prints their header only",
				ps.quantized, ps.quantized == 1 ? "" : "s", f->path, ps.first_quantized,
				ps.quantized > 1 ? " and others" : "");
	if (rc == 0 && nodes)
		rc = add_passes(b, f, &ps, nodes, first_pass, n_passes, err);
	if (rc == 0 && ps.tokens) {
		tb_builder_set_tokens(b, ps.tokens, ps.n_tokens);
		ps.tokens = NULL;
	}
	free(nodes);
	free_parse(&ps);
	return rc;
}

/* A capture anywhere in a text file: a header line after any length of
 * log, or the log of a llama.cpp run that failed to load its model. */
static bool ggml_sniff_deep(const unsigned char *data, size_t n)
{
	const char *p = (const char *)data, *end = p + n;

	for (size_t k = 0; k < sizeof header_starts / sizeof *header_starts; k++) {
		const char *at = p;
		while ((at = memmem(at, (size_t)(end - at), header_starts[k], strlen(header_starts[k]))) != NULL) {
			const char *ls = at, *le = memchr(at, '\n', (size_t)(end - at));
			header h;
			while (ls > p && ls[-1] != '\n')
				ls--;
			if (!le)
				le = end;
			if (le > ls && le[-1] == '\r')
				le--;
			if (parse_header(ls, le, false, &h) == HDR_YES)
				return true;
			at += strlen(header_starts[k]);
		}
	}
	return memmem(p, n, "llama_model_load", 16) && memmem(p, n, load_failures[1], strlen(load_failures[1]));
}

const tb_format tb_fmt_ggmltext = {
	.name = "llama.cpp text dump",
	.label = ".txt, .log, any text (llama.cpp text dumps)",
	.suffixes = ggml_suffixes,
	.sniff = ggml_sniff,
	.sniff_deep = ggml_sniff_deep,
	.index = ggml_index,
};
