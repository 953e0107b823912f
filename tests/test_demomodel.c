#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "demobugs.h"
#include "demomodel.h"
#include "diagnose/cause.h"
#include "tensor/dtype.h"
#include "testutil.h"

#define BUG(id) ((demo_bugset)1 << DEMO_BUG_##id)

/* The reference and a candidate of the default model (or of cfg). */
typedef struct pair {
	demo_model *m;
	demo_run ref, cand;
} pair;

static void pair_run(pair *p, const demo_config *cfg, demo_bugset bugs, bool sub)
{
	demo_config def;

	demo_config_init(&def);
	p->m = demo_model_new(cfg ? cfg : &def);
	assert_non_null(p->m);
	assert_int_equal(demo_forward(p->m, 0, sub, &p->ref), 0);
	assert_int_equal(demo_forward(p->m, bugs, sub, &p->cand), 0);
	assert_int_equal(p->ref.n_taps, p->cand.n_taps);
}

static void pair_free(pair *p)
{
	demo_run_free(&p->ref);
	demo_run_free(&p->cand);
	demo_model_free(p->m);
}

static const demo_tap *tap(const demo_run *r, int layer, const char *name)
{
	const demo_tap *t = demo_run_find(r, layer, name);

	if (!t)
		fail_msg("no tap %d %s", layer, name);
	return t;
}

/* Rows [lo, hi) of a tap bit-identical between the two runs? */
static bool rows_equal(const pair *p, const demo_tap *t, int64_t lo, int64_t hi)
{
	const demo_tap *c = tap(&p->cand, t->layer, t->tap);

	return !memcmp(t->data + lo * t->cols, c->data + lo * t->cols, (size_t)((hi - lo) * t->cols) * sizeof(float));
}

static void test_taps_in_forward_order(void **state)
{
	static const char *layer_taps[] = {"attn_norm", "attn.q", "attn.k", "attn.v", "attn.o", "attn",
					   "mlp_norm", "mlp.gate", "mlp.up", "mlp.down", "mlp", "block"};
	demo_config cfg;
	demo_model *m;
	demo_run r;
	size_t k = 0;

	(void)state;
	demo_config_init(&cfg);
	cfg.layers = 3;
	m = demo_model_new(&cfg);
	assert_int_equal(demo_forward(m, 0, true, &r), 0);
	assert_int_equal(r.n_taps, 1 + 3 * 12 + 2);
	assert_string_equal(r.taps[k++].tap, "embed");
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < 12; i++, k++) {
			assert_int_equal(r.taps[k].layer, l);
			assert_string_equal(r.taps[k].tap, layer_taps[i]);
		}
	assert_string_equal(r.taps[k++].tap, "final_norm");
	assert_string_equal(r.taps[k].tap, "logits");
	assert_int_equal(r.taps[k].cols, DEMO_VOCAB);
	assert_int_equal(tap(&r, 0, "attn.k")->cols, DEMO_KV_HEADS * DEMO_HEAD_DIM);
	assert_int_equal(tap(&r, 0, "mlp.up")->cols, DEMO_MLP);
	/* o_proj and down_proj are their groups' outputs, as in Hugging Face models */
	assert_memory_equal(tap(&r, 1, "attn.o")->data, tap(&r, 1, "attn")->data, 16 * DEMO_HIDDEN * sizeof(float));
	assert_memory_equal(tap(&r, 1, "mlp.down")->data, tap(&r, 1, "mlp")->data, 16 * DEMO_HIDDEN * sizeof(float));
	assert_int_equal(r.tokens[0], 1);
	demo_run_free(&r);
	assert_int_equal(demo_forward(m, 0, false, &r), 0);
	assert_int_equal(r.n_taps, 1 + 3 * 5 + 2);
	demo_run_free(&r);
	demo_model_free(m);
}

static void test_none_is_exact_and_finite(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, 0, true);
	for (size_t i = 0; i < p.ref.n_taps; i++) {
		const demo_tap *t = &p.ref.taps[i];
		assert_true(rows_equal(&p, t, 0, t->rows));
		for (int64_t j = 0; j < t->rows * t->cols; j++)
			assert_true(isfinite(t->data[j]));
	}
	pair_free(&p);
}

/* Causal attention: a token only changes its own and later positions. */
static void test_causal(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(TOKENIZER), false);
	assert_int_not_equal(p.ref.tokens[5], p.cand.tokens[5]);
	for (size_t i = 0; i < p.ref.n_taps; i++) {
		const demo_tap *t = &p.ref.taps[i];
		assert_true(rows_equal(&p, t, 0, 5));
		assert_false(rows_equal(&p, t, 5, 6));
	}
	pair_free(&p);
}

/* RoPE rotates nothing at position 0, so position 0 never sees a RoPE bug. */
static void test_rope_bugs_spare_position_0(void **state)
{
	const demo_bugset bugs[] = {BUG(ROPE_STYLE), BUG(ROPE_THETA), BUG(ROTATE_HALF_SIGN), BUG(PARTIAL_ROPE)};

	(void)state;
	for (size_t b = 0; b < sizeof bugs / sizeof *bugs; b++) {
		pair p;
		pair_run(&p, NULL, bugs[b], true);
		for (size_t i = 0; i < p.ref.n_taps; i++)
			assert_true(rows_equal(&p, &p.ref.taps[i], 0, 1));
		assert_false(rows_equal(&p, tap(&p.ref, 0, "attn.q"), 1, 2));
		assert_true(rows_equal(&p, tap(&p.ref, 0, "attn.v"), 0, p.ref.seq));
		pair_free(&p);
	}
}

/* The RoPE scaling bugs, each on the model it implies: every tap before
 * the table's layer is exact, its attn.q (after RoPE) is not, and position
 * 0 is exact there unless an attention factor scales it. */
static void test_rope_scaling_bugs(void **state)
{
	const demo_bugset bugs[] = {BUG(ROPE_SCALING_MISSING), BUG(ROPE_SCALING_ALL), BUG(ROPE_LLAMA3), BUG(YARN_MSCALE),
				    BUG(YARN_MSCALE_TWICE), BUG(YARN_RAMP), BUG(NOPE_INVERTED)};
	char msg[128];

	(void)state;
	for (size_t b = 0; b < sizeof bugs / sizeof *bugs; b++) {
		demo_config cfg;
		pair p;
		int layer = 0;
		demo_config_init(&cfg);
		assert_int_equal(demo_config_imply(&cfg, bugs[b], msg, sizeof msg), 0);
		pair_run(&p, &cfg, bugs[b], true);
		for (int i = 0; i < DEMO_N_BUGS; i++)
			if (bugs[b] >> i & 1)
				layer = demo_bugs[i].layer;
		for (size_t i = 0; i < p.ref.n_taps && p.ref.taps[i].layer < layer; i++)
			assert_true(rows_equal(&p, &p.ref.taps[i], 0, p.ref.seq));
		const demo_tap *q = tap(&p.ref, layer, "attn.q");
		assert_false(rows_equal(&p, q, 1, p.ref.seq));
		assert_int_equal(rows_equal(&p, q, 0, 1), !(bugs[b] & (BUG(YARN_MSCALE) | BUG(YARN_MSCALE_TWICE))));
		pair_free(&p);
	}
}

/* A bug's model option is implied, and a contradicting one refused. */
static void test_rope_options(void **state)
{
	demo_config cfg;
	char msg[128];

	(void)state;
	demo_config_init(&cfg);
	assert_int_equal(demo_config_imply(&cfg, BUG(YARN_RAMP), msg, sizeof msg), 0);
	assert_int_equal(cfg.rope_scaling, DEMO_ROPE_YARN);
	demo_config_init(&cfg);
	assert_int_equal(demo_config_imply(&cfg, BUG(NOPE_INVERTED), msg, sizeof msg), 0);
	assert_int_equal(cfg.nope, 4);
	demo_config_init(&cfg);
	cfg.rope_scaling = DEMO_ROPE_LINEAR;
	cfg.rope_factor = 4;
	assert_int_equal(demo_config_imply(&cfg, BUG(ROPE_LLAMA3), msg, sizeof msg), -1);
	assert_string_equal(msg, "rope-llama3 needs --rope-scaling llama3:F");
	demo_config_init(&cfg);
	cfg.layer_types = true;
	assert_int_equal(demo_config_imply(&cfg, BUG(YARN_MSCALE), msg, sizeof msg), -1);
	assert_string_equal(msg, "a yarn bug scales every layer: not with --layer-types");
	demo_config_init(&cfg);
	assert_int_equal(demo_config_imply(&cfg, BUG(ROPE_DYNAMIC), msg, sizeof msg), 0);
	assert_int_equal(cfg.rope_scaling, DEMO_ROPE_DYNAMIC);
	assert_true(cfg.rope_factor == 4);
	demo_config_init(&cfg);
	assert_int_equal(demo_config_imply(&cfg, BUG(ROPE_DYNAMIC) | BUG(ROPE_LLAMA3), msg, sizeof msg), -1);
	assert_string_equal(msg, "rope-llama3, rope-dynamic and the yarn bugs need different --rope-scaling");
}

/* Which family a bug implies, which it is refused on. */
static void test_moe_family_options(void **state)
{
	demo_config cfg;
	char msg[128];

	(void)state;
	demo_config_init(&cfg);
	cfg.moe = true;
	assert_int_equal(demo_config_imply(&cfg, BUG(MOE_GROUP), msg, sizeof msg), 0);
	assert_int_equal(cfg.moe_family, DEMO_MOE_DEEPSEEK);
	demo_config_init(&cfg);
	cfg.moe = true;
	assert_int_equal(demo_config_imply(&cfg, BUG(MOE_SHARED_GATE), msg, sizeof msg), 0);
	assert_int_equal(cfg.moe_family, DEMO_MOE_QWEN2);
	demo_config_init(&cfg);
	cfg.moe = true;
	cfg.moe_family = DEMO_MOE_MIXTRAL;
	assert_int_equal(demo_config_imply(&cfg, BUG(MOE_SHARED), msg, sizeof msg), -1);
	assert_string_equal(msg,
			    "moe-shared: the mixtral router has nothing it changes (use --moe-router deepseek or qwen2)");
	assert_int_equal(demo_config_imply(&cfg, BUG(MOE_TOPK_K), msg, sizeof msg), 0);
	demo_config_init(&cfg);
	assert_int_equal(demo_config_imply(&cfg, BUG(MOE_GROUP), msg, sizeof msg), 0);
	assert_false(cfg.moe);
}

/* Layer 0's top-k weights of a run, summed per position, and the number
 * of expert groups its choices span at most. */
static void routed(const demo_run *r, int k, double *wsum_lo, double *wsum_hi, int *groups)
{
	const demo_tap *ids = tap(r, 0, "mlp.topk_ids"), *w = tap(r, 0, "mlp.topk_weights");

	assert_int_equal(ids->cols, k);
	*wsum_lo = INFINITY;
	*wsum_hi = -INFINITY;
	*groups = 0;
	for (int64_t i = 0; i < ids->rows; i++) {
		double sum = 0;
		unsigned seen = 0;
		int n = 0;
		for (int j = 0; j < k; j++) {
			sum += w->data[i * k + j];
			seen |= 1u << ((int)ids->data[i * k + j] / (DEMO_EXPERTS / DEMO_GROUPS));
		}
		for (; seen; seen &= seen - 1)
			n++;
		*wsum_lo = fmin(*wsum_lo, sum);
		*wsum_hi = fmax(*wsum_hi, sum);
		*groups = n > *groups ? n : *groups;
	}
}

/* Each MoE family routes as its model does, and its bugs change what they must. */
static void test_moe_families(void **state)
{
	demo_config cfg;
	pair p;
	double lo, hi;
	int groups;

	(void)state;
	demo_config_init(&cfg);
	cfg.moe = true;
	cfg.moe_family = DEMO_MOE_DEEPSEEK;
	pair_run(&p, &cfg, BUG(MOE_GROUP), DEMO_TAPS_SUB);
	routed(&p.ref, DEMO_TOPK, &lo, &hi, &groups);
	assert_true(fabs(lo - DEMO_ROUTED_SCALE) < 1e-5 && fabs(hi - DEMO_ROUTED_SCALE) < 1e-5);
	assert_true(groups <= DEMO_TOPK_GROUP);
	routed(&p.cand, DEMO_TOPK, &lo, &hi, &groups);
	assert_true(groups > DEMO_TOPK_GROUP || !rows_equal(&p, tap(&p.ref, 0, "mlp.topk_ids"), 0, cfg.seq));
	pair_free(&p);
	pair_run(&p, &cfg, BUG(MOE_BIAS_WEIGHTS), DEMO_TAPS_SUB);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "mlp.topk_ids"), 0, cfg.seq));
	assert_false(rows_equal(&p, tap(&p.ref, 0, "mlp.topk_weights"), 0, cfg.seq));
	pair_free(&p);

	cfg.moe_family = DEMO_MOE_MIXTRAL;
	pair_run(&p, &cfg, BUG(MOE_TOPK_K), DEMO_TAPS_SUB);
	routed(&p.ref, DEMO_TOPK, &lo, &hi, &groups);
	assert_true(fabs(lo - 1) < 1e-5 && fabs(hi - 1) < 1e-5);
	assert_null(demo_run_find(&p.ref, 0, "mlp.shared"));
	routed(&p.cand, DEMO_TOPK_BUG, &lo, &hi, &groups);
	pair_free(&p);

	cfg.moe_family = DEMO_MOE_QWEN2;
	pair_run(&p, &cfg, BUG(MOE_SHARED_GATE), DEMO_TAPS_SUB);
	routed(&p.ref, DEMO_TOPK, &lo, &hi, &groups);
	assert_true(hi < 1);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "mlp.experts"), 0, cfg.seq));
	assert_false(rows_equal(&p, tap(&p.ref, 0, "mlp.shared"), 0, cfg.seq));
	pair_free(&p);
}

/* Rows before the bug's first position are exact at every tap. */
static void check_from_position(const demo_config *cfg, demo_bugset bug, int from)
{
	pair p;

	pair_run(&p, cfg, bug, false);
	for (size_t i = 0; i < p.ref.n_taps; i++)
		assert_true(rows_equal(&p, &p.ref.taps[i], 0, from));
	assert_false(rows_equal(&p, tap(&p.ref, 0, "attn"), from, from + 1));
	pair_free(&p);
}

static void test_window_and_decode_position(void **state)
{
	demo_config cfg;

	(void)state;
	demo_config_init(&cfg);
	check_from_position(&cfg, BUG(SLIDING_WINDOW), 8);
	cfg.window = 5;
	check_from_position(&cfg, BUG(SLIDING_WINDOW), 5);
	cfg.seq = 128;
	check_from_position(&cfg, BUG(DECODE_POSITION), 100);
}

static void test_gqa_leaves_projections(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(GQA_REPEAT), true);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "attn.q"), 0, p.ref.seq));
	assert_true(rows_equal(&p, tap(&p.ref, 0, "attn.k"), 0, p.ref.seq));
	assert_false(rows_equal(&p, tap(&p.ref, 0, "attn"), 0, 1));
	pair_free(&p);
}

/* cand[i] == k * ref[i] for every element of a tap. */
static void assert_scaled(const pair *p, int layer, const char *name, float k)
{
	const demo_tap *r = tap(&p->ref, layer, name), *c = tap(&p->cand, layer, name);

	for (int64_t i = 0; i < r->rows * r->cols; i++)
		assert_near(c->data[i], k * r->data[i], 1e-6 * fabs(r->data[i]));
}

static void test_scales(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(EMBEDDING_SCALE), false);
	assert_scaled(&p, -1, "embed", 8.0f);
	pair_free(&p);
	pair_run(&p, NULL, BUG(SCALE_MULTIPLIER), false);
	assert_scaled(&p, 0, "attn", 0.5f);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "attn_norm"), 0, p.ref.seq));
	pair_free(&p);
}

static void test_dump_bugs(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(DUMP_OFFSET), false);
	assert_memory_equal(tap(&p.cand, 0, "block")->data, tap(&p.ref, -1, "embed")->data, 16 * 64 * sizeof(float));
	for (int l = 1; l < 4; l++)
		assert_memory_equal(tap(&p.cand, l, "block")->data, tap(&p.ref, l - 1, "block")->data,
				    16 * 64 * sizeof(float));
	assert_true(rows_equal(&p, tap(&p.ref, 3, "mlp"), 0, 16));
	pair_free(&p);
	pair_run(&p, NULL, BUG(DUMP_DUPLICATE), false);
	for (int l = 0; l < 4; l++)
		assert_memory_equal(tap(&p.cand, l, "mlp")->data, tap(&p.ref, 0, "mlp")->data, 16 * 64 * sizeof(float));
	assert_true(rows_equal(&p, tap(&p.ref, 3, "block"), 0, 16));
	pair_free(&p);
	pair_run(&p, NULL, BUG(DUMP_ALIASING), true);
	for (int l = 0; l < 4; l++) {
		assert_memory_equal(tap(&p.cand, l, "mlp")->data, tap(&p.ref, l, "block")->data, 16 * 64 * sizeof(float));
		assert_memory_equal(tap(&p.cand, l, "mlp.down")->data, tap(&p.ref, l, "block")->data,
				    16 * 64 * sizeof(float));
		assert_true(rows_equal(&p, tap(&p.ref, l, "block"), 0, 16));
	}
	pair_free(&p);
}

/* fp8 e4m3 keeps 3 mantissa bits: each K and V element moves by at most
 * 2^-4 of itself, so the decode positions' attention moves by a few
 * percent; the prefill's does not move at all. */
static void test_kv_cache(void **state)
{
	demo_config cfg;
	pair p;

	(void)state;
	demo_config_init(&cfg);
	cfg.prefill = 10;
	pair_run(&p, &cfg, BUG(KV_CACHE), true);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "attn"), 0, 10));
	assert_true(rows_equal(&p, tap(&p.ref, 0, "attn.k"), 0, 16));
	for (int i = 10; i < 16; i++) {
		const float *r = tap(&p.ref, 0, "attn")->data + i * 64, *c = tap(&p.cand, 0, "attn")->data + i * 64;
		double dd = 0, rr = 0;
		for (int k = 0; k < 64; k++) {
			dd += (double)(c[k] - r[k]) * (c[k] - r[k]);
			rr += (double)r[k] * r[k];
		}
		assert_true(dd > 0 && sqrt(dd / rr) < 0.15);
	}
	pair_free(&p);
}

static void test_tokens(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(TOKENIZER_BOS), false);
	assert_int_equal(p.cand.tokens[0], 1);
	assert_int_equal(p.cand.tokens[1], 1);
	for (int i = 2; i < 16; i++)
		assert_int_equal(p.cand.tokens[i], p.ref.tokens[i - 1]);
	assert_memory_equal(tap(&p.cand, -1, "embed")->data + 64, tap(&p.ref, -1, "embed")->data, 15 * 64 * sizeof(float));
	pair_free(&p);
}

static size_t nonfinite(const demo_tap *t)
{
	size_t n = 0;

	for (int64_t i = 0; i < t->rows * t->cols; i++)
		n += !isfinite(t->data[i]);
	return n;
}

static void test_overflow_and_precision(void **state)
{
	pair p;

	(void)state;
	pair_run(&p, NULL, BUG(NAN_OVERFLOW), false);
	assert_int_equal(nonfinite(tap(&p.ref, 1, "mlp")), 0);
	assert_true(nonfinite(tap(&p.cand, 1, "mlp")) > 0);
	assert_int_equal(nonfinite(tap(&p.cand, 1, "mlp_norm")), 0);
	assert_true(rows_equal(&p, tap(&p.ref, 0, "block"), 0, 16));
	pair_free(&p);
	pair_run(&p, NULL, BUG(DTYPE_PRECISION), false);
	for (int l = 0; l < 4; l++) {
		const demo_tap *t = tap(&p.cand, l, "block");
		for (int64_t i = 0; i < t->rows * t->cols; i++)
			assert_true(t->data[i] == tb_bf16_to_f32(tb_f32_to_bf16(t->data[i])));
	}
	/* The weights are bf16 values already: the embeddings are exact. */
	assert_true(rows_equal(&p, tap(&p.ref, -1, "embed"), 0, 16));
	assert_false(rows_equal(&p, tap(&p.ref, 0, "block"), 0, 16));
	pair_free(&p);
}

/* Every bug names a cause id of the rule table: the sweeps score by it. */
static void test_causes_are_ids(void **state)
{
	(void)state;
	for (int i = 0; i < DEMO_N_BUGS; i++) {
		size_t k = 0;
		while (k < tb_n_cause_ids && strcmp(tb_cause_ids[k], demo_bugs[i].cause))
			k++;
		if (k == tb_n_cause_ids)
			fail_msg("%s: cause '%s' is no cause id", demo_bugs[i].name, demo_bugs[i].cause);
	}
}

static void test_parse(void **state)
{
	demo_bugset s;
	char msg[128], buf[256];

	(void)state;
	assert_int_equal(demo_bugs_parse("none", &s, msg, sizeof msg), 0);
	assert_true(s == 0);
	assert_int_equal(demo_bugs_parse("mlp-gating,rope-style", &s, msg, sizeof msg), 0);
	assert_true(s == (BUG(MLP_GATING) | BUG(ROPE_STYLE)));
	demo_bugs_format(s, buf, sizeof buf);
	assert_string_equal(buf, "rope-style,mlp-gating");
	demo_bugs_format(0, buf, sizeof buf);
	assert_string_equal(buf, "none");
	assert_int_equal(demo_bugs_parse("rope", &s, msg, sizeof msg), -1);
	assert_string_equal(msg, "unknown bug 'rope' (mkdemo --list shows them)");
	assert_int_equal(demo_bugs_parse("rope-style,", &s, msg, sizeof msg), -1);
	assert_string_equal(msg, "bug list 'rope-style,' ends with a comma");
	assert_int_equal(demo_bugs_parse("rope-style,,lm-head", &s, msg, sizeof msg), -1);
	assert_string_equal(msg, "unknown bug '' (mkdemo --list shows them)");
	assert_int_equal(demo_bugs_parse("", &s, msg, sizeof msg), -1);
	assert_string_equal(msg, "empty bug list");
}

static void expect_is(const char *bugs, demo_expect_ctx ctx, const char *want)
{
	demo_bugset s;
	char msg[128], got[64];

	assert_int_equal(demo_bugs_parse(bugs, &s, msg, sizeof msg), 0);
	demo_expect(s, &ctx, got, sizeof got);
	if (strcmp(got, want))
		fail_msg("expect %s: got %s, want %s", bugs, got, want);
}

static void test_expect(void **state)
{
	demo_expect_ctx def = {4, 16, 8, false, false, false, 0, false}, sub = {4, 16, 8, true, false, false, 0, false},
			deep = {9, 128, 8, false, false, false, 0, false}, replay = {4, 16, 8, false, true, false, 0, false},
			moe = {4, 16, 8, false, false, true, 0, false}, moe_sub = {4, 16, 8, true, false, true, 0, false};

	(void)state;
	expect_is("none", def, "match");
	expect_is("dtype-precision", def, "close");
	expect_is("rope-style", def, "L0.attn");
	expect_is("rope-style", sub, "L0.attn.q");
	expect_is("gqa-repeat", sub, "L0.attn.o");
	expect_is("scale-multiplier", sub, "L0.attn");
	expect_is("rope-style", replay, "L0.attn.q_rope");
	expect_is("sliding-window", (demo_expect_ctx){4, 16, 8, false, true, false, 0, false}, "L0.attn.core");
	expect_is("moe-scaling", def, "match");
	expect_is("mlp-activation", moe, "match");
	expect_is("moe-scaling", moe, "L0.mlp");
	expect_is("moe-scaling", moe_sub, "L0.mlp.topk_weights");
	expect_is("moe-expert-order", moe_sub, "L0.mlp.experts");
	expect_is("moe-shared,moe-expert-order", moe_sub, "L0.mlp.experts");
	expect_is("moe-softmax", moe_sub, "L0.mlp.topk_ids");
	expect_is("moe-bias-weights", moe, "L0.mlp");
	expect_is("moe-bias-weights", moe_sub, "L0.mlp.topk_weights");
	expect_is("moe-group", moe_sub, "L0.mlp.topk_ids");
	expect_is("moe-topk-k", moe_sub, "L0.mlp.topk_ids");
	expect_is("moe-shared-gate", moe_sub, "L0.mlp.shared");
	expect_is("moe-shared-gate,moe-topk-k", moe_sub, "L0.mlp.topk_ids");
	expect_is("moe-group", def, "match");
	expect_is("mlp-gating", replay, "L0.mlp.act");
	expect_is("mlp-bias", replay, "L0.mlp.down");
	expect_is("weight-mapping", replay, "L2.attn.o");
	expect_is("mlp-gating", sub, "L0.mlp.down");
	expect_is("weight-mapping", def, "L2.attn");
	expect_is("weight-mapping", deep, "L4.attn");
	expect_is("decode-position", def, "match");
	expect_is("decode-position", deep, "L0.attn");
	expect_is("sliding-window", (demo_expect_ctx){4, 8, 8, false, false, false, 0, false}, "match");
	expect_is("sliding-window", def, "L0.attn");
	/* the sliding layers have the window already: the first global one shows it */
	expect_is("sliding-window", (demo_expect_ctx){4, 16, 8, false, false, false, 0, true}, "L1.attn");
	expect_is("tied-embeddings,mlp-activation,rope-style", def, "L0.attn");
	expect_is("tied-embeddings,mlp-activation", def, "L0.mlp");
	expect_is("lm-head,final-norm", def, "final_norm");
	expect_is("dtype-precision,lm-head", def, "logits");
	expect_is("dump-duplicate,nan-overflow,weight-mapping", def, "L1.mlp");
	expect_is("norm-epsilon,embedding-scale", def, "embed");
	expect_is("sinks-dropped", def, "L0.attn");
	expect_is("sinks-dropped", sub, "L0.attn.o");
	expect_is("sinks-dropped", replay, "L0.attn.core");
	expect_is("softcap-missing", replay, "logits");
	expect_is("oai-plus-one", sub, "L0.mlp.down");
	expect_is("oai-clamp", replay, "L0.mlp.act");
	expect_is("oai-clamp", moe, "match");
	expect_is("softcap-missing,oai-clamp", def, "L0.mlp");
	expect_is("kv-cache", def, "L0.attn");
	expect_is("kv-cache", sub, "L0.attn.o");
	expect_is("kv-cache", replay, "L0.attn.core");
	expect_is("kv-cache", (demo_expect_ctx){4, 16, 8, false, false, false, 16, false}, "match");
	expect_is("dump-aliasing", def, "L0.mlp");
	expect_is("dump-aliasing", sub, "L0.mlp.down");
	expect_is("dump-aliasing,weight-mapping", def, "L0.mlp");
	expect_is("rope-scaling-missing", def, "L1.attn");
	expect_is("rope-scaling-missing", sub, "L1.attn.q");
	expect_is("rope-scaling-missing", replay, "L1.attn.q_rope");
	expect_is("yarn-mscale,nope-inverted", sub, "L0.attn.q");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_taps_in_forward_order),
		cmocka_unit_test(test_none_is_exact_and_finite),
		cmocka_unit_test(test_causal),
		cmocka_unit_test(test_rope_bugs_spare_position_0),
		cmocka_unit_test(test_rope_scaling_bugs),
		cmocka_unit_test(test_rope_options),
		cmocka_unit_test(test_moe_family_options),
		cmocka_unit_test(test_moe_families),
		cmocka_unit_test(test_window_and_decode_position),
		cmocka_unit_test(test_gqa_leaves_projections),
		cmocka_unit_test(test_scales),
		cmocka_unit_test(test_dump_bugs),
		cmocka_unit_test(test_kv_cache),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_overflow_and_precision),
		cmocka_unit_test(test_causes_are_ids),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_expect),
	};

	return cmocka_run_group_tests_name("demomodel", tests, NULL, NULL);
}
