#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggmlgraph.h"

/* What a node computes from the weight it is given: llama.cpp's GGUF
 * tensor names (gguf-py's TENSOR_NAMES), "blk.N." before a layer's.
 * input: the tap of the other operand, o_proj's and down_proj's inputs. */
static const struct op_tap {
	const char *op;
	const char *weight; /* after "blk.N." when layered */
	bool layered;
	const char *tap, *input;
} op_taps[] = {
	{"GET_ROWS", "token_embd.weight", false, "embed", NULL},
	{"MUL", "attn_norm.weight", true, "attn_norm", NULL},
	{"MUL_MAT", "attn_q.weight", true, "attn.q", NULL},
	{"MUL_MAT", "attn_k.weight", true, "attn.k", NULL},
	{"MUL_MAT", "attn_v.weight", true, "attn.v", NULL},
	{"MUL_MAT", "attn_qkv.weight", true, "attn.qkv", NULL},
	{"MUL", "attn_q_norm.weight", true, "attn.q_norm", NULL},
	{"MUL", "attn_k_norm.weight", true, "attn.k_norm", NULL},
	{"MUL_MAT", "attn_output.weight", true, "attn", "attn.core"},
	{"MUL", "ffn_norm.weight", true, "mlp_norm", NULL},
	{"MUL_MAT", "ffn_gate.weight", true, "mlp.gate", NULL},
	{"MUL_MAT", "ffn_up.weight", true, "mlp.up", NULL},
	{"MUL_MAT", "ffn_down.weight", true, "mlp", "mlp.act"},
	{"MUL_MAT", "ffn_gate_inp.weight", true, "mlp.router", NULL},
	/* an experts block's projections: one row per selected expert (slot),
	 * [.., n_used, T], the activation between them down's input */
	{"MUL_MAT_ID", "ffn_gate_exps.weight", true, "mlp.gate", NULL},
	{"MUL_MAT_ID", "ffn_up_exps.weight", true, "mlp.up", NULL},
	{"MUL_MAT_ID", "ffn_down_exps.weight", true, "mlp.down", "mlp.act"},
	{"MUL", "output_norm.weight", false, "final_norm", NULL},
	{"MUL_MAT", "output.weight", false, "logits", NULL},
	/* tied embeddings: the logits from the embedding matrix */
	{"MUL_MAT", "token_embd.weight", false, "logits", NULL},
};

/* The tensors of a layer that llama.cpp's GGUF files name ("blk.N." + one
 * of these + ".weight" or ".bias"): gguf-py's TENSOR_NAMES (2026-07, a
 * superset of 2024's). */
static const char *const block_tensors[] = {
	"altup_correct_coef", "altup_correct_scale", "altup_predict_coef", "altup_router", "altup_router_norm",
	"attn_gate", "attn_k", "attn_k_b", "attn_k_norm", "attn_kv_a_mqa", "attn_kv_a_norm", "attn_kv_b", "attn_norm",
	"attn_norm_2", "attn_output", "attn_output_norm", "attn_q", "attn_q_a", "attn_q_a_norm", "attn_q_b",
	"attn_q_norm", "attn_qkv", "attn_rot_embd", "attn_sinks", "attn_sub_norm", "attn_v", "attn_v_b",
	"channel_mix_key", "channel_mix_lerp_k", "channel_mix_lerp_r", "channel_mix_receptance", "channel_mix_value",
	"exp_probs_b", "ffn", "ffn_down", "ffn_down_chexps", "ffn_down_exps", "ffn_down_shexp", "ffn_gate",
	"ffn_gate_chexps", "ffn_gate_exps", "ffn_gate_inp", "ffn_gate_inp_shexp", "ffn_gate_shexp",
	"ffn_gate_up_exps", "ffn_latent_down", "ffn_latent_up", "ffn_norm", "ffn_norm_exps", "ffn_sub_norm", "ffn_up",
	"ffn_up_chexps", "ffn_up_exps", "ffn_up_shexp", "indexer.attn_k", "indexer.attn_q_b", "indexer.k_norm",
	"indexer.proj", "inp_gate", "laurel_l", "laurel_post_norm", "laurel_r", "layer_output_norm",
	"layer_output_scale", "nextn.eh_proj", "nextn.embed_tokens", "nextn.enorm", "nextn.hnorm",
	"nextn.shared_head_head", "nextn.shared_head_norm", "post_attention_norm", "post_ffw_norm", "post_ffw_norm_1",
	"post_ffw_norm_2", "post_norm", "pre_ffw_norm_2", "proj", "shortconv.conv", "shortconv.in_proj",
	"shortconv.out_proj", "ssm_a", "ssm_alpha", "ssm_b_norm", "ssm_ba", "ssm_beta", "ssm_c_norm", "ssm_conv1d",
	"ssm_conv1d_k", "ssm_conv1d_q", "ssm_conv1d_v", "ssm_d", "ssm_dt", "ssm_dt_norm", "ssm_f_a", "ssm_f_b",
	"ssm_g_a", "ssm_g_b", "ssm_in", "ssm_norm", "ssm_out", "ssm_x", "time_mix_a0", "time_mix_a1", "time_mix_a2",
	"time_mix_decay", "time_mix_decay_w1", "time_mix_decay_w2", "time_mix_first", "time_mix_g1", "time_mix_g2",
	"time_mix_gate", "time_mix_k_a", "time_mix_k_k", "time_mix_key", "time_mix_lerp_fused", "time_mix_lerp_g",
	"time_mix_lerp_k", "time_mix_lerp_r", "time_mix_lerp_v", "time_mix_lerp_w", "time_mix_lerp_x", "time_mix_ln",
	"time_mix_output", "time_mix_r_k", "time_mix_receptance", "time_mix_v0", "time_mix_v1", "time_mix_v2",
	"time_mix_value", "time_mix_w0", "time_mix_w1", "time_mix_w2", "vis_attn_output", "vis_attn_qkv", "vis_down",
	"vis_gate", "vis_up",
};

/* Ops that move or select values without computing new ones: the node
 * holds its first operand's tap (carried). */
static const char *const carriers[] = {"RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "CONT", "GET_ROWS"};

/* An experts block's routing: an op of a source with tap (or inner) from
 * gives the node tap (or, with tap NULL, inner to).  Tried in order. */
static const struct moe_step {
	const char *op, *from; /* from: a tap, or "moe.*": an inner */
	const char *tap, *inner;
} moe_steps[] = {
	/* the score function (build_moe_ffn's gating_op) */
	{"SOFT_MAX", "mlp.router", "mlp.router_probs", NULL},
	{"SIGMOID", "mlp.router", "mlp.router_probs", NULL},
	/* the selection: ggml_top_k, or ggml_argsort_top_k's view of an argsort */
	{"TOP_K", "mlp.router_probs", "mlp.topk_ids", NULL},
	{"ARGSORT", "mlp.router_probs", NULL, "moe.argsort"},
	{"VIEW", "moe.argsort", "mlp.topk_ids", NULL},
	/* the weights gathered (GET_ROWS, by the ids: moe_weights), then
	 * renormalised and scaled */
	{"DIV", "mlp.moe_w", "mlp.moe_w_norm", NULL},
	{"SCALE", "mlp.moe_w", "mlp.moe_w_scaled", NULL},
	{"SCALE", "mlp.moe_w_norm", "mlp.moe_w_scaled", NULL},
};

/* RoPE turns a query or key tap, normed or not, into its rotated one (a
 * fused qkv is split by views first, never rotated whole). */
static const struct {
	const char *from, *to;
} ropes[] = {
	{"attn.q", "attn.q_rope"},
	{"attn.q_norm", "attn.q_rope"},
	{"attn.k", "attn.k_rope"},
	{"attn.k_norm", "attn.k_rope"},
};

bool tb_span_eq(tb_span a, tb_span b)
{
	return a.n == b.n && !memcmp(a.p, b.p, a.n);
}

static bool span_is(tb_span s, const char *text)
{
	size_t n = strlen(text);

	return s.n == n && !memcmp(s.p, text, n);
}

static bool span_ends(tb_span s, const char *text)
{
	size_t n = strlen(text);

	return s.n >= n && !memcmp(s.p + s.n - n, text, n);
}

/* Is s the weight w ("blk.N." + w when layered)?  *layer: N, or -1. */
static bool weight_is(tb_span s, const struct op_tap *t, int *layer)
{
	size_t i = 4, n = 0;
	long v = 0;

	*layer = -1;
	if (!t->layered)
		return span_is(s, t->weight);
	if (s.n < 6 || memcmp(s.p, "blk.", 4))
		return false;
	while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9' && n < 6) {
		v = v * 10 + (s.p[i++] - '0');
		n++;
	}
	if (!n || i >= s.n || s.p[i] != '.')
		return false;
	tb_span rest = {s.p + i + 1, s.n - i - 1};
	if (!span_is(rest, t->weight))
		return false;
	*layer = (int)v;
	return true;
}

static int cmp_name(const void *key, const void *elem)
{
	const tb_span *k = key;
	const char *e = *(const char *const *)elem;
	size_t n = strlen(e);
	int c = memcmp(k->p, e, k->n < n ? k->n : n);

	return c ? c : (k->n > n) - (k->n < n);
}

tb_span tb_ggml_unknown_weight(const tb_ggml_node *node)
{
	static const tb_span none = {NULL, 0};

	for (int s = 0; s < 2; s++) {
		tb_span w = node->src[s], base;
		size_t i = 4;
		if (w.n < 6 || memcmp(w.p, "blk.", 4))
			continue;
		while (i < w.n && w.p[i] >= '0' && w.p[i] <= '9')
			i++;
		if (i == 4 || i >= w.n || w.p[i] != '.')
			continue;
		base.p = w.p + i + 1;
		if (span_ends(w, ".weight"))
			base.n = w.n - i - 1 - 7;
		else if (span_ends(w, ".bias"))
			base.n = w.n - i - 1 - 5;
		else
			continue;
		if (!bsearch(&base, block_tensors, sizeof block_tensors / sizeof *block_tensors, sizeof *block_tensors,
			     cmp_name))
			return w;
	}
	return none;
}

bool tb_ggml_is_embed(const tb_ggml_node *node)
{
	return span_is(node->op, "GET_ROWS") && span_is(node->src[0], "token_embd.weight");
}

bool tb_ggml_is_logits(const char *tap)
{
	return tap && !strcmp(tap, "logits");
}

/* The latest node before i, in i's pass, named s; or NULL. */
static tb_ggml_node *source(tb_ggml_node *nodes, size_t i, tb_span s)
{
	if (!s.n)
		return NULL;
	for (size_t j = i; j-- > 0 && nodes[j].pass == nodes[i].pass;)
		if (tb_span_eq(nodes[j].name, s))
			return &nodes[j];
	return NULL;
}

static void set_tap(tb_ggml_node *n, const char *tap, int layer, bool carried)
{
	n->tap = tap;
	n->layer = tap ? layer : -1;
	n->carried = carried;
	n->inner = NULL;
}

static void set_inner(tb_ggml_node *n, const char *inner, int layer)
{
	set_tap(n, NULL, -1, false);
	n->inner = inner;
	n->layer = layer;
}

static bool inner_is(const tb_ggml_node *n, const char *inner)
{
	return n && n->inner && !strcmp(n->inner, inner);
}

/* A node whose op and weight the table knows; its other operand may be
 * an input tap. */
static bool by_weight(tb_ggml_node *nodes, size_t i)
{
	tb_ggml_node *n = &nodes[i];

	for (size_t k = 0; k < sizeof op_taps / sizeof *op_taps; k++) {
		const struct op_tap *t = &op_taps[k];
		int layer;
		if (!span_is(n->op, t->op))
			continue;
		for (int s = 0; s < 2; s++) {
			if (!weight_is(n->src[s], t, &layer))
				continue;
			set_tap(n, t->tap, layer, false);
			tb_ggml_node *in = t->input ? source(nodes, i, n->src[1 - s]) : NULL;
			if (in)
				set_tap(in, t->input, layer, false);
			return true;
		}
	}
	return false;
}

static bool is_carrier(tb_span op)
{
	for (size_t k = 0; k < sizeof carriers / sizeof *carriers; k++)
		if (span_is(op, carriers[k]))
			return true;
	return false;
}

static bool tap_is(const tb_ggml_node *n, const char *tap)
{
	return n && n->tap && !strcmp(n->tap, tap);
}

/* A residual addition: after attention (its output plus the stream),
 * after the MLP (its output, or the routed experts' sum when the block
 * adds nothing beside them, plus the stream after attention). */
static void residual(tb_ggml_node *n, const tb_ggml_node *a, const tb_ggml_node *b)
{
	const tb_ggml_node *attn = tap_is(a, "attn") ? a : tap_is(b, "attn") ? b : NULL;
	const tb_ggml_node *mlp = tap_is(a, "mlp") ? a : tap_is(b, "mlp") ? b : NULL;
	const tb_ggml_node *experts = tap_is(a, "mlp.experts") ? a : tap_is(b, "mlp.experts") ? b : NULL;

	if (attn)
		set_tap(n, "attn.resid", attn->layer, false);
	else if (mlp)
		set_tap(n, "block", mlp->layer, false);
	else if (experts && tap_is(experts == a ? b : a, "attn.resid"))
		set_tap(n, "block", experts->layer, false);
}

/* A node of an experts block's routing or of the sum of its experts'
 * outputs; false when it is none. */
static bool moe_node(tb_ggml_node *n, const tb_ggml_node *a, const tb_ggml_node *b)
{
	for (size_t k = 0; k < sizeof moe_steps / sizeof *moe_steps; k++) {
		const struct moe_step *m = &moe_steps[k];
		bool inner = !strncmp(m->from, "moe.", 4);
		if (!span_is(n->op, m->op) || !a || !(inner ? inner_is(a, m->from) : tap_is(a, m->from)))
			continue;
		if (m->tap)
			set_tap(n, m->tap, a->layer, false);
		else
			set_inner(n, m->inner, a->layer);
		return true;
	}
	/* the probabilities' rows of the selected experts: the combine weights */
	if (span_is(n->op, "GET_ROWS") && tap_is(a, "mlp.router_probs") && tap_is(b, "mlp.topk_ids")) {
		set_tap(n, "mlp.moe_w", a->layer, false);
		return true;
	}
	/* each selected expert's output times its weight, per slot */
	if (span_is(n->op, "MUL") && (tap_is(a, "mlp.down") || tap_is(b, "mlp.down"))) {
		const tb_ggml_node *w = tap_is(a, "mlp.down") ? b : a;
		if (w && w->tap && !strncmp(w->tap, "mlp.moe_w", 9)) {
			set_tap(n, "mlp.weighted", w->layer, false);
			return true;
		}
	}
	/* the sum of the weighted experts' views (carried: each a slot's) */
	if (span_is(n->op, "ADD") && a && b && (tap_is(a, "mlp.weighted") || tap_is(a, "mlp.experts")) &&
	    tap_is(b, "mlp.weighted")) {
		set_tap(n, "mlp.experts", b->layer, false);
		return true;
	}
	return false;
}

static void classify_one(tb_ggml_node *nodes, size_t i)
{
	tb_ggml_node *n = &nodes[i];
	const tb_ggml_node *a = source(nodes, i, n->src[0]), *b = source(nodes, i, n->src[1]);

	if (by_weight(nodes, i) || moe_node(n, a, b))
		return;
	if (span_is(n->op, "ADD") && (span_ends(n->src[0], ".bias") || span_ends(n->src[1], ".bias"))) {
		/* a projection's bias: the sum is the finished tap */
		const tb_ggml_node *x = span_ends(n->src[1], ".bias") ? a : b;
		if (x && x->tap)
			set_tap(n, x->tap, x->layer, x->carried);
		return;
	}
	if (span_is(n->op, "ROPE") && a && a->tap) {
		for (size_t k = 0; k < sizeof ropes / sizeof *ropes; k++)
			if (!strcmp(a->tap, ropes[k].from))
				set_tap(n, ropes[k].to, a->layer, false);
		return;
	}
	if (is_carrier(n->op) && a && a->tap) {
		set_tap(n, a->tap, a->layer, true);
		return;
	}
	if (is_carrier(n->op) && a && a->inner) {
		set_inner(n, a->inner, a->layer);
		return;
	}
	if (span_is(n->op, "ADD"))
		residual(n, a, b);
}

void tb_ggml_classify(tb_ggml_node *nodes, size_t n)
{
	int pass = 0;
	bool embedded = false;

	for (size_t i = 0; i < n; i++) {
		if (tb_ggml_is_embed(&nodes[i])) {
			pass += embedded;
			embedded = true;
		}
		nodes[i].pass = pass;
		set_tap(&nodes[i], NULL, -1, false);
	}
	for (size_t i = 0; i < n; i++)
		classify_one(nodes, i);
}
