#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "logits.h"

#define TOPK 5

/* Indices of the k largest values, largest first (ties: lower index). */
static int topk(const float *x, int64_t n, int64_t *idx)
{
	int k = 0;

	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		int j;
		if (isnan(v))
			continue;
		if (k == TOPK && !(v > x[idx[TOPK - 1]]))
			continue;
		j = k < TOPK ? k++ : TOPK - 1;
		while (j > 0 && v > x[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
	return k;
}

static double log_sum_exp(const float *x, int64_t n, double mx)
{
	double s = 0;

	for (int64_t i = 0; i < n; i++)
		s += exp((double)x[i] - mx);
	return mx + log(s);
}

void tb_logits_row(const float *ref, const float *cand, int64_t vocab, tb_logit_row *out)
{
	int64_t ir[TOPK], ic[TOPK];
	int kr, kc, common = 0;
	double lr, lc, kl = 0;
	bool finite = true;

	for (int64_t i = 0; i < vocab && finite; i++)
		finite = isfinite(ref[i]) && isfinite(cand[i]);
	kr = topk(ref, vocab, ir);
	kc = topk(cand, vocab, ic);
	for (int a = 0; a < kr; a++)
		for (int b = 0; b < kc; b++)
			common += ir[a] == ic[b];
	out->top5_common = common;
	out->top1[0] = kr ? ir[0] : -1;
	out->top1[1] = kc ? ic[0] : -1;
	if (!finite || vocab == 0) {
		out->kl = NAN;
		out->top1_logprob[0] = out->top1_logprob[1] = NAN;
		return;
	}
	lr = log_sum_exp(ref, vocab, ref[ir[0]]);
	lc = log_sum_exp(cand, vocab, cand[ic[0]]);
	for (int64_t i = 0; i < vocab; i++) {
		double a = (double)ref[i] - lr, b = (double)cand[i] - lc;
		kl += exp(a) * (a - b);
	}
	out->kl = kl < 0 ? 0 : kl; /* rounding can dip a hair below zero */
	out->top1_logprob[0] = (double)ref[ir[0]] - lr;
	out->top1_logprob[1] = (double)cand[ic[0]] - lc;
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
	int k = lm->vocab < TOPK ? (int)(lm->vocab > 0 ? lm->vocab : 1) : TOPK;

	for (int64_t i = 0; i < lm->n_pos; i++) {
		const tb_logit_row *r = &lm->rows[i];
		kl += r->kl;
		mx = isnan(r->kl) || r->kl > mx ? r->kl : mx;
		agree += r->top1[0] == r->top1[1] && r->top1[0] >= 0;
		overlap += r->top5_common / (double)k;
	}
	if (lm->n_pos > 0) {
		lm->kl_mean = kl / (double)lm->n_pos;
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
