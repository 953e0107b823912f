/* libFuzzer target: Polygraphy RunResults JSON, as reference and as
 * candidate (first and second runner), iterations 0 and 1. */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tb_open_opts opts;
	const char *path = fuzz_write("x.json", data, size);

	tb_open_opts_init(&opts);
	for (int side = 0; side < 2; side++) {
		opts.side = side;
		for (int record = 0; record < 2; record++) {
			opts.record = record;
			fuzz_open_and_read(path, &opts);
		}
	}
	return 0;
}
