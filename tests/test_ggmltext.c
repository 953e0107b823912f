/*
 * test_ggmltext: llama.cpp's text dumps (llama-eval-callback, llama-debug)
 * read through tb_tree_open.  The dumps are printed here as common/debug.cpp
 * prints them (4-space indents) and as the older eval-callback did (37 to
 * 39 spaces), from values that %12.4f prints exactly, so every value read
 * must be the one at its flat index; then the names (last write wins,
 * ffn_out's first), views and quantized headers skipped, the log lines
 * around the dumps, NaN and inf, and each refusal with its line.
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

#include "testutil.h"
#include "formats/tree.h"

/* The value at flat index i of a generated tensor: a multiple of 1/16,
 * which %12.4f prints exactly; seed tells tensors apart. */
static float value_at(uint64_t i, int seed)
{
	return (float)((int)((i * 7 + (uint64_t)seed * 13) % 101) - 50) / 16.0f;
}

typedef enum style { V3, V1 } style;

/* A dump being written: the file and its layout. */
typedef struct gen {
	FILE *f;
	style st;
	int n;      /* values kept at each end of a long axis (3 upstream) */
	bool sum_sq; /* llama-debug's extra line */
} gen;

static void gen_open(gen *g, const char *path, style st)
{
	memset(g, 0, sizeof *g);
	g->f = fopen(path, "w");
	assert_non_null(g->f);
	g->st = st;
	g->n = 3;
}

static void gen_close(gen *g)
{
	assert_int_equal(fclose(g->f), 0);
}

static void header(gen *g, const char *name, const char *type, const int64_t ne[4])
{
	fprintf(g->f, "%s: %24s = (%s) %10s(src-0{%lld, %lld, 1, 1}, }) = {%lld, %lld, %lld, %lld}\n",
		g->st == V3 ? "common_debug_cb_eval" : "ggml_debug", name, type, "MUL_MAT", (long long)ne[0],
		(long long)ne[1], (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
}

/* How each style lays the values out: the indents of the ne3 blocks,
 * the ne2 blocks and the rows, the elision inside a row, a row's end. */
static const struct {
	int i3, i2, i1;
	const char *el0, *endrow;
} layouts[] = {
	[V3] = {4, 8, 12, "   ..., ", "  ],\n"},
	[V1] = {37, 38, 39, "..., ", "],\n"},
};

/* The values, as common_debug_print_tensor (V3) or the older ggml_print_tensor (V1) nests them. */
static void body(gen *g, const int64_t ne[4], int seed)
{
	int i3w = layouts[g->st].i3, i2w = layouts[g->st].i2, i1w = layouts[g->st].i1;
	float sum = 0;
	int64_t n = g->n;

	for (uint64_t i = 0; i < (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]); i++)
		sum += value_at(i, seed);
	for (int64_t i3 = 0; i3 < ne[3]; i3++) {
		fprintf(g->f, "%*s[\n", i3w, "");
		for (int64_t i2 = 0; i2 < ne[2]; i2++) {
			if (i2 == n && ne[2] > 2 * n) {
				fprintf(g->f, "%*s..., \n", i2w, "");
				i2 = ne[2] - n;
			}
			fprintf(g->f, "%*s[\n", i2w, "");
			for (int64_t i1 = 0; i1 < ne[1]; i1++) {
				if (i1 == n && ne[1] > 2 * n) {
					fprintf(g->f, "%*s..., \n", i1w, "");
					i1 = ne[1] - n;
				}
				fprintf(g->f, "%*s[", i1w, "");
				for (int64_t i0 = 0; i0 < ne[0]; i0++) {
					if (i0 == n && ne[0] > 2 * n) {
						fputs(layouts[g->st].el0, g->f);
						i0 = ne[0] - n;
					}
					uint64_t flat = (uint64_t)(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0);
					fprintf(g->f, "%12.4f", (double)value_at(flat, seed));
					if (i0 < ne[0] - 1)
						fputs(", ", g->f);
				}
				fputs(layouts[g->st].endrow, g->f);
			}
			fprintf(g->f, "%*s],\n", i2w, "");
		}
		fprintf(g->f, "%*s]\n", i3w, "");
		fprintf(g->f, "%*ssum = %f\n", i3w, "", (double)sum);
		if (g->sum_sq)
			fprintf(g->f, "%*ssum_sq = %f\n", i3w, "", 1.0);
	}
}

static void tensor(gen *g, const char *name, const int64_t ne[4], int seed)
{
	header(g, name, "f32", ne);
	body(g, ne, seed);
}

/* Is entry i of axis of length ne printed (n kept at each end)? */
static bool printed(int64_t i, int64_t ne, int n)
{
	return ne <= 2 * n || i < n || i >= ne - n;
}

/* t holds exactly the printed elements of a tensor of shape ne, in order,
 * with the generator's values. */
static void expect_dump(tb_tensor *t, const int64_t ne[4], int seed, int n)
{
	int64_t whole[4] = {ne[3], ne[2], ne[1], ne[0]};
	uint64_t k = 0, numel = (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]);
	float *want = malloc(numel * sizeof *want);
	uint64_t *index = malloc(numel * sizeof *index);

	assert_non_null(want);
	assert_non_null(index);
	for (int64_t i3 = 0; i3 < ne[3]; i3++)
		for (int64_t i2 = 0; i2 < ne[2]; i2++)
			for (int64_t i1 = 0; i1 < ne[1]; i1++)
				for (int64_t i0 = 0; i0 < ne[0]; i0++) {
					uint64_t flat = (uint64_t)(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0);
					if (!printed(i2, ne[2], n) || !printed(i1, ne[1], n) || !printed(i0, ne[0], n))
						continue;
					index[k] = flat;
					want[k++] = value_at(flat, seed);
				}
	assert_int_equal(t->dtype, TB_DT_F32);
	if (k == numel) {
		assert_null(t->partial);
		assert_int_equal(t->ndim, 4);
		assert_memory_equal(t->shape, whole, sizeof whole);
	} else {
		assert_non_null(t->partial);
		assert_int_equal(t->ndim, 1);
		assert_int_equal(t->partial->ndim, 4);
		assert_memory_equal(t->partial->shape, whole, sizeof whole);
		assert_int_equal(t->partial->n, k);
		assert_memory_equal(t->partial->index, index, k * sizeof *index);
	}
	tu_expect_values(t, want, (size_t)k);
	free(want);
	free(index);
}

static void test_v3_layouts(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "dump.txt");
	const int64_t hidden[4] = {8, 7, 1, 1}, heads[4] = {10, 3, 8, 2}, small[4] = {4, 3, 2, 1};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V3);
	tensor(&g, "attn_norm-0", hidden, 1);
	tensor(&g, "Kcur-0", heads, 2);
	tensor(&g, "l_out-0", small, 3);
	gen_close(&g);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, 3);
	expect_dump(tu_tensor(tree, "attn_norm-0"), hidden, 1, 3);
	expect_dump(tu_tensor(tree, "Kcur-0"), heads, 2, 3);
	expect_dump(tu_tensor(tree, "l_out-0"), small, 3, 3);
	/* 36 printed of 56: rows 0-2 and 4-6 of 7, columns 0-2 and 5-7 of 8 */
	assert_int_equal(tu_tensor(tree, "attn_norm-0")->partial->n, 36);
	assert_int_equal(tu_tensor(tree, "attn_norm-0")->partial->index[3], 5);
	assert_true(tu_tensor(tree, "attn_norm-0")->partial->has_sum);
	tb_tree_free(tree);
}

/* The older layout, llama-debug's sum_sq line, a dump printed with more
 * values kept than upstream's three, and the log around it. */
static void test_v1_layout_and_logs(void **state)
{
	const char *dir = tu_tmpdir(), *path = tu_path(dir, "run.log");
	const int64_t heads[4] = {10, 3, 8, 2}, wide[4] = {12, 5, 1, 1};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V1);
	fputs("build: 4567 (abcdef12) with cc (Debian 14.2.0) for x86_64-linux-gnu\n"
	      "llama_model_loader: - kv   0:                       general.architecture str              = llama\n"
	      "print_info: n_embd           = 8\n\nsystem_info: n_threads = 2 | CPU : SSE3 = 1 |\n", g.f);
	g.sum_sq = true;
	tensor(&g, "ffn_norm-1", heads, 4);
	fputs("I number of input tokens = 4\nW some warning = (f32) {1}\n     1 -> '<s>'\n", g.f);
	g.n = 4;
	tensor(&g, "result_norm", wide, 5);
	fputs("\nllama_perf_context_print:        load time =      12.34 ms\n", g.f);
	gen_close(&g);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, 2);
	expect_dump(tu_tensor(tree, "ffn_norm-1"), heads, 4, 3);
	expect_dump(tu_tensor(tree, "result_norm"), wide, 5, 4);
	tb_tree_free(tree);
}

/* Qcur-N is written before and after RoPE (the last counts), ffn_out-N
 * twice when a control vector follows (the first counts); "norm" gives
 * way to result_norm; views are skipped, quantized tensors (header only)
 * with a note. */
static void test_names(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "dump.txt");
	const int64_t flat[4] = {16, 4, 1, 1}, roped[4] = {4, 4, 4, 1}, view[4] = {2, 2, 1, 1};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V3);
	tensor(&g, "Qcur-0", flat, 1);
	tensor(&g, "Qcur-0 (reshaped)", roped, 1);
	tensor(&g, "Qcur-0", roped, 2);
	tensor(&g, "ffn_out-0", flat, 3);
	header(&g, "cache_k_l0 (view)", "q8_0", view);
	header(&g, "k_quant-0", "q4_K", view);
	tensor(&g, "ffn_out-0", flat, 4);
	tensor(&g, "l_out-0", flat, 4);
	tensor(&g, "norm", flat, 5);
	tensor(&g, "result_norm", flat, 6);
	gen_close(&g);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, 4);
	/* the final norm before its weight gives way to result_norm */
	assert_null(tb_tree_find(tree, "norm"));
	expect_dump(tu_tensor(tree, "result_norm"), flat, 6, 3);
	expect_dump(tu_tensor(tree, "Qcur-0"), roped, 2, 3);
	expect_dump(tu_tensor(tree, "ffn_out-0"), flat, 3, 3);
	assert_null(tb_tree_find(tree, "Qcur-0 (reshaped)"));
	assert_int_equal(tree->n_notes, 1);
	assert_non_null(strstr(tree->notes[0], "skipped 1 quantized tensor of "));
	assert_non_null(strstr(tree->notes[0], "k_quant-0 (q4_K)"));
	tb_tree_free(tree);
}

static void test_nonfinite(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "nan.txt");
	const float want[4] = {__builtin_nanf(""), -__builtin_nanf(""), __builtin_inff(), -__builtin_inff()};
	tb_tree *tree;
	tb_tensor *t;
	(void)state;

	tu_write_str(path, "common_debug_cb_eval:                    x-0 = (f32)        ADD(a{4, 1, 1, 1}, b{4, 1, 1, 1}}) = {4, 1, 1, 1}\n"
			   "    [\n        [\n            [         nan,         -nan,          inf,         -inf  ],\n"
			   "        ],\n    ]\n    sum = nan\n");
	tree = tu_open(path, NULL);
	t = tu_tensor(tree, "x-0");
	assert_null(t->partial);
	tu_expect_values(t, want, 4);
	tb_tree_free(tree);
}

/* A header found past the sniffer's 512 bytes: a .log is read whole, any
 * other name needs the header within them. */
static void test_sniff(void **state)
{
	const char *dir = tu_tmpdir();
	const char *dump = "common_debug_cb_eval:                    x-0 = (f32)        ADD(a{2, 1, 1, 1}, b{2, 1, 1, 1}}) = {2, 1, 1, 1}\n"
			   "    [\n        [\n            [      1.0000,       2.0000  ],\n        ],\n    ]\n    sum = 3.000000\n";
	char text[4096];
	tb_tree *tree;
	(void)state;

	snprintf(text, sizeof text, "%s%s", "llama_model_loader: loaded meta data with 30 key-value pairs\n", dump);
	tu_write_str(tu_path(dir, "early/capture"), text);
	memset(text, 0, sizeof text);
	for (int i = 0; i < 12; i++)
		strcat(text, "llama_model_loader: - kv  12:    llama.attention.layer_norm_rms_epsilon f32 = 0.000010\n");
	strcat(text, dump);
	tu_write_str(tu_path(dir, "late/capture"), text);
	tu_write_str(tu_path(dir, "late.log"), text);
	tu_write_str(tu_path(dir, "nodump/notes.txt"), "a README that is no dump\n");

	tree = tu_open(tu_path(dir, "early"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	tb_tree_free(tree);
	tree = tu_open(tu_path(dir, "late.log"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	tb_tree_free(tree);
	tu_expect_refused(tu_path(dir, "late"), NULL, NULL, "not a tensor file");
	tu_expect_refused(tu_path(dir, "nodump"), NULL, NULL, "notes.txt: not a tensor file");
}

/* Each refusal names the file and the line. */
static void test_refusals(void **state)
{
	static const char head[] = "common_debug_cb_eval:                    x-0 = (f32)        ADD(a{8, 1, 1, 1}, b{8, 1, 1, 1}}) = ";
	static const struct {
		const char *ne, *body, *want;
	} cases[] = {
		{"{8, 1, 1, 1}", "    [\n        [\n            [      1.0000,       2.0000,       3.0000",
		 "line 4: the file ends inside the values (the dump was cut short) in the dump of 'x-0' (line 1)"},
		{"{8, 1, 1, 1}", "    [\n        [\n",
		 "line 3: the file ends inside the values"},
		{"{2, 1, 1, 1}", "    [\n        [\n            [      1.0000,       abc  ],\n        ],\n    ]\n",
		 "line 4: 'abc' is not a number in the dump of 'x-0'"},
		{"{3, 1, 1, 1}", "    [\n        [\n            [      1.0000,       2.0000  ],\n        ],\n    ]\n",
		 "line 4: a row of 2 values where ne0 = 3 prints 3"},
		{"{8, 1, 1, 1}", "    [\n        [\n            [      1.0000,       2.0000,   ...,       3.0000  ],\n",
		 "line 4: a row of 3 values where ne0 = 8 prints 4"},
		{"{2, 1, 1, 1}", "    [\n        [\n            [      1.0000,   ...,       3.0000  ],\n",
		 "line 4: '...' where its shape elides nothing"},
		{"{99999999999, 99999999999, 1, 1}", "    [\n", "line 1: its shape {ne0, ne1, ne2, ne3} overflows"},
		{"{99999999999999999999, 1, 1, 1}", "    [\n", "line 1: its shape {ne0, ne1, ne2, ne3} overflows"},
		{"{1, 1, 1, 1}", "    [\n        [\n"
				 "common_debug_cb_eval:                    y-0 = (f32)        ADD(a{1, 1, 1, 1}, b{1, 1, 1, 1}}) = {1, 1, 1, 1}\n",
		 "line 4: another tensor starts inside the values"},
		{"{1, 1, 1, 1}", "    [\n        {\n", "line 3: expected '[', found '{'"},
		{"{1, 1, 1, 1}", "    [\n        [\n            [      1.0000  ],\n        ],\n    ]\n    sum = x\n",
		 "line 7: its sum is not a number"},
	};
	const char *dir = tu_tmpdir();
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char name[32], text[1024];
		snprintf(name, sizeof name, "bad%zu.txt", i);
		snprintf(text, sizeof text, "%s%s\n%s", head, cases[i].ne, cases[i].body);
		tu_write_str(tu_path(dir, name), text);
		tu_expect_refused(tu_path(dir, name), NULL, NULL, cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v3_layouts),
		cmocka_unit_test(test_v1_layout_and_logs),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_sniff),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
