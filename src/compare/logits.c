#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compare/logits.h"
#include "compare/metrics.h"
#include "base/simd.h"

#define TOPK 5

/* Insert element i of x (read by tb_sload as kind sk) into the running
 * top-k idx[0..k) (largest first; ties keep the lower index; NaN never
 * enters). */
#define TOPK_AT(j) tb_sload(sk, x, (uint64_t)(j))
#define TOPK_INSERT(i, idx, k)                                                 \
	do {                                                                   \
		float v_ = TOPK_AT(i);                                         \
		int j_;                                                        \
		if (isnan(v_) || ((k) == TOPK && !(v_ > TOPK_AT((idx)[TOPK - 1])))) \
			break;                                                 \
		j_ = (k) < TOPK ? (k)++ : TOPK - 1;                            \
		while (j_ > 0 && v_ > TOPK_AT((idx)[j_ - 1])) {                \
			(idx)[j_] = (idx)[j_ - 1];                             \
			j_--;                                                  \
		}                                                              \
		(idx)[j_] = (i);                                               \
	} while (0)

/* The logit kernel's float lanes are summed over blocks of this many
 * vectors, then into double (see logit_kernel.inc). */
#define LOGIT_BLOCK 16
#define LOGIT_SUMS 7

/* log1p(z) - z for |z| < 2^-7: -z^2/2 + z^3/3 - ..., to z^10 (the
 * terms left out are under 2^-56 of the first). */
static double log1p_minus(double z)
{
	double q = 0;

	for (int j = 10; j >= 2; j--)
		q = q * z + (j % 2 ? 1.0 : -1.0) / j;
	return z * z * q;
}

/* KL and the top-1 log-probabilities from the kernel's sums (see
 * logit_kernel.inc); sd = mc - mr - k, so e_r e^w = e_c e^sd. */
static void logit_finish(const double s[LOGIT_SUMS], double sd, tb_logit_row *out)
{
	double x = s[1] / s[0], kl;

	if (sd > 600) {
		/* e^sd overflows: cand's argmax, far from ref's, holds the mass
		 * (s[4] >= 1), and the small-w terms vanish next to it */
		kl = sd + log(s[4]) - log(s[0]) + log1p(s[3] * exp(-sd) / s[4]) - x;
	} else {
		double y = (s[2] + (s[4] * exp(sd) - s[5] - s[6])) / s[0], z = x + y;
		/* log1p(z) - x, without the difference of x and nearly x when
		 * both are small, nor of y and nearly y when both are large */
		kl = fabs(z) < 0x1p-7 ? y + log1p_minus(z) : log1p(z) - x;
	}
	out->kl = kl < 0 ? 0 : kl; /* rounding can dip a hair below zero */
	out->top1_logprob[0] = -log(s[0]);
	out->top1_logprob[1] = -log(s[3] * exp(-sd) + s[4]);
}

/* The kernel's sums in double, one element at a time, for a row whose
 * float sums overflowed (logits near float's range, whose differences
 * float cannot hold): the same sums, with k = c - r at ref's argmax
 * exact.  Returns sd for logit_finish. */
static double sums_double(tb_src rk, const void *ref, tb_src ck, const void *cand, int64_t n, int64_t ir,
			  double mr, double mc, double s[LOGIT_SUMS])
{
	double k = tb_sload(ck, cand, (uint64_t)ir) - mr;

	memset(s, 0, LOGIT_SUMS * sizeof *s);
	for (int64_t i = 0; i < n; i++) {
		double r = tb_sload(rk, ref, (uint64_t)i), c = tb_sload(ck, cand, (uint64_t)i);
		double er = exp(r - mr), w = (c - r) - k;
		s[0] += er;
		s[1] += er * w;
		if (fabs(w) <= 0.5) {
			double g = er * (expm1(w) - w);
			s[2] += g;
			s[3] += er + er * w + g;
		} else {
			s[4] += exp(c - mc);
			s[5] += er;
			s[6] += er * w;
		}
	}
	return mc - mr - k;
}

static bool sums_finite(const double s[LOGIT_SUMS])
{
	for (int j = 0; j < LOGIT_SUMS; j++)
		if (!isfinite(s[j]))
			return false;
	return true;
}

#define TB_KERNEL_FILE "compare/logit_kernel.inc"
#define TB_KERNEL_PREFIX logit
#include "base/simd_stamp.h"

void tb_logits_row(const float *ref, const float *cand, int64_t vocab, tb_logit_row *out)
{
	TB_SIMD_PICK(logit, row)(TB_SRC_F32, ref, TB_SRC_F32, cand, vocab, out);
}

void tb_logits_row_raw(const void *ref, tb_dtype rdt, const void *cand, tb_dtype cdt, int64_t vocab,
		       tb_logit_row *out)
{
	TB_SIMD_PICK(logit, row)((tb_src)tb_dtype_src(rdt), ref, (tb_src)tb_dtype_src(cdt), cand, vocab, out);
}

tb_logit_metrics *tb_logits_new(int64_t n_pos, int64_t vocab)
{
	tb_logit_metrics *lm = calloc(1, sizeof *lm);

	if (!lm)
		return NULL;
	lm->rows = calloc(n_pos > 0 ? (size_t)n_pos : 1, sizeof *lm->rows);
	if (!lm->rows) {
		free(lm);
		return NULL;
	}
	lm->n_pos = n_pos;
	lm->vocab = vocab;
	return lm;
}

void tb_logits_finish(tb_logit_metrics *lm)
{
	double kl = 0, agree = 0, overlap = 0, mx = 0;
	int64_t n_kl = 0;
	int k = lm->vocab < TOPK ? (int)(lm->vocab > 0 ? lm->vocab : 1) : TOPK;

	for (int64_t i = 0; i < lm->n_pos; i++) {
		const tb_logit_row *r = &lm->rows[i];
		/* A row with NaN or Inf has no softmax: the element test judges it
		 * (one side only is a mismatch, NaN beside NaN is not), and the
		 * mean KL is over the rows that have one. */
		if (!isnan(r->kl)) {
			kl += r->kl;
			n_kl++;
		}
		mx = isnan(r->kl) || r->kl > mx ? r->kl : mx;
		agree += r->top1[0] == r->top1[1] && r->top1[0] >= 0;
		overlap += r->top5_common / (double)k;
	}
	if (lm->n_pos > 0) {
		lm->kl_mean = n_kl ? kl / (double)n_kl : NAN;
		lm->kl_last = lm->rows[lm->n_pos - 1].kl;
		lm->kl_max = mx;
		lm->top1_agree = agree / (double)lm->n_pos;
		lm->top5_overlap = overlap / (double)lm->n_pos;
	}
}

void tb_logits_free(tb_logit_metrics *lm)
{
	if (!lm)
		return;
	free(lm->rows);
	free(lm);
}
