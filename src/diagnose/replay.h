/*
 * replay: proof of a cause instead of a suggestion.  Where a dump holds an
 * op's inputs and output, the op is recomputed from the dumped inputs
 * under each hypothesis: first from the reference's inputs, which must
 * reproduce the reference's output (that validates the configuration the
 * replay infers), then from the candidate's inputs, against the
 * candidate's output.  A variant other than the reference's that
 * reproduces the candidate within the noise of both sides' dtypes, of
 * the reference's own replay and of the inputs where the sides agree
 * confirms the cause it stands for (tbisect-rules(5) CONFIRMED CAUSES).
 *
 * The ops replayed, by the first divergence's tap: the MLP's gated
 * activation (mlp.act from mlp.gate and mlp.up); the norms (attn_norm,
 * mlp_norm, final_norm from their input); the embedding scale (embed); an
 * output multiplier (attn from attn.o, mlp from mlp.down); a bias of
 * o_proj or down_proj; the residual wiring (block from its inputs); the
 * final logit soft-cap (logits, when final_norm agrees).  Never
 * confirms from non-finite values.
 */
#ifndef TB_REPLAY_H
#define TB_REPLAY_H

#include <stdbool.h>

#include "base/error.h"
#include "compare/compare.h"
#include "diagnose/replay_base.h"
#include "model/session.h"

/* Replay the op of a result cell (its index in r->cells), where its tap
 * has one; heads and kv_heads are the user's counts (0: unknown).  A
 * replay that cannot run says why in out->note (not an error); -1 and err
 * only when a tensor cannot be read. */
int tb_replay_cell(const tb_session *s, const tb_result *r, long cell, int heads, int kv_heads, tb_replay *out,
		   tb_err *err);
/* The same for the first divergence (nothing when there is none). */
int tb_replay_first_divergence(const tb_session *s, const tb_result *r, int heads, int kv_heads, tb_replay *out,
			       tb_err *err);

#endif
