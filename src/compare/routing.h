/*
 * routing: the experts a mixture-of-experts layer chose, compared as
 * routers choose them (tbisect-dumps(5), Mixture of experts).  Per MoE
 * layer and position, the two sides' expert sets (mlp.topk_ids) compared
 * order-free; where they differ, the reference's gap between its k-th and
 * (k+1)-th router score there: a near tie is a flip (rounding decided it),
 * a larger gap a divergence of mlp.topk_ids.  The combine weights
 * (mlp.topk_weights) are compared aligned by expert id at the positions
 * whose sets agree, and so are the tensors llama.cpp holds one row of per
 * selected expert (mlp.gate, .up, .act, .down, .weighted), row by row.
 * Ids that are no expert of the side's router fail the run naming the
 * file; weights or rows that are not one per selected expert are not
 * compared, the cell saying why.  The cells of a compared result are
 * judged again from that; a flipped position is left out of every later cell (and later
 * layers' routing), whose metrics are measured again without it; and the
 * result is summarised again.
 *
 * Owns its per-layer arrays (tb_routing_done).
 */
#ifndef TB_ROUTING_H
#define TB_ROUTING_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "compare/compare.h"
#include "model/pairing.h"

/* A near tie: the reference's gap at most this share of its largest score
 * magnitude at that position (--flip-margin). */
#define TB_FLIP_MARGIN 1e-3

typedef struct tb_routed_pos {
	int64_t pos;
	double gap; /* the reference's k-th minus (k+1)-th score there, NaN when its router was not dumped */
} tb_routed_pos;

typedef struct tb_routing_layer {
	int layer;
	int64_t positions, k;
	int64_t first;                 /* the position its first one is (positions are numbered as the
					* model's: llama.cpp's last layer computes the last one only) */
	int64_t agree;                 /* positions whose expert sets agree */
	int64_t excluded;              /* positions flipped in an earlier layer, not compared here */
	tb_routed_pos *flipped;        /* near ties, in position order (from first on) */
	size_t n_flipped;
	tb_routed_pos *disagree;       /* the other differing positions */
	size_t n_disagree;
} tb_routing_layer;

typedef struct tb_routing {
	tb_routing_layer *v; /* in layer order */
	size_t n;
} tb_routing;

/* Compare the routing of every layer whose mlp.topk_ids both sides dumped
 * whole, and judge its mlp.topk_ids and mlp.topk_weights cells of r again
 * (flip_margin <= 0: TB_FLIP_MARGIN).  r must come from a comparison that
 * kept its per-position sums (tb_compare_opts.keep_positions): later cells
 * are measured again from them, without reading their tensors.  0, or -1
 * and err (a tensor that cannot be read, out of memory). */
int tb_routing_compute(const tb_pairing *p, tb_result *r, double flip_margin, tb_routing *out, tb_err *err);
void tb_routing_done(tb_routing *rt);

/* The routing of a layer, or NULL when its experts were not compared. */
const tb_routing_layer *tb_routing_layer_of(const tb_routing *rt, int layer);

/* The most experts a position's choice is read for (tb_routing_chosen). */
#define TB_ROUTING_K_MAX 16

/* The experts each side chose at position pos of a layer whose routing was
 * compared (ids[0] the reference's, ids[1] the candidate's, k of each, in
 * the order each side chose them).  0, or -1 and err. */
int tb_routing_chosen(const tb_pairing *p, const tb_routing_layer *l, int64_t pos, int ids[2][TB_ROUTING_K_MAX],
		      tb_err *err);

#endif
