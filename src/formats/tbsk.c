#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/reader.h"
#include "formats/tbsk.h"

#define MAGIC "TBSKETCH"
#define MAGIC_LEN 8
#define MAX_K 4096u
#define MAX_KP 8u

/* The checksum of the file's bytes: FNV-1a over 64-bit words' bytes. */
static uint64_t checksum(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3u;
	return h;
}

#define CHECKSUM_INIT 0xcbf29ce484222325u

/* --- writing --- */

static int put(tb_tbsk_writer *w, const void *p, size_t n, tb_err *err)
{
	if (n && fwrite(p, 1, n, w->file.f) != n)
		return tb_err_setc(err, TB_ERR_IO, w->file.path, "cannot write the sketch");
	w->sum = checksum(w->sum, p, n);
	w->bytes += n;
	return 0;
}

/* Little-endian integers and doubles: the hosts tbisect builds on are
 * little-endian (configure checks), so these are the bytes in memory. */
#define PUT(w, v, err) put((w), &(v), sizeof(v), (err))

static int put_str(tb_tbsk_writer *w, const char *s, size_t max, int width, tb_err *err)
{
	size_t n = strlen(s);

	if (n > max)
		return tb_err_setc(err, TB_ERR_LIMIT, w->file.path, "name '%.64s...' too long for a sketch", s);
	if (width == 2) {
		uint16_t len = (uint16_t)n;
		if (PUT(w, len, err) < 0)
			return -1;
	} else {
		uint8_t len = (uint8_t)n;
		if (PUT(w, len, err) < 0)
			return -1;
	}
	return put(w, s, n, err);
}

int tb_tbsk_begin(tb_tbsk_writer *w, const char *path, uint64_t seed, uint32_t n_tensors, const tb_tbsk_tree *tree,
		  tb_err *err)
{
	uint32_t version = TB_SKETCH_VERSION;

	memset(w, 0, sizeof *w);
	w->sum = CHECKSUM_INIT;
	if (tb_atomic_open(&w->file, path, "the sketch file", 0, err) < 0)
		return -1;
	if (put(w, MAGIC, MAGIC_LEN, err) < 0 || PUT(w, version, err) < 0 || PUT(w, n_tensors, err) < 0 ||
	    PUT(w, seed, err) < 0 || PUT(w, tree->tie, err) < 0 || PUT(w, tree->n_tokens, err) < 0 ||
	    put(w, tree->tokens, (size_t)tree->n_tokens * sizeof *tree->tokens, err) < 0) {
		tb_tbsk_abort(w);
		return -1;
	}
	return 0;
}

int tb_tbsk_add(tb_tbsk_writer *w, const tb_tensor *t, const char *cell, const tb_sketch *s, tb_err *err)
{
	const tb_sketch_params *p = &s->p;
	uint8_t ndim = (uint8_t)t->ndim;

	if (put_str(w, t->name, UINT16_MAX, 2, err) < 0 || put_str(w, cell, UINT16_MAX, 2, err) < 0 ||
	    put_str(w, tb_dtype_name(t->dtype), UINT8_MAX, 1, err) < 0 || PUT(w, ndim, err) < 0 ||
	    put(w, t->shape, (size_t)t->ndim * sizeof *t->shape, err) < 0 || PUT(w, p->numel, err) < 0 ||
	    PUT(w, p->k, err) < 0 || PUT(w, p->n_pos, err) < 0 || PUT(w, p->row_len, err) < 0 || PUT(w, p->kp, err) < 0 ||
	    PUT(w, s->rank, err) < 0 || PUT(w, s->ranks, err) < 0 ||
	    PUT(w, s->nan, err) < 0 || PUT(w, s->inf, err) < 0 || PUT(w, s->finite, err) < 0 || PUT(w, s->sum, err) < 0 ||
	    PUT(w, s->sumsq, err) < 0 || PUT(w, s->min, err) < 0 || PUT(w, s->max, err) < 0 ||
	    put(w, s->bucket, p->k * sizeof *s->bucket, err) < 0 ||
	    put(w, s->pos_sumsq, (size_t)p->n_pos * sizeof *s->pos_sumsq, err) < 0 ||
	    put(w, s->pos_bucket, (size_t)p->n_pos * p->kp * sizeof *s->pos_bucket, err) < 0 ||
	    put(w, s->col_sum, p->n_pos > 0 ? (size_t)p->row_len * sizeof *s->col_sum : 0, err) < 0 ||
	    put(w, s->hash, s->n_blocks * sizeof *s->hash, err) < 0)
		return -1;
	return 0;
}

int tb_tbsk_end(tb_tbsk_writer *w, uint64_t *size, tb_err *err)
{
	uint64_t sum = w->sum;

	if (put(w, &sum, sizeof sum, err) < 0) {
		tb_tbsk_abort(w);
		return -1;
	}
	*size = w->bytes;
	if (tb_atomic_commit(&w->file, false, err) < 0)
		return -1;
	memset(w, 0, sizeof *w);
	return 0;
}

void tb_tbsk_abort(tb_tbsk_writer *w)
{
	tb_atomic_abort(&w->file);
	memset(w, 0, sizeof *w);
}

/* --- reading --- */

typedef struct cursor {
	const unsigned char *p, *end;
	const char *path;
	const char *what; /* the tensor being read, for messages */
} cursor;

static int take(cursor *c, void *out, size_t n, tb_err *err)
{
	if ((size_t)(c->end - c->p) < n)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "truncated sketch (%s)", c->what);
	memcpy(out, c->p, n);
	c->p += n;
	return 0;
}

#define TAKE(c, v, err) take((c), &(v), sizeof(v), (err))

/* Pass over n bytes the reader has no use for (the cell's name: naming
 * maps the tensor's name again). */
static int skip(cursor *c, size_t n, tb_err *err)
{
	if ((size_t)(c->end - c->p) < n)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "truncated sketch (%s)", c->what);
	c->p += n;
	return 0;
}

/* A string of len bytes into tree memory. */
static const char *take_str(tb_builder *b, cursor *c, size_t len, tb_err *err)
{
	const char *s;

	if ((size_t)(c->end - c->p) < len) {
		tb_err_setc(err, TB_ERR_FORMAT, c->path, "truncated sketch (%s)", c->what);
		return NULL;
	}
	if (memchr(c->p, 0, len)) {
		tb_err_setc(err, TB_ERR_FORMAT, c->path, "a name in the sketch holds a NUL byte (%s)", c->what);
		return NULL;
	}
	if (!(s = tb_builder_keep(b, (const char *)c->p, len)))
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	c->p += len;
	return s;
}

/* n items of size bytes into tree memory (NULL with err). */
static void *take_array(tb_builder *b, cursor *c, uint64_t n, size_t size, tb_err *err)
{
	void *v;

	if (n > (uint64_t)(c->end - c->p) / size) {
		tb_err_setc(err, TB_ERR_FORMAT, c->path, "truncated sketch (%s)", c->what);
		return NULL;
	}
	if (!(v = tb_builder_alloc(b, n ? (size_t)n * size : 1))) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	memcpy(v, c->p, (size_t)n * size);
	c->p += n * size;
	return v;
}

/* Are the parameters the writer's own (tb_sketch_params_for's, bounded)? */
static const char *bad_params(const tb_sketch_params *p)
{
	if (p->k < 64 || p->k > MAX_K || (p->k & (p->k - 1)))
		return "bucket count";
	if (p->n_pos < 0 || (p->n_pos > 0 && (p->row_len == 0 || p->kp == 0 || p->kp > MAX_KP || (p->kp & (p->kp - 1)) ||
					       p->numel % p->row_len || (p->numel / p->row_len) % (uint64_t)p->n_pos)))
		return "positions";
	return NULL;
}

static int read_tensor(tb_builder *b, cursor *c, uint64_t seed, tb_err *err)
{
	uint16_t name_len = 0, cell_len = 0;
	uint8_t dtype_len = 0, ndim = 0;
	int64_t shape[TB_MAX_DIMS];
	const char *name, *dtype_name;
	tb_sketch *s = NULL;
	tb_dtype dt;
	tb_tensor *t;
	const char *bad;

	if (TAKE(c, name_len, err) < 0 || !(name = take_str(b, c, name_len, err)))
		return -1;
	c->what = name;
	if (TAKE(c, cell_len, err) < 0 || skip(c, cell_len, err) < 0 || TAKE(c, dtype_len, err) < 0 ||
	    !(dtype_name = take_str(b, c, dtype_len, err)) || TAKE(c, ndim, err) < 0)
		return -1;
	if (tb_dtype_parse(dtype_name, &dt) < 0)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': unknown dtype '%s' in the sketch", name, dtype_name);
	if (ndim > TB_MAX_DIMS)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': %u dimensions in the sketch", name, ndim);
	if (take(c, shape, (size_t)ndim * sizeof *shape, err) < 0)
		return -1;
	if (!(s = tb_builder_alloc(b, sizeof *s)))
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (TAKE(c, s->p.numel, err) < 0 || TAKE(c, s->p.k, err) < 0 || TAKE(c, s->p.n_pos, err) < 0 ||
	    TAKE(c, s->p.row_len, err) < 0 || TAKE(c, s->p.kp, err) < 0 || TAKE(c, s->rank, err) < 0 ||
	    TAKE(c, s->ranks, err) < 0 || TAKE(c, s->nan, err) < 0 ||
	    TAKE(c, s->inf, err) < 0 || TAKE(c, s->finite, err) < 0 || TAKE(c, s->sum, err) < 0 ||
	    TAKE(c, s->sumsq, err) < 0 || TAKE(c, s->min, err) < 0 || TAKE(c, s->max, err) < 0)
		return -1;
	s->p.seed = seed;
	if (!(t = tb_builder_add(b, c->path, "", name, err)))
		return -1;
	t->dtype = dt;
	if (tb_tensor_set_shape(t, ndim, shape, c->path, err) < 0)
		return -1;
	if (t->numel != s->p.numel)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': %llu values for shape of %llu in the sketch", name,
				  (unsigned long long)s->p.numel, (unsigned long long)t->numel);
	if ((bad = bad_params(&s->p)))
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': the sketch's %s is not one tbisect writes", name, bad);
	if (s->ranks == 0 || s->rank >= s->ranks)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': rank %u of %u in the sketch", name, s->rank, s->ranks);
	/* each count at most the values, so that no sum of them wraps */
	if (s->nan > s->p.numel || s->inf > s->p.numel - s->nan || s->finite > s->p.numel - s->nan - s->inf ||
	    (s->ranks == 1 && s->nan + s->inf + s->finite != s->p.numel))
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "tensor '%s': its value counts do not add up in the sketch", name);
	s->n_blocks = (s->p.numel + TB_SKETCH_BLOCK - 1) / TB_SKETCH_BLOCK;
	if (!(s->bucket = take_array(b, c, s->p.k, sizeof *s->bucket, err)) ||
	    !(s->pos_sumsq = take_array(b, c, (uint64_t)s->p.n_pos, sizeof *s->pos_sumsq, err)) ||
	    !(s->pos_bucket = take_array(b, c, (uint64_t)s->p.n_pos * s->p.kp, sizeof *s->pos_bucket, err)) ||
	    !(s->col_sum = take_array(b, c, s->p.n_pos > 0 ? s->p.row_len : 0, sizeof *s->col_sum, err)) ||
	    !(s->hash = take_array(b, c, s->n_blocks, sizeof *s->hash, err)))
		return -1;
	t->sketch = s;
	return 0;
}

static bool tbsk_sniff(const unsigned char *head, size_t n)
{
	return n >= MAGIC_LEN && !memcmp(head, MAGIC, MAGIC_LEN);
}

/* The tree's record: its tie score and token ids. */
static int read_tree(tb_builder *b, cursor *c, tb_err *err)
{
	double tie = NAN;
	uint64_t n = 0;
	int64_t *tok;

	if (TAKE(c, tie, err) < 0 || TAKE(c, n, err) < 0)
		return -1;
	if (!(isnan(tie) || (tie >= -1 && tie <= 1)))
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "the sketch's tie score %g is no correlation", tie);
	tb_builder_set_tie(b, tie);
	if (n == 0)
		return 0;
	if (n > (uint64_t)(c->end - c->p) / sizeof *tok)
		return tb_err_setc(err, TB_ERR_FORMAT, c->path, "truncated sketch (%s)", c->what);
	if (!(tok = malloc((size_t)n * sizeof *tok)))
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	memcpy(tok, c->p, (size_t)n * sizeof *tok);
	c->p += n * sizeof *tok;
	tb_builder_set_tokens(b, tok, (size_t)n);
	return 0;
}

static int tbsk_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	cursor c = {f->data, f->data + f->size, f->path, "header"};
	uint32_t version, n;
	uint64_t seed, sum;

	(void)stem;
	(void)prefix;
	if (f->size < MAGIC_LEN + 4 + 4 + 8 + 8 || memcmp(f->data, MAGIC, MAGIC_LEN))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "not a tbisect sketch (or truncated)");
	memcpy(&sum, f->data + f->size - sizeof sum, sizeof sum);
	c.p += MAGIC_LEN;
	if (TAKE(&c, version, err) < 0)
		return -1;
	if (version != TB_SKETCH_VERSION)
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path, "sketch version %u; this tbisect reads version %d (%s)",
				   version, TB_SKETCH_VERSION,
				   version < TB_SKETCH_VERSION ? "sketch the tree again" : "a newer tbisect wrote it");
	if (checksum(CHECKSUM_INIT, f->data, (size_t)f->size - sizeof sum) != sum)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "the sketch is corrupted or truncated (its checksum does not match)");
	c.end -= sizeof sum;
	if (TAKE(&c, n, err) < 0 || TAKE(&c, seed, err) < 0 || read_tree(b, &c, err) < 0)
		return -1;
	if (n > TB_MAX_TENSORS)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "%u tensors in the sketch (at most %d)", n, TB_MAX_TENSORS);
	for (uint32_t i = 0; i < n; i++)
		if (read_tensor(b, &c, seed, err) < 0)
			return -1;
	if (c.p != c.end)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "%zu bytes after the sketch's last tensor", (size_t)(c.end - c.p));
	return 0;
}

static const char *const tbsk_suffixes[] = {".tbsk", NULL};

const tb_format tb_fmt_tbsk = {
	.name = "tbisect sketch",
	.label = ".tbsk (tbisect sketches)",
	.suffixes = tbsk_suffixes,
	.sniff = tbsk_sniff,
	.index = tbsk_index,
};
