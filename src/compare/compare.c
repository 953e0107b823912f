#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blaspool.h"
#include "base/cpus.h"
#include "compare/compare.h"
#include "tensor/digest.h"
#include "compare/estimate.h"

/* Elements per work unit and per conversion block. */
#define UNIT_ELEMS (1u << 22)
#define BLOCK_ELEMS (1u << 14)
/* Rows of 1-D tensors (no positions) are cut to this length. */
#define FLAT_ROW (1u << 16)
#define MAX_THREADS 64

static const char *const status_names[TB_ST_COUNT] = {
	[TB_ST_PENDING] = "pending",
	[TB_ST_MATCH] = "match",
	[TB_ST_CLOSE] = "close",
	[TB_ST_DIVERGED] = "diverged",
	[TB_ST_MISSING] = "missing",
};

const char *tb_status_name(tb_status st)
{
	return st < TB_ST_COUNT ? status_names[st] : "?";
}

void tb_compare_opts_init(tb_compare_opts *o)
{
	memset(o, 0, sizeof *o);
	tb_tolerance_default(&o->tol);
}

/* Per-pair state while units run. */
typedef struct pair_work {
	tb_cell_result *res;
	tb_tensor *ref, *cand;
	uint64_t n;        /* elements compared */
	uint64_t row_len;
	uint64_t n_rows;
	uint64_t rows_per_unit;
	int64_t n_pos;     /* positions for the profile, 0 for none */
	bool logits;       /* per-row logit metrics too */
	tb_run_sums *rows;
	tb_acc *unit_acc;
	size_t first_unit, n_units;
	atomic_size_t remaining;
	pthread_mutex_t lock;
	bool acquired;
	int acquire_rc;
	bool sketched;     /* either side is a sketch: estimated in one unit (sketch_pair) */
	bool digest[2];    /* add up each side's values digest as its rows are read */
	bool keep_positions; /* hand the per-position sums to the cell (tb_compare_opts.keep_positions) */
	const unsigned char *dsrc[2]; /* what it is of: the bytes in place, or NULL for the decoded values */
	size_t dsize[2];   /* bytes of an element of it */
	atomic_uint_fast64_t dsum[2];
} pair_work;

typedef struct unit {
	size_t pair;
	uint64_t row0, row1;
} unit;

struct tb_job {
	tb_result *res;
	pair_work *pairs;
	size_t n_pairs;
	unit *units;
	size_t n_units;
	atomic_size_t next;
	atomic_size_t cells_done;
	atomic_uint_fast64_t bytes_done;
	uint64_t bytes_total;
	atomic_int *done;
	atomic_bool cancel;
	pthread_t threads[MAX_THREADS];
	int n_threads;
	pthread_mutex_t err_lock;
	bool failed;
	tb_err err;
};

/* Scratch buffers of one worker. */
typedef struct scratch {
	float *r, *c;
	size_t cap;
} scratch;

static int scratch_fit(scratch *s, size_t n)
{
	float *r, *c;

	if (n <= s->cap)
		return 0;
	r = realloc(s->r, n * sizeof *r);
	if (r)
		s->r = r;
	c = realloc(s->c, n * sizeof *c);
	if (c)
		s->c = c;
	if (!r || !c)
		return -1;
	s->cap = n;
	return 0;
}

static void fail(tb_job *job, const tb_err *e)
{
	pthread_mutex_lock(&job->err_lock);
	if (!job->failed) {
		job->failed = true;
		job->err = *e;
	}
	pthread_mutex_unlock(&job->err_lock);
	atomic_store(&job->cancel, true);
}

static size_t elem_bytes(const tb_tensor *t)
{
	return t ? tb_dtype_size(t->dtype) : 0;
}

/* Can each side's digest be added up row by row?  When the comparison
 * reads all its values, and every row starts at a whole pair of words of
 * what the digest is of (bytes in place or decoded float32; the decoded
 * blocks within a row do, BLOCK_ELEMS being a multiple of 8). */
static void plan_digests(pair_work *pw)
{
	const tb_tensor *t[2] = {pw->ref, pw->cand};

	for (int s = 0; s < 2; s++) {
		pw->dsrc[s] = tb_digest_source(t[s], &pw->dsize[s]);
		pw->digest[s] = pw->digest[s] && t[s]->numel == pw->n &&
				(pw->n_rows <= 1 || pw->row_len * pw->dsize[s] % TB_DIGEST_ALIGN == 0);
	}
}

static int pair_acquire(pair_work *pw, tb_err *err)
{
	int rc;

	pthread_mutex_lock(&pw->lock);
	if (!pw->acquired) {
		pw->acquired = true;
		/* Per-row sums exist only while the pair is in flight, so memory
		 * follows the pairs being compared, not the tree. */
		if (pw->n_pos > 0 && !(pw->rows = calloc((size_t)pw->n_rows, sizeof *pw->rows)))
			pw->acquire_rc = tb_err_setc(err, TB_ERR_NOMEM, pw->ref->path, "out of memory for tensor '%s'",
						     pw->ref->name);
		else
			pw->acquire_rc = tb_tensor_acquire(pw->ref, err);
		if (pw->acquire_rc == 0) {
			pw->acquire_rc = tb_tensor_acquire(pw->cand, err);
			if (pw->acquire_rc < 0)
				tb_tensor_release(pw->ref);
		}
		if (pw->acquire_rc == 0)
			plan_digests(pw);
	} else if (pw->acquire_rc < 0) {
		tb_err_setc(err, TB_ERR_IO, pw->ref->path, "could not read tensor data");
	}
	rc = pw->acquire_rc;
	pthread_mutex_unlock(&pw->lock);
	return rc;
}

/* Elements the kernel can read in place (f32, bf16, f16, contiguous,
 * native order), or NULL when they must be decoded first. */
static const void *in_place(const tb_tensor *t)
{
	return tb_acc_reads(t->dtype) ? tb_tensor_data(t) : NULL;
}

/* Add side s's digest of elements [start, start+len) to *sum: of its
 * bytes in place, or of the values decoded at dec when it has none. */
static void digest_run(const pair_work *pw, int s, uint64_t start, uint64_t len, const float *dec, uint64_t *sum)
{
	size_t es = pw->dsize[s];

	if (pw->digest[s])
		*sum += tb_digest_piece(start * es, pw->dsrc[s] ? (const void *)(pw->dsrc[s] + start * es) : dec,
					(size_t)(len * es));
}

/* Fold one row (or a slice of a flat tensor) into acc, and its values into
 * the sides' digests (dsum). */
static int run_row(pair_work *pw, tb_acc *acc, uint64_t row, scratch *s, uint64_t dsum[2])
{
	const tb_tolerance *tol = &pw->res->tol;
	uint64_t start = row * pw->row_len, len = pw->row_len;
	const unsigned char *pr = in_place(pw->ref), *pc = in_place(pw->cand);
	size_t er = elem_bytes(pw->ref), ec = elem_bytes(pw->cand);
	tb_run_sums sums = {0}, part;

	if (len > pw->n - start)
		len = pw->n - start;
	if (pr && pc) {
		tb_acc_run_raw(acc, pr + start * er, pw->ref->dtype, pc + start * ec, pw->cand->dtype, (size_t)len, start,
			       tol->atol, tol->rtol, &sums);
		if (pw->logits)
			tb_logits_row_raw(pr + start * er, pw->ref->dtype, pc + start * ec, pw->cand->dtype, (int64_t)len,
					  &pw->res->logits->rows[row]);
		digest_run(pw, 0, start, len, NULL, &dsum[0]);
		digest_run(pw, 1, start, len, NULL, &dsum[1]);
	} else if (pw->logits) {
		/* Logit rows the kernels cannot read in place are decoded whole. */
		const float *dr = tb_tensor_f32_direct(pw->ref), *dc = tb_tensor_f32_direct(pw->cand);
		const float *r = dr ? dr + start : NULL, *c = dc ? dc + start : NULL;
		if ((!r || !c) && scratch_fit(s, (size_t)len) < 0)
			return -1;
		if (!r) {
			tb_tensor_read_f32(pw->ref, start, len, s->r);
			r = s->r;
		}
		if (!c) {
			tb_tensor_read_f32(pw->cand, start, len, s->c);
			c = s->c;
		}
		tb_acc_run(acc, r, c, (size_t)len, start, tol->atol, tol->rtol, &sums);
		tb_logits_row(r, c, (int64_t)len, &pw->res->logits->rows[row]);
		digest_run(pw, 0, start, len, r, &dsum[0]);
		digest_run(pw, 1, start, len, c, &dsum[1]);
	} else {
		/* Decode what cannot be read in place, a cache-sized block at a time. */
		if (scratch_fit(s, BLOCK_ELEMS) < 0)
			return -1;
		for (uint64_t off = 0; off < len; off += BLOCK_ELEMS) {
			size_t k = (size_t)(len - off < BLOCK_ELEMS ? len - off : BLOCK_ELEMS);
			const void *r = pr ? (const void *)(pr + (start + off) * er) : s->r;
			const void *c = pc ? (const void *)(pc + (start + off) * ec) : s->c;
			if (!pr)
				tb_tensor_read_f32(pw->ref, start + off, k, s->r);
			if (!pc)
				tb_tensor_read_f32(pw->cand, start + off, k, s->c);
			tb_acc_run_raw(acc, r, pr ? pw->ref->dtype : TB_DT_F32, c, pc ? pw->cand->dtype : TB_DT_F32, k,
				       start + off, tol->atol, tol->rtol, &part);
			digest_run(pw, 0, start + off, k, s->r, &dsum[0]);
			digest_run(pw, 1, start + off, k, s->c, &dsum[1]);
			sums.sdd += part.sdd;
			sums.srr += part.srr;
			sums.scc += part.scc;
			sums.src += part.src;
			sums.sad += part.sad;
			sums.mx = fmax(sums.mx, part.mx);
			sums.n += part.n;
			sums.close += part.close;
			sums.mismatch += part.mismatch;
		}
	}
	if (pw->rows)
		pw->rows[row] = sums;
	return 0;
}

/* A partial dump's cell gets its profile from the rows it printed: each
 * element's position is its place in the whole tensor's second-to-last
 * axis.  0, or -1 when out of memory. */
static int partial_positions(pair_work *pw)
{
	tb_cell_result *c = pw->res;
	const tb_partial *pa = tb_cell_partial(c);
	int64_t sh[TB_MAX_DIMS], S, H;
	int nd, rc;
	float *r, *v;
	tb_run_sums *pos;
	bool *seen;

	if (!pa || c->shape_mismatch || pw->n != pa->n || c->m.n_pos)
		return 0;
	nd = tb_shape_squeeze(pa->ndim, pa->shape, sh);
	if (nd < 2 || sh[nd - 1] <= 0 || sh[nd - 2] <= 1)
		return 0;
	S = sh[nd - 2];
	H = sh[nd - 1];
	r = malloc(pa->n * 2 * sizeof *r);
	pos = calloc((size_t)S, sizeof *pos);
	seen = calloc((size_t)S, sizeof *seen);
	if (!r || !pos || !seen) {
		rc = -1;
		goto out;
	}
	v = r + pa->n;
	tb_tensor_read_f32(pw->ref, 0, pa->n, r);
	tb_tensor_read_f32(pw->cand, 0, pa->n, v);
	for (uint64_t i = 0; i < pa->n; i++) {
		int64_t p = (int64_t)(pa->index[i] / (uint64_t)H % (uint64_t)S);
		double a = r[i], b = v[i];
		seen[p] = true;
		if (isfinite(a) && isfinite(b)) {
			pos[p].sdd += (b - a) * (b - a);
			pos[p].srr += a * a;
			pos[p].scc += b * b;
			pos[p].src += a * b;
		} else if (!(a == b || (isnan(a) && isnan(b)))) {
			pos[p].mismatch++;
		}
	}
	rc = tb_metrics_positions(&c->m, pos, seen, S, c->tol.diverge);
out:
	free(r);
	free(pos);
	free(seen);
	return rc;
}

static void pair_finish(tb_job *job, pair_work *pw)
{
	tb_cell_result *c = pw->res;
	tb_acc total;

	tb_acc_init(&total);
	for (size_t i = 0; i < pw->n_units; i++)
		tb_acc_merge(&total, &pw->unit_acc[i]);
	if (tb_metrics_finish(&c->m, &total, pw->rows, pw->n_rows, pw->n_pos, c->tol.diverge) < 0 ||
	    (pw->acquired && pw->acquire_rc == 0 && partial_positions(pw) < 0) ||
	    (pw->keep_positions && pw->rows && !(c->pos_sums = tb_run_sums_by_position(pw->rows, pw->n_rows, pw->n_pos)))) {
		tb_err e;
		tb_err_setc(&e, TB_ERR_NOMEM, NULL, "out of memory computing metrics");
		fail(job, &e);
	}
	/* shapes that differ read no element against its counterpart: no
	 * difference is measured (the status says why) */
	if (c->shape_mismatch) {
		c->m.max_abs = c->m.mean_abs = c->m.rel_l2 = c->m.cosine = c->m.norm_ratio = c->m.allclose_frac = NAN;
		c->m.first_bad_position = -1;
	}
	/* a partial dump's worst element by its place in the whole tensor */
	if (tb_cell_partial(c) && !c->shape_mismatch && c->m.worst_index < tb_cell_partial(c)->n)
		c->m.worst_index = tb_cell_partial(c)->index[c->m.worst_index];
	if (c->logits)
		tb_logits_finish(c->logits);
	for (int s = 0; s < 2; s++) {
		const tb_tensor *t = s ? pw->cand : pw->ref;
		if ((c->digested[s] = pw->digest[s] && pw->acquired && pw->acquire_rc == 0))
			c->digest[s] = tb_digest_final(atomic_load(&pw->dsum[s]), t->numel * pw->dsize[s]);
	}
	free(pw->rows);
	free(pw->unit_acc);
	pw->rows = NULL;
	pw->unit_acc = NULL;
	if (pw->acquired && pw->acquire_rc == 0) {
		tb_tensor_release(pw->ref);
		tb_tensor_release(pw->cand);
	}
	tb_cell_judge(c);
	atomic_store(&job->done[c - job->res->cells], 1);
	atomic_fetch_add(&job->cells_done, 1);
}

/* Fill m from what two sketches say, owning the estimate's arrays. */
static void estimated_metrics(tb_metrics *m, const tb_sketch *r, const tb_sketch *c, tb_sketch_estimate *e,
			      double diverge)
{
	const tb_sketch *side[2] = {r, c};

	m->n = r->p.numel;
	m->estimated = true;
	m->exact = e->exact;
	m->rel_l2 = e->exact ? 0 : e->rel_l2;
	m->rel_l2_lo = e->exact ? 0 : e->rel_l2_lo;
	m->rel_l2_hi = e->exact ? 0 : e->rel_l2_hi;
	m->cosine = e->exact ? 1 : e->cosine;
	m->cosine_lo = e->exact ? 1 : e->cosine_lo;
	m->cosine_hi = e->exact ? 1 : e->cosine_hi;
	m->norm_ratio = e->norm_ratio;
	m->max_abs = m->mean_abs = e->exact ? 0 : NAN;
	m->allclose_frac = e->exact ? 1 : NAN;
	m->mismatch = e->mismatch;
	m->bias_frac = e->bias_frac;
	m->shift_frac = e->shift_frac;
	for (int i = 0; i < 2; i++) {
		const tb_sketch *s = side[i];
		double n = (double)s->finite;
		m->nan[i] = s->nan;
		m->inf[i] = s->inf;
		m->mean[i] = n > 0 ? s->sum / n : NAN;
		m->std[i] = n > 0 ? sqrt(fmax(0, s->sumsq / n - m->mean[i] * m->mean[i])) : NAN;
		m->min[i] = n > 0 ? s->min : NAN;
		m->max[i] = n > 0 ? s->max : NAN;
		m->l2[i] = sqrt(s->sumsq);
	}
	m->n_pos = m->pos_seen = r->p.n_pos;
	m->pos_rel_l2 = e->pos_rel_l2;
	m->pos_cos = e->pos_cos;
	m->pos_norm_ratio = e->pos_norm_ratio;
	m->first_bad_position = -1;
	for (int64_t p = 0; p < m->n_pos && !e->exact; p++)
		if (!(m->pos_rel_l2[p] <= diverge)) {
			m->first_bad_position = p;
			break;
		}
	if (e->exact)
		for (int64_t p = 0; p < m->n_pos; p++)
			m->pos_rel_l2[p] = 0, m->pos_cos[p] = 1;
}

/* A pair with a sketch on either side: the side that holds values is
 * sketched alike (one pass over them), and the metrics are estimated. */
static int sketch_pair(pair_work *pw, tb_err *err)
{
	tb_cell_result *c = pw->res;
	tb_tensor *t[2] = {pw->ref, pw->cand};
	const tb_sketch *s[2];
	tb_sketch own[2];
	tb_sketch_estimate e;
	int rc;

	for (int i = 0; i < 2; i++)
		if (t[i]->sketch && t[i]->sketch->ranks > 1)
			return tb_err_setc(err, TB_ERR_USAGE, t[i]->path,
					   "'%s' is rank %u of %u's share: merge the ranks' sketches first (tbisect sketch merge)",
					   t[i]->name, t[i]->sketch->rank, t[i]->sketch->ranks);
	c->m.estimated = true;
	c->m.first_bad_position = -1;
	if (c->shape_mismatch)
		return 0;
	/* one thread a side: the compare's own threads share the pairs */
	rc = tb_sketch_sides(t, s, own, err);
	if (rc == 0 && (rc = tb_sketch_compare(s[0], s[1], &e, err)) < 0) {
		char why[sizeof err->msg];
		snprintf(why, sizeof why, "%s", err->msg);
		tb_err_setc(err, TB_ERR_USAGE, t[1]->sketch ? t[1]->path : t[0]->path, "'%s' against '%s': %s (sketch both alike)",
			    t[0]->name, t[1]->name, why);
	}
	if (rc == 0)
		estimated_metrics(&c->m, s[0], s[1], &e, c->tol.diverge);
	tb_sketch_done(&own[0]);
	tb_sketch_done(&own[1]);
	return rc;
}

static void *worker(void *arg)
{
	tb_job *job = arg;
	scratch s = {0};
	size_t u;

	while (!atomic_load(&job->cancel) && (u = atomic_fetch_add(&job->next, 1)) < job->n_units) {
		const unit *un = &job->units[u];
		pair_work *pw = &job->pairs[un->pair];
		tb_acc *acc = &pw->unit_acc[u - pw->first_unit];
		tb_err e;

		if (pw->sketched) {
			if (sketch_pair(pw, &e) < 0) {
				fail(job, &e);
				break;
			}
			atomic_fetch_add(&job->bytes_done, pw->n * (elem_bytes(pw->ref) + elem_bytes(pw->cand)));
			tb_cell_judge(pw->res);
			atomic_store(&job->done[pw->res - job->res->cells], 1);
			atomic_fetch_add(&job->cells_done, 1);
			continue;
		}
		if (pair_acquire(pw, &e) < 0) {
			fail(job, &e);
			break;
		}
		uint64_t dsum[2] = {0, 0};
		for (uint64_t row = un->row0; row < un->row1; row++) {
			if (run_row(pw, acc, row, &s, dsum) < 0) {
				tb_err_setc(&e, TB_ERR_NOMEM, pw->ref->path, "out of memory reading tensor '%s'",
					    pw->ref->name);
				fail(job, &e);
				goto out;
			}
		}
		uint64_t e0 = un->row0 * pw->row_len, e1 = un->row1 * pw->row_len;
		if (e1 > pw->n)
			e1 = pw->n;
		tb_tensor_drop(pw->ref, e0, e1 - e0);
		tb_tensor_drop(pw->cand, e0, e1 - e0);
		atomic_fetch_add(&pw->dsum[0], dsum[0]);
		atomic_fetch_add(&pw->dsum[1], dsum[1]);
		atomic_fetch_add(&job->bytes_done, (e1 - e0) * (elem_bytes(pw->ref) + elem_bytes(pw->cand)));
		if (atomic_fetch_sub(&pw->remaining, 1) == 1)
			pair_finish(job, pw);
	}
out:
	free(s.r);
	free(s.c);
	return NULL;
}

static bool same_shape(int na, const int64_t *a, int nb, const int64_t *b)
{
	return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* Does t hold every value of one position's logits: not a partial dump,
 * or one of a whole [1, vocab] (the last position only)? */
static bool whole_one_position(const tb_tensor *t)
{
	int64_t sq[TB_MAX_DIMS];

	return !t->partial || (tb_shape_squeeze(t->partial->ndim, t->partial->shape, sq) == 1 && t->partial->n == (uint64_t)sq[0]);
}

/* Decide how a pair is walked: element count, rows, positions. */
static void plan_pair(pair_work *pw)
{
	tb_cell_result *c = pw->res;
	int64_t sr[TB_MAX_DIMS], sc[TB_MAX_DIMS];
	int nr = tb_tensor_squeezed(pw->ref, sr), nc = tb_tensor_squeezed(pw->cand, sc);
	bool same = same_shape(nr, sr, nc, sc);

	/* Partial dumps compare only where both hold the same elements of one
	 * whole (the pairing gathers a whole tensor's to match). */
	if (pw->ref->partial || pw->cand->partial)
		same = tb_partial_same(pw->ref->partial, pw->cand->partial);
	c->shape_mismatch = !same;
	pw->n = pw->ref->numel < pw->cand->numel ? pw->ref->numel : pw->cand->numel;
	if ((same || pw->ref->numel == pw->cand->numel) && nr >= 2 && sr[nr - 1] > 0) {
		pw->row_len = (uint64_t)sr[nr - 1];
		pw->n_pos = sr[nr - 2];
	} else if (same && nr == 1 && sr[0] > 0 && c->cell.id == TB_TAP_LOGITS && whole_one_position(pw->ref)) {
		/* one position's logits (raw logits files hold the last token's) */
		pw->row_len = (uint64_t)sr[0];
		pw->n_pos = 1;
	} else {
		pw->row_len = pw->n < FLAT_ROW ? (pw->n ? pw->n : 1) : FLAT_ROW;
		pw->n_pos = 0;
	}
	pw->n_rows = pw->n ? (pw->n + pw->row_len - 1) / pw->row_len : 0;
	pw->logits = same && pw->n_pos > 0 && c->cell.id == TB_TAP_LOGITS;
}

static void free_job(tb_job *job)
{
	if (!job)
		return;
	for (size_t i = 0; i < job->n_pairs; i++) {
		free(job->pairs[i].rows);
		free(job->pairs[i].unit_acc);
		pthread_mutex_destroy(&job->pairs[i].lock);
	}
	free(job->pairs);
	free(job->units);
	free(job->done);
	pthread_mutex_destroy(&job->err_lock);
	free(job);
}

static int plan(tb_job *job, const tb_pairing *p, const tb_compare_opts *o)
{
	tb_result *res = job->res;
	uint64_t unit_elems = o->unit_elems ? o->unit_elems : UNIT_ELEMS;
	size_t n_units = 0;

	for (size_t i = 0; i < p->n_pairs; i++) {
		tb_cell_result *c = &res->cells[i];
		pair_work *pw = &job->pairs[i];
		const tb_tensor *shown = p->pairs[i].ref ? p->pairs[i].ref : p->pairs[i].cand;

		c->cell = p->pairs[i].cell;
		c->ref = p->pairs[i].ref;
		c->cand = p->pairs[i].cand;
		c->tol = o->tol;
		if (o->tol_for)
			o->tol_for(o->tol_ud, &c->cell, c->ref, c->cand, &c->tol);
		/* a partial dump's cell has the whole tensor's shape */
		c->ndim = shown->partial ? shown->partial->ndim : shown->ndim;
		memcpy(c->shape, shown->partial ? shown->partial->shape : shown->shape, sizeof c->shape);
		c->m.first_bad_position = -1;
		pw->res = c;
		pw->ref = p->pairs[i].ref;
		pw->cand = p->pairs[i].cand;
		pthread_mutex_init(&pw->lock, NULL);
		if (!pw->ref || !pw->cand)
			continue;
		plan_pair(pw);
		if ((pw->sketched = pw->ref->sketch || pw->cand->sketch)) {
			pw->logits = false;
			pw->n_units = 1;
			pw->first_unit = n_units++;
			pw->unit_acc = calloc(1, sizeof *pw->unit_acc);
			if (!pw->unit_acc)
				return -1;
			job->bytes_total += pw->n * (elem_bytes(pw->ref) + elem_bytes(pw->cand));
			continue;
		}
		pw->digest[0] = o->digest[0];
		pw->digest[1] = o->digest[1];
		pw->keep_positions = o->keep_positions;
		uint64_t rows_per_unit = unit_elems / pw->row_len ? unit_elems / pw->row_len : 1;
		/* A streamed side (a deflated member) inflates front to back:
		 * two threads on its units would each move its one stream to
		 * their own offset and restart it by turns, so one thread walks
		 * the pair. */
		if (tb_tensor_streamed(pw->ref) || tb_tensor_streamed(pw->cand))
			rows_per_unit = pw->n_rows ? pw->n_rows : 1;
		pw->rows_per_unit = rows_per_unit;
		pw->n_units = (size_t)((pw->n_rows + rows_per_unit - 1) / rows_per_unit);
		if (pw->n_units == 0)
			pw->n_units = 1; /* empty tensors still get judged by a unit */
		pw->first_unit = n_units;
		n_units += pw->n_units;
		atomic_init(&pw->remaining, pw->n_units);
		atomic_init(&pw->dsum[0], 0);
		atomic_init(&pw->dsum[1], 0);
		pw->unit_acc = malloc(pw->n_units * sizeof *pw->unit_acc);
		if (pw->logits)
			c->logits = tb_logits_new((int64_t)pw->n_rows, (int64_t)pw->row_len);
		if (!pw->unit_acc || (pw->logits && !c->logits))
			return -1;
		for (size_t k = 0; k < pw->n_units; k++)
			tb_acc_init(&pw->unit_acc[k]);
		job->bytes_total += pw->n * (elem_bytes(pw->ref) + elem_bytes(pw->cand));
	}
	job->units = calloc(n_units ? n_units : 1, sizeof *job->units);
	if (!job->units)
		return -1;
	for (size_t i = 0; i < p->n_pairs; i++) {
		pair_work *pw = &job->pairs[i];
		for (size_t k = 0; k < pw->n_units; k++) {
			unit *u = &job->units[pw->first_unit + k];
			u->pair = i;
			u->row0 = k * pw->rows_per_unit;
			u->row1 = u->row0 + pw->rows_per_unit < pw->n_rows ? u->row0 + pw->rows_per_unit : pw->n_rows;
		}
	}
	job->n_units = n_units;
	return 0;
}

tb_job *tb_compare_start(const tb_pairing *p, const tb_compare_opts *o, tb_err *err)
{
	tb_job *job = calloc(1, sizeof *job);
	int want;

	if (!job) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&job->err_lock, NULL);
	job->res = calloc(1, sizeof *job->res);
	job->pairs = calloc(p->n_pairs ? p->n_pairs : 1, sizeof *job->pairs);
	job->done = calloc(p->n_pairs ? p->n_pairs : 1, sizeof *job->done);
	if (job->res)
		job->res->cells = calloc(p->n_pairs ? p->n_pairs : 1, sizeof *job->res->cells);
	job->n_pairs = p->n_pairs;
	if (!job->res || !job->res->cells || !job->pairs || !job->done)
		goto oom;
	job->res->n_cells = p->n_pairs;
	job->res->n_layers = p->n_layers;
	job->res->tol = o->tol;
	job->res->first_div = -1;
	if (plan(job, p, o) < 0)
		goto oom;
	/* Missing cells are judged at once. */
	for (size_t i = 0; i < p->n_pairs; i++) {
		if (!job->pairs[i].ref || !job->pairs[i].cand) {
			tb_cell_judge(&job->res->cells[i]);
			atomic_store(&job->done[i], 1);
			atomic_fetch_add(&job->cells_done, 1);
		}
	}
	tb_blas_pool_stop();
	want = tb_threads_for(o->threads);
	if (want > MAX_THREADS)
		want = MAX_THREADS;
	if ((size_t)want > job->n_units)
		want = job->n_units ? (int)job->n_units : 1;
	for (int i = 0; i < want; i++) {
		if (pthread_create(&job->threads[i], NULL, worker, job) != 0)
			break;
		job->n_threads++;
	}
	if (job->n_threads == 0 && job->n_units > 0) {
		tb_err_setc(err, TB_ERR_SYSTEM, NULL, "cannot start worker threads");
		tb_result_free(job->res);
		free_job(job);
		return NULL;
	}
	return job;
oom:
	tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory planning the comparison");
	tb_result_free(job->res);
	free_job(job);
	return NULL;
}

void tb_job_progress(const tb_job *job, size_t *cells_done, size_t *cells_total, uint64_t *bytes_done,
		     uint64_t *bytes_total)
{
	if (cells_done)
		*cells_done = atomic_load(&((tb_job *)job)->cells_done);
	if (cells_total)
		*cells_total = job->n_pairs;
	if (bytes_done)
		*bytes_done = atomic_load(&((tb_job *)job)->bytes_done);
	if (bytes_total)
		*bytes_total = job->bytes_total;
}

const tb_result *tb_job_result(const tb_job *job)
{
	return job->res;
}

bool tb_job_cell_done(const tb_job *job, size_t i)
{
	return i < job->n_pairs && atomic_load(&job->done[i]);
}

bool tb_job_finished(const tb_job *job)
{
	return atomic_load(&((tb_job *)job)->cells_done) == job->n_pairs || atomic_load(&((tb_job *)job)->cancel);
}

void tb_job_cancel(tb_job *job)
{
	atomic_store(&job->cancel, true);
}

int tb_job_finish(tb_job *job, tb_result **out, tb_err *err)
{
	bool cancelled;

	*out = NULL;
	for (int i = 0; i < job->n_threads; i++)
		pthread_join(job->threads[i], NULL);
	cancelled = atomic_load(&job->cancel);
	if (job->failed || cancelled) {
		if (job->failed)
			*err = job->err;
		else
			tb_err_setc(err, TB_ERR_CANCELLED, NULL, "comparison cancelled");
		/* Release what half-finished pairs still hold. */
		for (size_t i = 0; i < job->n_pairs; i++) {
			pair_work *pw = &job->pairs[i];
			if (pw->acquired && pw->acquire_rc == 0 && pw->unit_acc) {
				tb_tensor_release(pw->ref);
				tb_tensor_release(pw->cand);
			}
		}
		tb_result_free(job->res);
		free_job(job);
		return -1;
	}
	tb_result_summarise(job->res);
	*out = job->res;
	free_job(job);
	return 0;
}

int tb_compare(const tb_pairing *p, const tb_compare_opts *o, tb_result **out, tb_err *err)
{
	tb_job *job = tb_compare_start(p, o, err);

	if (!job)
		return -1;
	return tb_job_finish(job, out, err);
}

/* A tensor's shape, the whole one's for a partial dump. */
static void whole_shape(const tb_tensor *t, char *buf, size_t size)
{
	if (t->partial)
		tb_shape_format(t->partial->ndim, t->partial->shape, buf, size);
	else
		tb_shape_format(t->ndim, t->shape, buf, size);
}

const char *tb_cell_note(const tb_cell_result *c)
{
	if (c->cand && c->cand->note)
		return c->cand->note;
	return c->ref ? c->ref->note : NULL;
}

const tb_partial *tb_cell_partial(const tb_cell_result *c)
{
	if (c->ref && c->ref->partial)
		return c->ref->partial;
	return c->cand ? c->cand->partial : NULL;
}

/* A cell judged on a sketch's estimate: diverged or close (match needs
 * every value, which only equal block hashes prove), saying when the
 * bound straddles the threshold. */
static void estimated_judge(tb_cell_result *c)
{
	const tb_metrics *m = &c->m;
	double d = c->tol.diverge;
	const char *straddle = m->rel_l2_lo <= d && !(m->rel_l2_hi <= d) ? "; the bound straddles the threshold" : "";

	c->status = m->rel_l2 <= d ? TB_ST_CLOSE : TB_ST_DIVERGED;
	snprintf(c->reason, sizeof c->reason, "rel_l2 ~%.3g %s diverge %.3g (estimated from a sketch, within [%.3g, %.3g]%s)",
		 m->rel_l2, c->status == TB_ST_CLOSE ? "<=" : ">", d, m->rel_l2_lo, m->rel_l2_hi, straddle);
}

void tb_cell_judge(tb_cell_result *c)
{
	const tb_tolerance *t = &c->tol;
	const tb_metrics *m = &c->m;

	if (!c->ref || !c->cand) {
		c->status = TB_ST_MISSING;
		snprintf(c->reason, sizeof c->reason, "only in the %s", c->ref ? "reference" : "candidate");
		return;
	}
	c->status = TB_ST_DIVERGED;
	if (c->shape_mismatch) {
		char a[TB_REASON_SHAPE_MAX], b[TB_REASON_SHAPE_MAX];
		whole_shape(c->ref, a, sizeof a);
		whole_shape(c->cand, b, sizeof b);
		snprintf(c->reason, sizeof c->reason, "shapes differ: ref %s, cand %s", a, b);
	} else if (m->mismatch > 0) {
		snprintf(c->reason, sizeof c->reason, "NaN/Inf mismatch at %llu elements (NaN %llu/%llu, Inf %llu/%llu)",
			 (unsigned long long)m->mismatch, (unsigned long long)m->nan[0], (unsigned long long)m->nan[1],
			 (unsigned long long)m->inf[0], (unsigned long long)m->inf[1]);
	} else if (m->estimated && !m->exact) {
		estimated_judge(c);
	} else if (t->absolute && !(m->max_abs <= t->diverge)) {
		snprintf(c->reason, sizeof c->reason, "max_abs %.3g > %.3g (absolute test)", m->max_abs, t->diverge);
	} else if (!t->absolute && !(m->rel_l2 <= t->diverge)) {
		snprintf(c->reason, sizeof c->reason, "rel_l2 %.3g > diverge %.3g", m->rel_l2, t->diverge);
	} else if (c->logits && !(c->logits->kl_mean <= t->max_kl)) {
		snprintf(c->reason, sizeof c->reason, "mean KL %.3g > max-kl %.3g", c->logits->kl_mean, t->max_kl);
	} else if (m->allclose_frac < 1) {
		c->status = TB_ST_CLOSE;
		snprintf(c->reason, sizeof c->reason, "%.4g%% of elements outside allclose, rel_l2 %.3g",
			 100 * (1 - m->allclose_frac), m->rel_l2);
	} else {
		c->status = TB_ST_MATCH;
		snprintf(c->reason, sizeof c->reason, "every element within allclose");
	}
}

void tb_result_summarise(tb_result *r)
{
	memset(r->count, 0, sizeof r->count);
	r->first_div = -1;
	for (size_t i = 0; i < r->n_cells; i++) {
		r->count[r->cells[i].status]++;
		if (r->first_div < 0 && r->cells[i].status == TB_ST_DIVERGED)
			r->first_div = (long)i;
	}
	r->verdict = r->count[TB_ST_DIVERGED] ? TB_ST_DIVERGED : r->count[TB_ST_CLOSE] ? TB_ST_CLOSE : TB_ST_MATCH;
}

void tb_result_free(tb_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->cells && i < r->n_cells; i++) {
		tb_metrics_done(&r->cells[i].m);
		tb_logits_free(r->cells[i].logits);
		free(r->cells[i].pos_sums);
		free(r->cells[i].flips);
	}
	free(r->cells);
	free(r);
}

long tb_result_find(const tb_result *r, const tb_cell *c)
{
	size_t lo = 0, hi = r->n_cells;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int k = tb_cell_cmp(&r->cells[mid].cell, c);
		if (k == 0)
			return (long)mid;
		if (k < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

const tb_cell_result *tb_result_cell(const tb_result *r, int layer, tb_tap_id tap)
{
	tb_cell c;
	long k;

	tb_cell_make_id(&c, layer, tap);
	k = tb_result_find(r, &c);
	return k < 0 ? NULL : &r->cells[k];
}
