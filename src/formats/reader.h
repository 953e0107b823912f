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
#include "formats/builder.h"
#include "tensor/tensor.h"

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
extern const tb_format tb_fmt_moetrace;
extern const tb_format tb_fmt_ggmltext;
extern const tb_format tb_fmt_rawlogits;
extern const tb_format tb_fmt_tbsk;

#endif
