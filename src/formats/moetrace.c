/*
 * moetrace: llama.cpp's MoE routing trace, the CSV llama-moe-trace writes
 * (examples/moe-trace, ggml-org/llama.cpp pull request 28544, open, in the
 * layout of the fork that adds each row's token and rank; tbisect-dumps(5)
 * FORMATS): the header line
 * "phase,token,layer,rank,expert", then one row per routed expert: phase
 * "prefill" or "decode", token the zero-based position in the one
 * sequence, layer the MoE layer, rank the expert's place in that token's
 * top-k, expert its id, all read from the graph's ffn_moe_topk-N.  Each
 * layer becomes the int32 tensor layers.N.mlp.topk_ids [tokens, k] (k: the
 * ranks the file holds), a partial dump of the tokens it traced when it
 * lacks some (llama.cpp's last layer computes the last prompt token only).
 * The pull request's first version wrote "layer,expert" rows with no
 * token or rank: no position can be told from them, and no reader claims
 * them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"

static const char header[] = "phase,token,layer,rank,expert";

/* Bounds of a row's numbers: past them a file is refused, not read. */
#define MAX_TOKEN (1L << 30)
#define MAX_LAYER 1000000L
#define MAX_RANK 4096L
#define MAX_EXPERT (1L << 24)

static const char *const trace_suffixes[] = {NULL};

static bool trace_sniff(const unsigned char *head, size_t n)
{
	size_t h = sizeof header - 1;

	return n > h && !memcmp(head, header, h) && (head[h] == '\n' || head[h] == '\r');
}

typedef struct row {
	int32_t token, layer, rank, expert;
	uint64_t line;
} row;

/* One field of a row: a number in [0, max], followed by sep. */
static bool field(const char **p, const char *end, char sep, long max, int32_t *out)
{
	const char *s = *p;
	long v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	while (s < end && *s >= '0' && *s <= '9') {
		v = v * 10 + (*s++ - '0');
		if (v > max)
			return false;
	}
	if (sep ? s >= end || *s != sep : s != end)
		return false;
	*p = s + (sep != 0);
	*out = (int32_t)v;
	return true;
}

/* The rows of the file, after its header; -1 and err on a bad row. */
static int parse(const tb_file *f, row **out, size_t *n_out, tb_err *err)
{
	const char *p = (const char *)f->data, *end = p + f->size;
	row *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t line = 1;

	p += sizeof header - 1;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *stop = eol ? eol : end;
		const char *e = stop > p && stop[-1] == '\r' ? stop - 1 : stop;
		row r = {.line = line};
		if (line++ == 1 || e == p) { /* the header's end; a blank line */
			p = eol ? eol + 1 : end;
			continue;
		}
		const char *comma = memchr(p, ',', (size_t)(e - p)), *q = comma ? comma + 1 : e;
		size_t ph = comma ? (size_t)(comma - p) : 0;
		if (!((ph == 7 && !memcmp(p, "prefill", 7)) || (ph == 6 && !memcmp(p, "decode", 6))) ||
		    !field(&q, e, ',', MAX_TOKEN, &r.token) || !field(&q, e, ',', MAX_LAYER, &r.layer) ||
		    !field(&q, e, ',', MAX_RANK, &r.rank) || !field(&q, e, 0, MAX_EXPERT, &r.expert)) {
			free(v);
			return tb_err_setc(err, TB_ERR_FORMAT, f->path,
					   "line %llu: not prefill|decode,token,layer,rank,expert with numbers in range",
					   (unsigned long long)r.line);
		}
		if (n == cap) {
			row *w = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof *v);
			if (!w) {
				free(v);
				return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
			}
			v = w;
		}
		v[n++] = r;
		p = eol ? eol + 1 : end;
	}
	*out = v;
	*n_out = n;
	return 0;
}

static int cmp_row(const void *a, const void *b)
{
	const row *x = a, *y = b;

	if (x->layer != y->layer)
		return (x->layer > y->layer) - (x->layer < y->layer);
	if (x->token != y->token)
		return (x->token > y->token) - (x->token < y->token);
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Layer rows v[0..n) (sorted, every token's ranks 0..k-1 checked) as
 * layers.L.mlp.topk_ids: whole when it traced every token, else partial. */
static int add_layer(tb_builder *b, const tb_file *f, const char *prefix, const row *v, size_t n, int64_t tokens,
		     int64_t k, tb_err *err)
{
	int64_t whole[2] = {tokens, k}, traced = (int64_t)n / k;
	int32_t *ids = malloc(n * sizeof *ids);
	char name[64];
	tb_tensor *t;
	tb_blob *blob;

	if (!ids)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	for (size_t i = 0; i < n; i++)
		ids[i] = v[i].expert;
	snprintf(name, sizeof name, "layers.%d.mlp.topk_ids", (int)v[0].layer);
	t = tb_builder_add(b, f->path, prefix, name, err);
	blob = t ? tb_builder_blob(b, err) : NULL;
	if (!blob) {
		free(ids);
		return -1;
	}
	tb_blob_set_owned(blob, (unsigned char *)ids, n * sizeof *ids);
	t->blob = blob;
	t->dtype = TB_DT_I32;
	if (traced < tokens) {
		tb_partial *pa = tb_builder_alloc(b, sizeof *pa);
		uint64_t *ix = tb_builder_alloc(b, n * sizeof *ix);
		if (!pa || !ix)
			return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		for (size_t i = 0; i < n; i++)
			ix[i] = (uint64_t)v[i].token * (uint64_t)k + (uint64_t)v[i].rank;
		pa->ndim = 2;
		memcpy(pa->shape, whole, sizeof whole);
		pa->n = n;
		pa->index = ix;
		t->partial = pa;
		whole[0] = (int64_t)n;
		if (tb_tensor_set_shape(t, 1, whole, f->path, err) < 0)
			return -1;
	} else if (tb_tensor_set_shape(t, 2, whole, f->path, err) < 0) {
		return -1;
	}
	return tb_tensor_check_bounds(t, f->path, err);
}

static int trace_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	row *v = NULL;
	size_t n = 0, start = 0;
	int64_t tokens = 0, k = 0;
	int rc = 0;

	(void)stem;
	if (parse(f, &v, &n, err) < 0)
		return -1;
	if (!n) {
		free(v);
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "a routing trace with no row");
	}
	for (size_t i = 0; i < n; i++) {
		tokens = v[i].token >= tokens ? v[i].token + 1 : tokens;
		k = v[i].rank >= k ? v[i].rank + 1 : k;
	}
	qsort(v, n, sizeof *v, cmp_row);
	/* every traced token of a layer holds ranks 0..k-1, once each */
	for (size_t i = 0; i < n && !rc; i++) {
		bool first = i == start || v[i].token != v[i - 1].token;
		if (v[i].rank != (first ? 0 : v[i - 1].rank + 1) || (first && i > start && v[i - 1].rank != k - 1))
			rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "line %llu: token %d of layer %d: rank %d, but the ranks of a token are 0 to %lld once each",
					 (unsigned long long)v[i].line, (int)v[i].token, (int)v[i].layer, (int)v[i].rank, (long long)k - 1);
		else if (i + 1 == n || v[i + 1].layer != v[i].layer) {
			if (v[i].rank != k - 1)
				rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "line %llu: token %d of layer %d has %d ranks of %lld",
						 (unsigned long long)v[i].line, (int)v[i].token, (int)v[i].layer, (int)v[i].rank + 1,
						 (long long)k);
			else
				rc = add_layer(b, f, prefix, v + start, i + 1 - start, tokens, k, err);
			start = i + 1;
		}
	}
	free(v);
	return rc;
}

const tb_format tb_fmt_moetrace = {
	.name = "MoE routing trace",
	.label = ".csv (llama.cpp moe-trace)",
	.suffixes = trace_suffixes,
	.sniff = trace_sniff,
	.index = trace_index,
};
