/*
 * test_npz: .npz archives as np.savez (stored, zip64 local extras) and
 * np.savez_compressed (deflate) write them, read through tb_tree_open:
 * names from keys, exact values, lazy inflation, and the refusals that
 * keep a lying member from being inflated.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "testutil.h"
#include "formats/tree.h"

static const float xa[6] = {1.0f, -2.0f, 0.5f, 3.25f, -0.0f, 1e-30f};
static const float xb[4] = {10.0f, 20.0f, 30.0f, 40.0f};

static void write_pair(const char *path, const dw_zip_opts *o)
{
	dw_tensor ts[2] = {
		{.name = "a", .dtype = TB_DT_F32, .ndim = 2, .shape = {2, 3}, .data = xa, .nbytes = sizeof xa},
		{.name = "layers/0/attn", .dtype = TB_DT_F32, .ndim = 1, .shape = {4}, .data = xb, .nbytes = sizeof xb},
	};

	assert_int_equal(dw_write_npz(path, ts, 2, o), 0);
}

static void test_savez_variants(void **state)
{
	const char *dir = tu_tmpdir();
	const dw_zip_opts variants[] = {
		{0},
		{.zip64_local = true},
		{.deflate = true},
		{.deflate = true, .zip64_local = true, .zip64_central = true},
	};
	(void)state;

	for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
		char name[32];
		tb_tree *tree;
		tb_tensor *t;

		snprintf(name, sizeof name, "v%zu.npz", i);
		write_pair(tu_path(dir, name), &variants[i]);
		tree = tu_open(tu_path(dir, name), NULL);
		assert_int_equal(tree->n_tensors, 2);
		t = tu_tensor(tree, "a");
		assert_int_equal(t->ndim, 2);
		assert_int_equal(t->shape[1], 3);
		tu_expect_values(t, xa, 6);
		/* '/' in a key stays; naming reads it as '.'. */
		tu_expect_values(tu_tensor(tree, "layers/0/attn"), xb, 4);
		assert_true(variants[i].deflate ? t->blob->ops != NULL : t->blob->file != NULL);
		tb_tree_free(tree);
	}
}

/* Inside a directory, keys get the directory prefix; an .npz found there
 * is sniffed by content whatever its name. */
static void test_in_tree(void **state)
{
	const char *dir = tu_tmpdir();
	tb_tree *tree;
	(void)state;

	write_pair(tu_path(dir, "sub/run.npz"), NULL);
	write_pair(tu_path(dir, "other/other.data"), NULL);
	tree = tu_open(dir, NULL);
	assert_int_equal(tree->n_tensors, 4);
	tu_expect_values(tu_tensor(tree, "sub.a"), xa, 6);
	tu_expect_values(tu_tensor(tree, "other.a"), xa, 6);
	tu_expect_values(tu_tensor(tree, "sub.layers/0/attn"), xb, 4);
	tb_tree_free(tree);
}

/* Valid arrays of no tensor type (scipy's test archives: strings, objects,
 * long double beside the numbers) are noted and skipped, not fatal; an
 * archive of nothing else is refused, naming it. */
static void test_non_numeric_members(void **state)
{
	static const struct {
		const char *name, *descr, *why;
	} others[] = {
		{"s.npy", "<U2", "skipped member 's.npy': npy dtype '<U2' is not a numeric tensor type"},
		{"b.npy", "|S4", "skipped member 'b.npy': npy dtype '|S4' is not a numeric tensor type"},
		{"o.npy", "|O", "skipped member 'o.npy': object array (pickled data) refused"},
		{"ld.npy", "<f16", "skipped member 'ld.npy': long double npy dtype '<f16' is not supported"},
		{"g.npy", "g", "skipped member 'g.npy': long double npy dtype 'g' is not supported"},
		{"t.npy", "<M8[ns]", "skipped member 't.npy': npy dtype '<M8[ns]' is not a numeric tensor type"},
	};
	const size_t n_others = sizeof others / sizeof *others;
	const char *dir = tu_tmpdir();
	const int64_t shape[1] = {4};
	const unsigned char junk[64] = {0};
	dw_buf npy = {0};
	dw_zip *z;
	tb_tree *tree;
	(void)state;

	z = dw_zip_new();
	for (size_t i = 0; i < n_others; i++) {
		dw_npy_bytes(&npy, 1, others[i].descr, false, 1, shape, junk, sizeof junk);
		dw_zip_add(z, others[i].name, npy.p, npy.n, NULL);
		npy.n = 0;
	}
	dw_npy_bytes(&npy, 1, "<f4", false, 1, shape, xb, sizeof xb);
	dw_zip_add(z, "x.npy", npy.p, npy.n, NULL);
	dw_zip_write(z, tu_path(dir, "mixed.npz"), false);
	dw_zip_free(z);
	tree = tu_open(tu_path(dir, "mixed.npz"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	tu_expect_values(tu_tensor(tree, "x"), xb, 4);
	assert_int_equal(tree->n_notes, n_others);
	for (size_t i = 0; i < n_others; i++)
		if (!strstr(tree->notes[i], others[i].why))
			fail_msg("note \"%s\" does not say \"%s\"", tree->notes[i], others[i].why);
	tb_tree_free(tree);

	z = dw_zip_new();
	for (size_t i = 0; i < 2; i++) {
		npy.n = 0;
		dw_npy_bytes(&npy, 1, others[i].descr, false, 1, shape, junk, sizeof junk);
		dw_zip_add(z, others[i].name, npy.p, npy.n, NULL);
	}
	dw_zip_write(z, tu_path(dir, "strings.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "strings.npz"), NULL, NULL,
			  "npz holds no numeric array (2 members skipped; first: npy dtype '<U2' is not a numeric tensor type)");
	/* in a tree, the archive is skipped with a note naming it, as a lone
	 * string .npy is: labels beside the dumps are no broken dump */
	z = dw_zip_new();
	dw_zip_add(z, "s.npy", npy.p, npy.n, NULL);
	dw_zip_write(z, tu_path(dir, "tree/strings.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "tree"), NULL, tu_path(dir, "tree"), "strings.npz: skipped member 's.npy'");
	assert_int_equal(dw_write_npy(tu_path(dir, "tree/x.npy"), 1, "<f4", false, 1, shape, xb, sizeof xb), 0);
	tree = tu_open(tu_path(dir, "tree"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	assert_non_null(strstr(tree->notes[tree->n_notes - 1], "strings.npz: npz holds no numeric array"));
	tb_tree_free(tree);
	dw_buf_free(&npy);
}

static void test_skips_and_refusals(void **state)
{
	const char *dir = tu_tmpdir();
	const dw_zip_opts deflate = {.deflate = true};
	const int64_t shape[1] = {4};
	dw_buf npy = {0};
	dw_zip *z;
	tb_tree *tree;
	(void)state;

	/* A member that is not an .npy array is skipped with a note. */
	z = dw_zip_new();
	dw_npy_bytes(&npy, 1, "<f4", false, 1, shape, xb, sizeof xb);
	dw_zip_add(z, "x.npy", npy.p, npy.n, NULL);
	dw_zip_add(z, "README.txt", "hi", 2, NULL);
	dw_zip_write(z, tu_path(dir, "skip.npz"), false);
	dw_zip_free(z);
	tree = tu_open(tu_path(dir, "skip.npz"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	assert_int_equal(tree->n_notes, 1);
	assert_non_null(strstr(tree->notes[0], "skipped member 'README.txt'"));
	tb_tree_free(tree);

	/* A stored member whose bytes no longer match its CRC. */
	z = dw_zip_new();
	dw_zip_add(z, "x.npy", npy.p, npy.n, NULL);
	{
		size_t n;
		const unsigned char *p = dw_zip_bytes(z, false, &n);
		unsigned char *b = malloc(n);
		memcpy(b, p, n);
		b[30 + 5 + npy.n - 1] ^= 0x40;
		tu_write(tu_path(dir, "crc.npz"), b, n);
		free(b);
	}
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "crc.npz"), NULL, NULL, "zip: member 'x.npy' fails its CRC check");

	/* Data shorter than the npy header says. */
	z = dw_zip_new();
	dw_zip_add(z, "x.npy", npy.p, npy.n - 4, NULL);
	dw_zip_write(z, tu_path(dir, "short.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "short.npz"), NULL, NULL,
			  "npz member 'x.npy': npy data truncated: 16 bytes expected, 12 present");

	/* A deflated member holding more than its header accounts for. */
	z = dw_zip_new();
	dw_buf_add(&npy, "trailing", 8);
	dw_zip_add(z, "x.npy", npy.p, npy.n, &deflate);
	dw_zip_write(z, tu_path(dir, "extra.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "extra.npz"), NULL, NULL, "npz member 'x.npy' declares 152 bytes but its npy header needs 144");

	/* A broken npy header inside: the npy reader's message, with the member. */
	z = dw_zip_new();
	dw_zip_add(z, "x.npy", "\x93NUMPY\x01\x00\x10\x00{'descr': 1}   \n", 26, &deflate);
	dw_zip_write(z, tu_path(dir, "hdr.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "hdr.npz"), NULL, NULL, "npz member 'x.npy': npy header: 'descr' is not a dtype string");

	/* Two members giving one tensor name. */
	z = dw_zip_new();
	dw_zip_add(z, "x.npy", npy.p, npy.n, NULL);
	dw_zip_add(z, "x.NPY", npy.p, npy.n, NULL);
	dw_zip_write(z, tu_path(dir, "dup.npz"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "dup.npz"), NULL, NULL, "duplicate tensor name 'x'");

	/* Not an npz at all, despite the name. */
	tu_write_str(tu_path(dir, "text.npz"), "hello, this is a text file and no zip archive\n");
	tu_expect_refused(tu_path(dir, "text.npz"), NULL, NULL, "zip: no end-of-central-directory record");
	dw_buf_free(&npy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_savez_variants),
		cmocka_unit_test(test_in_tree),
		cmocka_unit_test(test_non_numeric_members),
		cmocka_unit_test(test_skips_and_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
