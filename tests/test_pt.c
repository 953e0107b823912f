/*
 * test_pt: torch.save zip files with protocol-2 pickles assembled the way
 * torch writes them (samples/dumpwrite.c): dicts, OrderedDicts with
 * _metadata, lone tensors, nesting, views with offsets, transposes and
 * stride-0 expands over shared storages, _rebuild_tensor_v3, big-endian
 * archives, and the refusals for globals, sizes and out-of-range views.
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

static const float s6[6] = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f};

static dw_pt_tensor f32_tensor(const char *name, int ndim, const int64_t *shape, const float *x, size_t n)
{
	dw_pt_tensor t = {.name = name, .dtype = TB_DT_F32, .ndim = ndim, .storage = x, .storage_bytes = n * 4};

	memcpy(t.shape, shape, sizeof(int64_t) * (size_t)ndim);
	return t;
}

static void test_state_dicts(void **state)
{
	const char *dir = tu_tmpdir();
	static const float w[4] = {0.25f, -1.5f, 3.0f, 7.0f};
	const int64_t s23[2] = {2, 3}, s4[1] = {4};
	size_t n16;
	void *h16 = dw_encode(w, 4, TB_DT_BF16, &n16);
	const int64_t ids[3] = {5, -7, 1ll << 40};
	dw_pt_tensor ts[4] = {
		f32_tensor("model.layers.0.mlp", 2, s23, s6, 6),
		f32_tensor("w", 1, s4, w, 4),
		{.name = "h", .dtype = TB_DT_BF16, .ndim = 1, .shape = {4}, .storage = h16, .storage_bytes = n16},
		{.name = "ids", .dtype = TB_DT_I64, .ndim = 1, .shape = {3}, .storage = ids, .storage_bytes = sizeof ids},
	};
	const float idsf[3] = {5.0f, -7.0f, (float)(1ll << 40)};
	const dw_pt_opts variants[] = {
		{0},
		{.ordered = true},
		{.prefix = "model", .deflate = true},
		{.ordered = true, .no_byteorder = true},
	};
	(void)state;

	for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
		char name[32];
		tb_tree *tree;

		snprintf(name, sizeof name, "sd%zu.pt", i);
		assert_int_equal(dw_write_pt(tu_path(dir, name), ts, 4, &variants[i]), 0);
		tree = tu_open(tu_path(dir, name), NULL);
		assert_int_equal(tree->n_tensors, 4);
		tu_expect_values(tu_tensor(tree, "model.layers.0.mlp"), s6, 6);
		tu_expect_values(tu_tensor(tree, "w"), w, 4);
		assert_int_equal(tu_tensor(tree, "h")->dtype, TB_DT_BF16);
		tu_expect_values(tu_tensor(tree, "h"), w, 4);
		tu_expect_values(tu_tensor(tree, "ids"), idsf, 3);
		assert_int_equal(tu_tensor(tree, "model.layers.0.mlp")->shape[1], 3);
		tb_tree_free(tree);
	}
	free(h16);
}

static void test_lone_and_list(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t s6s[1] = {6};
	dw_pt_tensor t = f32_tensor("x", 1, s6s, s6, 6);
	const dw_pt_opts lone = {.lone = true};
	dw_pk p = {0};
	tb_tree *tree;
	(void)state;

	assert_int_equal(dw_write_pt(tu_path(dir, "d/layers.3.attn.pt"), &t, 1, &lone), 0);
	tree = tu_open(dir, NULL);
	assert_int_equal(tree->n_tensors, 1);
	tu_expect_values(tu_tensor(tree, "d.layers.3.attn"), s6, 6);
	tb_tree_free(tree);

	/* A tuple of two tensors: the file's name, then the index. */
	dw_pk_begin(&p, 2);
	dw_pk_tensor(&p, &t, "0", false);
	dw_pk_tensor(&p, &t, "0", false);
	dw_pk_op(&p, 0x86);
	dw_pk_put(&p);
	dw_pk_op(&p, '.');
	assert_int_equal(dw_write_pt_pickle(tu_path(dir, "pair.pt"), p.b.p, p.b.n, &t, 1, NULL), 0);
	tree = tu_open(tu_path(dir, "pair.pt"), NULL);
	assert_int_equal(tree->n_tensors, 2);
	tu_expect_values(tu_tensor(tree, "pair.0"), s6, 6);
	tu_expect_values(tu_tensor(tree, "pair.1"), s6, 6);
	tb_tree_free(tree);
	dw_pk_free(&p);
}

/* {"model": {"layers": [{"attn": T}, {"attn": T}], 7: T}, "step": 10} */
static void test_nesting(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t s6s[1] = {6};
	dw_pt_tensor t = f32_tensor("x", 1, s6s, s6, 6);
	dw_pk p = {0};
	tb_tree *tree;
	(void)state;

	dw_pk_begin(&p, 2);
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	dw_pk_str(&p, "model");
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	dw_pk_str(&p, "layers");
	dw_pk_op(&p, ']');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	for (int i = 0; i < 2; i++) {
		dw_pk_op(&p, '}');
		dw_pk_put(&p);
		dw_pk_str(&p, "attn");
		dw_pk_tensor(&p, &t, "0", false);
		dw_pk_op(&p, 's');
	}
	dw_pk_op(&p, 'e');
	dw_pk_int(&p, 7);
	dw_pk_tensor(&p, &t, "0", false);
	dw_pk_op(&p, 'u');
	dw_pk_str(&p, "step");
	dw_pk_int(&p, 10);
	dw_pk_op(&p, 'u');
	dw_pk_op(&p, '.');
	assert_int_equal(dw_write_pt_pickle(tu_path(dir, "n/nest.pt"), p.b.p, p.b.n, &t, 1, NULL), 0);
	tree = tu_open(dir, NULL);
	assert_int_equal(tree->n_tensors, 3);
	tu_expect_values(tu_tensor(tree, "n.model.layers.0.attn"), s6, 6);
	tu_expect_values(tu_tensor(tree, "n.model.layers.1.attn"), s6, 6);
	tu_expect_values(tu_tensor(tree, "n.model.7"), s6, 6);
	assert_int_equal(tree->n_notes, 1);
	assert_non_null(strstr(tree->notes[0], "1 non-tensor values ignored"));
	tb_tree_free(tree);
	dw_pk_free(&p);
}

/* Four views of one 6-element storage, and an expand of a 1-element one. */
static void test_views(void **state)
{
	const char *dir = tu_tmpdir();
	static const float one[1] = {2.5f};
	dw_pt_tensor ts[5] = {
		{.name = "whole", .dtype = TB_DT_F32, .ndim = 2, .shape = {2, 3}, .storage = s6, .storage_bytes = 24, .key = "s"},
		{.name = "transposed", .dtype = TB_DT_F32, .ndim = 2, .shape = {3, 2}, .strided = true, .stride = {1, 3}, .storage = s6,
		 .storage_bytes = 24, .key = "s"},
		{.name = "tail", .dtype = TB_DT_F32, .ndim = 1, .shape = {3}, .strided = true, .stride = {1}, .offset = 3, .storage = s6,
		 .storage_bytes = 24, .key = "s"},
		{.name = "every_other", .dtype = TB_DT_F32, .ndim = 1, .shape = {3}, .strided = true, .stride = {2}, .offset = 1, .storage = s6,
		 .storage_bytes = 24, .key = "s"},
		{.name = "expanded", .dtype = TB_DT_F32, .ndim = 2, .shape = {3, 4}, .strided = true, .stride = {0, 0}, .storage = one,
		 .storage_bytes = 4, .key = "e"},
	};
	const float tr[6] = {0, 3, 1, 4, 2, 5}, tail[3] = {3, 4, 5}, odd[3] = {1, 3, 5};
	float ex[12];
	tb_tree *tree;
	(void)state;

	for (int i = 0; i < 12; i++)
		ex[i] = 2.5f;
	assert_int_equal(dw_write_pt(tu_path(dir, "views.pt"), ts, 5, NULL), 0);
	tree = tu_open(tu_path(dir, "views.pt"), NULL);
	tu_expect_values(tu_tensor(tree, "whole"), s6, 6);
	tu_expect_values(tu_tensor(tree, "transposed"), tr, 6);
	assert_false(tu_tensor(tree, "transposed")->contiguous);
	tu_expect_values(tu_tensor(tree, "tail"), tail, 3);
	tu_expect_values(tu_tensor(tree, "every_other"), odd, 3);
	tu_expect_values(tu_tensor(tree, "expanded"), ex, 12);
	/* One blob per storage. */
	assert_ptr_equal(tu_tensor(tree, "whole")->blob, tu_tensor(tree, "tail")->blob);
	tb_tree_free(tree);

	/* A view reaching past its storage is refused. */
	ts[2].offset = 4;
	assert_int_equal(dw_write_pt(tu_path(dir, "past.pt"), ts, 3, NULL), 0);
	tu_expect_refused(tu_path(dir, "past.pt"), NULL, NULL,
			  "tensor 'tail': data extends past its storage (28 bytes needed, 24 present)");
}

static void test_v3_and_byteorder(void **state)
{
	const char *dir = tu_tmpdir();
	static const float w[4] = {0.5f, -2.0f, 448.0f, 0.0f};
	static const unsigned char be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0}; /* 1.0, -2.5 big-endian */
	const float bev[2] = {1.0f, -2.5f};
	size_t n8;
	void *f8 = dw_encode(w, 4, TB_DT_F8_E4M3FN, &n8);
	dw_pt_tensor t8 = {.name = "q", .dtype = TB_DT_F8_E4M3FN, .ndim = 1, .shape = {4}, .storage = f8, .storage_bytes = n8};
	dw_pt_tensor tb = {.name = "b", .dtype = TB_DT_F32, .ndim = 1, .shape = {2}, .storage = be, .storage_bytes = 8};
	const dw_pt_opts v3 = {.v3 = true}, big = {.big_endian = true};
	tb_tree *tree;
	(void)state;

	assert_int_equal(dw_write_pt(tu_path(dir, "v3.pt"), &t8, 1, &v3), 0);
	tree = tu_open(tu_path(dir, "v3.pt"), NULL);
	assert_int_equal(tu_tensor(tree, "q")->dtype, TB_DT_F8_E4M3FN);
	tu_expect_values(tu_tensor(tree, "q"), w, 4);
	tb_tree_free(tree);
	free(f8);

	assert_int_equal(dw_write_pt(tu_path(dir, "big.pt"), &tb, 1, &big), 0);
	tree = tu_open(tu_path(dir, "big.pt"), NULL);
	assert_true(tu_tensor(tree, "b")->big_endian);
	tu_expect_values(tu_tensor(tree, "b"), bev, 2);
	tb_tree_free(tree);
}

/* A one-tensor pickle over storage key (numel from declared_bytes) beside
 * a 24-byte record "0", which must be refused saying want. */
static void refuse_tensor(const char *dir, const char *name, const char *key, size_t declared_bytes, const char *want)
{
	const int64_t s6s[1] = {6};
	dw_pt_tensor t = f32_tensor("x", 1, s6s, s6, 6);
	dw_pk p = {0};

	dw_pk_begin(&p, 2);
	t.storage_bytes = declared_bytes;
	dw_pk_tensor(&p, &t, key, false);
	dw_pk_op(&p, '.');
	t.storage_bytes = 24;
	assert_int_equal(dw_write_pt_pickle(tu_path(dir, name), p.b.p, p.b.n, &t, 1, NULL), 0);
	tu_expect_refused(tu_path(dir, name), NULL, NULL, want);
	dw_pk_free(&p);
}

/* The pickle asks for something other than what the archive holds. */
static void test_refusals(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t s6s[1] = {6};
	dw_pt_tensor t = f32_tensor("x", 1, s6s, s6, 6);
	const char *path;
	dw_pk p = {0};
	(void)state;

	refuse_tensor(dir, "size.pt", "0", 20,
		      "storage record 'archive/data/0' holds 24 bytes, the pickle declares 20 (5 x FloatStorage)");
	refuse_tensor(dir, "missing.pt", "7", 24, "storage record 'archive/data/7' is missing");
	refuse_tensor(dir, "key.pt", "../data.pkl", 24, "storage key is not a plain name");

	/* A global outside the allowlist, named in the message. */
	dw_pk_begin(&p, 2);
	dw_pk_global(&p, "torch._utils", "_rebuild_qtensor");
	dw_pk_op(&p, '.');
	path = tu_path(dir, "global.pt");
	assert_int_equal(dw_write_pt_pickle(path, p.b.p, p.b.n, &t, 1, NULL), 0);
	tu_expect_refused(path, NULL, NULL, "archive/data.pkl: pickle: pickle global torch._utils._rebuild_qtensor is not allowed");
	dw_pk_free(&p);

	/* Legacy stream, an archive without data.pkl, members outside a folder. */
	path = tu_path(dir, "legacy.pt");
	tu_write(path, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
	tu_expect_refused(path, NULL, NULL, "a legacy (pre-1.6) torch.save file: re-save with torch>=1.6");
	/* protocol 4 frames it; named .bin in a tree it is claimed, not skipped */
	tu_write(tu_path(dir, "legacy/pytorch_model.bin"),
		 "\x80\x04\x95\x0f\0\0\0\0\0\0\0\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 24);
	tu_expect_refused(tu_path(dir, "legacy"), NULL, tu_path(dir, "legacy/pytorch_model.bin"),
			  "a legacy (pre-1.6) torch.save file");
	/* any other pickle named .pt */
	tu_write(tu_path(dir, "bare.pt"), "\x80\x02}.", 4);
	tu_expect_refused(tu_path(dir, "bare.pt"), NULL, NULL, "a bare pickle, not a torch.save archive");
	dw_zip *z = dw_zip_new();
	/* torch.jit.save: code/ and constants.pkl beside data.pkl */
	dw_zip_add(z, "model/data.pkl", "\x80\x02}.", 4, NULL);
	dw_zip_add(z, "model/code/__torch__.py", "class M: pass\n", 14, NULL);
	dw_zip_add(z, "model/constants.pkl", "\x80\x02).", 4, NULL);
	dw_zip_write(z, tu_path(dir, "model.pt"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "model.pt"), NULL, NULL,
			  "a TorchScript archive (torch.jit.save), not torch.save");
	z = dw_zip_new();
	dw_zip_add(z, "model/data.pkl", "\x80\x02}.", 4, NULL);
	dw_zip_add(z, "model/code/__torch__.py", "class M: pass\n", 14, NULL);
	dw_zip_write(z, tu_path(dir, "codeonly.pt"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "codeonly.pt"), NULL, NULL, "a TorchScript archive");
	z = dw_zip_new();
	dw_zip_add(z, "archive/version", "3\n", 2, NULL);
	dw_zip_write(z, tu_path(dir, "nopkl.pt"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "nopkl.pt"), NULL, NULL, "not a torch.save archive: no 'archive/data.pkl'");
	z = dw_zip_new();
	dw_zip_add(z, "data.pkl", "\x80\x02}.", 4, NULL);
	dw_zip_write(z, tu_path(dir, "flat.pt"), false);
	dw_zip_free(z);
	tu_expect_refused(tu_path(dir, "flat.pt"), NULL, NULL, "first member 'data.pkl' is not inside a folder");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_dicts),
		cmocka_unit_test(test_lone_and_list),
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_v3_and_byteorder),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
