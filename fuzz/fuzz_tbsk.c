/* libFuzzer target: tbisect sketches (.tbsk).  The input's last 8 bytes
 * are replaced by its checksum, so that mutations get past the checksum
 * to the parser; every tensor's sketch is then compared with itself. */
#include "config.h"

#include "fuzz_common.h"
#include "compare/estimate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	uint64_t h = 0xcbf29ce484222325u;
	tb_open_opts opts;
	tb_tree *tree;
	tb_err err;

	if (size < 8)
		return 0;
	copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	for (size_t i = 0; i < size - 8; i++)
		h = (h ^ copy[i]) * 0x100000001b3u;
	memcpy(copy + size - 8, &h, 8);
	tb_open_opts_init(&opts);
	if (tb_tree_open(fuzz_write("x.tbsk", copy, size), &opts, &tree, &err) == 0) {
		for (size_t i = 0; i < tree->n_tensors; i++) {
			tb_sketch_estimate e;
			if (tree->tensors[i]->sketch &&
			    tb_sketch_compare(tree->tensors[i]->sketch, tree->tensors[i]->sketch, &e, &err) == 0) {
				tb_sketch_estimate_done(&e);
			}
		}
		tb_tree_free(tree);
	}
	free(copy);
	return 0;
}
