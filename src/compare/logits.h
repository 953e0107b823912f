/*
 * logits: per-position comparison of two [S, V] logit tensors: KL(ref||cand)
 * of the softmaxes (computed stably in double), top-1 agreement, top-5
 * overlap and each side's top-1 log-probability.
 *
 * tb_logits_row handles one position; tb_logits_finish summarises.
 * tb_logit_metrics owns its arrays; tb_logits_free releases it.
 */
#ifndef TB_LOGITS_H
#define TB_LOGITS_H

#include <stdint.h>

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
/* Allocate for n_pos positions (rows zeroed). */
tb_logit_metrics *tb_logits_new(int64_t n_pos, int64_t vocab);
void tb_logits_finish(tb_logit_metrics *lm);
void tb_logits_free(tb_logit_metrics *lm);

#endif
