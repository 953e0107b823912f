/*
 * rawlogits: logits as raw float32 with no header, as llama.cpp's
 * model-conversion scripts write and compare them (data/llamacpp-MODEL.bin
 * from llama-debug --save-logits, data/pytorch-MODEL.bin from
 * run-org-model.py): little-endian float32, the vocabulary's logits of the
 * last token, or of every token one row after the other.  Nothing in the
 * file gives the row length: --vocab N does, and without it a .bin file is
 * skipped.  The tensor is the file mapped as [size / (4 N), N], named by
 * the file's stem (the naming conventions map llamacpp-* and pytorch-* to
 * the logits cell).  The token ids llama-debug writes beside them
 * (MODEL-tokens.bin, int32) are the tree's token ids.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"

static const char *const raw_suffixes[] = {".bin", NULL};

/* Claimed by suffix only: raw floats have no signature.  A torch.save
 * file named .bin is a zip the torch reader claims by content first. */
static bool raw_sniff(const unsigned char *head, size_t n)
{
	(void)head;
	(void)n;
	return false;
}

/* llama-debug --save-logits writes the prompt's ids beside the logits,
 * as int32: data/llamacpp-MODEL-tokens.bin (examples/debug/debug.cpp). */
static const char tokens_suffix[] = "-tokens";

static int raw_tokens(tb_builder *b, const tb_file *f, tb_err *err)
{
	size_t n = (size_t)(f->size / 4);
	int64_t *ids;

	if (f->size == 0 || f->size % 4)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "its %llu bytes are not int32 token ids", (unsigned long long)f->size);
	ids = malloc(n * sizeof *ids);
	if (!ids)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int32_t v;
		memcpy(&v, f->data + 4 * i, 4);
		ids[i] = v;
	}
	tb_builder_set_tokens(b, ids, n);
	return 0;
}

static int raw_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	int64_t vocab = tb_builder_opts(b)->vocab, shape[2];
	uint64_t row = (uint64_t)vocab * sizeof(float);
	tb_tensor *t;
	tb_blob *blob;

	(void)prefix;
	if (tb_has_suffix(stem, tokens_suffix))
		return raw_tokens(b, f, err);
	if (vocab <= 0) {
		tb_builder_note(b, "skipped %s: --vocab N reads raw float32 logits", f->path);
		return 0;
	}
	if (f->size >= 4 && !memcmp(f->data, "PK\3\4", 4)) {
		tb_builder_note(b, "skipped %s: a zip archive, not raw float32 logits", f->path);
		return 0;
	}
	if (f->size == 0 || f->size % row) {
		tb_builder_note(b, "skipped %s: its %llu bytes are not rows of --vocab %lld float32 logits (%llu bytes each)",
				f->path, (unsigned long long)f->size, (long long)vocab, (unsigned long long)row);
		return 0;
	}
	shape[0] = (int64_t)(f->size / row);
	shape[1] = vocab;
	t = tb_builder_add(b, f->path, "", stem, err);
	blob = t ? tb_builder_blob(b, err) : NULL;
	if (!blob)
		return -1;
	t->dtype = TB_DT_F32;
	if (tb_tensor_set_shape(t, 2, shape, f->path, err) < 0)
		return -1;
	tb_blob_set_mapped(blob, f, 0, f->size);
	t->blob = blob;
	return tb_tensor_check_bounds(t, f->path, err);
}

const tb_format tb_fmt_rawlogits = {
	.name = "raw float32 logits",
	.label = ".bin (raw float32 logits)",
	.suffixes = raw_suffixes,
	.sniff = raw_sniff,
	.index = raw_index,
};
