/*
 * test_layout: the layout step (src/model/layout.c) on npy trees written
 * here: every spelling of a rank or step tag dumpers use, stripped and
 * joined into the same tensor; the joins by tap (split, partial sum,
 * replicated, a fused gate_up per projection) read back value for value;
 * --shard specs and SGLang's dims grammar, parsed and refused.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/layout.h"
#include "model/trtllm.h"
#include "testutil.h"

/* A [1, 2, 4] tensor of values base, base+1, ... */
static void put(const char *dir, const char *name, float base, int64_t width)
{
	int64_t shape[3] = {1, 2, width};
	float x[64];

	for (int64_t i = 0; i < 2 * width; i++)
		x[i] = base + (float)i;
	tu_put(dir, name, TB_DT_F32, 3, shape, x);
}

/* Open dir and apply the layout with o (NULL: the defaults). */
static tb_tree *laid_out(const char *dir, const tb_layout_opts *o, tb_namer *namer)
{
	tb_layout_opts def;
	tb_tree *tree = tu_open(dir, NULL);
	tb_err err = {0};

	if (!o) {
		tb_layout_opts_init(&def);
		o = &def;
	}
	if (tb_layout_apply(tree, namer, o, &err) < 0)
		fail_msg("layout of %s: %s", dir, err.msg);
	return tree;
}

static void test_tag_spellings(void **state)
{
	static const char *const layouts[][2] = {
		{"rank_0/model.norm", "rank_1/model.norm"},
		{"tp-0/model.norm", "tp-1/model.norm"},
		{"tp_rank_0/model.norm", "tp_rank_1/model.norm"},
		{"model.norm_rank0", "model.norm_rank1"},
		{"model.norm-tp0", "model.norm-tp1"},
		{"rank0/model.norm", "rank1/model.norm"},
	};
	tb_namer *namer;
	tb_err err = {0};
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &namer, &err), 0);
	for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
		char dir[64];
		const char *d;
		tb_tree *tree;
		snprintf(dir, sizeof dir, "spell%zu", i);
		d = tu_path(tu_tmpdir(), dir);
		put(d, layouts[i][0], 0, 4);
		put(d, layouts[i][1], 0, 4);
		tree = laid_out(d, NULL, namer);
		assert_int_equal(tree->n_tensors, 1);
		assert_string_equal(tree->tensors[0]->name, "model.norm");
		assert_int_equal(tree->layout.ranks, 2);
		tb_tree_free(tree);
	}
	tb_namer_free(namer);
}

static void test_steps_and_stitch(void **state)
{
	const char *d = tu_path(tu_tmpdir(), "steps");
	float all[16];
	tb_layout_opts o;
	tb_namer *namer;
	tb_err err = {0};
	tb_tree *tree;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &namer, &err), 0);
	put(d, "step_0/model.norm", 0, 4);
	put(d, "forward_pass_id=1", 0, 4); /* '=' makes no step component: an ordinary name */
	tb_layout_opts_init(&o);
	tree = laid_out(d, &o, namer);
	assert_int_equal(tree->layout.n_steps, 1);
	assert_int_equal(tree->layout.step, 0);
	assert_non_null(tb_tree_find(tree, "forward_pass_id=1"));
	tb_tree_free(tree);

	/* two steps of two positions each, stitched on the positions axis */
	d = tu_path(tu_tmpdir(), "steps2");
	put(d, "step_0/model.norm", 0, 4);
	put(d, "step_1/model.norm", 100, 4);
	o.all_steps = true;
	tree = laid_out(d, &o, namer);
	assert_int_equal(tree->n_tensors, 1);
	assert_int_equal(tree->layout.step, -1);
	assert_int_equal(tree->tensors[0]->shape[1], 4);
	for (int i = 0; i < 8; i++) {
		all[i] = (float)i;
		all[8 + i] = 100.0f + (float)i;
	}
	tu_expect_values(tree->tensors[0], all, 16);
	tb_tree_free(tree);

	/* --step 1 picks the second */
	tb_layout_opts_init(&o);
	o.step = 1;
	tree = laid_out(d, &o, namer);
	tu_expect_values(tree->tensors[0], all + 8, 8);
	tb_tree_free(tree);
	tb_namer_free(namer);
}

static void test_joins_by_tap(void **state)
{
	const char *d = tu_path(tu_tmpdir(), "joins");
	tb_namer *namer;
	tb_err err = {0};
	tb_tree *tree;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &namer, &err), 0);
	/* q_proj split on its last axis: rank 0 holds columns 0..1, rank 1 2..3 */
	put(d, "rank_0/model.layers.0.self_attn.q_proj", 0, 2);
	put(d, "rank_1/model.layers.0.self_attn.q_proj", 10, 2);
	/* o_proj: partial sums that differ, so they are added */
	put(d, "rank_0/model.layers.0.self_attn.o_proj", 1, 4);
	put(d, "rank_1/model.layers.0.self_attn.o_proj", 2, 4);
	/* gate_up: [gate | up] on each rank */
	put(d, "rank_0/model.layers.0.mlp.gate_up_proj", 0, 4);
	put(d, "rank_1/model.layers.0.mlp.gate_up_proj", 20, 4);
	tree = laid_out(d, NULL, namer);
	assert_int_equal(tree->n_tensors, 3);
	tb_tensor *q = tu_tensor(tree, "model.layers.0.self_attn.q_proj");
	float wq[8] = {0, 1, 10, 11, 2, 3, 12, 13};
	tu_expect_values(q, wq, 8);
	tb_tensor *o = tu_tensor(tree, "model.layers.0.self_attn.o_proj");
	float wo[8] = {3, 5, 7, 9, 11, 13, 15, 17};
	tu_expect_values(o, wo, 8);
	tb_tensor *gu = tu_tensor(tree, "model.layers.0.mlp.gate_up_proj");
	/* gate: rank 0 cols 0..1, rank 1 cols 0..1; up: rank 0 cols 2..3, rank 1 cols 2..3 */
	float wgu[16] = {0, 1, 20, 21, 2, 3, 22, 23, 4, 5, 24, 25, 6, 7, 26, 27};
	tu_expect_values(gu, wgu, 16);
	tb_tree_free(tree);
	tb_namer_free(namer);
}

/* A fused qkv's shards split in the proportion the other tree gives: here
 * a TP1 tree holding only qkv_proj and the attention output (as vLLM
 * dumps), whose widths say q 8, k 2, v 2. */
static void test_fused_qkv_from_the_other_tree(void **state)
{
	const char *one = tu_path(tu_tmpdir(), "tp1"), *two = tu_path(tu_tmpdir(), "tp2");
	tb_layout_opts o;
	tb_namer *namer;
	tb_err err = {0};
	tb_tree *a, *b;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &namer, &err), 0);
	put(one, "model.layers.0.self_attn.qkv_proj", 0, 12);
	put(one, "model.layers.0.self_attn.attn", 0, 8);
	/* each rank: q 4, k 1, v 1 */
	put(two, "rank_0/model.layers.0.self_attn.qkv_proj", 0, 6);
	put(two, "rank_1/model.layers.0.self_attn.qkv_proj", 100, 6);
	a = tu_open(one, NULL);
	tb_layout_opts_init(&o);
	tb_layout_qk_widths(a, namer, &o.q_width, &o.kv_width);
	assert_int_equal(o.q_width, 8);
	assert_int_equal(o.kv_width, 2);
	b = laid_out(two, &o, namer);
	tb_tensor *t = tu_tensor(b, "model.layers.0.self_attn.qkv_proj");
	assert_int_equal(t->shape[2], 12);
	/* row 0: q of rank 0 (0..3), q of rank 1 (100..103), k0 4, k1 104, v0 5, v1 105 */
	float want[24] = {0, 1, 2, 3, 100, 101, 102, 103, 4, 104, 5, 105,
			  6, 7, 8, 9, 106, 107, 108, 109, 10, 110, 11, 111};
	tu_expect_values(t, want, 24);
	tb_tree_free(a);
	tb_tree_free(b);
	tb_namer_free(namer);
}

static void test_shard_specs(void **state)
{
	tb_shard_rule r;
	tb_err err = {0};
	(void)state;

	assert_int_equal(tb_shard_parse("mlp.act=s h[tp]", &r, &err), 0);
	assert_int_equal(r.kind, TB_SHARD_SPLIT);
	assert_int_equal(r.axis, 1);
	assert_int_equal(r.ndim, 2);
	assert_int_equal(tb_shard_parse("attn.o=b s h[tp:partial]", &r, &err), 0);
	assert_int_equal(r.kind, TB_SHARD_PARTIAL);
	assert_int_equal(tb_shard_parse("attn.core=t (heads*d)[attn_tp] # dp:=attn_dp", &r, &err), 0);
	assert_int_equal(r.kind, TB_SHARD_SPLIT);
	assert_int_equal(r.axis, 1);
	assert_int_equal(tb_shard_parse("embed=replicated", &r, &err), 0);
	assert_int_equal(r.kind, TB_SHARD_REPLICATED);
	assert_int_equal(tb_shard_parse("attn=partial", &r, &err), 0);
	assert_int_equal(r.kind, TB_SHARD_PARTIAL);
	assert_int_equal(tb_shard_parse("attn=s h", &r, &err), -1);
	assert_non_null(strstr(err.msg, "no dim is marked [tp]"));
	assert_int_equal(tb_shard_parse("attn=s[tp] h[tp]", &r, &err), -1);
	assert_non_null(strstr(err.msg, "more than one dim"));
	assert_int_equal(tb_shard_parse("attn=s h[tp", &r, &err), -1);
	assert_non_null(strstr(err.msg, "without ']'"));
	assert_int_equal(tb_shard_parse("noequals", &r, &err), -1);
	assert_non_null(strstr(err.msg, "expected TAP=SPEC"));
	assert_int_equal(tb_shard_parse("bogus=partial", &r, &err), -1);
	assert_non_null(strstr(err.msg, "unknown tap"));
}

/* TensorRT-LLM's debug-hook names read as module paths: inputs dumped
 * again as outputs and calls inside a linear layer dropped, outputs in the
 * hook's order, a second call of the model a second step; names that are
 * not all the hook's left alone. */
static void test_trtllm_names(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: internal */
		int step;
	} rows[] = {
		{"1.LlamaModel-1.Embedding-input.input", "model.embed_tokens.inputs.input", -1},
		{"1.LlamaModel-1.Embedding-output.input", NULL, -1},
		{"1.LlamaModel-1.Embedding-output.1", "model.embed_tokens", -1},
		{"1.LlamaModel-3.LlamaDecoderLayer-1.RMSNorm-output.3", "model.layers.1.input_layernorm.output.1", -1},
		{"1.LlamaModel-3.LlamaDecoderLayer-1.RMSNorm-output.2", "model.layers.1.input_layernorm.output.0", -1},
		{"1.LlamaModel-3.LlamaDecoderLayer-1.RMSNorm-input.hidden_states",
		 "model.layers.1.input_layernorm.inputs.hidden_states", -1},
		{"1.LlamaModel-3.LlamaDecoderLayer-1.RMSNorm-output.hidden_states", NULL, -1},
		{"1.LlamaModel-2.LlamaDecoderLayer-4.GatedMLP-2.Linear-output.1", "model.layers.0.mlp.down_proj", -1},
		{"1.LlamaModel-2.LlamaDecoderLayer-4.GatedMLP-1.Linear-output.1", "model.layers.0.mlp.gate_up_proj", -1},
		{"1.LlamaModel-2.LlamaDecoderLayer-2.LlamaAttention-2.Linear-1.AllReduce-output.1", NULL, -1},
		{"1.LlamaModel-2.LlamaDecoderLayer-2.LlamaAttention-output.position_ids", "model.layers.0.self_attn", -1},
		{"1.LlamaModel-4.RMSNorm-output.2", "model.norm", -1},
		{"2.LMHead-output.1", "lm_head", -1},
	};
	tb_trtllm_name names[sizeof rows / sizeof *rows] = {0}, two[3] = {0}, mixed[2] = {0};
	size_t n = sizeof rows / sizeof *rows;
	(void)state;

	for (size_t i = 0; i < n; i++)
		names[i].in = rows[i].in;
	assert_int_equal(tb_trtllm_rename(names, n), 1);
	for (size_t i = 0; i < n; i++) {
		if ((names[i].out == NULL) != (rows[i].out == NULL) || (rows[i].out && strcmp(names[i].out, rows[i].out)))
			fail_msg("%s: got %s, want %s", rows[i].in, names[i].out ? names[i].out : "(internal)",
				 rows[i].out ? rows[i].out : "(internal)");
		assert_int_equal(names[i].step, rows[i].step);
		free(names[i].out);
	}
	/* the model called twice, the head after each: two steps */
	two[0].in = "1.LlamaModel-1.Embedding-output.1";
	two[1].in = "3.LlamaModel-1.Embedding-output.1";
	two[2].in = "4.LMHead-output.1";
	assert_int_equal(tb_trtllm_rename(two, 3), 1);
	assert_int_equal(two[0].step, 0);
	assert_int_equal(two[1].step, 1);
	assert_int_equal(two[2].step, 1);
	for (int i = 0; i < 3; i++)
		free(two[i].out);
	mixed[0].in = "1.LlamaModel-1.Embedding-output.1";
	mixed[1].in = "model.layers.0.mlp";
	assert_int_equal(tb_trtllm_rename(mixed, 2), 0);
	assert_null(mixed[0].out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tag_spellings),
		cmocka_unit_test(test_steps_and_stitch),
		cmocka_unit_test(test_joins_by_tap),
		cmocka_unit_test(test_fused_qkv_from_the_other_tree),
		cmocka_unit_test(test_shard_specs),
		cmocka_unit_test(test_trtllm_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
