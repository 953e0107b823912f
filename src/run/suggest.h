/*
 * suggest: map rules for the names that did not pair, found from the
 * trees' structure (`tbisect suggest-map`).  The unmapped names of one tree
 * are grouped by their shape with the layer number taken out
 * ("net.blk{N}.sa"); each group is tried against the cells the other tree
 * has and this one lacks, layer by layer: the same element count, then the
 * values (a port is close to its reference until it diverges, and stays
 * more like the right tap than any other after), with the layer number
 * read as it is or off by one.  Model-level names are tried against embed,
 * final_norm and logits the same way.  When the other tree has no cell to
 * compare with either, the identities of the tree's own forward pass say
 * which name is which (structure.h).  Each rule carries a confidence and
 * the evidence.  The suggestion owns its strings; tb_suggestion_done
 * releases them.
 */
#ifndef TB_SUGGEST_H
#define TB_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "model/session.h"
#include "model/taps.h"

typedef struct tb_suggested_rule {
	char *match;          /* POSIX ERE over the raw name, anchored */
	int layer;            /* a fixed layer, or -1: model-level or from the name */
	bool layer_from_name; /* "layer": "\\1" (the number in the name, off by offset) */
	int offset;           /* layer = number in the name + offset (only 0 is a template) */
	char tap[64];
	double confidence;    /* 0..1 */
	char *evidence;
	int side;             /* 0: the reference's names, 1: the candidate's */
} tb_suggested_rule;

typedef struct tb_suggestion {
	tb_suggested_rule *rules;
	size_t n;
	size_t unpaired[2]; /* unmapped tensors per side before the suggestion */
	size_t holes[2];    /* cells the other side has and this one lacks, that its names could fill */
	tb_cell *cells[2];  /* the cells the rules give each side's names */
	size_t n_cells[2];
} tb_suggestion;

/* Fails with "nothing in common" when neither tree has a cell to anchor the
 * other's names to. */
int tb_suggest_map(const tb_session *s, tb_suggestion *out, tb_err *err);
/* The map file (tbisect-dumps(5) The map file) with "confidence" and "evidence" beside each
 * rule's fields; malloc'd, NULL when out of memory. */
char *tb_suggestion_json(const tb_suggestion *sg);
/* The rules of a map file (map_text when given, else the file map_path,
 * else none) followed by the suggested ones, as one map file; malloc'd,
 * or NULL and err. */
char *tb_suggestion_merged(const tb_suggestion *sg, const char *map_path, const char *map_text, size_t map_len,
			   tb_err *err);
void tb_suggestion_done(tb_suggestion *sg);

#endif
