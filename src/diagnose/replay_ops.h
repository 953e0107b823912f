/*
 * replay_ops: what the replay of each op shares, and the per-op replays
 * that replay.c dispatches to by the first divergence's tap.  Internal to
 * the replay module (replay*.c); users include replay.h.
 *
 * Every op follows one rule (tbisect-rules(5) "CONFIRMED CAUSES"): the
 * configuration that reproduces the reference from the reference's inputs
 * is found first; a variant that differs from it in one thing confirms
 * its cause when it reproduces the candidate within the noise bound (the
 * reference's own residual, the floor, both sides' storage rounding and
 * the error of the inputs where the sides agree) and the reference's
 * configuration misses the candidate by ten times the variant's residual
 * and the noise.
 */
#ifndef TB_REPLAY_OPS_H
#define TB_REPLAY_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compare/compare.h"
#include "diagnose/cause.h"
#include "model/session.h"

/* Declared, not included: replay.c includes this header, and the module
 * graph has no cycle (tests/e2e/layout.sh).  The ops include replay.h for
 * the fields. */
typedef struct tb_replay tb_replay;

typedef struct tb_replay_in {
	const tb_session *s;
	const tb_result *r;
	const tb_cell_result *target; /* the cell replayed (the first divergence, or one the user chose) */
	int heads, kv_heads;         /* 0: unknown */
} tb_replay_in;

/* The pair of (layer, tap) when both sides dumped it whole, else NULL. */
const tb_pair *tb_replay_pair(const tb_replay_in *in, int layer, tb_tap_id id);

/* The unit rounding of t's values as they are: its dtype's, or a coarser
 * one when its values use fewer mantissa bits (read from its first values:
 * a port that computes in bf16 and casts to float32 before it dumps leaves
 * the low 16 bits zero). */
double tb_replay_rounding(tb_tensor *t);

/* The residual below which a replay of out's values matches: `roundings`
 * times the rounding of half-width values (an op that rounds several
 * times), else f32_floor (the float error of the op). */
double tb_replay_floor(tb_tensor *ref, tb_tensor *cand, double f32_floor, double roundings);

/* Are all n values finite? */
bool tb_replay_finite(const float *v, uint64_t n);

/* Both sides of a pair as float32, for the ops that read whole tensors. */
typedef struct tb_replay_sides {
	float *ref, *cand; /* owned; NULL for a NULL pair */
} tb_replay_sides;

/* Load both sides of the n pairs (NULL pairs are skipped) into v[n] and
 * say whether every value is finite; 0, or -1 and err with nothing left
 * loaded.  tb_replay_unload frees them. */
int tb_replay_load_pairs(const tb_pair *const *p, size_t n, tb_replay_sides *v, bool *finite, tb_err *err);
void tb_replay_unload(tb_replay_sides *v, size_t n);

/* Every step-th row of one side's rows of cols values (rows 0, step,
 * 2 step, ...): sampled row i at v + i * stride.  They are the tensor's
 * float32 in place when it holds them (the tensor stays acquired), else a
 * copy, one row after another. */
typedef struct tb_replay_rowset {
	const float *v;
	uint64_t stride;
	float *owned;    /* the copy, or NULL */
	tb_tensor *held; /* the tensor read in place, or NULL */
} tb_replay_rowset;

typedef struct tb_replay_sampled {
	tb_replay_rowset ref, cand; /* all zero for a NULL pair */
} tb_replay_sampled;

/* For the ops that are a function of each row alone, which a sample of
 * rows pins down: the rows of both sides of the n pairs into v[n], as
 * tb_replay_load_pairs; tb_replay_unload_sampled lets them go. */
int tb_replay_load_sampled(const tb_pair *const *p, size_t n, uint64_t cols, uint64_t step, tb_replay_sampled *v,
			   bool *finite, tb_err *err);
void tb_replay_unload_sampled(tb_replay_sampled *v, size_t n);

/* Do both sides of every pair (NULL ones skipped) hold rows x cols values,
 * cols the last axis, with rows >= min_rows (a per-channel fit over fewer
 * positions fits anything)?  Else false and out->note says why. */
bool tb_replay_rows(tb_replay *out, const tb_pair *const *p, size_t n, uint64_t min_rows, uint64_t *rows,
		    uint64_t *cols);

/* The best variant tried so far on the candidate, for tb_replay_decide. */
typedef struct tb_replay_best {
	char name[64];     /* "" until one was considered */
	tb_cause_id cause;
	double rel_l2;
} tb_replay_best;

/* Keep the variant named by fmt when it beats the best so far. */
void tb_replay_consider(tb_replay_best *b, double rel_l2, tb_cause_id cause, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* What one op's replay measured, for tb_replay_decide. */
typedef struct tb_replay_fit {
	const char *ref_variant; /* the reference's configuration, for people */
	double ref_rel_l2;       /* ... its residual on the reference */
	double cand_at_ref;      /* ... its residual on the candidate */
	const char *variant;     /* the best other variant on the candidate (NULL: none) */
	tb_cause_id cause;       /* ... the cause it stands for */
	double rel_l2;           /* ... its residual */
} tb_replay_fit;

/* Apply the confirmation rule to a fit of the tap (cell) and fill out:
 * the cause and variant when confirmed, and a note either way. */
void tb_replay_decide(const tb_replay_in *in, tb_replay *out, double floor, const tb_replay_fit *fit);

int tb_replay_mlp_act(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_router.c: an MoE layer's mlp.topk_weights from its router scores
 * and chosen experts: score function, top-k renormalisation, scaling. */
int tb_replay_router(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.q_rope / attn.k_rope from attn.q and attn.k: the RoPE family. */
int tb_replay_rope(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.core from attn.q_rope, attn.k_rope and attn.v: scale, mask,
 * window, GQA mapping, soft-capping, head order. */
int tb_replay_attn_core(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_norm.c: attn_norm, mlp_norm and final_norm from their input. */
int tb_replay_norm(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_resid.c: the embedding scale, an output multiplier on attn or
 * mlp, a bias or multiplier of o_proj or down_proj, and the block's
 * residual wiring. */
int tb_replay_embed_scale(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_multiplier(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_bias(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_wiring(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_logits.c: the final logit soft-cap, from logits when final_norm agrees. */
int tb_replay_logits(const tb_replay_in *in, tb_replay *out, tb_err *err);

#endif
