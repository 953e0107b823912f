/* libFuzzer target: the restricted pickle machine, twice: as the data.pkl
 * of a torch.save archive (torch hooks, storages data/0 of 64 bytes and
 * data/1 of 16) and as a MaxText golden pickle (numpy hooks). */
#include "config.h"

#include "dumpwrite.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char storage[64];
	dw_zip *z = dw_zip_new();
	const unsigned char *bytes;
	size_t n;

	dw_zip_add(z, "archive/data.pkl", data, size, NULL);
	dw_zip_add(z, "archive/data/0", storage, 64, NULL);
	dw_zip_add(z, "archive/data/1", storage, 16, NULL);
	bytes = dw_zip_bytes(z, false, &n);
	fuzz_open_and_read(fuzz_write("x.pt", bytes, n), NULL);
	dw_zip_free(z);
	fuzz_open_and_read(fuzz_write("x.jsonl", data, size), NULL);
	return 0;
}
