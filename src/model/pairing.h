/*
 * pairing: the tensors of a reference tree and a candidate tree, matched
 * cell by cell (via naming) and put in forward order.
 *
 * A cell found on one side only is kept with the other side NULL (status
 * "missing" later).  Tensors that map to no cell, or to a cell another
 * tensor of the same tree already took, are listed as unpaired with the
 * reason; token-id tensors (tb_name_is_token_ids) are neither.  The pairing borrows the trees' tensors: free it before the trees.
 */
#ifndef TB_PAIRING_H
#define TB_PAIRING_H

#include <stddef.h>

#include "model/naming.h"
#include "model/taps.h"
#include "formats/tree.h"

typedef struct tb_pair {
	tb_cell cell;
	tb_tensor *ref;  /* NULL when the cell is only in the candidate */
	tb_tensor *cand; /* NULL when the cell is only in the reference */
} tb_pair;

typedef struct tb_unpaired {
	const tb_tensor *tensor;
	const char *reason; /* static text: "no naming rule matched", ... */
} tb_unpaired;

typedef struct tb_pairing {
	tb_pair *pairs;        /* forward order */
	size_t n_pairs;
	tb_unpaired *unp[2];   /* [0] reference side, [1] candidate side */
	size_t n_unp[2];
	int n_layers;          /* 1 + highest layer index seen, 0 if none */
} tb_pairing;

/* A tensor's cell in its tree (shared-prefix aware).  False when unmapped. */
typedef struct tb_tree_names {
	char shared[1024]; /* prefix shared by every raw name of the tree */
} tb_tree_names;
void tb_tree_names_init(tb_tree_names *tn, const tb_tree *tree);

int tb_pairing_build(const tb_tree *ref, const tb_tree *cand, const tb_namer *namer, tb_pairing **out,
		     tb_err *err);
void tb_pairing_free(tb_pairing *p);

/* Index of the pair for a cell, or -1. */
long tb_pairing_find(const tb_pairing *p, const tb_cell *cell);
/* Cells with a tensor on both sides. */
size_t tb_pairing_complete(const tb_pairing *p);

#endif
