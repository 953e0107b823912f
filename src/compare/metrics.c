#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics.h"
#include "base/simd.h"

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
	for (int s = 0; s < 2; s++) {
		a->lone_min[s] = INFINITY;
		a->lone_max[s] = -INFINITY;
	}
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
	for (int s = 0; s < 2; s++) {
		into->lone_n[s] += from->lone_n[s];
		into->lone_s[s] += from->lone_s[s];
		into->lone_ss[s] += from->lone_ss[s];
		into->lone_min[s] = fmin(into->lone_min[s], from->lone_min[s]);
		into->lone_max[s] = fmax(into->lone_max[s], from->lone_max[s]);
	}
}

/* v, finite on side s while its partner is not, into that side's own statistics. */
static void add_lone(tb_acc *a, int s, double v)
{
	a->lone_n[s]++;
	a->lone_s[s] += v;
	a->lone_ss[s] += v * v;
	a->lone_min[s] = fmin(a->lone_min[s], v);
	a->lone_max[s] = fmax(a->lone_max[s], v);
}

/* Element i of a source, widened. */
TB_INLINE double elem(tb_src k, const void *p, size_t i)
{
	return (double)tb_sload(k, p, i);
}

/* |c - r| of finite values as the sums and allclose have it: rounded to
 * float, as the kernel computes it (and numpy on float32 arrays), except
 * where that overflows. */
static inline double abs_diff(float rf, float cf)
{
	float d = fabsf(cf - rf);

	return isinf(d) ? fabs((double)cf - rf) : d;
}

/* Does |c - r| pass allclose?  The bound in float, as the kernel has it. */
static inline bool close_f(double ad, float rf, float atol, float rtol)
{
	return ad <= atol + rtol * fabsf(rf);
}

/* The first pair of the run whose |c - r|, in float as the kernel has
 * it, is mx; max_abs is its |c - r| in double, exact. */
static void note_worst(tb_acc *a, tb_src rk, const void *r, tb_src ck, const void *c, size_t n, uint64_t base,
		       double mx)
{
	if (!(mx > a->max_abs))
		return;
	for (size_t i = 0; i < n; i++) {
		float rf = tb_sload(rk, r, i), cf = tb_sload(ck, c, i);
		if (fabsf(cf - rf) == mx) {
			a->max_abs = fabs((double)cf - rf);
			a->worst = base + i;
			a->worst_r = rf;
			a->worst_c = cf;
			return;
		}
	}
}

/* The careful path, in double, for runs holding NaN or Inf (counts them
 * and keeps the sums over finite pairs), and for runs whose squares float
 * cannot hold (see float_safe). */
static void run_nonfinite(tb_acc *a, tb_src rk, const void *r, tb_src ck, const void *c, size_t n, uint64_t base,
			  double atol, double rtol, tb_run_sums *run)
{
	tb_run_sums s = {0};

	for (size_t i = 0; i < n; i++) {
		double rv = elem(rk, r, i), cv = elem(ck, c, i);
		bool rf = isfinite(rv), cf = isfinite(cv);

		a->nan[0] += isnan(rv) != 0;
		a->nan[1] += isnan(cv) != 0;
		a->inf[0] += isinf(rv) != 0;
		a->inf[1] += isinf(cv) != 0;
		if (!rf || !cf) {
			bool same_inf = isinf(rv) && isinf(cv) && rv == cv;
			bool both_nan = isnan(rv) && isnan(cv);
			if (!same_inf && !both_nan) {
				a->mismatch++;
				s.mismatch++;
			}
			/* Equal infinities are close (numpy's isclose), and so are NaNs
			 * in the same place (isclose's equal_nan): a tensor compared
			 * with itself must match even when it holds NaN. */
			a->close += same_inf || both_nan;
			if (rf)
				add_lone(a, 0, rv);
			if (cf)
				add_lone(a, 1, cv);
			continue;
		}
		double d = cv - rv;
		double ad = abs_diff((float)rv, (float)cv);
		bool ok = close_f(ad, (float)rv, (float)atol, (float)rtol);
		a->finite++;
		s.sdd += d * d;
		s.srr += rv * rv;
		s.scc += cv * cv;
		s.src += rv * cv;
		s.sad += ad;
		s.close += ok;
		s.mx = fmax(s.mx, fabs(d));
		a->sad += ad;
		a->sr += rv;
		a->sc += cv;
		a->rmin = fmin(a->rmin, rv);
		a->rmax = fmax(a->rmax, rv);
		a->cmin = fmin(a->cmin, cv);
		a->cmax = fmax(a->cmax, cv);
		a->close += ok;
		if (fabs(d) > a->max_abs) {
			a->max_abs = fabs(d);
			a->worst = base + i;
			a->worst_r = (float)rv;
			a->worst_c = (float)cv;
		}
	}
	a->n += n;
	s.n = n;
	a->sdd += s.sdd;
	a->srr += s.srr;
	a->scc += s.scc;
	a->src += s.src;
	if (run)
		*run = s;
}

/* What one fast-path run produced. */
typedef struct kout {
	double sdd, srr, scc, src, sad, sr, sc, mx;
	float rmin, rmax, cmin, cmax;
	uint64_t close;
} kout;

#define ACC_BLOCK TB_ACC_BLOCK
#define TB_KERNEL_FILE "compare/acc_kernel.inc"
#define TB_KERNEL_PREFIX acc
#include "base/simd_stamp.h"

/* Did the kernel's float terms hold?  A NaN or Inf, or a square beyond
 * float's range, makes a sum non-finite; values below 2^-63 have squares
 * in float's subnormals, which keep fewer bits, or underflow to 0 (below
 * 2^-75): when the whole run is that small its sums are only that, and a
 * sum of 0 is one only where every value is 0. */
static bool float_safe(const kout *o)
{
	double s = o->srr + o->scc + o->sdd;
	bool zeros = o->rmin == 0 && o->rmax == 0 && o->cmin == 0 && o->cmax == 0;

	return isfinite(s) && ((s == 0 && zeros) || s >= 0x1p-100);
}

int tb_dtype_src(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_F32:
		return TB_SRC_F32;
	case TB_DT_BF16:
		return TB_SRC_BF16;
	case TB_DT_F16:
		return TB_SRC_F16;
	default:
		return -1;
	}
}

bool tb_acc_reads(tb_dtype dt)
{
	return tb_dtype_src(dt) >= 0;
}

void tb_acc_run_raw(tb_acc *a, const void *r, tb_dtype rdt, const void *c, tb_dtype cdt, size_t n, uint64_t base,
		    double atol, double rtol, tb_run_sums *run)
{
	tb_src rk = (tb_src)tb_dtype_src(rdt), ck = (tb_src)tb_dtype_src(cdt);
	kout o;

	TB_SIMD_PICK(acc, run)(rk, r, ck, c, n, atol, rtol, &o);
	if (!float_safe(&o)) {
		run_nonfinite(a, rk, r, ck, c, n, base, atol, rtol, run);
		return;
	}
	a->n += n;
	a->finite += n;
	a->sdd += o.sdd;
	a->srr += o.srr;
	a->scc += o.scc;
	a->src += o.src;
	a->sad += o.sad;
	a->sr += o.sr;
	a->sc += o.sc;
	if (n) {
		a->rmin = fmin(a->rmin, o.rmin);
		a->rmax = fmax(a->rmax, o.rmax);
		a->cmin = fmin(a->cmin, o.cmin);
		a->cmax = fmax(a->cmax, o.cmax);
		note_worst(a, rk, r, ck, c, n, base, o.mx);
	}
	a->close += o.close;
	if (run) {
		run->sdd = o.sdd;
		run->srr = o.srr;
		run->scc = o.scc;
		run->src = o.src;
		run->sad = o.sad;
		run->mx = n ? o.mx : 0;
		run->n = n;
		run->close = o.close;
		run->mismatch = 0;
	}
}

void tb_acc_run(tb_acc *a, const float *r, const float *c, size_t n, uint64_t base, double atol, double rtol,
		tb_run_sums *run)
{
	tb_acc_run_raw(a, r, TB_DT_F32, c, TB_DT_F32, n, base, atol, rtol, run);
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

tb_run_sums *tb_run_sums_by_position(const tb_run_sums *rows, uint64_t n_rows, int64_t n_pos)
{
	tb_run_sums *pos = calloc((size_t)n_pos, sizeof *pos);

	if (!pos)
		return NULL;
	for (uint64_t i = 0; i < n_rows; i++) {
		tb_run_sums *p = &pos[i % (uint64_t)n_pos];
		p->sdd += rows[i].sdd;
		p->srr += rows[i].srr;
		p->scc += rows[i].scc;
		p->src += rows[i].src;
		p->sad += rows[i].sad;
		p->mx = fmax(p->mx, rows[i].mx);
		p->n += rows[i].n;
		p->close += rows[i].close;
		p->mismatch += rows[i].mismatch;
	}
	return pos;
}

int tb_metrics_finish(tb_metrics *m, const tb_acc *a, const tb_run_sums *rows, uint64_t n_rows, int64_t n_pos,
		      double diverge)
{
	double nf = a->finite ? (double)a->finite : 1;
	/* NaN/Inf on one side and no finite pair: nothing to measure the
	 * difference on (null in the JSON report, not a perfect 0). */
	bool blind = a->finite == 0 && a->mismatch > 0;

	memset(m, 0, sizeof *m);
	m->n = a->n;
	m->max_abs = blind ? NAN : a->max_abs < 0 ? 0 : a->max_abs;
	m->mean_abs = blind ? NAN : a->sad / nf;
	m->rel_l2 = blind ? NAN : tb_rel_l2(a->sdd, a->srr);
	m->cosine = blind ? NAN : tb_cosine(a->src, a->srr, a->scc);
	m->norm_ratio = blind ? NAN : tb_norm_ratio(a->scc, a->srr);
	m->allclose_frac = a->n ? (double)a->close / (double)a->n : 1;
	for (int s = 0; s < 2; s++) {
		double own = (double)(a->finite + a->lone_n[s]);
		double sum = (s ? a->sc : a->sr) + a->lone_s[s], sq = (s ? a->scc : a->srr) + a->lone_ss[s];
		double mean = own > 0 ? sum / own : 0;
		m->nan[s] = a->nan[s];
		m->inf[s] = a->inf[s];
		m->mean[s] = mean;
		m->std[s] = own > 0 ? sqrt(fmax(0, sq / own - mean * mean)) : 0;
		m->min[s] = own > 0 ? fmin(s ? a->cmin : a->rmin, a->lone_min[s]) : 0;
		m->max[s] = own > 0 ? fmax(s ? a->cmax : a->rmax, a->lone_max[s]) : 0;
		m->l2[s] = sqrt(sq);
	}
	m->mismatch = a->mismatch;
	m->worst_index = a->worst;
	m->worst_ref = a->worst_r;
	m->worst_cand = a->worst_c;
	m->first_bad_position = -1;
	if (n_pos <= 0 || !rows)
		return 0;
	tb_run_sums *pos = tb_run_sums_by_position(rows, n_rows, n_pos);
	if (!pos)
		return -1;
	int rc = tb_metrics_positions(m, pos, NULL, n_pos, diverge);
	free(pos);
	return rc;
}

int tb_metrics_positions(tb_metrics *m, const tb_run_sums *pos, const bool *seen, int64_t n_pos, double diverge)
{
	m->pos_rel_l2 = malloc((size_t)n_pos * sizeof *m->pos_rel_l2);
	m->pos_cos = malloc((size_t)n_pos * sizeof *m->pos_cos);
	m->pos_norm_ratio = malloc((size_t)n_pos * sizeof *m->pos_norm_ratio);
	if (!m->pos_rel_l2 || !m->pos_cos || !m->pos_norm_ratio) {
		tb_metrics_done(m);
		return -1;
	}
	m->n_pos = n_pos;
	m->pos_seen = 0;
	m->first_bad_position = -1;
	for (int64_t i = 0; i < n_pos; i++) {
		if (seen && !seen[i]) {
			m->pos_rel_l2[i] = m->pos_cos[i] = m->pos_norm_ratio[i] = NAN;
			continue;
		}
		m->pos_seen++;
		/* A position where NaN/Inf appear on one side is as bad as it gets,
		 * whatever its finite elements say. */
		m->pos_rel_l2[i] = pos[i].mismatch ? INFINITY : tb_rel_l2(pos[i].sdd, pos[i].srr);
		m->pos_cos[i] = pos[i].mismatch ? NAN : tb_cosine(pos[i].src, pos[i].srr, pos[i].scc);
		m->pos_norm_ratio[i] = pos[i].mismatch ? NAN : tb_norm_ratio(pos[i].scc, pos[i].srr);
		if (m->first_bad_position < 0 && !(m->pos_rel_l2[i] <= diverge))
			m->first_bad_position = i;
	}
	return 0;
}

void tb_metrics_done(tb_metrics *m)
{
	free(m->pos_rel_l2);
	free(m->pos_cos);
	free(m->pos_norm_ratio);
	m->pos_rel_l2 = m->pos_cos = m->pos_norm_ratio = NULL;
	m->n_pos = m->pos_seen = 0;
}
