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

/* A node with its op and operands, as the printers write them (the
 * operands' dims are not read). */
static void node(gen *g, const char *name, const char *type, const char *op, const char *src0, const char *src1,
		 const int64_t ne[4], int seed)
{
	fprintf(g->f, "%s: %24s = (%s) %10s(%s{1, 1, 1, 1}, %s%s}) = {%lld, %lld, %lld, %lld}\n",
		g->st == V3 ? "common_debug_cb_eval" : "ggml_debug", name, type, op, src0, src1 ? src1 : "",
		src1 ? "{1, 1, 1, 1}" : "", (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
	if (strcmp(type, "q8_0"))
		body(g, ne, seed);
}

static void expect_role(tb_tree *tree, const char *name, const char *role)
{
	tb_tensor *t = tu_tensor(tree, name);

	assert_non_null(t->role);
	assert_string_equal(t->role, role);
}

/* A layer of llama.cpp's Llama graph as the 2024 tree prints it (the
 * headers of a capture of koboldcpp's llama-eval-callback, values
 * generated): the op decides each node's role, whatever its name
 * (kqv_out-0 is the attention's output, its input kqv_merged_cont-0),
 * RoPE's output takes its query's name and op, a row selection carries
 * its source's tap, views and reshapes are no tensor, quantized headers
 * are noted. */
static void test_ops_2024(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "dump.txt");
	const int64_t h[4] = {16, 4, 1, 1}, heads[4] = {4, 4, 4, 1}, last[4] = {16, 1, 1, 1}, kv[4] = {2, 2, 1, 1};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V1);
	node(&g, "inp_embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "norm-0", "f32", "RMS_NORM", "inp_embd", NULL, h, 2);
	node(&g, "attn_norm-0", "f32", "MUL", "norm-0", "blk.0.attn_norm.weight", h, 3);
	node(&g, "Qcur-0", "f32", "MUL_MAT", "blk.0.attn_q.weight", "attn_norm-0", h, 4);
	node(&g, "Qcur-0 (reshaped)", "f32", "RESHAPE", "Qcur-0", NULL, heads, 4);
	node(&g, "Qcur-0", "f32", "ROPE", "Qcur-0 (reshaped)", "inp_pos", heads, 5);
	node(&g, "k_q8-0", "q8_0", "CPY", "Kcur-0", "k_cache_view-0", kv, 0);
	node(&g, "kqv_merged_cont-0", "f32", "CONT", "kqv_merged-0", NULL, h, 6);
	node(&g, "kqv_out-0", "f32", "MUL_MAT", "blk.0.attn_output.weight", "kqv_merged_cont-0", h, 7);
	node(&g, "node_9", "f32", "GET_ROWS", "kqv_out-0", "inp_out_ids", last, 7);
	node(&g, "node_10", "f32", "GET_ROWS", "inp_embd", "inp_out_ids", last, 1);
	node(&g, "ffn_inp-0", "f32", "ADD", "node_9", "node_10", last, 8);
	node(&g, "ffn_silu-0", "f32", "SILU", "ffn_gate-0", NULL, last, 9);
	node(&g, "ffn_gate_par-0", "f32", "MUL", "ffn_silu-0", "ffn_up-0", last, 10);
	node(&g, "ffn_out-0", "f32", "MUL_MAT", "blk.0.ffn_down.weight", "ffn_gate_par-0", last, 11);
	node(&g, "ffn_out-0", "f32", "ADD", "ffn_out-0", "blk.0.ffn_down.bias", last, 12);
	node(&g, "l_out-0", "f32", "ADD", "ffn_out-0", "ffn_inp-0", last, 13);
	node(&g, "norm", "f32", "RMS_NORM", "l_out-0", NULL, last, 14);
	node(&g, "result_norm", "f32", "MUL", "norm", "output_norm.weight", last, 15);
	node(&g, "result_output", "f32", "MUL_MAT", "output.weight", "result_norm", last, 16);
	gen_close(&g);
	tree = tu_open(path, NULL);
	expect_role(tree, "inp_embd", "embed");
	expect_role(tree, "attn_norm-0", "layers.0.attn_norm");
	expect_role(tree, "Qcur-0", "layers.0.attn.q");
	expect_dump(tu_tensor(tree, "Qcur-0"), h, 4, 3);
	expect_role(tree, "Qcur-0 (ROPE)", "layers.0.attn.q_rope");
	expect_dump(tu_tensor(tree, "Qcur-0 (ROPE)"), heads, 5, 3);
	assert_int_equal(tu_tensor(tree, "Qcur-0")->gguf_qk_head_dim, 4);
	assert_int_equal(tu_tensor(tree, "Qcur-0 (ROPE)")->gguf_qk_head_dim, 4);
	expect_role(tree, "kqv_merged_cont-0", "layers.0.attn.core");
	expect_role(tree, "kqv_out-0", "layers.0.attn");
	assert_string_equal(tu_tensor(tree, "kqv_out-0")->origin, "MUL_MAT(blk.0.attn_output.weight, kqv_merged_cont-0)");
	expect_role(tree, "ffn_inp-0", "layers.0.attn.resid");
	expect_role(tree, "ffn_gate_par-0", "layers.0.mlp.act");
	/* the bias added is the MLP's output, under its name */
	expect_role(tree, "ffn_out-0", "layers.0.mlp");
	expect_dump(tu_tensor(tree, "ffn_out-0"), last, 12, 3);
	expect_role(tree, "l_out-0", "layers.0.block");
	expect_role(tree, "result_norm", "final_norm");
	expect_role(tree, "result_output", "logits");
	expect_role(tree, "norm-0", "");
	expect_role(tree, "norm", "");
	expect_role(tree, "ffn_silu-0", "");
	assert_null(tb_tree_find(tree, "Qcur-0 (reshaped)"));
	assert_null(tb_tree_find(tree, "k_q8-0"));
	assert_int_equal(tree->n_notes, 1);
	assert_non_null(strstr(tree->notes[0], "skipped 1 quantized tensor of "));
	assert_non_null(strstr(tree->notes[0], "k_q8-0 (q8_0)"));
	tb_tree_free(tree);
}

/* The 2026 graph (headers of a July 2026 llama-eval-callback's capture):
 * the embedding is embd, Qcur-0 is written three times (projection,
 * reshape, RoPE), kqv_out-0 is o_proj's input (a reshape of flash
 * attention's output) and attn_out-0 its output, the MLP's activation a
 * fused SWIGLU.  The prompt's ids are read from the list eval-callback
 * logs before the graph. */
static void test_ops_2026(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "dump.txt");
	const int64_t h[4] = {16, 4, 1, 1}, heads[4] = {4, 4, 4, 1}, wide[4] = {32, 4, 1, 1};
	const int64_t ids[4] = {1, 107, 104, 111};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V3);
	fputs("0.00.021.162 I number of input tokens = 4\n0.00.021.182 I   1\n0.00.021.205 I   107\n"
	      "0.00.021.205 I   104\n0.00.021.205 I   111\n", g.f);
	node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "Qcur-0", "f32", "MUL_MAT", "blk.0.attn_q.weight", "attn_norm-0", h, 2);
	node(&g, "Qcur-0", "f32", "RESHAPE", "Qcur-0", NULL, heads, 2);
	node(&g, "Qcur-0", "f32", "ROPE", "Qcur-0", "leaf_5", heads, 3);
	node(&g, "__fattn__-0", "f32", "FLASH_ATTN_EXT", "Qcur-0 (view) (permuted)", "cache_k_l0 (view) (permuted)",
	     heads, 4);
	node(&g, "kqv_out-0", "f32", "RESHAPE", "__fattn__-0", NULL, h, 4);
	node(&g, "attn_out-0", "f32", "MUL_MAT", "blk.0.attn_output.weight", "kqv_out-0", h, 5);
	node(&g, "ffn_inp-0", "f32", "ADD", "attn_out-0", "embd", h, 6);
	node(&g, "ffn_gate-0", "f32", "MUL_MAT", "blk.0.ffn_gate.weight", "ffn_norm-0", wide, 7);
	node(&g, "ffn_swiglu-0", "f32", "SWIGLU", "ffn_gate-0", "ffn_up-0", wide, 8);
	node(&g, "ffn_out-0", "f32", "MUL_MAT", "blk.0.ffn_down.weight", "ffn_swiglu-0", h, 9);
	node(&g, "l_out-0", "f32", "ADD", "ffn_out-0", "ffn_inp-0", h, 10);
	node(&g, "result_output", "f32", "MUL_MAT", "token_embd.weight", "result_norm", h, 11);
	gen_close(&g);
	tree = tu_open(path, NULL);
	expect_role(tree, "embd", "embed");
	expect_role(tree, "Qcur-0", "layers.0.attn.q");
	expect_dump(tu_tensor(tree, "Qcur-0"), h, 2, 3);
	expect_role(tree, "Qcur-0 (ROPE)", "layers.0.attn.q_rope");
	expect_role(tree, "__fattn__-0", "");
	expect_role(tree, "kqv_out-0", "layers.0.attn.core");
	expect_role(tree, "attn_out-0", "layers.0.attn");
	expect_role(tree, "ffn_inp-0", "layers.0.attn.resid");
	expect_role(tree, "ffn_swiglu-0", "layers.0.mlp.act");
	expect_role(tree, "ffn_out-0", "layers.0.mlp");
	expect_role(tree, "l_out-0", "layers.0.block");
	/* tied embeddings: the logits from token_embd */
	expect_role(tree, "result_output", "logits");
	assert_int_equal(tree->n_tokens, 4);
	assert_memory_equal(tree->tokens, ids, sizeof ids);
	tb_tree_free(tree);
}

/* llama-debug's warmup decode is left out with a note, and its token
 * list read; two passes after it are steps. */
static void test_passes(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "debug.txt");
	const int64_t two[4] = {8, 2, 1, 1}, four[4] = {8, 4, 1, 1};
	const int64_t ids[4] = {1, 35, 107, 104};
	tb_tree *tree;
	gen g;
	(void)state;

	gen_open(&g, path, V3);
	fputs("0.00.020.660 I common_init_from_params: warming up the model with an empty run - please wait ... "
	      "(--no-warmup to disable)\n", g.f);
	node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", two, 1);
	node(&g, "attn_norm-0", "f32", "MUL", "norm-0", "blk.0.attn_norm.weight", two, 2);
	fputs("0.00.126.881 I system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 |\n", g.f);
	for (int pass = 0; pass < 2; pass++) {
		node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", four, 3 + pass);
		node(&g, "attn_norm-0", "f32", "MUL", "norm-0", "blk.0.attn_norm.weight", four, 5 + pass);
	}
	/* a space's piece is a space: the id still ends in ") " */
	fputs("Model add_bos: true\nInput prompt: \" he\"\nToken ids (4):\n<s>(1)  (35) h(107) e(104) \n", g.f);
	gen_close(&g);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, 4);
	expect_role(tree, "step_0.embd", "embed");
	expect_dump(tu_tensor(tree, "step_0.embd"), four, 3, 3);
	expect_dump(tu_tensor(tree, "step_1.attn_norm-0"), four, 6, 3);
	assert_int_equal(tree->n_notes, 1);
	assert_non_null(strstr(tree->notes[0], "left out the warmup decode of "));
	assert_int_equal(tree->n_tokens, 4);
	assert_memory_equal(tree->tokens, ids, sizeof ids);
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

/* A header found past the sniffer's 512 bytes: a .log is read whole, a
 * text file of any other name is searched whole for a header, a binary
 * file never. */
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
	/* any other name is searched whole when it is text */
	tree = tu_open(tu_path(dir, "late"), NULL);
	assert_int_equal(tree->n_tensors, 1);
	tb_tree_free(tree);
	tu_expect_refused(tu_path(dir, "nodump"), NULL, NULL, "notes.txt: not a tensor file");
	/* binary is never searched */
	text[0] = '\0';
	tu_write(tu_path(dir, "binary/capture.out"), text, sizeof text);
	tu_expect_refused(tu_path(dir, "binary"), NULL, NULL, "capture.out: not a tensor file");
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

/* What makes a whole capture unreadable, each refused with the line: an
 * operand naming a weight no GGUF has, a second run after the first's
 * tensors, a graph that stops before the logits with nothing after it
 * (the log lost its end), a model that never loaded. */
static void test_bad_captures(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t h[4] = {2, 1, 1, 1};
	gen g;
	(void)state;

	gen_open(&g, tu_path(dir, "typo.txt"), V3);
	node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "attn_out-0", "f32", "MUL_MAT", "blk.0.attn_outptu.weight", "kqv_out-0", h, 2);
	gen_close(&g);
	tu_expect_refused(tu_path(dir, "typo.txt"), NULL, NULL,
			  "line 8: 'attn_out-0' MUL_MAT's operand 'blk.0.attn_outptu.weight' is no weight llama.cpp's "
			  "GGUF files name");

	gen_open(&g, tu_path(dir, "two.txt"), V1);
	fputs("build: 999 (KOBOLDCPP) with KCPP for KCPP\n", g.f);
	node(&g, "inp_embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "result_output", "f32", "MUL_MAT", "output.weight", "result_norm", h, 2);
	fputs("build: 999 (KOBOLDCPP) with KCPP for KCPP\n", g.f);
	node(&g, "inp_embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	gen_close(&g);
	tu_expect_refused(tu_path(dir, "two.txt"), NULL, NULL,
			  "line 16: another run of llama.cpp starts here ('build: 999 (KOBOLDCPP) with KCPP for KCP...') "
			  "after the tensors of the first (line 2 on): capture one run per file");

	gen_open(&g, tu_path(dir, "cut.txt"), V3);
	node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "attn_norm-0", "f32", "MUL", "norm-0", "blk.0.attn_norm.weight", h, 2);
	gen_close(&g);
	tu_expect_refused(tu_path(dir, "cut.txt"), NULL, NULL,
			  "line 14: the capture ends after 'attn_norm-0' (L0.attn_norm), before the logits, with nothing "
			  "after it");
	/* the same graph with what the program printed after it: a capture of some nodes only */
	gen_open(&g, tu_path(dir, "filtered.txt"), V3);
	node(&g, "embd", "f32", "GET_ROWS", "token_embd.weight", "inp_tokens", h, 1);
	node(&g, "attn_norm-0", "f32", "MUL", "norm-0", "blk.0.attn_norm.weight", h, 2);
	fputs("Token ids (1):\n<s>(1) \n", g.f);
	gen_close(&g);
	tb_tree_free(tu_open(tu_path(dir, "filtered.txt"), NULL));

	tu_write_str(tu_path(dir, "failed.out"),
		     "0.00.006.978 E llama_model_load: error loading model: missing tensor 'blk.1.ffn_down.weight'\n"
		     "0.00.007.614 E common_init_from_params: failed to load model 'm.gguf'\n"
		     "0.00.007.620 E main : failed to init\n");
	tu_expect_refused(tu_path(dir, "failed.out"), NULL, NULL,
			  "line 1: llama.cpp did not run the model, so it printed no tensor: 'llama_model_load: error "
			  "loading model: missing tensor 'blk.1.ffn_down.weight''");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v3_layouts),
		cmocka_unit_test(test_v1_layout_and_logs),
		cmocka_unit_test(test_ops_2024),
		cmocka_unit_test(test_ops_2026),
		cmocka_unit_test(test_passes),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_sniff),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_bad_captures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
