#include "config.h"

#include <stdio.h>
#include <string.h>

#include "diagnose/replay.h"
#include "diagnose/replay_ops.h"

/* The op each tap's replay recomputes. */
static const struct {
	tb_tap_id tap;
	int (*replay)(const tb_replay_in *in, tb_replay *out, tb_err *err);
} ops[] = {
	{TB_TAP_EMBED, tb_replay_embed_scale},
	{TB_TAP_ATTN_NORM, tb_replay_norm},
	{TB_TAP_ATTN_Q_ROPE, tb_replay_rope},
	{TB_TAP_ATTN_K_ROPE, tb_replay_rope},
	{TB_TAP_ATTN_CORE, tb_replay_attn_core},
	{TB_TAP_ATTN_O, tb_replay_attn_o},
	{TB_TAP_ATTN, tb_replay_multiplier},
	{TB_TAP_MLP_NORM, tb_replay_norm},
	{TB_TAP_MLP_TOPK_IDS, tb_replay_topk_ids},
	{TB_TAP_MLP_TOPK_WEIGHTS, tb_replay_router},
	{TB_TAP_MLP_ACT, tb_replay_mlp_act},
	{TB_TAP_MLP_EXPERTS, tb_replay_combine},
	{TB_TAP_MLP_SHARED, tb_replay_combine},
	{TB_TAP_MLP_DOWN, tb_replay_bias},
	{TB_TAP_MLP, tb_replay_multiplier},
	{TB_TAP_BLOCK, tb_replay_wiring},
	{TB_TAP_FINAL_NORM, tb_replay_norm},
	{TB_TAP_LOGITS, tb_replay_logits},
};

int tb_replay_cell(const tb_session *s, const tb_result *r, long cell, int heads, int kv_heads, tb_replay *out,
		   tb_err *err)
{
	tb_replay_in in = {s, r, &r->cells[cell], heads, kv_heads};

	memset(out, 0, sizeof *out);
	if ((in.target->ref && in.target->ref->sketch) || (in.target->cand && in.target->cand->sketch)) {
		snprintf(out->note, sizeof out->note, "no replay from a sketch: replaying an op needs its tensors");
		return 0;
	}
	if (tb_cell_partial(in.target)) {
		const tb_partial *pa = tb_cell_partial(in.target);
		uint64_t whole = 1;
		char name[TB_CELL_NAME_MAX];
		for (int d = 0; d < pa->ndim; d++)
			whole *= (uint64_t)pa->shape[d];
		tb_cell_name(&in.target->cell, name, sizeof name);
		snprintf(out->note, sizeof out->note,
			 "no replay from a partial dump: %s holds %llu of its %llu values (llama.cpp prints the first and "
			 "last three of each axis), and replaying an op needs every value of its inputs and output",
			 name, (unsigned long long)pa->n, (unsigned long long)whole);
		return 0;
	}
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (in.target->cell.id == ops[i].tap)
			return ops[i].replay(&in, out, err);
	snprintf(out->note, sizeof out->note, "no replay for %s", in.target->cell.tap);
	return 0;
}

int tb_replay_first_divergence(const tb_session *s, const tb_result *r, int heads, int kv_heads, tb_replay *out,
			       tb_err *err)
{
	if (r->first_div < 0) {
		memset(out, 0, sizeof *out);
		return 0;
	}
	return tb_replay_cell(s, r, r->first_div, heads, kv_heads, out, err);
}
