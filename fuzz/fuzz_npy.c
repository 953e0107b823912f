/* libFuzzer target: the .npy reader (also with void dtypes forced). */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tb_open_opts opts;
	const char *path = fuzz_write("x.npy", data, size);

	tb_open_opts_init(&opts);
	fuzz_open_and_read(path, &opts);
	opts.npy_void2 = TB_DT_BF16;
	opts.npy_void1 = TB_DT_F8_E4M3FN;
	fuzz_open_and_read(path, &opts);
	return 0;
}
