#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compare/logits.h"
#include "base/simd.h"

#define TOPK 5

/* Insert x[i] into the running top-k idx[0..k) (largest first; ties keep
 * the lower index; NaN never enters). */
#define TOPK_INSERT(x, i, idx, k)                                              \
	do {                                                                   \
		float v_ = (x)[i];                                             \
		int j_;                                                        \
		if (isnan(v_) || ((k) == TOPK && !(v_ > (x)[(idx)[TOPK - 1]]))) \
			break;                                                 \
		j_ = (k) < TOPK ? (k)++ : TOPK - 1;                            \
		while (j_ > 0 && v_ > (x)[(idx)[j_ - 1]]) {                    \
			(idx)[j_] = (idx)[j_ - 1];                             \
			j_--;                                                  \
		}                                                              \
		(idx)[j_] = (i);                                               \
	} while (0)

/* 2^(j/64), j = 0..63, each correctly rounded (computed to 60 digits). */
static const double exp2_64[64] = {
	0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
	0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
	0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
	0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
	0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
	0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
	0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
	0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
	0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
	0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
	0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
	0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
	0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
	0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
	0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
	0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0,
};

#define TB_KERNEL_FILE "compare/logit_kernel.inc"
#define TB_KERNEL_PREFIX logit
#include "base/simd_stamp.h"

void tb_logits_row(const float *ref, const float *cand, int64_t vocab, tb_logit_row *out)
{
	TB_SIMD_PICK(logit, row)(ref, cand, vocab, out);
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
