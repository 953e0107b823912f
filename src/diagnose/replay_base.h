/*
 * replay_base: what the replay of every op shares: its inputs (the cell
 * and the session), reading both sides' tensors, the noise floor, and the
 * one rule that confirms a cause (tb_replay_decide).
 *
 * Every op follows that rule (tbisect-rules(5) "CONFIRMED CAUSES"): the
 * configuration that reproduces the reference from the reference's inputs
 * is found first; a variant that differs from it in one thing confirms
 * its cause when it reproduces the candidate within the noise bound (the
 * reference's own residual, the floor, both sides' storage rounding and
 * the error of the inputs where the sides agree) and the reference's
 * configuration misses the candidate by ten times the variant's residual
 * and the noise.
 */
#ifndef TB_REPLAY_BASE_H
#define TB_REPLAY_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "compare/compare.h"
#include "diagnose/cause.h"
#include "model/session.h"

/* What a replay found (tbisect-rules(5) CONFIRMED CAUSES). */
typedef struct tb_replay {
	bool tried;          /* the op's inputs and output were dumped on both sides */
	const char *cause;   /* the cause id the variant stands for, when confirmed; else NULL */
	char variant[64];    /* "gelu (tanh)", the candidate's variant when confirmed */
	char ref_variant[64]; /* what the reference computes */
	double rel_l2;       /* the confirmed variant's residual against the candidate */
	double ref_rel_l2;   /* the reference's own replay residual */
	char note[384];      /* why nothing was confirmed, or what was */
} tb_replay;

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
	double reach;            /* how much further the reference's residual reaches on the variant's rows than on
				  * rows like its own, where a weight fitted to the reference carries it (0: as far) */
} tb_replay_fit;

/* A RoPE whose theta alone differs from the reference's theta0, both
 * fitted at length positions over rot rotated channels: its cause, and
 * its name in name[size] (63 characters show).  Configs give theta one or
 * two significant digits (1e4, 5e5); a dynamic NTK base, theta (factor
 * length / original - factor + 1)^(rot / (rot - 2)), seldom has so few:
 * rope-theta between round values, else rope-scaling, a dynamic NTK
 * scaling left out or added (Hugging Face raises theta so once the length
 * passes original_max_position_embeddings; llama.cpp has no such
 * scaling).  resolved: whether the side of the larger theta tells it from
 * one 0.1% larger; where it cannot (a half-width dump), a base near a
 * round value was fitted as round, and a round larger theta is taken for
 * a dynamic base when a factor of 2, 4, ... 64 and an original that is a
 * power of two below length give it within 1%. */
tb_cause_id tb_replay_theta_change(double theta, double theta0, int rot, int64_t length, bool resolved, char *name,
				   size_t size);

/* Apply the confirmation rule to a fit of the tap (cell) and fill out:
 * the cause and variant when confirmed, and a note either way. */
void tb_replay_decide(const tb_replay_in *in, tb_replay *out, double floor, const tb_replay_fit *fit);

#endif
