/* libFuzzer target: the --map naming file (JSON of POSIX regexes), then
 * every rule applied to a few names. */
#include "config.h"

#include "fuzz_common.h"
#include "model/naming.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"model.layers.3.self_attn", "dec.blk12.sa", "layers.0.attn.q", "logits", "x.y.z.0.1.2", "",
	};
	tb_namer *namer;
	tb_err err;

	if (tb_namer_new(fuzz_write("map.json", data, size), &namer, &err) < 0)
		return 0;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		tb_cell cell;
		char rule[256];
		tb_namer_map(namer, names[i], "", &cell, rule, sizeof rule);
	}
	tb_namer_free(namer);
	return 0;
}
