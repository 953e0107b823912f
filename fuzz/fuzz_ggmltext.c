/* libFuzzer target: llama.cpp text dumps (llama-eval-callback, llama-debug),
 * as a .log so the reader sees every input whether the sniffer claims it
 * or not. */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tb_open_opts opts;

	tb_open_opts_init(&opts);
	fuzz_open_and_read(fuzz_write("x.log", data, size), &opts);
	return 0;
}
