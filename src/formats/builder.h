/*
 * builder: what a tree is built of while it is opened.  The readers add
 * tensors, blobs, shards and notes to a tb_builder (reader.h says how
 * readers are called), which fills a tb_tree_priv; the tree walk (tree.c)
 * makes the tree of it, and the tree frees it.  Everything added lives as
 * long as the tree.  The builder knows nothing of the tree, so readers
 * never reach back into the walk that calls them.
 */
#ifndef TB_BUILDER_H
#define TB_BUILDER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/mapfile.h"
#include "tensor/tensor.h"


/* How to read what a file leaves open (the command line's --npy-void2,
 * --npy-void1, --record, --vocab; side: which tree of a comparison is opened). */
typedef struct tb_open_opts {
	int npy_void2; /* tb_dtype of |V2 / <V2 npy data, or -1 to refuse it */
	int npy_void1; /* tb_dtype of |V1 / <V1 npy data, or -1 to refuse it */
	int record;    /* which record of a multi-prompt golden file, iteration of a Polygraphy runner */
	int side;      /* 0: the reference, 1: the candidate (a Polygraphy file's first or second runner) */
	int64_t vocab; /* values per row of raw float32 logits files, 0: not given */
} tb_open_opts;

void tb_open_opts_init(tb_open_opts *opts);

/* What a reader adds its tensors to: the tree being opened. */
typedef struct tb_builder tb_builder;

/* Caps shared by every reader. */
#define TB_MAX_TENSORS 1000000
#define TB_MAX_NAME 4096

/* Add a tensor named prefix+name (dtype etc. left for the caller to fill).
 * Refuses duplicates, over-long names and too many tensors. */
tb_tensor *tb_builder_add(tb_builder *b, const char *path, const char *prefix, const char *name, tb_err *err);
/* Has a tensor of this full name been added? */
bool tb_builder_has(const tb_builder *b, const char *name);
/* The tensor added last, or NULL. */
tb_tensor *tb_builder_last(tb_builder *b);
/* A new blob owned by the tree (give it a source with tb_blob_set_*). */
tb_blob *tb_builder_blob(tb_builder *b, tb_err *err);
/* Open and map another file (a shard) for the tree; later walking skips it. */
const tb_file *tb_builder_open(tb_builder *b, const char *path, tb_err *err);
const tb_open_opts *tb_builder_opts(const tb_builder *b);
void tb_builder_note(tb_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* size zeroed bytes that live as long as the tree, or NULL (no memory). */
void *tb_builder_alloc(tb_builder *b, size_t size);
/* A copy of s[0..n) that lives as long as the tree, or NULL (no memory). */
const char *tb_builder_keep(tb_builder *b, const char *s, size_t n);
/* Takes ownership of tokens (malloc'd). */
void tb_builder_set_tokens(tb_builder *b, int64_t *tokens, size_t n);
/* A sketch's tie score (tb_tree.tie). */
void tb_builder_set_tie(tb_builder *b, double tie);

/* Does name end with suffix, ignoring ASCII case? */
bool tb_has_suffix(const char *name, const char *suffix);

/* --- for the tree walk (tree.c) --- */

/* A growable array of pointers. */
typedef struct tb_ptrvec {
	void **v;
	size_t n, cap;
} tb_ptrvec;

/* 0, or -1 when out of memory (p not added). */
int tb_ptrvec_push(tb_ptrvec *pv, void *p);

/* An open-addressing set of strings (borrowed pointers). */
typedef struct tb_strset {
	const char **slot;
	size_t cap, n;
} tb_strset;

/* 1 if added, 0 if present, -1 on allocation failure. */
int tb_strset_add(tb_strset *set, const char *s);
bool tb_strset_has(const tb_strset *set, const char *s);

/* What a tree is built of; the tree (tb_tree.priv) owns it. */
typedef struct tb_tree_priv {
	tb_ptrvec files;   /* tb_file * */
	tb_ptrvec blobs;   /* tb_blob * */
	tb_ptrvec tensors; /* tb_tensor * */
	tb_ptrvec notes;   /* char * */
	tb_ptrvec claimed; /* char *: real paths of files opened by readers */
	tb_ptrvec made;    /* tb_tensor *: views and composites of the layout step */
	tb_ptrvec kept;    /* what readers keep (tb_builder_keep, tb_builder_alloc) */
	tb_tensor **listed; /* tb_tree_set_tensors's list, or NULL */
	tb_strset names;   /* tensor names, for duplicate detection */
	tb_strset claimed_set;
	int64_t *tokens;   /* tb_builder_set_tokens's, until the tree takes them */
	size_t n_tokens;
	double tie;        /* tb_builder_set_tie's, NaN when not set */
} tb_tree_priv;

struct tb_builder {
	tb_tree_priv *priv;
	const tb_open_opts *opts;
};

/* Open and map a file the tree will own; NULL with err. */
const tb_file *tb_tree_priv_add_file(tb_tree_priv *p, const char *path, tb_err *err);
/* A Git LFS pointer: the small text file a clone holds in place of the
 * data until `git lfs pull` (the spec's first line, git-lfs docs/spec.md). */
bool tb_is_lfs_pointer(const tb_file *f);
/* Refuse a file that is a Git LFS pointer: -1 with err. */
int tb_lfs_error(const char *path, tb_err *err);
/* Add a note (tb_builder_note, tb_tree_note); false when out of memory. */
bool tb_tree_priv_note(tb_tree_priv *p, const char *fmt, va_list ap);

#endif
