/*
 * fuzz_common: what every libFuzzer target shares: write the input to a
 * scratch file with a chosen name, open it as a dump tree the way tbisect
 * does, and decode every tensor (so lazy sources, inflation and JSON number
 * parsing run too).  Included by one fuzz_*.c each; not part of the library.
 */
#ifndef TB_FUZZ_COMMON_H
#define TB_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/tree.h"

/* Tensors larger than this are only partly decoded (keeps each run fast). */
#define FUZZ_MAX_READ 65536

static char fuzz_dir[256];

/* A private scratch directory, made on first use. */
static const char *fuzz_scratch(void)
{
	if (!fuzz_dir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(fuzz_dir, sizeof fuzz_dir, "%s/tbfuzz.XXXXXX", base && *base ? base : "/tmp");
		if (!mkdtemp(fuzz_dir))
			abort();
	}
	return fuzz_dir;
}

/* Write data to scratch/name; returns the path (static buffer). */
static const char *fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", fuzz_scratch(), name);
	f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f))
		abort();
	return path;
}

/* Open path as a tree and decode what it holds. */
static void fuzz_open_and_read(const char *path, const tb_open_opts *opts)
{
	static float buf[FUZZ_MAX_READ];
	tb_tree *tree;
	tb_err err;

	if (tb_tree_open(path, opts, &tree, &err) < 0)
		return;
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		uint64_t n = t->numel < FUZZ_MAX_READ ? t->numel : FUZZ_MAX_READ;
		if (tb_tensor_acquire(t, &err) < 0)
			continue;
		tb_tensor_read_f32(t, 0, n, buf);
		if (t->numel > n)
			tb_tensor_read_f32(t, t->numel - 1, 1, buf);
		tb_tensor_release(t);
	}
	tb_tree_free(tree);
}

#endif
