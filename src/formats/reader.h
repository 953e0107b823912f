/*
 * reader: the interface between the tree walk and the format readers.
 *
 * A reader is a const tb_format: a content sniffer, the file-name suffixes
 * it owns, and an index function that adds the file's tensors to a builder.
 * Readers only parse headers; tensor bytes stay in the file mapping (or in
 * a lazy blob) until the compare step acquires them.  Readers know nothing
 * of naming or pairing.  Everything they create belongs to the tree.
 */
#ifndef TB_READER_H
#define TB_READER_H

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

/* What a reader adds its tensors to: the tree being opened (tree.c). */
typedef struct tb_builder tb_builder;

typedef struct tb_format {
	const char *name;
	/* What the user knows it as: the heading of its entry in the FORMATS
	 * list of tbisect-dumps(5), in plain text; the usage text lists these. */
	const char *label;
	const char *const *suffixes; /* lower-case file-name endings, NULL-terminated */
	/* Claim by content; head holds the file's first n (<= TB_SNIFF_BYTES) bytes. */
	bool (*sniff)(const unsigned char *head, size_t n);
	/* Or NULL; else claim a text file that no reader claims by its head or
	 * its name by content found anywhere in it (a capture after pages of
	 * log): data holds the whole file. */
	bool (*sniff_deep)(const unsigned char *data, size_t n);
	/* Add the file's tensors.  stem: the raw name a lone tensor gets (path
	 * in the tree, extension dropped, '/' as '.'); prefix: what container
	 * keys are prefixed with ("" or "sub.dir."). */
	int (*index)(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err);
	/* Names of the files the reader reads beside its own (npy's dtypes.json),
	 * NULL-terminated, or NULL: the tree skips them without a note. */
	const char *const *companions;
} tb_format;

/* Bytes of a file's start that sniffers see: enough for a zip's first
 * local header and member name. */
#define TB_SNIFF_BYTES 512

/* The readers, in sniffing order; NULL-terminated. */
extern const tb_format *const tb_formats[];

extern const tb_format tb_fmt_npy;
extern const tb_format tb_fmt_safetensors;
extern const tb_format tb_fmt_safetensors_index;
extern const tb_format tb_fmt_pt;
extern const tb_format tb_fmt_npz;
extern const tb_format tb_fmt_golden;
extern const tb_format tb_fmt_polygraphy;
extern const tb_format tb_fmt_sglang;
extern const tb_format tb_fmt_vllm_sidecar;
extern const tb_format tb_fmt_hfdebug_tree;
extern const tb_format tb_fmt_ggmltext;
extern const tb_format tb_fmt_rawlogits;
extern const tb_format tb_fmt_tbsk;

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

#endif
