/* libFuzzer target: llama.cpp's MoE routing trace (moe-trace CSV). */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tb_open_opts opts;
	const char *path = fuzz_write("x.csv", data, size);

	tb_open_opts_init(&opts);
	fuzz_open_and_read(path, &opts);
	return 0;
}
