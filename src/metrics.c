#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

void tb_tolerance_default(tb_tolerance *t)
{
	t->atol = 1e-4;
	t->rtol = 1e-4;
	t->diverge = 1e-2;
	t->max_kl = 0.015;
	t->absolute = false;
}

void tb_acc_init(tb_acc *a)
{
	memset(a, 0, sizeof *a);
	a->rmin = a->cmin = INFINITY;
	a->rmax = a->cmax = -INFINITY;
	a->max_abs = -1;
}

void tb_acc_merge(tb_acc *into, const tb_acc *from)
{
	into->n += from->n;
	into->finite += from->finite;
	into->sdd += from->sdd;
	into->srr += from->srr;
	into->scc += from->scc;
	into->src += from->src;
	into->sad += from->sad;
	into->sr += from->sr;
	into->sc += from->sc;
	into->rmin = fmin(into->rmin, from->rmin);
	into->rmax = fmax(into->rmax, from->rmax);
	into->cmin = fmin(into->cmin, from->cmin);
	into->cmax = fmax(into->cmax, from->cmax);
	if (from->max_abs > into->max_abs || (from->max_abs == into->max_abs && from->worst < into->worst)) {
		into->max_abs = from->max_abs;
		into->worst = from->worst;
		into->worst_r = from->worst_r;
		into->worst_c = from->worst_c;
	}
	into->close += from->close;
	for (int s = 0; s < 2; s++) {
		into->nan[s] += from->nan[s];
		into->inf[s] += from->inf[s];
	}
	into->mismatch += from->mismatch;
}

static void note_worst(tb_acc *a, const float *r, const float *c, size_t n, uint64_t base, double mx)
{
	if (!(mx > a->max_abs))
		return;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)c[i] - (double)r[i]);
		if (d == mx) {
			a->max_abs = mx;
			a->worst = base + i;
			a->worst_r = r[i];
			a->worst_c = c[i];
			return;
		}
	}
}

/* The careful path for runs holding NaN or Inf: counts them and keeps the
 * sums over finite pairs. */
static void run_nonfinite(tb_acc *a, const float *r, const float *c, size_t n, uint64_t base, double atol,
			  double rtol, tb_run_sums *run)
{
	tb_run_sums s = {0};

	for (size_t i = 0; i < n; i++) {
		double rv = r[i], cv = c[i];
		bool rf = isfinite(rv), cf = isfinite(cv);

		a->nan[0] += isnan(rv) != 0;
		a->nan[1] += isnan(cv) != 0;
		a->inf[0] += isinf(rv) != 0;
		a->inf[1] += isinf(cv) != 0;
		if (!rf || !cf) {
			bool same_inf = isinf(rv) && isinf(cv) && rv == cv;
			bool both_nan = isnan(rv) && isnan(cv);
			if (!same_inf && !both_nan)
				a->mismatch++;
			a->close += same_inf; /* numpy's isclose: equal infinities are close */
			continue;
		}
		double d = cv - rv, ad = fabs(d);
		a->finite++;
		s.sdd += d * d;
		s.srr += rv * rv;
		s.scc += cv * cv;
		s.src += rv * cv;
		a->sad += ad;
		a->sr += rv;
		a->sc += cv;
		a->rmin = fmin(a->rmin, rv);
		a->rmax = fmax(a->rmax, rv);
		a->cmin = fmin(a->cmin, cv);
		a->cmax = fmax(a->cmax, cv);
		a->close += ad <= atol + rtol * fabs(rv);
		if (ad > a->max_abs) {
			a->max_abs = ad;
			a->worst = base + i;
			a->worst_r = r[i];
			a->worst_c = c[i];
		}
	}
	a->n += n;
	a->sdd += s.sdd;
	a->srr += s.srr;
	a->scc += s.scc;
	a->src += s.src;
	if (run)
		*run = s;
}

void tb_acc_run(tb_acc *a, const float *r, const float *c, size_t n, uint64_t base, double atol, double rtol,
		tb_run_sums *run)
{
	double sdd = 0, srr = 0, scc = 0, src = 0, sad = 0, sr = 0, sc = 0, mx = 0;
	double rmin = INFINITY, rmax = -INFINITY, cmin = INFINITY, cmax = -INFINITY;
	uint64_t close = 0;

	/* The fast path assumes finite data; a NaN or Inf anywhere makes a sum
	 * non-finite (squares of finite floats cannot overflow a double), and
	 * the run is redone carefully. */
#pragma omp simd reduction(+ : sdd, srr, scc, src, sad, sr, sc, close) reduction(max : mx, rmax, cmax) \
	reduction(min : rmin, cmin)
	for (size_t i = 0; i < n; i++) {
		double rv = r[i], cv = c[i];
		double d = cv - rv, ad = fabs(d);
		sdd += d * d;
		srr += rv * rv;
		scc += cv * cv;
		src += rv * cv;
		sad += ad;
		sr += rv;
		sc += cv;
		mx = ad > mx ? ad : mx;
		rmin = rv < rmin ? rv : rmin;
		rmax = rv > rmax ? rv : rmax;
		cmin = cv < cmin ? cv : cmin;
		cmax = cv > cmax ? cv : cmax;
		close += ad <= atol + rtol * fabs(rv);
	}
	if (!isfinite(srr + scc)) {
		run_nonfinite(a, r, c, n, base, atol, rtol, run);
		return;
	}
	a->n += n;
	a->finite += n;
	a->sdd += sdd;
	a->srr += srr;
	a->scc += scc;
	a->src += src;
	a->sad += sad;
	a->sr += sr;
	a->sc += sc;
	a->rmin = fmin(a->rmin, rmin);
	a->rmax = fmax(a->rmax, rmax);
	a->cmin = fmin(a->cmin, cmin);
	a->cmax = fmax(a->cmax, cmax);
	a->close += close;
	if (n)
		note_worst(a, r, c, n, base, mx);
	if (run) {
		run->sdd = sdd;
		run->srr = srr;
		run->scc = scc;
		run->src = src;
	}
}

double tb_rel_l2(double sdd, double srr)
{
	if (srr == 0)
		return sdd == 0 ? 0 : INFINITY;
	return sqrt(sdd) / sqrt(srr);
}

double tb_cosine(double src, double srr, double scc)
{
	if (srr == 0 && scc == 0)
		return 1;
	if (srr == 0 || scc == 0)
		return 0;
	return src / (sqrt(srr) * sqrt(scc));
}

double tb_norm_ratio(double scc, double srr)
{
	if (srr == 0)
		return scc == 0 ? 1 : INFINITY;
	return sqrt(scc) / sqrt(srr);
}

int tb_metrics_finish(tb_metrics *m, const tb_acc *a, const tb_run_sums *rows, uint64_t n_rows, int64_t n_pos,
		      double diverge)
{
	double nf = a->finite ? (double)a->finite : 1;

	memset(m, 0, sizeof *m);
	m->n = a->n;
	m->max_abs = a->max_abs < 0 ? 0 : a->max_abs;
	m->mean_abs = a->sad / nf;
	m->rel_l2 = tb_rel_l2(a->sdd, a->srr);
	m->cosine = tb_cosine(a->src, a->srr, a->scc);
	m->norm_ratio = tb_norm_ratio(a->scc, a->srr);
	m->allclose_frac = a->n ? (double)a->close / (double)a->n : 1;
	for (int s = 0; s < 2; s++) {
		double sum = s ? a->sc : a->sr, sq = s ? a->scc : a->srr;
		double mean = a->finite ? sum / nf : 0;
		m->nan[s] = a->nan[s];
		m->inf[s] = a->inf[s];
		m->mean[s] = mean;
		m->std[s] = a->finite ? sqrt(fmax(0, sq / nf - mean * mean)) : 0;
		m->min[s] = a->finite ? (s ? a->cmin : a->rmin) : 0;
		m->max[s] = a->finite ? (s ? a->cmax : a->rmax) : 0;
		m->l2[s] = sqrt(sq);
	}
	m->mismatch = a->mismatch;
	m->worst_index = a->worst;
	m->worst_ref = a->worst_r;
	m->worst_cand = a->worst_c;
	m->first_bad_position = -1;
	if (n_pos <= 0 || !rows)
		return 0;
	tb_run_sums *pos = calloc((size_t)n_pos, sizeof *pos);
	m->pos_rel_l2 = malloc((size_t)n_pos * sizeof *m->pos_rel_l2);
	m->pos_cos = malloc((size_t)n_pos * sizeof *m->pos_cos);
	m->pos_norm_ratio = malloc((size_t)n_pos * sizeof *m->pos_norm_ratio);
	if (!pos || !m->pos_rel_l2 || !m->pos_cos || !m->pos_norm_ratio) {
		free(pos);
		tb_metrics_done(m);
		return -1;
	}
	for (uint64_t i = 0; i < n_rows; i++) {
		tb_run_sums *p = &pos[i % (uint64_t)n_pos];
		p->sdd += rows[i].sdd;
		p->srr += rows[i].srr;
		p->scc += rows[i].scc;
		p->src += rows[i].src;
	}
	m->n_pos = n_pos;
	for (int64_t i = 0; i < n_pos; i++) {
		m->pos_rel_l2[i] = tb_rel_l2(pos[i].sdd, pos[i].srr);
		m->pos_cos[i] = tb_cosine(pos[i].src, pos[i].srr, pos[i].scc);
		m->pos_norm_ratio[i] = tb_norm_ratio(pos[i].scc, pos[i].srr);
		if (m->first_bad_position < 0 && !(m->pos_rel_l2[i] <= diverge))
			m->first_bad_position = i;
	}
	free(pos);
	return 0;
}

void tb_metrics_done(tb_metrics *m)
{
	free(m->pos_rel_l2);
	free(m->pos_cos);
	free(m->pos_norm_ratio);
	m->pos_rel_l2 = m->pos_cos = m->pos_norm_ratio = NULL;
	m->n_pos = 0;
}
