/*
 * test_safetensors: the safetensors reader, single files and sharded
 * checkpoints (*.safetensors.index.json), through tb_tree_open.  Headers
 * are written by hand where their exact text is the point; the dumpwrite
 * writer makes the ordinary shards.
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

/* 8-byte length (hlen, whatever the header really holds), header bytes, data. */
static void st_raw(const char *path, uint64_t hlen, const void *header, size_t header_n, const void *data,
		   size_t nbytes)
{
	unsigned char *buf = malloc(8 + header_n + nbytes + 1);

	assert_non_null(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(hlen >> (8 * i));
	memcpy(buf + 8, header, header_n);
	if (nbytes)
		memcpy(buf + 8 + header_n, data, nbytes);
	tu_write(path, buf, 8 + header_n + nbytes);
	free(buf);
}

/* A well-formed length prefix for a text header. */
static void st_text(const char *path, const char *header, const void *data, size_t nbytes)
{
	st_raw(path, strlen(header), header, strlen(header), data, nbytes);
}

static tb_tree *open_tree(const char *path)
{
	tb_tree *tree;
	tb_err err;
	char text[TB_ERR_TEXT_MAX];

	if (tb_tree_open(path, NULL, &tree, &err) < 0)
		fail_msg("tb_tree_open(%s) failed: %s", path, tb_err_text(&err, text, sizeof text));
	return tree;
}

static tb_tensor *find(const tb_tree *tree, const char *name)
{
	tb_tensor *t = tb_tree_find(tree, name);

	if (!t)
		fail_msg("tensor '%s' not in the tree", name);
	return t;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

typedef struct dcase {
	const char *st;
	tb_dtype dtype;
	size_t n;
	unsigned char bytes[40];
	float want[5];
} dcase;

static const dcase dcases[] = {
	{"F64", TB_DT_F64, 4,
	 {0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0, 0, 0, 0, 0, 0, 0x02, 0xC0, 0x9A, 0x99, 0x99, 0x99, 0x99, 0x99, 0xB9, 0x3F,
	  0, 0, 0, 0, 0, 0, 0, 0x80},
	 {1.5f, -2.25f, 0.1f, -0.0f}},
	{"F32", TB_DT_F32, 4, {0, 0, 0x80, 0x3F, 0, 0, 0x60, 0xC0, 1, 0, 0, 0, 0, 0, 0xC0, 0x7F},
	 {1.0f, -3.5f, 0x1p-149f, NAN}},
	{"F16", TB_DT_F16, 5, {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00, 0x00, 0xFC},
	 {1.0f, -2.0f, 65504.0f, 0x1p-24f, -INFINITY}},
	{"BF16", TB_DT_BF16, 4, {0x80, 0x3F, 0xA0, 0xC0, 0x7F, 0x7F, 0x01, 0x00}, {1.0f, -5.0f, 0x1.FEp127f, 0x1p-133f}},
	/* E4M3 is e4m3fn: E=15 is still finite, only S.1111.111 is NaN. */
	{"F8_E4M3", TB_DT_F8_E4M3FN, 5, {0x38, 0x7E, 0xFE, 0x01, 0x7F}, {1.0f, 448.0f, -448.0f, 0x1p-9f, NAN}},
	{"F8_E5M2", TB_DT_F8_E5M2, 5, {0x3C, 0x7B, 0xC0, 0x01, 0x7C}, {1.0f, 57344.0f, -2.0f, 0x1p-16f, INFINITY}},
	{"F8_E4M3FNUZ", TB_DT_F8_E4M3FNUZ, 3, {0x40, 0x80, 0x01}, {1.0f, NAN, 0x1p-10f}},
	{"F8_E5M2FNUZ", TB_DT_F8_E5M2FNUZ, 3, {0x40, 0x80, 0x01}, {1.0f, NAN, 0x1p-17f}},
	{"I64", TB_DT_I64, 3,
	 {0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0, 0, 0x01, 0, 0, 0, 0},
	 {-0x1p40f, -1, 16777216.0f}},
	{"I32", TB_DT_I32, 3, {0x00, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF, 0x40, 0xE2, 0x01, 0x00},
	 {-2147483648.0f, -1, 123456}},
	{"I16", TB_DT_I16, 3, {0x00, 0x80, 0xFF, 0xFF, 0xFF, 0x7F}, {-32768, -1, 32767}},
	{"I8", TB_DT_I8, 3, {0x80, 0xFF, 0x7F}, {-128, -1, 127}},
	{"U64", TB_DT_U64, 2, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 1, 0, 0, 0}, {0x1p64f, 0x1p32f}},
	{"U32", TB_DT_U32, 2, {0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0, 0, 0}, {0x1p32f, 7}},
	{"U16", TB_DT_U16, 2, {0xFF, 0xFF, 0x01, 0x00}, {65535, 1}},
	{"U8", TB_DT_U8, 3, {0x00, 0xFF, 0x80}, {0, 255, 128}},
	{"BOOL", TB_DT_BOOL, 4, {0, 1, 1, 0}, {0, 1, 1, 0}},
};

static void test_all_dtypes(void **state)
{
	const char *dir = tu_tmpdir(), *path = tu_path(dir, "all.safetensors");
	const size_t nc = sizeof dcases / sizeof *dcases;
	unsigned char data[1024];
	char header[8192];
	size_t off = 0, len = 0;
	tb_tree *tree;
	(void)state;

	/* Listed last-to-first: the reader must order by data_offsets, not by key. */
	len += (size_t)snprintf(header + len, sizeof header - len, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t k = nc; k-- > 0;) {
		size_t before = 0;
		for (size_t j = 0; j < k; j++)
			before += dcases[j].n * tb_dtype_size(dcases[j].dtype);
		len += (size_t)snprintf(header + len, sizeof header - len,
					",\"t.%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
					dcases[k].st, dcases[k].st, dcases[k].n, before,
					before + dcases[k].n * tb_dtype_size(dcases[k].dtype));
	}
	for (size_t k = 0; k < nc; k++) {
		size_t nb = dcases[k].n * tb_dtype_size(dcases[k].dtype);
		memcpy(data + off, dcases[k].bytes, nb);
		off += nb;
	}
	snprintf(header + len, sizeof header - len, "}");
	st_text(path, header, data, off);

	tree = open_tree(path);
	assert_int_equal(tree->n_tensors, nc);
	off = 0;
	for (size_t k = 0; k < nc; k++) {
		char name[64];
		tb_tensor *t;

		snprintf(name, sizeof name, "t.%s", dcases[k].st);
		t = find(tree, name);
		if (t->dtype != dcases[k].dtype)
			fail_msg("%s: dtype %s", dcases[k].st, tb_dtype_name(t->dtype));
		assert_false(t->big_endian);
		assert_int_equal(t->ndim, 1);
		assert_int_equal(t->shape[0], dcases[k].n);
		assert_int_equal(t->offset, off);
		assert_string_equal(t->path, path);
		tu_expect_values(t, dcases[k].want, dcases[k].n);
		off += dcases[k].n * tb_dtype_size(dcases[k].dtype);
	}
	assert_null(tb_tree_find(tree, "__metadata__"));
	tb_tree_free(tree);
}

static void test_shapes(void **state)
{
	const char *dir = tu_tmpdir(), *path = tu_path(dir, "s.safetensors");
	/* scalar 2.5, then [2,3] 0..5, with two empty tensors sharing offset 4. */
	static const float data[7] = {2.5f, 0, 1, 2, 3, 4, 5};
	static const float want23[6] = {0, 1, 2, 3, 4, 5};
	const char *header = "{\"m\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[4,28]},"
			     "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[4,4]},"
			     "\"z\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
			     "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"extra\":\"ignored\"}}";
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	st_text(path, header, data, sizeof data);
	tree = open_tree(path);
	assert_int_equal(tree->n_tensors, 4);
	/* Sorted by name. */
	assert_string_equal(tree->tensors[0]->name, "e");
	assert_string_equal(tree->tensors[1]->name, "m");
	assert_string_equal(tree->tensors[2]->name, "s");
	assert_string_equal(tree->tensors[3]->name, "z");
	t = find(tree, "s");
	assert_int_equal(t->ndim, 0);
	tu_expect_values(t, data, 1);
	t = find(tree, "m");
	assert_int_equal(t->ndim, 2);
	assert_int_equal(t->shape[0], 2);
	assert_int_equal(t->shape[1], 3);
	tu_expect_values(t, want23, 6);
	t = find(tree, "e");
	assert_int_equal(t->ndim, 2);
	assert_int_equal(t->shape[0], 0);
	assert_int_equal(t->shape[1], 4);
	tu_expect_values(t, NULL, 0);
	t = find(tree, "z");
	assert_int_equal(t->dtype, TB_DT_BF16);
	assert_int_equal(t->numel, 0);
	tb_tree_free(tree);
}

static void test_whitespace_and_metadata(void **state)
{
	const char *dir = tu_tmpdir();
	static const float x[2] = {3, -4};
	/* Leading padding is accepted since safetensors PR #686; trailing always was. */
	const char *padded = "\n \t{\"__metadata__\":{\"format\":\"pt\",\"note\":\"\\u00e9t\\u00e9\"},"
			     "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} \t\r\n   ";
	const dw_tensor wt = {"w.0", TB_DT_F32, 1, {2}, x, sizeof x};
	tb_tree *tree;
	(void)state;

	st_text(tu_path(dir, "pad.safetensors"), padded, x, sizeof x);
	tree = open_tree(tu_path(dir, "pad.safetensors"));
	assert_int_equal(tree->n_tensors, 1);
	tu_expect_values(find(tree, "x"), x, 2);
	tb_tree_free(tree);

	/* The writer's own space padding to a multiple of 8. */
	assert_int_equal(dw_write_safetensors(tu_path(dir, "w.safetensors"), &wt, 1, "{\"format\":\"pt\"}"), 0);
	tree = open_tree(tu_path(dir, "w.safetensors"));
	assert_int_equal(tree->n_tensors, 1);
	tu_expect_values(find(tree, "w.0"), x, 2);
	tb_tree_free(tree);

	/* "__metadata__": null is no metadata (the reference reader's Option;
	 * mlx-examples' adapters.safetensors). */
	st_text(tu_path(dir, "metanull.safetensors"),
		"{\"__metadata__\":null,\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", x, sizeof x);
	tree = open_tree(tu_path(dir, "metanull.safetensors"));
	assert_int_equal(tree->n_tensors, 1);
	tu_expect_values(find(tree, "x"), x, 2);
	tb_tree_free(tree);

	/* Metadata only: a valid file that holds nothing. */
	st_text(tu_path(dir, "meta.safetensors"), "{\"__metadata__\":{}}", NULL, 0);
	tu_expect_refused(tu_path(dir, "meta.safetensors"), NULL, tu_path(dir, "meta.safetensors"), "no tensors found");
}

typedef struct bad_case {
	const char *name;
	const char *header;
	size_t nbytes;
	const char *want;
} bad_case;

#define E4 "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"

static const bad_case bad_cases[] = {
	{"json", "{\"a\":", 0, "safetensors header is not valid JSON"},
	{"array", "[1,2]", 0, "safetensors: header is not a JSON object"},
	{"string", "\"x\"", 0, "safetensors: header is not a JSON object"},
	{"dup", "{\"a\":{" E4 "},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
	 "duplicate tensor name 'a'"},
	{"dtype", "{\"a\":{\"dtype\":\"F12\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "has unknown dtype 'F12'"},
	{"dtypecase", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "has unknown dtype 'f32'"},
	{"f4", "{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, "dtype F4 is not supported"},
	{"c64", "{\"a\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "dtype C64 is not supported"},
	{"e8m0", "{\"a\":{\"dtype\":\"F8_E8M0\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
	 "dtype F8_E8M0 is not supported"},
	{"nodtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a' has no dtype string"},
	{"dtypenum", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a' has no dtype string"},
	{"shapenum", "{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, "has no shape array"},
	{"noshape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "has no shape array"},
	{"shapeneg", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
	 "shape entries must be non-negative integers"},
	{"shapefrac", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
	 "number 1.5 at header byte 29 is not an integer"},
	/* integral values written as floats: the reference reader refuses them too */
	{"shapefloat", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
	 "number 1.0 at header byte 29 is not an integer"},
	{"shapeexp", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4,
	 "number 1e0 at header byte 29 is not an integer"},
	{"offsfloat", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4,
	 "number 4.0 at header byte 50 is not an integer"},
	/* digits inside strings are no numbers */
	{"strdigits", "{\"__metadata__\":{\"v\":\"1.5 \\\" 2.0\"},\"a\":{" E4 "},\"b\":{\"dtype\":\"F32\",\"shape\":[0.5],\"data_offsets\":[4,4]}}", 4,
	 "number 0.5 at header byte"},
	{"shapestr", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
	 "shape entries must be non-negative integers"},
	{"shape2e53", "{\"a\":{\"dtype\":\"F32\",\"shape\":[18014398509481984],\"data_offsets\":[0,4]}}", 4,
	 "shape entries must be non-negative integers"},
	{"numel", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
	 "element count overflows"},
	{"rank", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
	 "more than 16 dimensions"},
	{"offs1", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
	 "data_offsets must be two non-negative integers"},
	{"offs3", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4,
	 "data_offsets must be two non-negative integers"},
	{"offsneg", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
	 "data_offsets must be two non-negative integers"},
	{"offsobj", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"0\":4}}}", 4,
	 "data_offsets must be two non-negative integers"},
	{"nooffs", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets must be two non-negative integers"},
	{"reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
	 "tensor 'a': data_offsets end before they begin"},
	{"overlap",
	 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
	 12, "tensor 'b' overlaps the previous tensor (data_offsets begin at 4, expected 8)"},
	{"alias",
	 "{\"a\":{" E4 "},\"b\":{" E4 "}}", 4, "overlaps the previous tensor"},
	{"gap",
	 "{\"a\":{" E4 "},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
	 12, "tensor 'b' leaves a gap before it (data_offsets begin at 8, expected 4)"},
	{"leading", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "leaves a gap before it"},
	{"trailing", "{\"a\":{" E4 "}}", 8, "tensors cover 4 data bytes but the file holds 8"},
	{"short", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
	 "tensors cover 8 data bytes but the file holds 4"},
	{"mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
	 "tensor 'a': data_offsets span 8 bytes, shape and dtype need 12"},
	{"meta", "{\"__metadata__\":{\"format\":1},\"a\":{" E4 "}}", 4, "__metadata__ value 'format' is not a string"},
	{"metanull", "{\"__metadata__\":{\"format\":null},\"a\":{" E4 "}}", 4,
	 "__metadata__ value 'format' is not a string"},
	{"metaarr", "{\"__metadata__\":[\"pt\"],\"a\":{" E4 "}}", 4, "__metadata__ is not an object"},
	{"entry", "{\"a\":5}", 0, "safetensors: entry 'a' is not an object"},
	{"trailjson", "{\"a\":{" E4 "}}x", 4, "safetensors header has trailing bytes after the JSON value"},
	{"twojson", "{\"a\":{" E4 "}} {}", 4, "trailing bytes after the JSON value"},
	{"nan", "{\"a\":{\"dtype\":\"F32\",\"shape\":[NaN],\"data_offsets\":[0,4]}}", 4, "not valid JSON"},
	{"utf8", "{\"a\xff\":{" E4 "}}", 4, "safetensors header is not valid UTF-8"},
	{"overlong", "{\"a\xc0\xaf\":{" E4 "}}", 4, "safetensors header is not valid UTF-8"},
	{"surrogate", "{\"a\xed\xa0\x80\":{" E4 "}}", 4, "safetensors header is not valid UTF-8"},
	{"cut", "{\"a\xe2\x82", 0, "safetensors header is not valid UTF-8"},
};

static void test_bad_headers(void **state)
{
	const char *dir = tu_tmpdir();
	static const unsigned char zeros[64];
	(void)state;

	for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
		char name[64];
		const char *path;

		snprintf(name, sizeof name, "%s.safetensors", bad_cases[k].name);
		path = tu_path(dir, name);
		st_text(path, bad_cases[k].header, zeros, bad_cases[k].nbytes);
		tu_expect_refused(path, NULL, path, bad_cases[k].want);
	}
}

static void test_bad_preamble(void **state)
{
	const char *dir = tu_tmpdir();
	const char *ok = "{\"a\":{" E4 "}}";
	static const unsigned char four[4];
	char nulpad[128];
	const char *p;
	(void)state;

	p = tu_path(dir, "tiny.safetensors");
	tu_write(p, "\x02\0\0\0\0", 5);
	tu_expect_refused(p, NULL, p, "safetensors: file shorter than its 8-byte header length");
	p = tu_path(dir, "zero.safetensors");
	tu_write(p, "", 0);
	tu_expect_refused(p, NULL, p, "safetensors: file shorter than its 8-byte header length");
	p = tu_path(dir, "past.safetensors");
	st_raw(p, 1000, ok, strlen(ok), four, 4);
	tu_expect_refused(p, NULL, p, "safetensors: header length 1000 runs past the end of the file");
	p = tu_path(dir, "huge.safetensors");
	st_raw(p, 100000001, ok, strlen(ok), four, 4);
	tu_expect_refused(p, NULL, p, "safetensors: header length 100000001 exceeds the 100 MB cap");
	p = tu_path(dir, "wrap.safetensors");
	st_raw(p, UINT64_MAX - 4, ok, strlen(ok), four, 4);
	tu_expect_refused(p, NULL, p, "exceeds the 100 MB cap");
	/* The length cuts the JSON short: invalid, never read past the length. */
	p = tu_path(dir, "cut.safetensors");
	st_raw(p, strlen(ok) - 1, ok, strlen(ok), four, 4);
	tu_expect_refused(p, NULL, p, "not valid JSON");

	/* serde rejects NUL padding; so must we. */
	snprintf(nulpad, sizeof nulpad, "%s", ok);
	memset(nulpad + strlen(ok), 0, 4);
	p = tu_path(dir, "nulpad.safetensors");
	st_raw(p, strlen(ok) + 4, nulpad, strlen(ok) + 4, four, 4);
	tu_expect_refused(p, NULL, p, "safetensors header contains a NUL byte");
}

/* A shard holding F32 tensors of two elements, all equal to value. */
static void write_shard(const char *path, const char *const *names, size_t n, float value)
{
	dw_tensor ts[8];
	float x[8][2];

	for (size_t i = 0; i < n; i++) {
		x[i][0] = x[i][1] = value;
		ts[i] = (dw_tensor){names[i], TB_DT_F32, 1, {2}, x[i], sizeof x[i]};
	}
	assert_int_equal(dw_write_safetensors(path, ts, n, "{\"format\":\"pt\"}"), 0);
}

static void expect_const(tb_tensor *t, float value)
{
	const float want[2] = {value, value};

	tu_expect_values(t, want, 2);
}

static void test_sharded_basic(void **state)
{
	const char *dir = tu_tmpdir();
	float v[4][3];
	dw_tensor ts[4];
	static const char *const names[4] = {"model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm"};
	tb_tree *tree;
	(void)state;

	for (int i = 0; i < 4; i++) {
		for (int k = 0; k < 3; k++)
			v[i][k] = (float)(10 * i + k);
		ts[i] = (dw_tensor){names[i], TB_DT_F32, 2, {1, 3}, v[i], sizeof v[i]};
	}
	assert_int_equal(dw_write_safetensors_sharded(dir, "model", ts, 4, 2), 0);

	/* Walking the directory: each tensor once, from the shard the index names,
	 * and the shards are not indexed a second time as plain files. */
	tree = open_tree(dir);
	assert_int_equal(tree->n_tensors, 4);
	for (int i = 0; i < 4; i++) {
		tb_tensor *t = tree->tensors[i];
		assert_string_equal(t->name, names[i]);
		assert_true(ends_with(t->path, i < 2 ? "/model-00001-of-00002.safetensors"
						    : "/model-00002-of-00002.safetensors"));
		assert_int_equal(t->ndim, 2);
		tu_expect_values(t, v[i], 3);
	}
	assert_int_equal(tree->n_notes, 0);
	tb_tree_free(tree);

	/* The index alone is a tree too. */
	tree = open_tree(tu_path(dir, "model.safetensors.index.json"));
	assert_int_equal(tree->n_tensors, 4);
	tu_expect_values(find(tree, "model.norm"), v[3], 3);
	tb_tree_free(tree);

	/* A shard alone is an ordinary safetensors file. */
	tree = open_tree(tu_path(dir, "model-00002-of-00002.safetensors"));
	assert_int_equal(tree->n_tensors, 2);
	assert_string_equal(tree->tensors[0]->name, "model.layers.1");
	tb_tree_free(tree);
}

static void test_sharded_subdir(void **state)
{
	const char *dir = tu_tmpdir();
	static const float x[2] = {1, 2};
	const dw_tensor ts[2] = {{"a", TB_DT_F32, 1, {2}, x, sizeof x}, {"b", TB_DT_F32, 1, {2}, x, sizeof x}};
	const int64_t one[1] = {2};
	tb_tree *tree;
	(void)state;

	assert_int_equal(dw_write_safetensors_sharded(tu_path(dir, "ckpt"), "model", ts, 2, 2), 0);
	assert_int_equal(dw_write_npy(tu_path(dir, "top.npy"), 1, "<f4", false, 1, one, x, sizeof x), 0);
	tree = open_tree(dir);
	assert_int_equal(tree->n_tensors, 3);
	assert_string_equal(tree->tensors[0]->name, "ckpt.a");
	assert_string_equal(tree->tensors[1]->name, "ckpt.b");
	assert_string_equal(tree->tensors[2]->name, "top");
	tu_expect_values(tree->tensors[1], x, 2);
	tb_tree_free(tree);
}

static void test_sharded_pick_copy(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const in_a[2] = {"a", "b"}, *const in_b[2] = {"b", "c"};
	tb_tree *tree;
	bool noted = false;
	(void)state;

	write_shard(tu_path(dir, "A.safetensors"), in_a, 2, 1.0f);
	write_shard(tu_path(dir, "B.safetensors"), in_b, 2, 2.0f);
	tu_write_str(tu_path(dir, "m.safetensors.index.json"),
		     "{\"metadata\":{\"total_size\":24,\"total_parameters\":6},"
		     "\"weight_map\":{\"a\":\"A.safetensors\",\"b\":\"B.safetensors\",\"c\":\"B.safetensors\"}}");
	tree = open_tree(dir);
	assert_int_equal(tree->n_tensors, 3);
	expect_const(find(tree, "a"), 1.0f);
	expect_const(find(tree, "b"), 2.0f);
	expect_const(find(tree, "c"), 2.0f);
	assert_true(ends_with(find(tree, "b")->path, "/B.safetensors"));
	for (size_t i = 0; i < tree->n_notes; i++)
		noted |= strstr(tree->notes[i], "tensor 'b' also in B.safetensors; the index picks that copy") != NULL;
	assert_true(noted);
	tb_tree_free(tree);

	/* The other way round. */
	tu_write_str(tu_path(dir, "m.safetensors.index.json"),
		     "{\"weight_map\":{\"a\":\"A.safetensors\",\"b\":\"A.safetensors\",\"c\":\"B.safetensors\"}}");
	tree = open_tree(dir);
	assert_int_equal(tree->n_tensors, 3);
	expect_const(find(tree, "b"), 1.0f);
	assert_true(ends_with(find(tree, "b")->path, "/A.safetensors"));
	tb_tree_free(tree);
}

static void test_sharded_bad_shard_names(void **state)
{
	static const char *const names[] = {"sub/A.safetensors", "../A.safetensors", "..", ".",
					    "/etc/passwd", "a\\\\A.safetensors", ""};
	static const char *const in_a[1] = {"a"};
	(void)state;

	for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
		const char *root = tu_tmpdir(), *dir = tu_path(root, "tree");
		const char *index = tu_path(dir, "m.safetensors.index.json");
		char json[256];

		/* A real shard behind the bad name: refusing must not depend on absence. */
		write_shard(tu_path(root, "A.safetensors"), in_a, 1, 1.0f);
		write_shard(tu_path(dir, "sub/A.safetensors"), in_a, 1, 1.0f);
		snprintf(json, sizeof json, "{\"weight_map\":{\"a\":\"%s\"}}", names[k]);
		tu_write_str(index, json);
		tu_expect_refused(index, NULL, index,
			       "shard index: tensor 'a' names a shard that is not a plain file name beside the index");
	}
	{
		const char *dir = tu_tmpdir(), *index = tu_path(dir, "m.safetensors.index.json");
		tu_write_str(index, "{\"weight_map\":{\"a\":7}}");
		tu_expect_refused(index, NULL, index, "not a plain file name");
	}
}

static void test_sharded_inconsistent(void **state)
{
	const char *dir;
	static const char *const in_a[2] = {"a", "extra"}, *const only_a[1] = {"a"};
	const char *index, *shard;
	(void)state;

	/* Listed, but the shard does not hold it. */
	dir = tu_tmpdir();
	index = tu_path(dir, "m.safetensors.index.json");
	write_shard(tu_path(dir, "A.safetensors"), only_a, 1, 1.0f);
	tu_write_str(index, "{\"weight_map\":{\"a\":\"A.safetensors\",\"ghost\":\"A.safetensors\"}}");
	tu_expect_refused(dir, NULL, index, "shard index lists tensor 'ghost' but shard A.safetensors does not hold it");
	tu_expect_refused(index, NULL, index, "shard index lists tensor 'ghost' but shard A.safetensors does not hold it");

	/* Held by the shard, but not listed. */
	dir = tu_tmpdir();
	index = tu_path(dir, "m.safetensors.index.json");
	shard = tu_path(dir, "A.safetensors");
	write_shard(shard, in_a, 2, 1.0f);
	tu_write_str(index, "{\"weight_map\":{\"a\":\"A.safetensors\"}}");
	tu_expect_refused(dir, NULL, shard, "safetensors: tensor 'extra' is not listed in the shard index");

	/* A shard that is not there. */
	dir = tu_tmpdir();
	index = tu_path(dir, "m.safetensors.index.json");
	tu_write_str(index, "{\"weight_map\":{\"a\":\"gone.safetensors\"}}");
	tu_expect_refused(index, NULL, tu_path(dir, "gone.safetensors"), "shard listed in ");
	tu_expect_refused(index, NULL, tu_path(dir, "gone.safetensors"), "m.safetensors.index.json: cannot open");

	/* A broken shard is reported as itself. */
	dir = tu_tmpdir();
	index = tu_path(dir, "m.safetensors.index.json");
	shard = tu_path(dir, "A.safetensors");
	st_text(shard, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "\0\0\0\0", 4);
	tu_write_str(index, "{\"weight_map\":{\"a\":\"A.safetensors\"}}");
	tu_expect_refused(dir, NULL, shard, "tensors cover 8 data bytes but the file holds 4");
}

static void test_index_errors(void **state)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{"{\"metadata\":{\"total_size\":0}}", "shard index has no \"weight_map\" object"},
		{"{\"weight_map\":[\"A.safetensors\"]}", "shard index has no \"weight_map\" object"},
		{"[]", "shard index has no \"weight_map\" object"},
		{"{\"weight_map\":{\"a\":", "shard index is not valid JSON"},
		{"", "shard index is not valid JSON"},
		{"{\"weight_map\":{\"a\":\"A.safetensors\",\"a\":\"A.safetensors\"}}", "shard index lists tensor 'a' twice"},
		{"{\"weight_map\":{\"\xff\":\"A.safetensors\"}}", "shard index is not valid UTF-8"},
	};
	(void)state;

	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		const char *dir = tu_tmpdir(), *index = tu_path(dir, "m.safetensors.index.json");
		static const char *const in_a[1] = {"a"};

		write_shard(tu_path(dir, "A.safetensors"), in_a, 1, 1.0f);
		tu_write_str(index, cases[k].json);
		tu_expect_refused(dir, NULL, index, cases[k].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_dtypes),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_whitespace_and_metadata),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_bad_preamble),
		cmocka_unit_test(test_sharded_basic),
		cmocka_unit_test(test_sharded_subdir),
		cmocka_unit_test(test_sharded_pick_copy),
		cmocka_unit_test(test_sharded_bad_shard_names),
		cmocka_unit_test(test_sharded_inconsistent),
		cmocka_unit_test(test_index_errors),
	};
	return cmocka_run_group_tests_name("safetensors", tests, NULL, NULL);
}
