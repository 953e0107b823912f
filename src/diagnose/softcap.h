/*
 * softcap: does one side's logits equal the other's soft-capped, y = C
 * tanh(x / C) (Gemma 2's final_logit_softcapping), and with which C?  The
 * fit the final-softcap features and the logits replay share.
 */
#ifndef TB_DIAG_SOFTCAP_H
#define TB_DIAG_SOFTCAP_H

#include <stddef.h>

typedef struct tb_softcap {
	double cap;      /* the fitted C */
	double rel_l2;   /* |C tanh(x / C) - y| / |y|, x the uncapped side, y the capped one; NaN: no fit */
	int capped_side; /* 0: the reference is the capped one, 1: the candidate */
} tb_softcap;

/* Fit both directions over n values of each side (ref[i] and cand[i] the
 * same logit) and keep the better. */
void tb_softcap_fit(const float *ref, const float *cand, size_t n, tb_softcap *out);

/* Both sides capped, at caps of their own: ref = C1 tanh(z / C1) and
 * cand = C2 tanh(z / C2) of the same z (final_logit_softcapping of another
 * value).  C1 is tried above the reference's largest |value|, z recovered
 * as C1 atanh(ref / C1), and C2 fitted to it as tb_softcap_fit does. */
typedef struct tb_softcap_pair {
	double ref_cap, cand_cap; /* C1 and C2 */
	double rel_l2;            /* |C2 tanh(z / C2) - cand| / |cand|; NaN: no fit */
} tb_softcap_pair;

void tb_softcap_fit_pair(const float *ref, const float *cand, size_t n, tb_softcap_pair *out);

#endif
