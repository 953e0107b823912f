/*
 * test_replay: the replay ops as a table of cases.  Each case writes an
 * op's dumped inputs and both sides' outputs (the reference computing the
 * op one way, the candidate another), replays the cell and expects the
 * cause and variant the replay must confirm, or nothing confirmed.  Every
 * cause a replay names must be a cause id of the rule table.
 *
 * A new replay op or variant is a row here (and its generator when the op
 * is new); the end-to-end sweeps (bench/replaysweep.sh, tests/e2e/replay*.sh)
 * run the ops on whole models.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "diagnose/replay.h"
#include "diagnose/replay_base.h"
#include "diagnose/rules.h"

enum { S = 48, F = 32, E = 8, K = 2, H = 24, V = 40 };

/* How a side computes its op; each case sets the reference's and the candidate's. */
typedef enum how {
	SILU,
	GELU_TANH,
	SILU_SWAPPED,
	SILU_SCALED, /* silu(gate) * up * 1.3: no variant of the op */
	OAI,
	OAI_NO_PLUS_ONE,
	SIGMOID_RENORM_25,   /* sigmoid scores, top-k renormalised, times 2.5 */
	SOFTMAX_RENORM_25,
	SIGMOID_NORENORM_25,
	SIGMOID_RENORM_625,  /* the scaling factor applied twice */
	SIGMOID_RENORM_BIASW, /* a selection bias added into the scores before they are renormalised */
	SIGMOID_RENORM_JITTER, /* each weight off by up to 5%: no variant of the router */
	SELECT_DS,           /* ids: DeepSeek-V3's selection: sigmoid plus a bias, the best 2 of 4 groups */
	SELECT_NO_GROUPS,    /* ... group-limited top-k ignored */
	SELECT_SOFTMAX,      /* ... softmax scores before the top-k */
	SELECT_K3,           /* ... the top 3 */
	SELECT_ONE_WRONG,    /* ... one position's second expert replaced by its weakest: no variant */
	SHARED_GATED,        /* mlp.shared: the shared expert times its sigmoid gate, one per position */
	SHARED_UNGATED,
	SHARED_TWICE,
	SHARED_NONE,
	SHARED_JITTER,       /* each value off by up to 5%: no variant of the combine */
	EXPERTS,             /* mlp.experts with the top-k weights that agree */
	EXPERTS_SCALED,      /* ... times 2.5 at the combine */
	EXPERTS_ROLLED,      /* ... channels rolled by one: no variant of the combine */
	CAPPED_10,           /* logits = 10 tanh(z / 10) */
	CAPPED_25,
	UNCAPPED,
	SCALED_12,           /* logits = 1.2 z: no cap explains it */
} how;

typedef void (*writer)(const char *dir, how h);

/* A deterministic value in [-1, 1). */
static float noise(uint32_t i)
{
	i = i * 2654435761u + 0x9e3779b9u;
	i ^= i >> 15;
	i *= 2246822519u;
	i ^= i >> 13;
	return (float)(i & 0xffffff) / (float)0x800000 - 1.0f;
}

static double silu(double x)
{
	return x / (1 + exp(-x));
}

/* mlp.gate, mlp.up and mlp.act = f(gate, up) of layer 0. */
static void write_act(const char *dir, how h)
{
	static float gate[S * F], up[S * F], act[S * F];
	const int64_t shape[2] = {S, F};

	for (int i = 0; i < S * F; i++) {
		double g = 4 * noise(i), u = 4 * noise(i + 100000), a;
		switch (h) {
		case GELU_TANH: a = 0.5 * g * (1 + tanh(sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u; break;
		case SILU_SWAPPED: a = silu(u) * g; break;
		case SILU_SCALED: a = 1.3 * silu(g) * u; break;
		case OAI:
		case OAI_NO_PLUS_ONE: {
			/* gpt-oss: gate and up scaled so that the clamp at 7 bites */
			double gc = fmin(2.5 * g, 7), uc = fmax(fmin(2.5 * u, 7), -7);
			a = gc / (1 + exp(-1.702 * gc)) * (uc + (h == OAI));
			g *= 2.5;
			u *= 2.5;
			break;
		}
		default: a = silu(g) * u; break;
		}
		gate[i] = (float)g;
		up[i] = (float)u;
		act[i] = (float)a;
	}
	tu_put(dir, "layers.0.mlp.gate", TB_DT_F32, 2, shape, gate);
	tu_put(dir, "layers.0.mlp.up", TB_DT_F32, 2, shape, up);
	tu_put(dir, "layers.0.mlp.act", TB_DT_F32, 2, shape, act);
}

/* mlp.router [S, E], mlp.topk_ids and mlp.topk_weights [S, K] of layer 0:
 * the ids are the top K by score on both sides, the weights as h says. */
static void write_router(const char *dir, how h)
{
	static float scores[S * E], ids[S * K], weights[S * K];
	const int64_t se[2] = {S, E}, sk[2] = {S, K};

	for (int p = 0; p < S; p++) {
		float *row = scores + p * E;
		double top = -INFINITY, sum = 0, chosen = 0, w[K];
		for (int e = 0; e < E; e++) {
			row[e] = 3 * noise(p * E + e + 7);
			top = fmax(top, row[e]);
		}
		for (int e = 0; e < E; e++)
			sum += exp(row[e] - top);
		for (int j = 0; j < K; j++) {
			int best = -1;
			for (int e = 0; e < E; e++) {
				bool taken = false;
				for (int i = 0; i < j; i++)
					taken |= (int)ids[p * K + i] == e;
				if (!taken && (best < 0 || row[e] > row[best]))
					best = e;
			}
			ids[p * K + j] = (float)best;
			w[j] = h == SOFTMAX_RENORM_25 ? exp(row[best] - top) / sum : 1 / (1 + exp(-row[best]));
			chosen += w[j];
		}
		if (h == SIGMOID_RENORM_BIASW)
			for (int j = 0; j < K; j++) {
				w[j] += 0.05 * noise((uint32_t)ids[p * K + j] + 333);
				chosen += 0.05 * noise((uint32_t)ids[p * K + j] + 333);
			}
		for (int j = 0; j < K; j++) {
			double x = h == SIGMOID_NORENORM_25 ? w[j] : w[j] / chosen;
			x *= h == SIGMOID_RENORM_JITTER ? 1 + 0.05 * noise(p * K + j + 4444) : 1;
			weights[p * K + j] = (float)(x * (h == SIGMOID_RENORM_625 ? 6.25 : 2.5));
		}
	}
	tu_put(dir, "layers.0.mlp.router", TB_DT_F32, 2, se, scores);
	tu_put(dir, "layers.0.mlp.topk_ids", TB_DT_F32, 2, sk, ids);
	tu_put(dir, "layers.0.mlp.topk_weights", TB_DT_F32, 2, sk, weights);
}

/* mlp.router [S, E] and mlp.topk_ids [S, k] of layer 0, chosen as h says
 * (the bias and the groups as DeepSeek-V3 has them: 4 groups of 2, each
 * scored by its two biased scores' sum, the best 2 kept). */
static void write_select(const char *dir, how h)
{
	enum { GROUPS = 4, PER = E / GROUPS };
	static float scores[S * E], ids[S * 3];
	int k = h == SELECT_K3 ? 3 : K;
	const int64_t se[2] = {S, E}, sk[2] = {S, k};

	for (int p = 0; p < S; p++) {
		float *row = scores + p * E;
		double c[E], gs[GROUPS], sum = 0;
		bool taken[E] = {false}, kept[GROUPS] = {false};
		for (int e = 0; e < E; e++) {
			row[e] = 2 * noise(p * E + e + 31);
			sum += exp(row[e]);
		}
		for (int e = 0; e < E; e++)
			c[e] = (h == SELECT_SOFTMAX ? exp(row[e]) / sum : 1 / (1 + exp(-row[e]))) + 0.08 * noise(e + 77);
		for (int g = 0; g < GROUPS; g++)
			gs[g] = c[g * PER] + c[g * PER + 1];
		for (int j = 0; j < 2; j++) {
			int best = -1;
			for (int g = 0; g < GROUPS; g++)
				if (!kept[g] && (best < 0 || gs[g] > gs[best]))
					best = g;
			kept[best] = true;
		}
		for (int j = 0; j < k; j++) {
			int best = -1;
			for (int e = 0; e < E; e++)
				if (!taken[e] && (h == SELECT_NO_GROUPS || kept[e / PER]) && (best < 0 || c[e] > c[best]))
					best = e;
			taken[best] = true;
			ids[p * k + j] = (float)best;
		}
		if (h == SELECT_ONE_WRONG && p == 5) {
			int low = -1;
			for (int e = 0; e < E; e++)
				if (!taken[e] && (low < 0 || c[e] < c[low]))
					low = e;
			ids[p * k + 1] = (float)low;
		}
	}
	tu_put(dir, "layers.0.mlp.router", TB_DT_F32, 2, se, scores);
	tu_put(dir, "layers.0.mlp.topk_ids", TB_DT_F32, 2, sk, ids);
}

/* mlp.shared [S, H] of layer 0 as h says. */
static void write_shared(const char *dir, how h)
{
	static float out[S * H];
	const int64_t sh[2] = {S, H};

	for (int p = 0; p < S; p++) {
		double g = 1 / (1 + exp(-2 * noise(p + 808)));
		for (int c = 0; c < H; c++) {
			double x = noise(p * H + c + 909);
			out[p * H + c] = (float)(h == SHARED_UNGATED ? x
						 : h == SHARED_TWICE ? x * g * g
						 : h == SHARED_NONE ? 0
						 : x * g * (h == SHARED_JITTER ? 1 + 0.05 * noise(p * H + c) : 1));
		}
	}
	tu_put(dir, "layers.0.mlp.shared", TB_DT_F32, 2, sh, out);
}

/* mlp.topk_ids and mlp.topk_weights (the same on both sides) and
 * mlp.experts [S, H] of layer 0 as h says. */
static void write_experts(const char *dir, how h)
{
	static float ids[S * K], w[S * K], out[S * H];
	const int64_t sk[2] = {S, K}, sh[2] = {S, H};

	for (int p = 0; p < S; p++) {
		ids[p * K] = (float)(p % E);
		ids[p * K + 1] = (float)((p + 3) % E);
		w[p * K] = (float)(1 + noise(p + 1212) / 2);
		w[p * K + 1] = 2.5f - w[p * K];
		for (int c = 0; c < H; c++)
			out[p * H + c] = (float)((h == EXPERTS_SCALED ? 2.5 : 1) *
						 noise(p * H + (h == EXPERTS_ROLLED ? (c + 1) % H : c) + 1313));
	}
	tu_put(dir, "layers.0.mlp.topk_ids", TB_DT_F32, 2, sk, ids);
	tu_put(dir, "layers.0.mlp.topk_weights", TB_DT_F32, 2, sk, w);
	tu_put(dir, "layers.0.mlp.experts", TB_DT_F32, 2, sh, out);
}

/* final_norm [S, H] (equal on both sides) and logits [S, V]. */
static void write_logits(const char *dir, how h)
{
	static float norm[S * H], logits[S * V];
	const int64_t sh[2] = {S, H}, sv[2] = {S, V};

	for (int i = 0; i < S * H; i++)
		norm[i] = noise(i + 555);
	for (int i = 0; i < S * V; i++) {
		double z = 14 * noise(i + 999);
		logits[i] = (float)(h == CAPPED_10 ? 10 * tanh(z / 10) : h == CAPPED_25 ? 25 * tanh(z / 25) : h == SCALED_12 ? 1.2 * z : z);
	}
	tu_put(dir, "final_norm", TB_DT_F32, 2, sh, norm);
	tu_put(dir, "logits", TB_DT_F32, 2, sv, logits);
}

typedef struct replay_case {
	const char *name;
	writer write;
	how ref, cand;
	const char *cell;    /* the cell replayed */
	const char *cause;   /* the cause confirmed, or NULL: nothing */
	const char *variant; /* a part of the confirmed variant's text */
} replay_case;

static const replay_case cases[] = {
	{"act: gelu (tanh) for silu", write_act, SILU, GELU_TANH, "L0.mlp.act", "mlp-activation", "gelu (tanh)"},
	{"act: gate and up swapped", write_act, SILU, SILU_SWAPPED, "L0.mlp.act", "mlp-gating", "swapped"},
	{"act: scaled, no variant of the op", write_act, SILU, SILU_SCALED, "L0.mlp.act", NULL, NULL},
	{"act: the same op", write_act, SILU, SILU, "L0.mlp.act", NULL, NULL},
	{"act: swiglu-oai without its +1", write_act, OAI, OAI_NO_PLUS_ONE, "L0.mlp.act", "mlp-activation", "+1"},
	{"act: swiglu-oai for silu", write_act, SILU, OAI, "L0.mlp.act", "mlp-activation", "swiglu-oai"},
	{"router: softmax for sigmoid", write_router, SIGMOID_RENORM_25, SOFTMAX_RENORM_25, "L0.mlp.topk_weights",
	 "moe-routing", "softmax"},
	{"router: not renormalised", write_router, SIGMOID_RENORM_25, SIGMOID_NORENORM_25, "L0.mlp.topk_weights",
	 "moe-routing", "not renormalised"},
	{"router: scaling applied twice", write_router, SIGMOID_RENORM_25, SIGMOID_RENORM_625, "L0.mlp.topk_weights",
	 "moe-routing", "twice"},
	{"router: the same router", write_router, SIGMOID_RENORM_25, SIGMOID_RENORM_25, "L0.mlp.topk_weights", NULL,
	 NULL},
	{"router: the selection bias in the weights", write_router, SIGMOID_RENORM_25, SIGMOID_RENORM_BIASW,
	 "L0.mlp.topk_weights", "moe-routing", "selection bias added into the weights"},
	{"router: weights jittered, no variant", write_router, SIGMOID_RENORM_25, SIGMOID_RENORM_JITTER,
	 "L0.mlp.topk_weights", NULL, NULL},
	{"ids: group-limited top-k ignored", write_select, SELECT_DS, SELECT_NO_GROUPS, "L0.mlp.topk_ids", "moe-routing",
	 "group-limited top-k ignored"},
	{"ids: softmax before the top-k", write_select, SELECT_DS, SELECT_SOFTMAX, "L0.mlp.topk_ids", "moe-routing",
	 "softmax scores before the top-k"},
	{"ids: the top 3 for the top 2", write_select, SELECT_DS, SELECT_K3, "L0.mlp.topk_ids", "moe-routing", "top-3"},
	{"ids: one wrong expert, no variant", write_select, SELECT_DS, SELECT_ONE_WRONG, "L0.mlp.topk_ids", NULL, NULL},
	{"ids: the same selection", write_select, SELECT_DS, SELECT_DS, "L0.mlp.topk_ids", NULL, NULL},
	{"shared: left out", write_shared, SHARED_GATED, SHARED_NONE, "L0.mlp.shared", "shared-expert", "left out"},
	{"shared: gate not applied", write_shared, SHARED_GATED, SHARED_UNGATED, "L0.mlp.shared", "shared-expert",
	 "gate not applied"},
	{"shared: gate applied twice", write_shared, SHARED_GATED, SHARED_TWICE, "L0.mlp.shared", "shared-expert",
	 "applied twice"},
	{"shared: jittered, no variant", write_shared, SHARED_GATED, SHARED_JITTER, "L0.mlp.shared", NULL, NULL},
	{"shared: the same", write_shared, SHARED_GATED, SHARED_GATED, "L0.mlp.shared", NULL, NULL},
	{"experts: scaled at the combine", write_experts, EXPERTS, EXPERTS_SCALED, "L0.mlp.experts", "moe-routing",
	 "scaled by 2.5 at the combine"},
	{"experts: channels rolled, no variant", write_experts, EXPERTS, EXPERTS_ROLLED, "L0.mlp.experts", NULL, NULL},
	{"logits: soft-cap dropped", write_logits, CAPPED_10, UNCAPPED, "logits", "final-softcap", "dropped"},
	{"logits: soft-cap added", write_logits, UNCAPPED, CAPPED_10, "logits", "final-softcap", "added"},
	{"logits: the same head", write_logits, CAPPED_10, CAPPED_10, "logits", NULL, NULL},
	{"logits: another cap", write_logits, CAPPED_10, CAPPED_25, "logits", "final-softcap", "25 instead of 10"},
	{"logits: scaled, not capped", write_logits, UNCAPPED, SCALED_12, "logits", NULL, NULL},
	{"logits: capped, then scaled", write_logits, CAPPED_10, SCALED_12, "logits", NULL, NULL},
};

static bool is_cause_id(const char *id)
{
	for (size_t i = 0; i < tb_n_cause_ids; i++)
		if (!strcmp(tb_cause_ids[i], id))
			return true;
	return false;
}

static void test_cases(void **state)
{
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const replay_case *c = &cases[i];
		const char *dir = tu_tmpdir();
		char ref[4200], cand[4200];
		tu_compared g;
		tb_replay rp;
		tb_err err;
		long cell = -1;

		snprintf(ref, sizeof ref, "%s/%zu/ref", dir, i);
		snprintf(cand, sizeof cand, "%s/%zu/cand", dir, i);
		c->write(ref, c->ref);
		c->write(cand, c->cand);
		tu_compare(&g, ref, cand, NULL);
		for (size_t k = 0; k < g.res->n_cells; k++) {
			char name[96];
			tb_cell_name(&g.res->cells[k].cell, name, sizeof name);
			if (!strcmp(name, c->cell))
				cell = (long)k;
		}
		if (cell < 0)
			fail_msg("%s: no cell %s", c->name, c->cell);
		if (tb_replay_cell(&g.s, g.res, cell, 0, 0, &rp, &err) < 0)
			fail_msg("%s: %s", c->name, err.msg);
		if (!rp.tried)
			fail_msg("%s: not replayed: %s", c->name, rp.note);
		if (rp.cause && !is_cause_id(rp.cause))
			fail_msg("%s: the replay names '%s', no cause id of the rule table", c->name, rp.cause);
		if (!c->cause && rp.cause)
			fail_msg("%s: confirmed %s (%s), expected nothing", c->name, rp.cause, rp.variant);
		if (c->cause && (!rp.cause || strcmp(rp.cause, c->cause) || !strstr(rp.variant, c->variant)))
			fail_msg("%s: expected %s (\"%s\"), got %s (\"%s\"): %s", c->name, c->cause, c->variant,
				 rp.cause ? rp.cause : "nothing", rp.variant, rp.note);
		tu_compared_done(&g);
	}
}

/* A theta changed alone: rope-theta between round values, a dynamic NTK
 * base (rope-scaling) otherwise, and near a round value where the fit
 * cannot tell (tb_replay_theta_change). */
static void test_theta_change(void **state)
{
	static const struct {
		double theta, theta0;
		int rot;
		int64_t length;
		bool resolved;
		const char *cause, *name;
	} changes[] = {
		{5e5, 1e4, 8, 256, true, "rope-theta", "theta 5e+05 (the reference: 1e+04)"},
		{5e5, 1e4, 8, 256, false, "rope-theta", "theta 5e+05 (the reference: 1e+04)"},
		/* 1.25% off a base at factor 2 and original 32: a theta still */
		{5e5, 1e4, 16, 512, false, "rope-theta", "theta 5e+05 (the reference: 1e+04)"},
		{1e4, 3.06e5, 8, 64, true, "rope-scaling", "no dynamic NTK: theta 1e+04, the reference's 3.06e+05"},
		{3.06e5, 1e4, 8, 64, true, "rope-scaling", "dynamic NTK: theta 3.06e+05 from 1e+04 at 64 positions"},
		/* 1e4 (4 * 256 / 16 - 3)^(8/6) = 2.401e6, fitted as 2.4e6 */
		{1e4, 2.4e6, 8, 256, false, "rope-scaling", "no dynamic NTK: theta 1e+04, the reference's 2.4e+06"},
		{1e4, 2.4e6, 8, 256, true, "rope-theta", "theta 1e+04 (the reference: 2.4e+06)"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
		char name[64];
		tb_cause_id id = tb_replay_theta_change(changes[i].theta, changes[i].theta0, changes[i].rot,
							changes[i].length, changes[i].resolved, name, sizeof name);
		assert_string_equal(tb_cause_ids[id - 1], changes[i].cause);
		assert_string_equal(name, changes[i].name);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_theta_change),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
