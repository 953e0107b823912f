/* libFuzzer target: the zip container (every member read, stored or
 * inflated), then the same bytes as an .npz and as a torch.save file. */
#include "config.h"

#include "fuzz_common.h"
#include "formats/zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char head[4096];
	tb_file f = {.path = (char *)"x.zip", .data = size ? data : NULL, .size = size};
	tb_zip *z;
	tb_err err;

	if (tb_zip_open(&f, &z, &err) == 0) {
		for (size_t i = 0; i < tb_zip_count(z); i++) {
			const tb_zip_entry *e = tb_zip_entry_at(z, i);
			const unsigned char *d;
			unsigned char *owned;
			size_t got;
			tb_zip_read_head(z, e, head, sizeof head, &got, &err);
			if (tb_zip_read(z, e, 1 << 20, &d, &owned, &err) == 0)
				free(owned);
			tb_zip_find(z, e->name);
		}
		tb_zip_free(z);
	}
	fuzz_open_and_read(fuzz_write("x.npz", data, size), NULL);
	fuzz_open_and_read(fuzz_write("x.pt", data, size), NULL);
	return 0;
}
