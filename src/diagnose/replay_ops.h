/*
 * replay_ops: what the replay of each op shares, and the per-op replays
 * that replay.c dispatches to by the first divergence's tap.  Internal to
 * the replay module (replay*.c); users include replay.h.
 *
 * Every op follows one rule (tbisect-rules(5) "CONFIRMED CAUSES"): the
 * configuration that reproduces the reference from the reference's inputs
 * is found first; a variant that differs from it in one thing confirms
 * its cause when it reproduces the candidate within max(floor / 4, 4 x
 * the reference's own residual) and the reference's configuration misses
 * the candidate by at least ten times that.
 */
#ifndef TB_REPLAY_OPS_H
#define TB_REPLAY_OPS_H

#include "diagnose/replay.h"

typedef struct tb_replay_in {
	const tb_session *s;
	const tb_result *r;
	const tb_cell_result *first; /* the first divergence */
	int heads, kv_heads;         /* 0: unknown */
} tb_replay_in;

/* The pair of (layer, tap) when both sides dumped it whole, else NULL. */
const tb_pair *tb_replay_pair(const tb_replay_in *in, int layer, tb_tap_id id);

/* The residual below which a replay of out's values matches: the rounding
 * of half-width storage, else f32_floor (the float error of the op). */
double tb_replay_floor(const tb_tensor *ref, const tb_tensor *cand, double f32_floor);

/* The whole tensor as float32 (caller frees), or NULL with err. */
float *tb_replay_load(tb_tensor *t, tb_err *err);
/* Are all n values finite? */
bool tb_replay_finite(const float *v, uint64_t n);

/* What one op's replay measured, for tb_replay_decide. */
typedef struct tb_replay_fit {
	const char *ref_variant; /* the reference's configuration, for people */
	double ref_rel_l2;       /* ... its residual on the reference */
	double cand_at_ref;      /* ... its residual on the candidate */
	const char *variant;     /* the best other variant on the candidate (NULL: none) */
	const char *cause;       /* ... the cause it stands for */
	double rel_l2;           /* ... its residual */
} tb_replay_fit;

/* Apply the confirmation rule to a fit of the tap (cell) and fill out:
 * the cause and variant when confirmed, and a note either way. */
void tb_replay_decide(tb_replay *out, const char *cell, double floor, const tb_replay_fit *fit);

int tb_replay_mlp_act(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.q_rope / attn.k_rope from attn.q and attn.k: the RoPE family. */
int tb_replay_rope(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.core from attn.q_rope, attn.k_rope and attn.v: scale, mask,
 * window, GQA mapping, soft-capping, head order. */
int tb_replay_attn_core(const tb_replay_in *in, tb_replay *out, tb_err *err);

#endif
