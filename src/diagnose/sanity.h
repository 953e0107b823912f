/*
 * sanity: checks that the dumps themselves are sane, before blaming the
 * port: candidate blocks shifted by one layer against the reference
 * (hidden_states[i] off by one), several layers of one side holding the
 * same tensor (a hook on the wrong module), a tap that disagrees while the
 * residual sum it feeds agrees (a tensor changed in place after its hook
 * kept a reference to it), and differing token ids.
 * Re-reads the block tensors it needs.  The findings are warnings for the
 * reports and features for the diagnosis; tb_sanity_done frees them.
 */
#ifndef TB_SANITY_H
#define TB_SANITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compare/compare.h"
#include "model/session.h"

typedef struct tb_warning {
	const char *id;  /* a cause id: "dump-offset", "dump-duplicate", "tokenizer" */
	char text[384];
} tb_warning;

typedef struct tb_sanity {
	int offset;              /* +1: cand layer N holds ref layer N+1; -1: N-1; 0: no shift */
	double offset_frac;      /* share of layers that show the shift */
	int dup_layers[2];       /* per side: layers whose tensor of one tap equals another layer's */
	const char *dup_tap[2];  /* the tap where that happens */
	bool tokens_compared;
	size_t tokens_differ;    /* positions whose ids differ */
	long first_token_diff;   /* -1: none */
	int token_shift;         /* +1 / -1 when cand ids are ref's shifted by one, else 0 */
	int aliased;             /* diverged cells whose residual sum matches (tb_sanity_aliased) */
	tb_warning *warnings;
	size_t n_warnings;
} tb_sanity;

/* Does cell i of r look changed after capture: an attention or MLP output
 * (or its sub-tap), a block or the embedding that diverges hugely while
 * the residual sum it feeds (its layer's block, the next layer's, layer
 * 0's) matches or is close far more tightly?  A port's bug there would
 * carry into that sum.  The sum's index, or -1. */
long tb_sanity_aliased(const tb_result *r, long i);

int tb_sanity_check(const tb_session *s, const tb_result *r, tb_sanity *out, tb_err *err);
void tb_sanity_done(tb_sanity *s);

/* Token ids of a tree: a golden file's, or a "tokens" / "input_ids" tensor
 * (malloc'd; NULL when the tree has none). */
int64_t *tb_tree_token_ids(const tb_tree *tree, size_t *n);

#endif
