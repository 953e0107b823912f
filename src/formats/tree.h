/*
 * tree: a dump tree, i.e. a directory walked recursively or one container
 * file, indexed into a sorted list of tensors with raw names (tbisect-dumps(5) NAMING).
 *
 * Each file is handed to the format reader that claims it by content, or by
 * extension when the content is not recognised (so a broken .npy gets the npy
 * reader's precise error).  Files no reader claims are skipped with a note.
 * The walk never follows a symlink out of the tree, refuses symlink loops,
 * and never opens FIFOs, sockets or devices.  Nothing is ever written.
 *
 * The tree owns its files (mapped), blobs, tensors and notes; tb_tree_free
 * releases everything.
 */
#ifndef TB_TREE_H
#define TB_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "formats/builder.h"
#include "tensor/tensor.h"


/* What the layout step (model/layout.h) made of a tree's ranks and steps. */
typedef struct tb_tree_layout {
	int ranks;          /* tensor-parallel degree joined on load; 0: no ranks */
	int n_steps;        /* forward passes tagged in the dump; 0: none */
	int first_step;     /* the lowest step tagged */
	int step;           /* the step compared; -1 when all were stitched or none tagged */
	int stale_steps;    /* decode steps whose tensors equal the step before's */
	long first_len;     /* positions of the first step when every step was stitched (the prefill's), else 0 */
	char stale[256];    /* which steps and tensors, "" when none */
	char replicas[256]; /* replicated tensors whose ranks disagree, "" when none */
} tb_tree_layout;

typedef struct tb_tree {
	char *path;          /* as given */
	tb_tensor **tensors; /* sorted by raw name */
	size_t n_tensors;
	char **notes;        /* skipped files and other non-fatal remarks */
	size_t n_notes;
	int64_t *tokens;     /* token ids, when the dump carries them; else NULL */
	size_t n_tokens;
	double tie;          /* a sketch's: how well its logits equal final_norm x the
			      * embedding rows (the feature tie_ref), measured on the
			      * values; NaN when unknown */
	tb_tree_layout layout;
	tb_tree_priv *priv;
} tb_tree;

int tb_tree_open(const char *path, const tb_open_opts *opts, tb_tree **out, tb_err *err);
void tb_tree_free(tb_tree *tree);

/* Replace the tensors the tree lists (the layout step: shards joined, one
 * step picked).  The tree takes list (malloc'd; it is sorted here) and the
 * made tensors (views and composites, freed with tb_view_free); the
 * tensors it indexed stay alive, so made tensors may borrow them. */
int tb_tree_set_tensors(tb_tree *tree, tb_tensor **list, size_t n, tb_tensor **made, size_t n_made, tb_err *err);

/* Add a note to the tree's (printf-style). */
void tb_tree_note(tb_tree *tree, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Tensor by raw name, or NULL. */
tb_tensor *tb_tree_find(const tb_tree *tree, const char *name);

#endif
