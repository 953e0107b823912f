/*
 * pairing: the tensors of a reference tree and a candidate tree, matched
 * cell by cell (via naming) and put in forward order.
 *
 * A cell found on one side only is kept with the other side NULL (status
 * "missing" later).  Tensors that map to no cell, or to a cell another
 * tensor of the same tree already took, are listed as unpaired with the
 * reason; token-id tensors (tb_name_is_token_ids) are neither.  The pairing
 * borrows the trees' tensors and owns the views it cuts from them: free it
 * before the trees.
 */
#ifndef TB_PAIRING_H
#define TB_PAIRING_H

#include <stdbool.h>
#include <stddef.h>

#include "model/naming.h"
#include "model/taps.h"
#include "formats/tree.h"

typedef struct tb_pair {
	tb_cell cell;
	tb_tensor *ref;  /* NULL when the cell is only in the candidate */
	tb_tensor *cand; /* NULL when the cell is only in the reference */
} tb_pair;

typedef enum tb_unpaired_kind {
	TB_UNP_UNMAPPED,  /* no naming rule matched */
	TB_UNP_DUPLICATE, /* another tensor of its tree took the cell */
	TB_UNP_ONE_SIDED, /* no tensor of the other tree maps to its cell */
	TB_UNP_UNSPLIT,   /* a fused projection that could not be split */
	TB_UNP_TOWER,     /* a vision or audio tower's, or its projector's (tb_name_tower) */
	TB_UNP_KINDS
} tb_unpaired_kind;

/* "no naming rule matched", ... */
const char *tb_unpaired_reason(tb_unpaired_kind kind);

typedef struct tb_unpaired {
	const tb_tensor *tensor;
	tb_unpaired_kind kind;
	const char *reason; /* static text: "no naming rule matched", ... */
} tb_unpaired;

typedef struct tb_pairing {
	tb_pair *pairs;        /* forward order */
	size_t n_pairs;
	tb_unpaired *unp[2];   /* [0] reference side, [1] candidate side */
	size_t n_unp[2];
	int n_layers;          /* 1 + highest layer index seen, 0 if none */
	size_t *unused_rules;  /* indices of the map file's rules that took no tensor */
	size_t n_unused_rules;
	tb_tensor **views;     /* layers of scan-stacked tensors, parts of fused ones, llama.cpp's
				* queries and keys in the other side's order (owned) */
	size_t n_views;
	char qk_note[512];     /* when they agree only in llama.cpp's own channel order, what that says; else "" */
} tb_pairing;

/* What splitting a fused qkv_proj needs when the other tree's q/k/v
 * projections do not say it. */
typedef struct tb_pairing_opts {
	int heads, kv_heads; /* 0: unknown */
	const char *tower;   /* the grid paired: a tower's ("vision", "audio": tb_name_tower), or NULL
			      * for the text decoder's, where the towers' tensors are unpaired */
} tb_pairing_opts;

/* A tensor's cell in its tree (shared-prefix aware).  False when unmapped. */
typedef struct tb_tree_names {
	char shared[1024]; /* prefix shared by every raw name of the tree */
} tb_tree_names;
void tb_tree_names_init(tb_tree_names *tn, const tb_tree *tree);

/* Does the tree hold a tensor of this tower (tb_name_tower)? */
bool tb_tree_holds_tower(const tb_tree *tree, const char *tower);

/* Scan-stacked tensors (TB_LAYER_STACKED) become one view per layer; a
 * fused attn.qkv or mlp.gate_up becomes one view per projection where the
 * other tree has them separate (o may be NULL).  Fails, naming the map
 * file, when its rules put two tensors of one tree in one cell. */
int tb_pairing_build(const tb_tree *ref, const tb_tree *cand, const tb_namer *namer, const tb_pairing_opts *o,
		     tb_pairing **out, tb_err *err);
void tb_pairing_free(tb_pairing *p);

/* How much of the two trees paired (tbisect-dumps(5) Coverage): coverage counts
 * the main cells (embed, attn_norm, attn, mlp_norm, mlp, block,
 * final_norm, logits); a sub-tap on one side only never lowers it.  Token
 * ids count on neither side. */
typedef struct tb_coverage {
	size_t paired;           /* cells with a tensor on both sides (any tap) */
	size_t tensors[2];       /* per side */
	size_t cells_paired;     /* main cells with a tensor on both sides */
	size_t cells[2];         /* main cells per side */
	size_t sub_one_sided[2]; /* sub-tap cells on this side only */
	size_t unmapped[2];      /* tensors no naming rule maps */
	size_t layer_tensors[2]; /* tensors mapped to a cell inside a layer, or
				  * unmapped with a number in the name */
	size_t layer_paired;     /* paired cells inside a layer */
} tb_coverage;

void tb_pairing_coverage(const tb_pairing *p, tb_coverage *c);
/* Too little paired to conclude anything: under one half of the smaller
 * side's main cells, layer tensors on both sides and none of them paired,
 * or nothing paired at all. */
bool tb_coverage_poor(const tb_coverage *c);
/* Nothing paired at all: no verdict can be given, even under
 * --allow-partial (a verdict over nothing is not a pass). */
bool tb_coverage_empty(const tb_coverage *c);
/* "only 3 of 23 main cells paired (ref 23, cand 23)", "no layer cell
 * paired, 1 main cell in all (ref 23, cand 1; unmapped tensors: ref 0,
 * cand 22)", "no cell paired (...)", or for a good pairing "23 of 23 main
 * cells paired (ref 23, cand 23)" */
#define TB_COVERAGE_TEXT_MAX 200
void tb_coverage_text(const tb_coverage *c, char *buf, size_t size);
/* The note on sub-taps found on one side only ("" when there are none):
 * "4 sub-tap cells on one side only (ref 0, cand 4): listed as unpaired,
 * not counted in the coverage" */
void tb_coverage_subtap_note(const tb_coverage *c, char *buf, size_t size);

/* Index of the pair for a cell, or -1. */
long tb_pairing_find(const tb_pairing *p, const tb_cell *cell);
/* Cells with a tensor on both sides. */
size_t tb_pairing_complete(const tb_pairing *p);

#endif
