/*
 * selection: how an MoE router chose its experts, reproduced from its
 * scores and the ids it chose.  Routers choose the top k of their scores,
 * some after a score function (DeepSeek-V3's sigmoid), plus a selection
 * bias that is not dumped (e_score_correction_bias), and within the best
 * groups of experts (group-limited top-k: n_group groups, each scored by
 * the sum of its top two, the best topk_group kept).  tb_select_fit finds
 * the simplest such selection that gives the ids, fitting the bias; the
 * routing comparison measures near ties on it and the replay of
 * mlp.topk_ids tries its variants.
 */
#ifndef TB_SELECTION_H
#define TB_SELECTION_H

#include <stdbool.h>
#include <stdint.h>

/* Routers of more experts than this are not fitted (the largest have 256). */
#define TB_SELECT_MAX_E 1024

typedef enum tb_score_fn { TB_SCORE_RAW, TB_SCORE_SIGMOID, TB_SCORE_SOFTMAX, TB_N_SCORE_FNS } tb_score_fn;

extern const char *const tb_score_fn_names[TB_N_SCORE_FNS];

typedef struct tb_select {
	int64_t e, k;
	tb_score_fn fn;
	int groups, topk_groups; /* groups 0: plain top-k */
	double *bias;            /* [e], owned; NULL: none */
} tb_select;

/* The selection that reproduces ids [positions, k] from scores [positions,
 * e] at the most positions, the simplest first (raw scores, no bias, no
 * groups); *misses the positions it does not reproduce.  0, or -1 when out
 * of memory.  tb_select_free releases it. */
int tb_select_fit(const float *scores, const float *ids, int64_t positions, int64_t e, int64_t k, tb_select *out,
		  int64_t *misses);
void tb_select_free(tb_select *s);

/* One router's choices under one selection, for tb_select_fit_bias. */
typedef struct tb_select_set {
	tb_select *sel;
	const float *scores, *ids; /* [positions, e], [positions, sel->k] */
	int64_t positions;
} tb_select_set;

/* Fit one bias that every set's selection shares (their bias pointers are
 * the same e values, fitted in place from their start) so that each set
 * chooses its ids; the positions missed, all sets together.  spare: e
 * values of scratch. */
int64_t tb_select_fit_bias(const tb_select_set *sets, int n, double *spare);

/* The k ids s chooses from one row of e scores, then the next best
 * (ids[k], -1: none), and its gap there: how much one selection score (or
 * one group's) would have to move to change the choice; *scale the largest
 * selection score's magnitude.  ids (k + 1 of them) may be NULL. */
void tb_select_row(const tb_select *s, const float *row, int64_t *ids, double *gap, double *scale);

/* Does s choose the same set as ids[k] from row?  And, where gap and
 * scale are not NULL, tb_select_row's gap and scale there. */
bool tb_select_agrees(const tb_select *s, const float *row, const float *ids, double *gap, double *scale);

#endif
