#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/estimate.h"
#include "compare/metrics.h"

/* ||d||^2 from the squared bucket differences, and its bound as a relative
 * rel_l2 interval. */
static void bounded(double dd, double srr, uint32_t k, double *rel, double *lo, double *hi)
{
	double eps = TB_SKETCH_Z * sqrt(2.0 / k);

	*rel = tb_rel_l2(dd, srr);
	*lo = tb_rel_l2(dd / (1 + eps), srr);
	*hi = eps < 1 ? tb_rel_l2(dd / (1 - eps), srr) : INFINITY;
}

/* The cosine from ||d||^2 and the exact norms: <r, c> = (||r||^2 +
 * ||c||^2 - ||d||^2) / 2, kept within [-1, 1] (d is an estimate). */
static double cosine_of(double dd, double srr, double scc)
{
	return fmin(1, fmax(-1, tb_cosine((srr + scc - dd) / 2, srr, scc)));
}

/* sum over columns of (column sum of c - r)^2 / rows, over ||c - r||^2
 * (dd, estimated). */
static double bias_share(const tb_sketch *r, const tb_sketch *c, double dd, bool exact)
{
	double explained = 0, rows;

	if (r->p.n_pos <= 0)
		return NAN;
	if (exact || !(dd > 0))
		return 0;
	rows = (double)(r->p.numel / r->p.row_len);
	for (uint64_t h = 0; h < r->p.row_len; h++)
		explained += ((double)c->col_sum[h] - r->col_sum[h]) * ((double)c->col_sum[h] - r->col_sum[h]);
	return fmin(1, explained / rows / dd);
}

/* Rows whose norms agree to this (relative): the same row, where rows of
 * other tokens differ by percents (a bf16 copy of a row by far less: its
 * roundings average out). */
#define SAME_NORM 1e-3

static bool same_norm(double a, double b)
{
	return fabs(sqrt(a) - sqrt(b)) <= SAME_NORM * fmax(sqrt(a), sqrt(b));
}

/* The share of positions but the first whose candidate row norm is the
 * reference's one position off (either way, the better) and not its own:
 * a sequence shifted by a token, told from the exact norms of the rows. */
static double shift_share(const tb_sketch *r, const tb_sketch *c)
{
	int64_t S = r->p.n_pos;
	double hits[2] = {0, 0};

	if (S < 2)
		return NAN;
	for (int64_t p = 0; p < S; p++)
		for (int d = 0; d < 2; d++) {
			int64_t q = d ? p - 1 : p + 1;
			if (q >= 0 && q < S)
				hits[d] += same_norm(c->pos_sumsq[p], r->pos_sumsq[q]) &&
					   !same_norm(c->pos_sumsq[p], r->pos_sumsq[p]);
		}
	return fmax(hits[0], hits[1]) / (double)(S - 1);
}

int tb_sketch_compare(const tb_sketch *r, const tb_sketch *c, tb_sketch_estimate *e, tb_err *err)
{
	const tb_sketch_params *p = &r->p;
	double dd = 0, brc = 0, brr = 0, bcc = 0, pos_dd = 0, eps = TB_SKETCH_Z * sqrt(2.0 / p->k);
	char why[128];

	memset(e, 0, sizeof *e);
	if (!tb_sketch_params_match(&r->p, &c->p, why, sizeof why))
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "cannot compare %s", why);
	e->exact = true;
	for (uint64_t b = 0; b < r->n_blocks; b++)
		e->exact &= r->hash[b] == c->hash[b];
	e->mismatch = (r->nan > c->nan ? r->nan - c->nan : c->nan - r->nan) +
		      (r->inf > c->inf ? r->inf - c->inf : c->inf - r->inf);
	e->norm_ratio = tb_norm_ratio(c->sumsq, r->sumsq);
	for (uint32_t k = 0; k < p->k && !e->exact; k++) {
		dd += (c->bucket[k] - r->bucket[k]) * (c->bucket[k] - r->bucket[k]);
		brc += r->bucket[k] * c->bucket[k];
		brr += r->bucket[k] * r->bucket[k];
		bcc += c->bucket[k] * c->bucket[k];
	}
	bounded(dd, r->sumsq, p->k, &e->rel_l2, &e->rel_l2_lo, &e->rel_l2_hi);
	/* A NaN or Inf is a zero in its side's sums, while the comparison of
	 * the values leaves out every pair it is in: which pairs those are the
	 * sketches do not say, so neither can the bound. */
	if (r->nan + r->inf + c->nan + c->inf > 0) {
		e->rel_l2_lo = 0;
		e->rel_l2_hi = INFINITY;
	}
	e->cosine_lo = cosine_of(eps < 1 ? dd / (1 - eps) : INFINITY, r->sumsq, c->sumsq);
	e->cosine_hi = cosine_of(dd / (1 + eps), r->sumsq, c->sumsq);
	/* The buckets' own cosine: exact for proportional tensors (the sketch
	 * is linear), where the one from ||d|| and the exact norms is not. */
	e->cosine = e->exact ? 1 : brr > 0 && bcc > 0 ? tb_cosine(brc, brr, bcc) : cosine_of(dd, r->sumsq, c->sumsq);
	e->cosine = fmin(fmax(e->cosine, e->cosine_lo), e->cosine_hi);
	e->bias_frac = NAN; /* no columns without positions */
	e->shift_frac = e->exact ? 0 : shift_share(r, c);
	if (p->n_pos <= 0)
		return 0;
	e->pos_rel_l2 = malloc((size_t)p->n_pos * sizeof *e->pos_rel_l2);
	e->pos_cos = malloc((size_t)p->n_pos * sizeof *e->pos_cos);
	e->pos_norm_ratio = malloc((size_t)p->n_pos * sizeof *e->pos_norm_ratio);
	if (!e->pos_rel_l2 || !e->pos_cos || !e->pos_norm_ratio) {
		tb_sketch_estimate_done(e);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (int64_t q = 0; q < p->n_pos; q++) {
		double d = 0, rr = r->pos_sumsq[q], cc = c->pos_sumsq[q], xy = 0, xx = 0, yy = 0;
		for (uint32_t k = 0; k < p->kp && !e->exact; k++) {
			double x = r->pos_bucket[q * p->kp + k], y = c->pos_bucket[q * p->kp + k];
			d += (y - x) * (y - x);
			xy += x * y;
			xx += x * x;
			yy += y * y;
		}
		pos_dd += d;
		e->pos_rel_l2[q] = tb_rel_l2(d, rr);
		e->pos_cos[q] = xx > 0 && yy > 0 ? tb_cosine(xy, xx, yy) : cosine_of(d, rr, cc);
		e->pos_norm_ratio[q] = tb_norm_ratio(cc, rr);
	}
	/* the positions' buckets estimate ||c - r||^2 too, independently:
	 * both, weighted by their buckets (the inverse of their variance) */
	{
		double wk = p->k, wp = (double)p->n_pos * p->kp;
		e->bias_frac = bias_share(r, c, (wk * dd + wp * pos_dd) / (wk + wp), e->exact);
	}
	/* A difference carried by a handful of values is a sum of few terms,
	 * and two of them sharing a bucket move an estimate beyond four of
	 * its standard deviations; the positions' buckets hash otherwise, so
	 * seldom both: the bound takes in their estimate too, as wide. */
	if (!e->exact && isfinite(e->rel_l2_hi)) {
		double lo, hi;
		bounded(pos_dd, r->sumsq, p->k, &(double){0}, &lo, &hi);
		e->rel_l2_lo = fmin(e->rel_l2_lo, lo);
		e->rel_l2_hi = fmax(e->rel_l2_hi, hi);
	}
	return 0;
}

int tb_sketch_sides(tb_tensor *const t[2], const tb_sketch *s[2], tb_sketch own[2], tb_err *err)
{
	const tb_sketch *given = t[0]->sketch ? t[0]->sketch : t[1]->sketch;
	int rc = 0;

	memset(own, 0, 2 * sizeof *own);
	for (int i = 0; i < 2 && rc == 0; i++) {
		if ((s[i] = t[i]->sketch))
			continue;
		if (tb_sketch_alloc(&own[i], &given->p) < 0)
			rc = tb_err_setc(err, TB_ERR_NOMEM, t[i]->path, "out of memory sketching tensor '%s'", t[i]->name);
		else if (t[i]->numel != given->p.numel)
			rc = tb_err_setc(err, TB_ERR_USAGE, t[i]->path, "'%s' is not of the sketch's shape", t[i]->name);
		else
			rc = tb_sketch_tensor(t[i], &own[i], 1, err);
		s[i] = &own[i];
	}
	return rc;
}

int tb_sketch_rel_l2(tb_tensor *ref, tb_tensor *cand, double *rel, bool *exact, tb_err *err)
{
	tb_tensor *t[2] = {ref, cand};
	const tb_sketch *s[2];
	tb_sketch own[2];
	tb_sketch_estimate e;
	int rc = tb_sketch_sides(t, s, own, err);

	if (rc == 0 && (rc = tb_sketch_compare(s[0], s[1], &e, err)) == 0) {
		*rel = e.exact ? 0 : e.rel_l2;
		*exact = e.exact;
		tb_sketch_estimate_done(&e);
	}
	tb_sketch_done(&own[0]);
	tb_sketch_done(&own[1]);
	return rc;
}

void tb_sketch_estimate_done(tb_sketch_estimate *e)
{
	free(e->pos_rel_l2);
	free(e->pos_cos);
	free(e->pos_norm_ratio);
	e->pos_rel_l2 = e->pos_cos = e->pos_norm_ratio = NULL;
}
