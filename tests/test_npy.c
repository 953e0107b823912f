/*
 * test_npy: the .npy reader, driven through tb_tree_open on files written
 * into a scratch directory.  Fixtures are spelled out byte by byte where the
 * point is the exact layout (odd headers, big-endian data, Fortran order),
 * so a writer bug cannot hide a reader bug.
 */
#include "config.h"

#include <math.h>
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

/* Preamble + header text padded with spaces and a final '\n' so that the
 * data starts at a multiple of align (1: no padding beyond the '\n'; 0: no
 * padding and no '\n' at all), then data, then trail. */
static size_t npy_raw(const char *path, int major, const char *dict, size_t align, const void *data, size_t nbytes,
		      const void *trail, size_t ntrail)
{
	size_t pre = major == 1 ? 10 : 12, len = strlen(dict), hlen, total;
	unsigned char *buf;

	if (align == 0) {
		hlen = len;
	} else {
		total = (pre + len + 1 + align - 1) / align * align;
		hlen = total - pre;
	}
	buf = malloc(pre + hlen + nbytes + ntrail + 1);
	assert_non_null(buf);
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)major;
	buf[7] = 0;
	for (size_t i = 0; i < pre - 8; i++)
		buf[8 + i] = (unsigned char)(hlen >> (8 * i));
	memcpy(buf + pre, dict, len);
	if (hlen > len) {
		memset(buf + pre + len, ' ', hlen - len - 1);
		buf[pre + hlen - 1] = '\n';
	}
	if (nbytes)
		memcpy(buf + pre + hlen, data, nbytes);
	if (ntrail)
		memcpy(buf + pre + hlen + nbytes, trail, ntrail);
	tu_write(path, buf, pre + hlen + nbytes + ntrail);
	free(buf);
	return pre + hlen;
}

/* Open a tree that must hold exactly one tensor, and return it. */
static tb_tensor *open_one(const char *path, const tb_open_opts *opts, tb_tree **tree)
{
	tb_err err;
	char text[TB_ERR_TEXT_MAX];

	if (tb_tree_open(path, opts, tree, &err) < 0)
		fail_msg("tb_tree_open(%s) failed: %s", path, tb_err_text(&err, text, sizeof text));
	assert_int_equal((*tree)->n_tensors, 1);
	return (*tree)->tensors[0];
}

static void expect_shape(const tb_tensor *t, int ndim, const int64_t *shape)
{
	assert_int_equal(t->ndim, ndim);
	for (int i = 0; i < ndim; i++)
		assert_int_equal(t->shape[i], shape[i]);
}

static void test_versions(void **state)
{
	const char *dir = tu_tmpdir();
	static const float x[4] = {1.0f, -2.0f, 0.5f, 3.0f};
	const int64_t shape[2] = {2, 2};
	(void)state;

	for (int v = 1; v <= 3; v++) {
		char name[32];
		tb_tree *tree;
		tb_tensor *t;

		snprintf(name, sizeof name, "v%d.npy", v);
		assert_int_equal(dw_write_npy(tu_path(dir, name), v, "<f4", false, 2, shape, x, sizeof x), 0);
		t = open_one(tu_path(dir, name), NULL, &tree);
		snprintf(name, sizeof name, "v%d", v);
		assert_string_equal(t->name, name);
		assert_int_equal(t->dtype, TB_DT_F32);
		assert_false(t->big_endian);
		expect_shape(t, 2, shape);
		assert_true(t->contiguous);
		tu_expect_values(t, x, 4);
		/* 64-byte aligned data in a page-aligned mapping: read in place. */
		assert_int_equal(tb_tensor_acquire(t, NULL), 0);
		assert_non_null(tb_tensor_f32_direct(t));
		tb_tensor_release(t);
		tb_tree_free(tree);
	}
}

typedef struct dcase {
	const char *descr;
	tb_dtype dtype;
	bool big;
	size_t n;
	unsigned char bytes[40];
	float want[5];
} dcase;

static const dcase dcases[] = {
	{"<f8", TB_DT_F64, false, 4,
	 {0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0, 0, 0, 0, 0, 0, 0x02, 0xC0, 0x9A, 0x99, 0x99, 0x99, 0x99, 0x99, 0xB9, 0x3F,
	  0, 0, 0, 0, 0, 0, 0, 0x80},
	 {1.5f, -2.25f, 0.1f, -0.0f}},
	{"<f4", TB_DT_F32, false, 4,
	 {0, 0, 0x80, 0x3F, 0, 0, 0x60, 0xC0, 1, 0, 0, 0, 0, 0, 0x80, 0x7F},
	 {1.0f, -3.5f, 0x1p-149f, INFINITY}},
	{"<f2", TB_DT_F16, false, 5,
	 {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00, 0x00, 0x7C},
	 {1.0f, -2.0f, 65504.0f, 0x1p-24f, INFINITY}},
	{"|i1", TB_DT_I8, false, 4, {0x80, 0xFF, 0x7F, 0x00}, {-128, -1, 127, 0}},
	{"<i2", TB_DT_I16, false, 4, {0x00, 0x80, 0xFF, 0xFF, 0xFF, 0x7F, 0x05, 0x00}, {-32768, -1, 32767, 5}},
	{"<i4", TB_DT_I32, false, 3,
	 {0x00, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF, 0x40, 0xE2, 0x01, 0x00},
	 {-2147483648.0f, -1, 123456}},
	{"<i8", TB_DT_I64, false, 4,
	 {0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0, 0, 0x01, 0, 0, 0, 0,
	  0, 0, 0, 0, 0, 0, 0, 0x80},
	 {-0x1p40f, -1, 16777216.0f /* 2^24+1 rounds to even */, -0x1p63f}},
	{"|u1", TB_DT_U8, false, 3, {0x00, 0xFF, 0x80}, {0, 255, 128}},
	{"<u2", TB_DT_U16, false, 2, {0xFF, 0xFF, 0x01, 0x00}, {65535, 1}},
	{"<u4", TB_DT_U32, false, 2, {0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0, 0, 0}, {0x1p32f, 7}},
	{"<u8", TB_DT_U64, false, 3,
	 {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
	 {0x1p64f, 0, 0x1p32f}},
	{"|b1", TB_DT_BOOL, false, 4, {0, 1, 1, 0}, {0, 1, 1, 0}},
	{">f4", TB_DT_F32, true, 3, {0x3F, 0x80, 0, 0, 0xC0, 0, 0, 0, 0x00, 0x00, 0x00, 0x01}, {1.0f, -2.0f, 0x1p-149f}},
	{">i8", TB_DT_I64, true, 2,
	 {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 0, 0, 0, 0x01, 0x02},
	 {-2, 258}},
	{">f2", TB_DT_F16, true, 3, {0x3C, 0x00, 0xC0, 0x00, 0x7B, 0xFF}, {1.0f, -2.0f, 65504.0f}},
	{">i2", TB_DT_I16, true, 2, {0xFF, 0xFE, 0x01, 0x00}, {-2, 256}},
	{">u4", TB_DT_U32, true, 1, {0x00, 0x00, 0x01, 0x00}, {256}},
	/* ml_dtypes writes float8_e5m2 as '<f1'. */
	{"<f1", TB_DT_F8_E5M2, false, 5, {0x3C, 0x7B, 0xC0, 0x01, 0x7C}, {1.0f, 57344.0f, -2.0f, 0x1p-16f, INFINITY}},
	/* A hand-written type name, the documented bf16 workaround. */
	{"bfloat16", TB_DT_BF16, false, 2, {0x80, 0x3F, 0xA0, 0xC0}, {1.0f, -5.0f}},
};

static void test_dtypes(void **state)
{
	const char *dir = tu_tmpdir();
	(void)state;

	for (size_t k = 0; k < sizeof dcases / sizeof *dcases; k++) {
		const dcase *c = &dcases[k];
		char dict[128], name[32];
		tb_tree *tree;
		tb_tensor *t;
		int64_t n = (int64_t)c->n;

		snprintf(name, sizeof name, "d%zu.npy", k);
		snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", c->descr, c->n);
		npy_raw(tu_path(dir, name), 1, dict, 64, c->bytes, c->n * tb_dtype_size(c->dtype), NULL, 0);
		t = open_one(tu_path(dir, name), NULL, &tree);
		if (t->dtype != c->dtype)
			fail_msg("descr %s: dtype %s, expected %s", c->descr, tb_dtype_name(t->dtype), tb_dtype_name(c->dtype));
		assert_int_equal(t->big_endian, c->big);
		expect_shape(t, 1, &n);
		tu_expect_values(t, c->want, c->n);
		tb_tree_free(tree);
	}
}

static const unsigned char bf16_bytes[8] = {0x80, 0x3F, 0xA0, 0xC0, 0x7F, 0x7F, 0xC0, 0x7F};
static const float bf16_want[4] = {1.0f, -5.0f, 0x1.FEp127f, NAN};

static void write_void2(const char *path, const char *descr)
{
	char dict[128];

	snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (4,), }", descr);
	npy_raw(path, 1, dict, 64, bf16_bytes, sizeof bf16_bytes, NULL, 0);
}

static void test_void2_option(void **state)
{
	const char *dir = tu_tmpdir();
	tb_open_opts opts;
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	write_void2(tu_path(dir, "lt.npy"), "<V2");
	write_void2(tu_path(dir, "bar.npy"), "|V2");
	tb_open_opts_init(&opts);
	opts.npy_void2 = TB_DT_BF16;
	t = open_one(tu_path(dir, "lt.npy"), &opts, &tree);
	assert_int_equal(t->dtype, TB_DT_BF16);
	tu_expect_values(t, bf16_want, 4);
	tb_tree_free(tree);
	t = open_one(tu_path(dir, "bar.npy"), &opts, &tree);
	assert_int_equal(t->dtype, TB_DT_BF16);
	tu_expect_values(t, bf16_want, 4);
	tb_tree_free(tree);

	/* The option names the type; it is not hard-wired to bf16. */
	opts.npy_void2 = TB_DT_F16;
	t = open_one(tu_path(dir, "bar.npy"), &opts, &tree);
	assert_int_equal(t->dtype, TB_DT_F16);
	tb_tree_free(tree);

	/* A 2-byte option must not leak onto 1-byte or wider voids. */
	opts.npy_void2 = TB_DT_BF16;
	npy_raw(tu_path(dir, "v4.npy"), 1, "{'descr': '|V4', 'fortran_order': False, 'shape': (1,), }", 64,
		bf16_bytes, 4, NULL, 0);
	tu_expect_refused(tu_path(dir, "v4.npy"), &opts, NULL, "void dtype '|V4' is not a tensor type");
}

static void test_void2_refused(void **state)
{
	const char *dir = tu_tmpdir();
	(void)state;

	write_void2(tu_path(dir, "lt.npy"), "<V2");
	write_void2(tu_path(dir, "bar.npy"), "|V2");
	tu_expect_refused(tu_path(dir, "lt.npy"), NULL, NULL, "dtype '<V2' is raw 2-byte void");
	tu_expect_refused(tu_path(dir, "lt.npy"), NULL, NULL, "--npy-void2 bf16");
	tu_expect_refused(tu_path(dir, "bar.npy"), NULL, NULL, "dtype '|V2' is raw 2-byte void");
	tu_expect_refused(tu_path(dir, "bar.npy"), NULL, NULL, "dtypes.json");
}

static void test_void2_manifest(void **state)
{
	const char *named = tu_tmpdir(), *stem = tu_tmpdir(), *star = tu_tmpdir(), *wrong = tu_tmpdir();
	const char *broken = tu_tmpdir();
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	write_void2(tu_path(named, "x.npy"), "|V2");
	write_void2(tu_path(named, "y.npy"), "|V2");
	tu_write_str(tu_path(named, "dtypes.json"), "{\"x.npy\": \"bfloat16\"}");
	t = open_one(tu_path(named, "x.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_BF16);
	tu_expect_values(t, bf16_want, 4);
	tb_tree_free(tree);
	/* The manifest speaks for the files it names, not their neighbours. */
	tu_expect_refused(tu_path(named, "y.npy"), NULL, NULL, "raw 2-byte void");

	write_void2(tu_path(stem, "x.npy"), "<V2");
	tu_write_str(tu_path(stem, "dtypes.json"), "{\"x\": \"bf16\"}");
	t = open_one(tu_path(stem, "x.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_BF16);
	tb_tree_free(tree);

	/* Walking the directory: the manifest is used, and skipped as a file
	 * without a note (it is where it should be). */
	write_void2(tu_path(star, "x.npy"), "|V2");
	tu_write_str(tu_path(star, "dtypes.json"), "{\"*\": \"bf16\"}");
	t = open_one(star, NULL, &tree);
	assert_string_equal(t->name, "x");
	assert_int_equal(t->dtype, TB_DT_BF16);
	tu_expect_values(t, bf16_want, 4);
	assert_int_equal(tree->n_notes, 0);
	tb_tree_free(tree);

	write_void2(tu_path(wrong, "x.npy"), "|V2");
	tu_write_str(tu_path(wrong, "dtypes.json"), "{\"*\": \"f32\"}");
	tu_expect_refused(tu_path(wrong, "x.npy"), NULL, NULL, "dtype f32 does not fit void dtype '|V2'");

	write_void2(tu_path(broken, "x.npy"), "|V2");
	tu_write_str(tu_path(broken, "dtypes.json"), "{\"*\": ");
	tu_expect_refused(tu_path(broken, "x.npy"), NULL, NULL, "raw 2-byte void");
}

/* bf16 saved as its bits (x.view(np.uint16)) is an integer npy file: the
 * manifest's own entry for the file says what the bits are. */
static void test_bits_manifest(void **state)
{
	const char *named = tu_tmpdir(), *star = tu_tmpdir(), *half = tu_tmpdir(), *wide = tu_tmpdir();
	const char *isfloat = tu_tmpdir(), *typo = tu_tmpdir();
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	write_void2(tu_path(named, "x.npy"), "<u2");
	write_void2(tu_path(named, "y.npy"), "<u2");
	tu_write_str(tu_path(named, "dtypes.json"), "{\"x.npy\": \"bf16\"}");
	t = open_one(tu_path(named, "x.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_BF16);
	tu_expect_values(t, bf16_want, 4);
	tb_tree_free(tree);
	/* only the files it names: a neighbour's integers stay integers */
	t = open_one(tu_path(named, "y.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_U16);
	tb_tree_free(tree);
	/* "*" speaks for void files, not for integer ones (token ids) */
	write_void2(tu_path(star, "x.npy"), "<u2");
	tu_write_str(tu_path(star, "dtypes.json"), "{\"*\": \"bf16\"}");
	t = open_one(tu_path(star, "x.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_U16);
	tb_tree_free(tree);
	write_void2(tu_path(half, "x.npy"), "<i2");
	tu_write_str(tu_path(half, "dtypes.json"), "{\"x\": \"f16\"}");
	t = open_one(tu_path(half, "x.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_F16);
	tb_tree_free(tree);

	/* an entry that contradicts the file is refused, never ignored */
	write_void2(tu_path(wide, "x.npy"), "<u2");
	tu_write_str(tu_path(wide, "dtypes.json"), "{\"x.npy\": \"f32\"}");
	tu_expect_refused(wide, NULL, tu_path(wide, "x.npy"),
			  "dtypes.json names f32 (4-byte elements) for it, but its npy dtype '<u2' has 2-byte ones");
	write_void2(tu_path(isfloat, "x.npy"), "<f2");
	tu_write_str(tu_path(isfloat, "dtypes.json"), "{\"x.npy\": \"bf16\"}");
	tu_expect_refused(tu_path(isfloat, "x.npy"), NULL, NULL, "holds npy dtype '<f2', not raw bits");
	write_void2(tu_path(typo, "x.npy"), "<u2");
	tu_write_str(tu_path(typo, "dtypes.json"), "{\"x.npy\": \"bfloat61\"}");
	tu_expect_refused(tu_path(typo, "x.npy"), NULL, NULL,
			  "dtypes.json names 'bfloat61' for it, which is not a dtype");
}

static void test_void1(void **state)
{
	const char *dir = tu_tmpdir();
	static const unsigned char b[3] = {0x7E, 0x38, 0x7F};
	const float want[3] = {448.0f, 1.0f, NAN};
	tb_open_opts opts;
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	npy_raw(tu_path(dir, "f8.npy"), 1, "{'descr': '<V1', 'fortran_order': False, 'shape': (3,), }", 64, b, 3,
		NULL, 0);
	tu_expect_refused(tu_path(dir, "f8.npy"), NULL, NULL, "--npy-void1");
	tb_open_opts_init(&opts);
	opts.npy_void1 = TB_DT_F8_E4M3FN;
	t = open_one(tu_path(dir, "f8.npy"), &opts, &tree);
	assert_int_equal(t->dtype, TB_DT_F8_E4M3FN);
	tu_expect_values(t, want, 3);
	tb_tree_free(tree);
}

static void test_fortran_2x3(void **state)
{
	const char *dir = tu_tmpdir();
	/* a[i][j] = 10 i + j stored column by column. */
	static const float colmajor[6] = {0, 10, 1, 11, 2, 12};
	static const float want[6] = {0, 1, 2, 10, 11, 12};
	const int64_t shape[2] = {2, 3};
	float part[3];
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	assert_int_equal(dw_write_npy(tu_path(dir, "f.npy"), 1, "<f4", true, 2, shape, colmajor, sizeof colmajor), 0);
	t = open_one(tu_path(dir, "f.npy"), NULL, &tree);
	expect_shape(t, 2, shape);
	assert_int_equal(t->stride[0], 1);
	assert_int_equal(t->stride[1], 2);
	assert_false(t->contiguous);
	tu_expect_values(t, want, 6);
	assert_int_equal(tb_tensor_acquire(t, NULL), 0);
	assert_null(tb_tensor_f32_direct(t));
	/* A range that starts and ends inside rows. */
	tb_tensor_read_f32(t, 2, 3, part);
	assert_true(part[0] == 2 && part[1] == 10 && part[2] == 11);
	tb_tensor_read_f32(t, 5, 1, part);
	assert_true(part[0] == 12);
	tb_tensor_release(t);
	tb_tree_free(tree);
}

static void test_fortran_3d(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t shape[3] = {2, 3, 4};
	float store[24], want[24];
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	/* Element (i,j,k) lives at i + 2 (j + 3 k); value 100 i + 10 j + k. */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++) {
				store[i + 2 * (j + 3 * k)] = (float)(100 * i + 10 * j + k);
				want[(i * 3 + j) * 4 + k] = (float)(100 * i + 10 * j + k);
			}
	assert_int_equal(dw_write_npy(tu_path(dir, "f3.npy"), 1, "<f4", true, 3, shape, store, sizeof store), 0);
	t = open_one(tu_path(dir, "f3.npy"), NULL, &tree);
	expect_shape(t, 3, shape);
	tu_expect_values(t, want, 24);
	tb_tree_free(tree);
}

static void test_fortran_bigendian(void **state)
{
	const char *dir = tu_tmpdir();
	/* >i2 [[1, 2], [3, 4]] column by column: 1 3 2 4. */
	static const unsigned char b[8] = {0, 1, 0, 3, 0, 2, 0, 4};
	static const float want[4] = {1, 2, 3, 4};
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	npy_raw(tu_path(dir, "fb.npy"), 1, "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 2), }", 64, b, 8,
		NULL, 0);
	t = open_one(tu_path(dir, "fb.npy"), NULL, &tree);
	assert_true(t->big_endian);
	assert_false(t->contiguous);
	tu_expect_values(t, want, 4);
	tb_tree_free(tree);
}

static void test_fortran_trivial(void **state)
{
	const char *dir = tu_tmpdir();
	static const float x[3] = {1, 2, 3};
	const int64_t one[1] = {3}, empty[3] = {2, 0, 3};
	float sink[1] = {42};
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	/* 1-D Fortran order is C order. */
	assert_int_equal(dw_write_npy(tu_path(dir, "f1.npy"), 1, "<f4", true, 1, one, x, sizeof x), 0);
	t = open_one(tu_path(dir, "f1.npy"), NULL, &tree);
	assert_true(t->contiguous);
	tu_expect_values(t, x, 3);
	tb_tree_free(tree);

	/* Empty and non-contiguous: nothing to read, and reading nothing is safe. */
	assert_int_equal(dw_write_npy(tu_path(dir, "f0.npy"), 1, "<f4", true, 3, empty, NULL, 0), 0);
	t = open_one(tu_path(dir, "f0.npy"), NULL, &tree);
	expect_shape(t, 3, empty);
	assert_int_equal(t->numel, 0);
	assert_int_equal(tb_tensor_acquire(t, NULL), 0);
	tb_tensor_read_f32(t, 0, 0, sink);
	assert_true(sink[0] == 42);
	tb_tensor_release(t);
	tb_tree_free(tree);
}

static void test_shapes(void **state)
{
	const char *dir = tu_tmpdir();
	static const float scalar[1] = {2.5f};
	static const float five[5] = {1, 2, 3, 4, 5};
	float four[12];
	const int64_t s5[1] = {5}, s03[2] = {0, 3}, s4d[4] = {2, 1, 3, 2};
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	assert_int_equal(dw_write_npy(tu_path(dir, "scalar.npy"), 1, "<f4", false, 0, NULL, scalar, 4), 0);
	t = open_one(tu_path(dir, "scalar.npy"), NULL, &tree);
	assert_int_equal(t->ndim, 0);
	tu_expect_values(t, scalar, 1);
	tb_tree_free(tree);

	assert_int_equal(dw_write_npy(tu_path(dir, "five.npy"), 1, "<f4", false, 1, s5, five, sizeof five), 0);
	t = open_one(tu_path(dir, "five.npy"), NULL, &tree);
	expect_shape(t, 1, s5);
	tu_expect_values(t, five, 5);
	tb_tree_free(tree);

	assert_int_equal(dw_write_npy(tu_path(dir, "empty.npy"), 1, "<f4", false, 2, s03, NULL, 0), 0);
	t = open_one(tu_path(dir, "empty.npy"), NULL, &tree);
	expect_shape(t, 2, s03);
	assert_int_equal(t->numel, 0);
	assert_int_equal(tb_tensor_acquire(t, NULL), 0);
	tb_tensor_release(t);
	tb_tree_free(tree);

	for (int i = 0; i < 12; i++)
		four[i] = (float)i - 5.5f;
	assert_int_equal(dw_write_npy(tu_path(dir, "four.npy"), 1, "<f4", false, 4, s4d, four, sizeof four), 0);
	t = open_one(tu_path(dir, "four.npy"), NULL, &tree);
	expect_shape(t, 4, s4d);
	assert_int_equal(t->stride[0], 6);
	assert_int_equal(t->stride[1], 6);
	assert_int_equal(t->stride[2], 2);
	assert_int_equal(t->stride[3], 1);
	tu_expect_values(t, four, 12);
	tb_tree_free(tree);
}

static void test_header_variants(void **state)
{
	const char *dir = tu_tmpdir();
	static const unsigned char i4[16] = {1, 0, 0, 0, 2, 0, 0, 0, 0xFD, 0xFF, 0xFF, 0xFF, 4, 0, 0, 0};
	static const float i4_want[4] = {1, 2, -3, 4};
	const int64_t s22[2] = {2, 2}, s6[1] = {6}, s23[2] = {2, 3};
	float f6[6] = {0.5f, 1.5f, -2.5f, 3.5f, 4.5f, -5.5f};
	tb_tree *tree;
	tb_tensor *t;
	size_t off;
	(void)state;

	npy_raw(tu_path(dir, "order.npy"), 1, "{'shape': (2, 2), 'fortran_order': False, 'descr': '<i4'}", 64, i4,
		sizeof i4, NULL, 0);
	t = open_one(tu_path(dir, "order.npy"), NULL, &tree);
	assert_int_equal(t->dtype, TB_DT_I32);
	expect_shape(t, 2, s22);
	tu_expect_values(t, i4_want, 4);
	tb_tree_free(tree);

	npy_raw(tu_path(dir, "spaced.npy"), 1, "{ \"descr\" : \"<i4\" ,'fortran_order':False,'shape':( 2 ,2 , ) }", 64,
		i4, sizeof i4, NULL, 0);
	t = open_one(tu_path(dir, "spaced.npy"), NULL, &tree);
	expect_shape(t, 2, s22);
	tu_expect_values(t, i4_want, 4);
	tb_tree_free(tree);

	/* NumPy before 1.14 aligned the data to 16 bytes only. */
	off = npy_raw(tu_path(dir, "old.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 16, f6,
		      sizeof f6, NULL, 0);
	assert_int_equal(off % 16, 0);
	assert_int_not_equal(off % 64, 0);
	t = open_one(tu_path(dir, "old.npy"), NULL, &tree);
	expect_shape(t, 1, s6);
	tu_expect_values(t, f6, 6);
	tb_tree_free(tree);

	/* Python 2 wrote longs with an L suffix. */
	npy_raw(tu_path(dir, "py2.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 64, f6,
		sizeof f6, NULL, 0);
	t = open_one(tu_path(dir, "py2.npy"), NULL, &tree);
	expect_shape(t, 2, s23);
	tu_expect_values(t, f6, 6);
	tb_tree_free(tree);

	/* No padding at all puts float data at an odd offset: still decoded. */
	off = npy_raw(tu_path(dir, "odd.npy"), 1, "{'descr':'<f4', 'fortran_order':False,'shape':(6,)}", 0, f6,
		      sizeof f6, NULL, 0);
	assert_int_not_equal(off % 4, 0);
	t = open_one(tu_path(dir, "odd.npy"), NULL, &tree);
	assert_int_equal(tb_tensor_acquire(t, NULL), 0);
	assert_null(tb_tensor_f32_direct(t));
	tb_tensor_release(t);
	tu_expect_values(t, f6, 6);
	tb_tree_free(tree);
}

static void test_trailing_data(void **state)
{
	const char *dir = tu_tmpdir();
	static const float x[3] = {7, 8, 9};
	/* np.save on one handle appends a second array; it must be ignored. */
	static const char second[] = "\x93NUMPY\x01\x00\x10\x00{'descr': '<f8'}xxxxxxxxxxxxxxxxxx";
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	npy_raw(tu_path(dir, "two.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 64, x,
		sizeof x, second, sizeof second - 1);
	t = open_one(tu_path(dir, "two.npy"), NULL, &tree);
	assert_int_equal(t->numel, 3);
	assert_int_equal(t->blob->size, sizeof x);
	tu_expect_values(t, x, 3);
	tb_tree_free(tree);
}

typedef struct bad_header {
	const char *name;
	const char *dict;
	size_t nbytes; /* data bytes after the header */
	const char *want;
} bad_header;

static const bad_header bad_headers[] = {
	{"notdict", "['descr', '<f4']", 0, "npy header is not a dict"},
	{"nodescr", "{'fortran_order': False, 'shape': (1,), }", 4, "missing key 'descr'"},
	{"noshape", "{'descr': '<f4', 'fortran_order': False, }", 4, "missing key 'shape'"},
	{"nofortran", "{'descr': '<f4', 'shape': (1,), }", 4, "missing key 'fortran_order'"},
	{"extra", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1, }", 4, "unexpected key 'extra'"},
	{"dupdescr", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
	 "duplicate key 'descr'"},
	{"dupshape", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,), }", 4,
	 "duplicate key 'shape'"},
	{"negdim", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", 0, "negative dimension"},
	{"hugedim", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
	 "dimension too large"},
	{"numel", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
	 "element count overflows"},
	{"bytes", "{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,), }", 0,
	 "byte size overflows"},
	{"fortran01", "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 4, "must be True or False"},
	{"fortranstr", "{'descr': '<f4', 'fortran_order': 'True', 'shape': (1,), }", 4, "must be True or False"},
	{"object", "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8, "object array (pickled data) refused"},
	{"object8", "{'descr': '|O8', 'fortran_order': False, 'shape': (1,), }", 8, "object array (pickled data) refused"},
	{"complex", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, "complex dtype '<c8' is not supported"},
	{"unknown", "{'descr': '<x4', 'fortran_order': False, 'shape': (1,), }", 4, "unknown npy dtype '<x4'"},
	{"f16bytes", "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", 16, "long double npy dtype '<f16'"},
	{"f12bytes", "{'descr': '<f12', 'fortran_order': False, 'shape': (1,), }", 12, "long double npy dtype '<f12'"},
	{"longdouble", "{'descr': 'g', 'fortran_order': False, 'shape': (1,), }", 16, "long double npy dtype 'g'"},
	{"f3bytes", "{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", 3, "unsupported float size"},
	{"i3", "{'descr': '<i3', 'fortran_order': False, 'shape': (1,), }", 3, "unsupported integer size"},
	{"b2", "{'descr': '|b2', 'fortran_order': False, 'shape': (1,), }", 2, "unsupported bool size"},
	{"string", "{'descr': '|S4', 'fortran_order': False, 'shape': (1,), }", 4, "not a numeric tensor type"},
	{"datetime", "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }", 8, "npy dtype '<M8[ns]' is not a numeric tensor type"},
	{"struct", "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4,
	 "structured or subarray dtypes are not supported"},
	{"descrnum", "{'descr': 4, 'fortran_order': False, 'shape': (1,), }", 4, "'descr' is not a dtype string"},
	{"truncated", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 8,
	 "npy data truncated: 16 bytes expected, 8 present"},
	{"trailing", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } xyz", 4,
	 "trailing bytes after the dict"},
	{"rank17", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4,
	 "more than 16 dimensions"},
	{"shapelist", "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", 4, "'shape' is not a tuple"},
	{"shapespace", "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24, "malformed 'shape' tuple"},
	{"shapefloat", "{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }", 4, "malformed 'shape' tuple"},
	{"shapeword", "{'descr': '<f4', 'fortran_order': False, 'shape': (n,), }", 4, "'shape' must hold integers"},
	{"nocolon", "{'descr' '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "missing ':' after 'descr'"},
	{"badkey", "{descr: '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "npy header: bad key"},
	{"unclosed", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, "expected ',' or '}'"},
};

static void test_bad_headers(void **state)
{
	const char *dir = tu_tmpdir();
	static const unsigned char zeros[64];
	(void)state;

	for (size_t k = 0; k < sizeof bad_headers / sizeof *bad_headers; k++) {
		const bad_header *c = &bad_headers[k];
		char name[64];

		snprintf(name, sizeof name, "%s.npy", c->name);
		npy_raw(tu_path(dir, name), 1, c->dict, 64, zeros, c->nbytes, NULL, 0);
		tu_expect_refused(tu_path(dir, name), NULL, NULL, c->want);
	}
}

static void test_bad_preamble(void **state)
{
	const char *dir = tu_tmpdir();
	const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
	unsigned char buf[256];
	(void)state;

	memset(buf, 0, sizeof buf);
	tu_write(tu_path(dir, "magic.npy"), "\x93NUMPX\x01\x00\x10\x00{'descr': 1}   \n", 26);
	tu_expect_refused(tu_path(dir, "magic.npy"), NULL, NULL, "not an npy file (bad magic)");
	tu_write(tu_path(dir, "empty.npy"), "", 0);
	tu_expect_refused(tu_path(dir, "empty.npy"), NULL, NULL, "not an npy file (bad magic)");
	/* The magic is right; what is wrong is the missing length field. */
	tu_write(tu_path(dir, "short1.npy"), "\x93NUMPY\x01\x00", 8);
	tu_expect_refused(tu_path(dir, "short1.npy"), NULL, NULL, "npy file truncated in its preamble");
	tu_write(tu_path(dir, "short2.npy"), "\x93NUMPY\x02\x00\x10\x00\x00", 11);
	tu_expect_refused(tu_path(dir, "short2.npy"), NULL, NULL, "npy file truncated in its preamble");

	for (int k = 0; k < 3; k++) {
		static const unsigned char ver[3][2] = {{4, 0}, {1, 1}, {0, 0}};
		static const char *const want[3] = {"unsupported npy format version 4.0",
						    "unsupported npy format version 1.1",
						    "unsupported npy format version 0.0"};
		memcpy(buf, "\x93NUMPY", 6);
		buf[6] = ver[k][0];
		buf[7] = ver[k][1];
		buf[8] = 118;
		buf[9] = 0;
		memcpy(buf + 10, dict, strlen(dict));
		memset(buf + 10 + strlen(dict), ' ', 128 - 10 - strlen(dict));
		tu_write(tu_path(dir, "ver.npy"), buf, 132);
		tu_expect_refused(tu_path(dir, "ver.npy"), NULL, NULL, want[k]);
	}

	/* HEADER_LEN 1000 in a 64-byte file. */
	memcpy(buf, "\x93NUMPY\x01\x00\xE8\x03", 10);
	memset(buf + 10, ' ', 54);
	tu_write(tu_path(dir, "past.npy"), buf, 64);
	tu_expect_refused(tu_path(dir, "past.npy"), NULL, NULL, "npy header length 1000 runs past the end of the file");
	/* A v2 HEADER_LEN of 1 MiB is refused before the file size matters. */
	memcpy(buf, "\x93NUMPY\x02\x00\x00\x00\x10\x00", 12);
	memset(buf + 12, ' ', 52);
	tu_write(tu_path(dir, "big.npy"), buf, 64);
	tu_expect_refused(tu_path(dir, "big.npy"), NULL, NULL, "npy header of 1048576 bytes exceeds the 65536-byte cap");
	/* A v2 length up to the cap is honoured (v1 cannot express it). */
	{
		size_t hl = 60000, n = 12 + hl + 4;
		unsigned char *p = malloc(n);
		assert_non_null(p);
		memcpy(p, "\x93NUMPY\x02\x00", 8);
		for (int i = 0; i < 4; i++)
			p[8 + i] = (unsigned char)(hl >> (8 * i));
		memcpy(p + 12, dict, strlen(dict));
		memset(p + 12 + strlen(dict), ' ', hl - strlen(dict));
		memset(p + 12 + hl, 0, 4);
		tu_write(tu_path(dir, "wide.npy"), p, n);
		free(p);
		tb_tree *tree;
		tb_tensor *t = open_one(tu_path(dir, "wide.npy"), NULL, &tree);
		assert_int_equal(t->numel, 1);
		tb_tree_free(tree);
	}

	memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
	memcpy(buf + 10, dict, strlen(dict));
	memset(buf + 10 + strlen(dict), ' ', 128 - 10 - strlen(dict));
	memset(buf + 128, 0, 4);
	buf[20] = '\0';
	tu_write(tu_path(dir, "nul.npy"), buf, 132);
	tu_expect_refused(tu_path(dir, "nul.npy"), NULL, NULL, "npy header contains a NUL byte");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_void2_option),
		cmocka_unit_test(test_void2_refused),
		cmocka_unit_test(test_void2_manifest),
		cmocka_unit_test(test_bits_manifest),
		cmocka_unit_test(test_void1),
		cmocka_unit_test(test_fortran_2x3),
		cmocka_unit_test(test_fortran_3d),
		cmocka_unit_test(test_fortran_bigendian),
		cmocka_unit_test(test_fortran_trivial),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_header_variants),
		cmocka_unit_test(test_trailing_data),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_bad_preamble),
	};
	return cmocka_run_group_tests_name("npy", tests, NULL, NULL);
}
