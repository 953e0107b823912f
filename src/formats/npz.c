#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/reader.h"
#include "formats/npy.h"
#include "formats/zip.h"

static const char *const npz_suffixes[] = {".npz", NULL};

/* An npz is a zip whose first member is an npy file (or an empty zip). */
static bool npz_sniff(const unsigned char *head, size_t n)
{
	const unsigned char *name;
	size_t len;

	if (n >= 4 && !memcmp(head, "PK\5\6", 4))
		return true;
	name = tb_zip_head_name(head, n, &len);
	return name && len > 4 && !memcmp(name + len - 4, ".npy", 4);
}

/* One member: parse its npy header (inflating only that much), then hand
 * the member to a blob and point the tensor past the header.  A member
 * that is a valid array of no tensor type (strings, objects, long double:
 * scipy's test archives hold them beside their numbers) is noted and
 * skipped: returns 1 then, leaving the reason in err. */
static int npz_member(tb_builder *b, const tb_zip *z, const tb_zip_entry *e, const char *prefix, unsigned char *head,
		      tb_err *err)
{
	const char *path = tb_zip_file_path(z);
	size_t got, n = strlen(e->name);
	uint64_t need;
	tb_npy_info info;
	tb_tensor *t;
	tb_blob *blob;
	char key[TB_MAX_NAME + 1];

	if (tb_zip_read_head(z, e, head, TB_NPY_MAX_PREAMBLE, &got, err) < 0)
		return -1;
	if (tb_npy_parse(head, got, path, tb_builder_opts(b), &info, err) < 0) {
		if (err->code == TB_ERR_UNSUPPORTED || err->code == TB_ERR_NO_TENSOR) {
			tb_builder_note(b, "%s: skipped member '%s': %s", path, e->name, err->msg);
			return 1;
		}
		tb_err_prefix(err, "npz member '%s'", e->name);
		return -1;
	}
	memcpy(key, e->name, n - 4);
	key[n - 4] = '\0';
	t = tb_builder_add(b, path, prefix, key, err);
	if (!t || tb_npy_apply(t, &info, path, err) < 0)
		return -1;
	need = info.data_off + t->numel * tb_dtype_size(t->dtype);
	if (need > e->usize)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npz member '%s': npy data truncated: %llu bytes expected, %llu present",
				  e->name, (unsigned long long)(need - info.data_off),
				  (unsigned long long)(e->usize - info.data_off));
	/* Never inflate what the header does not account for (zip bombs). */
	if (e->method == TB_ZIP_DEFLATE && need != e->usize)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "npz member '%s' declares %llu bytes but its npy header needs %llu",
				  e->name, (unsigned long long)e->usize, (unsigned long long)need);
	blob = tb_builder_blob(b, err);
	if (!blob || tb_zip_blob(z, e, blob, err) < 0)
		return -1;
	t->blob = blob;
	t->offset = info.data_off;
	return tb_tensor_check_bounds(t, path, err);
}

static int npz_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	unsigned char *head;
	tb_zip *z;
	size_t loaded = 0, skipped = 0;
	char why[TB_ERR_MSG_MAX] = ""; /* the first skipped member's reason */
	int rc = 0;

	(void)stem;
	if (tb_zip_open(f, &z, err) < 0)
		return -1;
	head = malloc(TB_NPY_MAX_PREAMBLE);
	if (!head) {
		tb_zip_free(z);
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	}
	for (size_t i = 0; i < tb_zip_count(z) && rc == 0; i++) {
		const tb_zip_entry *e = tb_zip_entry_at(z, i);
		if (e->is_dir)
			continue;
		if (!tb_has_suffix(e->name, ".npy") || strlen(e->name) == 4) {
			tb_builder_note(b, "%s: skipped member '%s': not an .npy array", f->path, e->name);
			continue;
		}
		rc = npz_member(b, z, e, prefix, head, err);
		if (rc == 1) {
			if (!skipped++)
				snprintf(why, sizeof why, "%s", err->msg);
			tb_err_clear(err);
		}
		loaded += rc == 0;
		rc = rc < 0 ? -1 : 0;
	}
	free(head);
	tb_zip_free(z);
	/* Notes alone would leave an archive of strings looking empty. */
	if (rc == 0 && skipped && !loaded)
		return tb_err_setc(err, TB_ERR_NO_TENSOR, f->path,
				   "npz holds no numeric array (%zu member%s skipped; first: %s)",
				   skipped, skipped > 1 ? "s" : "", why);
	return rc;
}

const tb_format tb_fmt_npz = {
	.name = "npz",
	.label = ".npz",
	.suffixes = npz_suffixes,
	.sniff = npz_sniff,
	.index = npz_index,
};
