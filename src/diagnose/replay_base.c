#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/origin.h"
#include "diagnose/replay_base.h"

#define BLOCK 65536
/* The rounding of float16, the finest of the half-width dtypes. */
#define HALF_ROUNDING 0x1p-11

const tb_pair *tb_replay_pair(const tb_replay_in *in, int layer, tb_tap_id id)
{
	const tb_cell_result *c = tb_result_cell(in->r, layer, id);
	long i = c ? tb_pairing_find(in->s->pairing, &c->cell) : -1;
	const tb_pair *p = i >= 0 ? &in->s->pairing->pairs[i] : NULL;

	if (!p || !p->ref || !p->cand || p->ref->partial || p->cand->partial || p->ref->sketch || p->cand->sketch)
		return NULL;
	return p;
}

/* Values read to find how many mantissa bits a tensor's values use. */
#define PRECISION_SAMPLE 65536

double tb_replay_rounding(tb_tensor *t)
{
	uint64_t n = t->numel < PRECISION_SAMPLE ? t->numel : PRECISION_SAMPLE;
	float *v = malloc((n ? n : 1) * sizeof *v);
	uint32_t used = 0;
	tb_err err;
	int bits = 23;

	if (!v || !n || tb_tensor_acquire(t, &err) < 0) {
		free(v);
		return tb_dtype_rounding(t->dtype);
	}
	tb_tensor_read_f32(t, 0, n, v);
	tb_tensor_release(t);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t b;
		memcpy(&b, &v[i], sizeof b);
		if ((b & 0x7f800000u) && (b & 0x7f800000u) != 0x7f800000u) /* normal: its mantissa is all stored */
			used |= b & 0x7fffffu;
	}
	free(v);
	while (bits > 0 && used && !(used & 1)) {
		used >>= 1;
		bits--;
	}
	return fmax(tb_dtype_rounding(t->dtype), ldexp(1, -(bits + 1)));
}

double tb_replay_floor(tb_tensor *ref, tb_tensor *cand, double f32_floor, double roundings)
{
	double f = f32_floor, r = tb_replay_rounding(ref), c = tb_replay_rounding(cand);

	/* values of half width or less (whatever the file's dtype) round at every op */
	if (r >= HALF_ROUNDING)
		f = fmax(f, roundings * r);
	if (c >= HALF_ROUNDING)
		f = fmax(f, roundings * c);
	return f;
}

/* Rows 0, step, 2 step, ... of t's rows of cols values, one after
 * another, in a malloc'd copy; step 1 is the whole tensor, read as one
 * run.  t is acquired. */
static float *copy_rows(tb_tensor *t, uint64_t cols, uint64_t step, uint64_t *n, tb_err *err)
{
	uint64_t rows = step > 1 ? t->numel / cols : 1, run = step > 1 ? cols : t->numel;
	uint64_t taken = (rows + step - 1) / step;
	float *v;

	*n = taken * run;
	if (*n > SIZE_MAX / sizeof *v) {
		tb_err_setc(err, TB_ERR_LIMIT, t->name, "replay: tensor too large to load");
		return NULL;
	}
	v = malloc((*n ? *n : 1) * sizeof *v);
	if (!v) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	for (uint64_t r = 0; r < taken; r++)
		for (uint64_t i = 0; i < run; i += BLOCK)
			tb_tensor_read_f32(t, r * step * run + i, run - i < BLOCK ? run - i : BLOCK, v + r * run + i);
	return v;
}

/* The whole of t, copied to float32. */
static float *load_whole(tb_tensor *t, uint64_t *n, tb_err *err)
{
	float *v;

	if (tb_tensor_acquire(t, err) < 0)
		return NULL;
	v = copy_rows(t, 1, 1, n, err);
	tb_tensor_release(t);
	return v;
}

bool tb_replay_finite(const float *v, uint64_t n)
{
	for (uint64_t i = 0; i < n; i += BLOCK) {
		uint64_t m = n - i < BLOCK ? n - i : BLOCK;
		uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
		for (uint64_t k = 0; k < m; k++) {
			uint32_t bits;
			memcpy(&bits, &v[i + k], sizeof bits);
			bad |= (bits & 0x7f800000u) == 0x7f800000u;
		}
		if (bad)
			return false;
	}
	return true;
}

int tb_replay_load_pairs(const tb_pair *const *p, size_t n, tb_replay_sides *v, bool *finite, tb_err *err)
{
	uint64_t nr, nc;

	memset(v, 0, n * sizeof *v);
	*finite = true;
	for (size_t i = 0; i < n; i++) {
		if (!p[i])
			continue;
		v[i].ref = load_whole(p[i]->ref, &nr, err);
		v[i].cand = v[i].ref ? load_whole(p[i]->cand, &nc, err) : NULL;
		if (!v[i].cand) {
			tb_replay_unload(v, n);
			return -1;
		}
		*finite = *finite && tb_replay_finite(v[i].ref, nr) && tb_replay_finite(v[i].cand, nc);
	}
	return 0;
}

/* One side's sampled rows: in place when t holds float32 there (a copy
 * would cost more than the sweeps over it), else copied; and are they
 * finite? */
static int sample_rows(tb_tensor *t, uint64_t cols, uint64_t step, tb_replay_rowset *out, bool *finite, tb_err *err)
{
	uint64_t rows = t->numel / cols, taken = (rows + step - 1) / step, n;
	const float *direct;

	memset(out, 0, sizeof *out);
	if (tb_tensor_acquire(t, err) < 0)
		return -1;
	direct = tb_tensor_f32_direct(t);
	if (direct) {
		*out = (tb_replay_rowset){direct, step * cols, NULL, t};
		for (uint64_t i = 0; i < taken && *finite; i++)
			*finite = tb_replay_finite(direct + i * step * cols, cols);
		return 0;
	}
	out->owned = copy_rows(t, cols, step, &n, err);
	tb_tensor_release(t);
	if (!out->owned)
		return -1;
	*out = (tb_replay_rowset){out->owned, cols, out->owned, NULL};
	*finite = *finite && tb_replay_finite(out->owned, n);
	return 0;
}

int tb_replay_load_sampled(const tb_pair *const *p, size_t n, uint64_t cols, uint64_t step, tb_replay_sampled *v,
			   bool *finite, tb_err *err)
{
	memset(v, 0, n * sizeof *v);
	*finite = true;
	for (size_t i = 0; i < n; i++) {
		if (p[i] && (sample_rows(p[i]->ref, cols, step, &v[i].ref, finite, err) < 0 ||
			     sample_rows(p[i]->cand, cols, step, &v[i].cand, finite, err) < 0)) {
			tb_replay_unload_sampled(v, n);
			return -1;
		}
	}
	return 0;
}

static void rows_free(tb_replay_rowset *r)
{
	free(r->owned);
	if (r->held)
		tb_tensor_release(r->held);
	memset(r, 0, sizeof *r);
}

void tb_replay_unload_sampled(tb_replay_sampled *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rows_free(&v[i].ref);
		rows_free(&v[i].cand);
	}
}

void tb_replay_unload(tb_replay_sides *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].ref);
		free(v[i].cand);
		v[i].ref = v[i].cand = NULL;
	}
}

bool tb_replay_rows(tb_replay *out, const tb_pair *const *p, size_t n, uint64_t min_rows, uint64_t *rows,
		    uint64_t *cols)
{
	const tb_pair *first = NULL;
	char a[TB_CELL_NAME_MAX], b[TB_CELL_NAME_MAX];

	for (size_t i = 0; i < n; i++) {
		const tb_tensor *t[2] = {p[i] ? p[i]->ref : NULL, p[i] ? p[i]->cand : NULL};
		for (int k = 0; k < 2 && t[k]; k++) {
			if (!first) {
				first = p[i];
				*cols = t[k]->ndim ? (uint64_t)t[k]->shape[t[k]->ndim - 1] : 1;
				*rows = *cols ? t[k]->numel / *cols : 0;
			}
			if (t[k]->numel == *rows * *cols && (t[k]->ndim ? (uint64_t)t[k]->shape[t[k]->ndim - 1] : 1) == *cols)
				continue;
			tb_cell_name(&first->cell, a, sizeof a);
			tb_cell_name(&p[i]->cell, b, sizeof b);
			snprintf(out->note, sizeof out->note, "replay: %s and %s differ in shape: not one op's input and output", a,
				 b);
			return false;
		}
	}
	if (first && *rows < min_rows) {
		tb_cell_name(&first->cell, a, sizeof a);
		snprintf(out->note, sizeof out->note,
			 "replay: %s holds %llu positions, too few to fit per-channel parameters (%llu at least)", a,
			 (unsigned long long)*rows, (unsigned long long)min_rows);
		return false;
	}
	return first != NULL;
}

void tb_replay_consider(tb_replay_best *b, double rel_l2, tb_cause_id cause, const char *fmt, ...)
{
	va_list ap;

	if (b->name[0] && !(rel_l2 < b->rel_l2))
		return;
	va_start(ap, fmt);
	vsnprintf(b->name, sizeof b->name, fmt, ap);
	va_end(ap);
	b->cause = cause;
	b->rel_l2 = rel_l2;
}

/* How closely a replay can reproduce a side at best: the noise of this op on
 * these dumps (the reference's own residual), the rounding of both sides'
 * values (a replay compares against values stored at either's precision),
 * and the error of the cell's inputs where the two sides agree (their
 * arithmetic, which the candidate repeats in this op). */
static void replay_noise(const tb_replay_in *in, const tb_replay_fit *fit, double floor, double *noise, double *within)
{
	const tb_cell_result *t = in->target;
	long k = tb_pairing_find(in->s->pairing, &t->cell);
	const tb_pair *p = k >= 0 ? &in->s->pairing->pairs[k] : NULL;
	/* a value rounded once is off by at most 2u/sqrt(12) of it, rms */
	double store = p && p->ref && p->cand
			       ? fmax(tb_replay_rounding(p->ref), tb_replay_rounding(p->cand)) / sqrt(3)
			       : fmax(tb_dtype_rounding(t->ref->dtype), tb_dtype_rounding(t->cand->dtype)) / sqrt(3);
	double agree = tb_origin_input_error(in->r, t - in->r->cells);
	/* the reference's residual where the variant's rows take it */
	double ref = fit->ref_rel_l2 * (fit->reach > 0 ? fit->reach : 1);

	if (!(agree < t->tol.diverge))
		agree = 0;
	/* expert ids are integers, stored exactly: their few mantissa bits are not a rounding */
	if (t->cell.id == TB_TAP_MLP_TOPK_IDS)
		store = 0;
	*noise = fmax(fmax(ref, store), fmax(agree, floor / 4));
	*within = fmax(fmax(floor / 4, 4 * ref), fmax(3 * store, 2 * agree));
}

void tb_replay_decide(const tb_replay_in *in, tb_replay *out, double floor, const tb_replay_fit *fit)
{
	char cell[TB_CELL_NAME_MAX];
	double noise, within;

	tb_cell_name(&in->target->cell, cell, sizeof cell);
	replay_noise(in, fit, floor, &noise, &within);
	snprintf(out->ref_variant, sizeof out->ref_variant, "%s", fit->ref_variant);
	out->ref_rel_l2 = fit->ref_rel_l2;
	if (!(fit->ref_rel_l2 <= floor)) {
		snprintf(out->note, sizeof out->note,
			 "the reference's %s is not an op the replay knows (closest: %s, rel_l2 %.2g); nothing is confirmed",
			 cell, fit->ref_variant, fit->ref_rel_l2);
		return;
	}
	if (fit->cand_at_ref <= within) {
		snprintf(out->note, sizeof out->note,
			 "replay of %s: the candidate computes it as the reference does (%s, rel_l2 %.2g); its difference comes "
			 "from its inputs",
			 cell, fit->ref_variant, fit->cand_at_ref);
		return;
	}
	if (!fit->variant || !(fit->rel_l2 <= within)) {
		snprintf(out->note, sizeof out->note,
			 "replay: the candidate's %s is not the reference's op on its inputs (rel_l2 %.2g) and no variant "
			 "tried reproduces it (closest: %s, rel_l2 %.2g): a weight, or an op the replay does not try",
			 cell, fit->cand_at_ref, fit->variant ? fit->variant : fit->ref_variant,
			 fit->variant ? fit->rel_l2 : fit->cand_at_ref);
		return;
	}
	if (!(fit->cand_at_ref >= 10 * fmax(fit->rel_l2, noise))) {
		snprintf(out->note, sizeof out->note,
			 "replay of %s: %s comes within the dumps' noise (rel_l2 %.2g), and the reference's op nearly so "
			 "(rel_l2 %.2g): too small a difference to tell them apart",
			 cell, fit->variant, fit->rel_l2, fit->cand_at_ref);
		return;
	}
	out->cause = tb_cause_name(fit->cause);
	snprintf(out->variant, sizeof out->variant, "%s", fit->variant);
	out->rel_l2 = fit->rel_l2;
	snprintf(out->note, sizeof out->note,
		 "replay of %s: %s reproduces the candidate (rel_l2 %.2g), the reference computes %s (rel_l2 %.2g)", cell,
		 fit->variant, fit->rel_l2, fit->ref_variant, fit->ref_rel_l2);
}

/* theta to two significant digits: fit_theta and fit_param keep up to three */
static bool round_theta(double theta)
{
	double unit = pow(10, floor(log10(theta)) - 1);

	return fabs(theta - unit * nearbyint(theta / unit)) <= 1e-9 * theta;
}

static bool dynamic_base(double hi, double lo, int rot, int64_t length)
{
	double k = pow(hi / lo, (rot - 2.0) / rot);

	for (double f = 2; f <= 64; f *= 2) {
		double orig = (double)length * f / (k - 1 + f), pow2 = exp2(nearbyint(log2(orig)));
		if (pow2 >= 16 && pow2 < (double)length && fabs(orig / pow2 - 1) < 0.01)
			return true;
	}
	return false;
}

tb_cause_id tb_replay_theta_change(double theta, double theta0, int rot, int64_t length, bool resolved, char *name,
				   size_t size)
{
	double hi = fmax(theta, theta0), lo = fmin(theta, theta0);

	if (round_theta(hi) && (resolved || !dynamic_base(hi, lo, rot, length))) {
		snprintf(name, size, "theta %.3g (the reference: %.3g)", theta, theta0);
		return TB_CAUSE_ROPE_THETA;
	}
	if (theta > theta0)
		snprintf(name, size, "dynamic NTK: theta %.3g from %.3g at %lld positions", theta, theta0,
			 (long long)length);
	else
		snprintf(name, size, "no dynamic NTK: theta %.3g, the reference's %.3g", theta, theta0);
	return TB_CAUSE_ROPE_SCALING;
}
