#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_ops.h"
#include "diagnose/softcap.h"

/* logits from final_norm through lm_head, of which only the soft-cap can be
 * replayed without lm_head's weights: when final_norm agrees and one side's
 * logits are the other's soft-capped, C tanh(z / C) with C fitted (Gemma
 * 2's final_logit_softcapping, transformers models/gemma2/modeling_gemma2.py
 * Gemma2ForCausalLM.forward), the cap is what the candidate adds or drops.
 * The reference's configuration is its logits as they are: capped at the
 * fitted C when it is the capped side. */

/* Rows read at most, spread over the positions: a whole vocabulary's logits
 * at every position can be hundreds of megabytes, and a C is pinned down by
 * a few rows. */
#define ROWS 64
/* A one-sided fit this close explains the pair: no two-cap fit is tried. */
#define CAP_EXACT 1e-5

/* The sampled rows of one side, one after another, into a malloc'd copy. */
static float *gather(const tb_replay_rowset *r, uint64_t n, uint64_t cols)
{
	float *v = malloc((n * cols > 0 ? n * cols : 1) * sizeof *v);

	for (uint64_t i = 0; v && i < n; i++)
		memcpy(v + i * cols, r->v + i * r->stride, cols * sizeof *v);
	return v;
}

int tb_replay_logits(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	const tb_cell_result *fn = tb_result_cell(in->r, -1, TB_TAP_FINAL_NORM);
	const tb_pair *lg = tb_replay_pair(in, -1, TB_TAP_LOGITS);
	const tb_pair *const p[1] = {lg};
	tb_replay_sampled v;
	tb_softcap sc;
	uint64_t rows, cols, step, n;
	float *r, *c;
	bool finite;
	char name[64], ref_name[64];
	double dd = 0, rr = 0;

	if (!lg || !fn || !fn->ref || !fn->cand) {
		snprintf(out->note, sizeof out->note,
			 "replaying logits needs final_norm and logits dumped whole on both sides (model.norm, lm_head)");
		return 0;
	}
	if (fn->status != TB_ST_MATCH && fn->status != TB_ST_CLOSE) {
		snprintf(out->note, sizeof out->note,
			 "replay of logits: final_norm differs already; the replay tells only a soft-cap of agreeing inputs");
		return 0;
	}
	if (!tb_replay_rows(out, p, 1, 1, &rows, &cols))
		return 0;
	out->tried = true;
	step = rows > ROWS ? rows / ROWS : 1;
	n = (rows + step - 1) / step;
	if (tb_replay_load_sampled(p, 1, cols, step, &v, &finite, err) < 0)
		return -1;
	r = finite ? gather(&v.ref, n, cols) : NULL;
	c = finite ? gather(&v.cand, n, cols) : NULL;
	tb_replay_unload_sampled(&v, 1);
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		return 0;
	}
	if (!r || !c) {
		free(r);
		free(c);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (uint64_t i = 0; i < n * cols; i++) {
		double d = (double)c[i] - r[i];
		dd += d * d;
		rr += (double)r[i] * r[i];
	}
	tb_softcap_fit(r, c, n * cols, &sc);
	snprintf(name, sizeof name, "final soft-cap %.3g %s", sc.cap, sc.capped_side ? "added" : "dropped");
	snprintf(ref_name, sizeof ref_name, sc.capped_side ? "no final soft-cap" : "final soft-cap %.3g", sc.cap);
	/* both capped, at other caps: the one-sided fit leaves a residual */
	if (!(sc.rel_l2 <= CAP_EXACT)) {
		tb_softcap_pair pc;
		tb_softcap_fit_pair(r, c, n * cols, &pc);
		if (pc.rel_l2 < sc.rel_l2 || isnan(sc.rel_l2)) {
			sc.rel_l2 = pc.rel_l2;
			snprintf(name, sizeof name, "final soft-cap %.3g instead of %.3g", pc.cand_cap, pc.ref_cap);
			snprintf(ref_name, sizeof ref_name, "final soft-cap %.3g", pc.ref_cap);
		}
	}
	free(r);
	free(c);
	tb_replay_decide(in, out, tb_replay_floor(lg->ref, lg->cand, 0x1p-20, 1),
			 &(tb_replay_fit){ref_name, 0, tb_rel_l2(dd, rr), isnan(sc.rel_l2) ? NULL : name,
					  TB_CAUSE_FINAL_SOFTCAP, sc.rel_l2, 0});
	return 0;
}
