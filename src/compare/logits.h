/*
 * logits: per-position comparison of two [S, V] logit tensors: KL(ref||cand)
 * of the softmaxes, top-1 agreement, top-5 overlap and each side's top-1
 * log-probability.  The exponentials are float, their sums go through
 * double; KL is computed from the sum of e^w - 1 - w (logit_kernel.inc), so
 * it keeps its relative accuracy down to the smallest KL: within
 * TB_LOGIT_KL_REL of itself, and the log-probabilities within
 * TB_LOGIT_LP_ABS (the block sums' bound of the metric kernel plus four
 * units of the exponentials; tests/test_kernel.c checks both against long
 * double from a KL of 1e-13 to 40).
 *
 * tb_logits_row handles one position; tb_logits_finish summarises.
 * tb_logit_metrics owns its arrays; tb_logits_free releases it.
 */
#ifndef TB_LOGITS_H
#define TB_LOGITS_H

#include <stdint.h>

#include "tensor/dtype.h"

#define TB_LOGIT_KL_REL 0x1p-20
#define TB_LOGIT_LP_ABS (24 * 0x1p-24)

typedef struct tb_logit_row {
	double kl;             /* KL(ref || cand), nats; NaN when a side is not finite */
	int64_t top1[2];       /* argmax per side */
	double top1_logprob[2];
	int top5_common;       /* |top5(ref) ∩ top5(cand)|, 0..5 */
} tb_logit_row;

typedef struct tb_logit_metrics {
	int64_t n_pos, vocab;
	tb_logit_row *rows;    /* n_pos */
	double kl_mean, kl_last, kl_max; /* mean over rows with a KL (NaN if none); max is NaN if any row's is */
	double top1_agree;     /* fraction of positions with equal argmax */
	double top5_overlap;   /* mean |top5 ∩ top5| / 5 */
} tb_logit_metrics;

void tb_logits_row(const float *ref, const float *cand, int64_t vocab, tb_logit_row *out);
/* tb_logits_row on little-endian elements of rdt and cdt read in place
 * (both must pass tb_acc_reads): the same results as on the exactly
 * decoded float32 values. */
void tb_logits_row_raw(const void *ref, tb_dtype rdt, const void *cand, tb_dtype cdt, int64_t vocab,
		       tb_logit_row *out);
/* Allocate for n_pos positions (rows zeroed). */
tb_logit_metrics *tb_logits_new(int64_t n_pos, int64_t vocab);
void tb_logits_finish(tb_logit_metrics *lm);
void tb_logits_free(tb_logit_metrics *lm);

#endif
