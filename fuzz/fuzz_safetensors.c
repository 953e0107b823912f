/* libFuzzer target: the safetensors reader. */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_open_and_read(fuzz_write("x.safetensors", data, size), NULL);
	return 0;
}
