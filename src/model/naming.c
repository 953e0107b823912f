#include "config.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/onnxname.h"
#include "base/pattern.h"
#include "model/naming.h"

#define MAP_MAX_BYTES (1024 * 1024)
#define MAP_MAX_RULES 10000
#define MAX_LAYER 1000000

/* Tried in order; the first full match wins. */
const tb_convention tb_conventions[] = {
	/* Hugging Face Llama / Mistral / Qwen / Gemma module paths */
	{"model.embed_tokens", "embed"},
	{"model.layers.{N}.input_layernorm", "attn_norm"},
	{"model.layers.{N}.self_attn.q_proj", "attn.q"},
	{"model.layers.{N}.self_attn.k_proj", "attn.k"},
	{"model.layers.{N}.self_attn.v_proj", "attn.v"},
	{"model.layers.{N}.self_attn.o_proj", "attn.o"},
	{"model.layers.{N}.self_attn.q_norm", "attn.q_norm"},
	{"model.layers.{N}.self_attn.k_norm", "attn.k_norm"},
	/* vLLM and SGLang fuse q/k/v and gate/up into one projection each:
	 * split by the other side's projections or the head counts */
	{"model.layers.{N}.self_attn.qkv_proj", "attn.qkv"},
	/* their attention module inside self_attn (vLLM's Attention, SGLang's
	 * RadixAttention) returns the heads' output before o_proj */
	{"model.layers.{N}.self_attn.attn", "attn.core"},
	{"model.layers.{N}.self_attn", "attn"},
	{"model.layers.{N}.post_attention_layernorm", "mlp_norm"},
	{"model.layers.{N}.mlp.gate_proj", "mlp.gate"},
	{"model.layers.{N}.mlp.up_proj", "mlp.up"},
	{"model.layers.{N}.mlp.down_proj", "mlp.down"},
	{"model.layers.{N}.mlp.act_fn", "mlp.act"},
	{"model.layers.{N}.mlp.gate_up_proj", "mlp.gate_up"},
	/* mixture-of-experts layers (tbisect-dumps(5), Mixture of experts):
	 * HF's router is the MLP's "gate", which pairing gives back to the
	 * gate projection in a layer without experts (moe_cells) */
	{"model.layers.{N}.mlp.gate", "mlp.router"},
	{"model.layers.{N}.mlp.router", "mlp.router"},
	{"model.layers.{N}.block_sparse_moe.gate", "mlp.router"},
	{"model.layers.{N}.feed_forward.router", "mlp.router"},
	{"model.layers.{N}.mlp.router_probs", "mlp.router_probs"},
	/* transformers v5's TopKRouter returns (probabilities, the top-k
	 * weights, the top-k ids) */
	{"model.layers.{N}.mlp.gate.output.1", "mlp.topk_weights"},
	{"model.layers.{N}.mlp.gate.output.2", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.topk.output.1", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.topk.output.0", "mlp.topk_weights"},
	/* the selected experts and their combine weights, as routers and
	 * dumpers name them, under a layer's mlp, block_sparse_moe or
	 * feed_forward */
	{"model.layers.{N}.mlp.router_topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.topk_idx", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.selected_experts", "mlp.topk_ids"},
	{"model.layers.{N}.mlp.router_topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.mlp.topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.mlp.topk_weight", "mlp.topk_weights"},
	{"model.layers.{N}.mlp.routing_weights", "mlp.topk_weights"},
	{"model.layers.{N}.block_sparse_moe.router_topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.block_sparse_moe.topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.block_sparse_moe.topk_idx", "mlp.topk_ids"},
	{"model.layers.{N}.block_sparse_moe.selected_experts", "mlp.topk_ids"},
	{"model.layers.{N}.block_sparse_moe.router_topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.block_sparse_moe.topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.block_sparse_moe.topk_weight", "mlp.topk_weights"},
	{"model.layers.{N}.block_sparse_moe.routing_weights", "mlp.topk_weights"},
	{"model.layers.{N}.feed_forward.router_topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.feed_forward.topk_ids", "mlp.topk_ids"},
	{"model.layers.{N}.feed_forward.topk_idx", "mlp.topk_ids"},
	{"model.layers.{N}.feed_forward.selected_experts", "mlp.topk_ids"},
	{"model.layers.{N}.feed_forward.router_topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.feed_forward.topk_weights", "mlp.topk_weights"},
	{"model.layers.{N}.feed_forward.topk_weight", "mlp.topk_weights"},
	{"model.layers.{N}.feed_forward.routing_weights", "mlp.topk_weights"},
	{"layers.{N}.mlp.router_topk_ids", "mlp.topk_ids"},
	{"layers.{N}.mlp.topk_idx", "mlp.topk_ids"},
	{"layers.{N}.mlp.selected_experts", "mlp.topk_ids"},
	{"layers.{N}.mlp.router_topk_weights", "mlp.topk_weights"},
	{"layers.{N}.mlp.topk_weight", "mlp.topk_weights"},
	{"layers.{N}.mlp.routing_weights", "mlp.topk_weights"},
	{"layers.{N}.block_sparse_moe.router_topk_ids", "mlp.topk_ids"},
	{"layers.{N}.block_sparse_moe.topk_ids", "mlp.topk_ids"},
	{"layers.{N}.block_sparse_moe.topk_idx", "mlp.topk_ids"},
	{"layers.{N}.block_sparse_moe.selected_experts", "mlp.topk_ids"},
	{"layers.{N}.block_sparse_moe.router_topk_weights", "mlp.topk_weights"},
	{"layers.{N}.block_sparse_moe.topk_weights", "mlp.topk_weights"},
	{"layers.{N}.block_sparse_moe.topk_weight", "mlp.topk_weights"},
	{"layers.{N}.block_sparse_moe.routing_weights", "mlp.topk_weights"},
	{"layers.{N}.feed_forward.router_topk_ids", "mlp.topk_ids"},
	{"layers.{N}.feed_forward.topk_ids", "mlp.topk_ids"},
	{"layers.{N}.feed_forward.topk_idx", "mlp.topk_ids"},
	{"layers.{N}.feed_forward.selected_experts", "mlp.topk_ids"},
	{"layers.{N}.feed_forward.router_topk_weights", "mlp.topk_weights"},
	{"layers.{N}.feed_forward.topk_weights", "mlp.topk_weights"},
	{"layers.{N}.feed_forward.topk_weight", "mlp.topk_weights"},
	{"layers.{N}.feed_forward.routing_weights", "mlp.topk_weights"},
	{"model.layers.{N}.mlp.experts", "mlp.experts"},
	{"model.layers.{N}.block_sparse_moe.experts", "mlp.experts"},
	{"model.layers.{N}.feed_forward.experts", "mlp.experts"},
	{"model.layers.{N}.mlp.shared_experts", "mlp.shared"},
	{"model.layers.{N}.feed_forward.shared_expert", "mlp.shared"},
	/* Qwen2-MoE's shared expert before its sigmoid gate, and the gate's
	 * logit ([S, 1]): cells of their own, never mlp.shared */
	{"model.layers.{N}.mlp.shared_expert", "mlp.shared_pre"},
	{"model.layers.{N}.mlp.shared_expert_gate", "mlp.shared_gate"},
	{"model.layers.{N}.block_sparse_moe", "mlp"},
	{"model.layers.{N}.feed_forward", "mlp"},
	{"model.layers.{N}.mlp", "mlp"},
	{"model.layers.{N}", "block"},
	{"model.norm", "final_norm"},
	/* vLLM's and SGLang's fused add-norms return (normed, residual sum):
	 * the next layer's input norm hands on this layer's block output, the
	 * MLP's norm the residual stream after attention (and the final norm
	 * the last layer's block: tb_name_is_last_block) */
	{"model.layers.{M}.input_layernorm.output.1", "block"},
	{"model.layers.{N}.post_attention_layernorm.output.1", "attn.resid"},
	/* a decoder layer's hidden-state input is the layer before's output
	 * (SGLang's module hooks: inputs.1; HF's model debugger: args_0; layer
	 * 0's is the embedding's, which both dump as such) */
	{"model.layers.{M}.inputs.1", "block"},
	{"model.layers.{M}_inputs_args_0", "block"},
	{"logits_processor", "logits"},
	/* SGLang dumper records named in its source patches (the comparator's
	 * e2e configuration), under layers.N from their layer_id */
	{"layers.0.layer_input", "embed"},
	{"layers.{M}.layer_input", "block"},
	{"layers.{N}.attn_pre_o_proj", "attn.core"},
	{"layers.{N}.attn_output", "attn"},
	{"layers.{N}.pre_mlp_residual", "attn.resid"},
	{"layers.{N}.moe_router_logits", "mlp.router"},
	{"layers.{N}.moe_expert_output", "mlp.experts"},
	{"layers.{N}.mlp_output", "mlp"},
	/* GPT-2 */
	{"transformer.wte", "embed"},
	{"transformer.h.{N}.ln_1", "attn_norm"},
	{"transformer.h.{N}.attn.c_proj", "attn.o"},
	{"transformer.h.{N}.attn", "attn"},
	{"transformer.h.{N}.ln_2", "mlp_norm"},
	{"transformer.h.{N}.mlp.c_fc", "mlp.up"},
	{"transformer.h.{N}.mlp.c_proj", "mlp.down"},
	{"transformer.h.{N}.mlp", "mlp"},
	{"transformer.h.{N}", "block"},
	{"transformer.ln_f", "final_norm"},
	/* GPT-NeoX / Pythia */
	{"gpt_neox.embed_in", "embed"},
	{"gpt_neox.layers.{N}.input_layernorm", "attn_norm"},
	{"gpt_neox.layers.{N}.attention", "attn"},
	{"gpt_neox.layers.{N}.post_attention_layernorm", "mlp_norm"},
	{"gpt_neox.layers.{N}.mlp", "mlp"},
	{"gpt_neox.layers.{N}", "block"},
	{"gpt_neox.final_layer_norm", "final_norm"},
	{"embed_out", "logits"},
	/* MaxText / Flax module paths (linen names; '/' reads as '.'), with or
	 * without the decoder scope.  A trailing "out" is dropped as any
	 * ".out" is, so self_attention/out is the attention output: which it is. */
	{"token_embedder", "embed"},
	{"decoder.layers_{N}.pre_self_attention_layer_norm", "attn_norm"},
	{"decoder.layers_{N}.self_attention.query", "attn.q"},
	{"decoder.layers_{N}.self_attention.key", "attn.k"},
	{"decoder.layers_{N}.self_attention.value", "attn.v"},
	{"decoder.layers_{N}.self_attention.query_rotary", "attn.q_rope"},
	{"decoder.layers_{N}.self_attention.key_rotary", "attn.k_rope"},
	{"decoder.layers_{N}.self_attention.attention_op", "attn.core"},
	{"decoder.layers_{N}.self_attention.out", "attn.o"},
	{"decoder.layers_{N}.self_attention", "attn"},
	{"decoder.layers_{N}.post_self_attention_layer_norm", "mlp_norm"},
	{"decoder.layers_{N}.mlp.wi_0", "mlp.gate"},
	{"decoder.layers_{N}.mlp.wi_1", "mlp.up"},
	{"decoder.layers_{N}.mlp.wo", "mlp.down"},
	{"decoder.layers_{N}.mlp", "mlp"},
	/* MaxText's MoE blocks: Mixtral's MoeBlock is the MLP; DeepSeek's wraps
	 * the routed MoeBlock and its shared experts */
	{"decoder.layers_{N}.MoeBlock_0.gate", "mlp.router"},
	{"decoder.layers_{N}.MoeBlock_0", "mlp"},
	{"decoder.layers_{N}.DeepSeekMoeBlock_0.MoeBlock_0.gate", "mlp.router"},
	{"decoder.layers_{N}.DeepSeekMoeBlock_0.MoeBlock_0", "mlp.experts"},
	{"decoder.layers_{N}.DeepSeekMoeBlock_0.shared_experts", "mlp.shared"},
	{"decoder.layers_{N}.DeepSeekMoeBlock_0", "mlp"},
	{"decoder.layers_{N}", "block"},
	{"decoder.decoder_norm", "final_norm"},
	{"decoder.logits_dense", "logits"},
	{"layers_{N}.pre_self_attention_layer_norm", "attn_norm"},
	{"layers_{N}.self_attention.query", "attn.q"},
	{"layers_{N}.self_attention.key", "attn.k"},
	{"layers_{N}.self_attention.value", "attn.v"},
	{"layers_{N}.self_attention.query_rotary", "attn.q_rope"},
	{"layers_{N}.self_attention.key_rotary", "attn.k_rope"},
	{"layers_{N}.self_attention.attention_op", "attn.core"},
	{"layers_{N}.self_attention.out", "attn.o"},
	{"layers_{N}.self_attention", "attn"},
	{"layers_{N}.post_self_attention_layer_norm", "mlp_norm"},
	{"layers_{N}.mlp.wi_0", "mlp.gate"},
	{"layers_{N}.mlp.wi_1", "mlp.up"},
	{"layers_{N}.mlp.wo", "mlp.down"},
	{"layers_{N}.mlp", "mlp"},
	{"layers_{N}.MoeBlock_0.gate", "mlp.router"},
	{"layers_{N}.MoeBlock_0", "mlp"},
	{"layers_{N}.DeepSeekMoeBlock_0.MoeBlock_0.gate", "mlp.router"},
	{"layers_{N}.DeepSeekMoeBlock_0.MoeBlock_0", "mlp.experts"},
	{"layers_{N}.DeepSeekMoeBlock_0.shared_experts", "mlp.shared"},
	{"layers_{N}.DeepSeekMoeBlock_0", "mlp"},
	{"layers_{N}", "block"},
	{"decoder_norm", "final_norm"},
	{"logits_dense", "logits"},
	/* MaxText with scanned layers: one tensor per tap, the layer axis first */
	{"decoder.layers{S}.pre_self_attention_layer_norm", "attn_norm"},
	{"decoder.layers{S}.self_attention.query", "attn.q"},
	{"decoder.layers{S}.self_attention.key", "attn.k"},
	{"decoder.layers{S}.self_attention.value", "attn.v"},
	{"decoder.layers{S}.self_attention.query_rotary", "attn.q_rope"},
	{"decoder.layers{S}.self_attention.key_rotary", "attn.k_rope"},
	{"decoder.layers{S}.self_attention.attention_op", "attn.core"},
	{"decoder.layers{S}.self_attention.out", "attn.o"},
	{"decoder.layers{S}.self_attention", "attn"},
	{"decoder.layers{S}.post_self_attention_layer_norm", "mlp_norm"},
	{"decoder.layers{S}.mlp.wi_0", "mlp.gate"},
	{"decoder.layers{S}.mlp.wi_1", "mlp.up"},
	{"decoder.layers{S}.mlp.wo", "mlp.down"},
	{"decoder.layers{S}.mlp", "mlp"},
	{"decoder.layers{S}", "block"},
	{"layers{S}.pre_self_attention_layer_norm", "attn_norm"},
	{"layers{S}.self_attention.query", "attn.q"},
	{"layers{S}.self_attention.key", "attn.k"},
	{"layers{S}.self_attention.value", "attn.v"},
	{"layers{S}.self_attention.query_rotary", "attn.q_rope"},
	{"layers{S}.self_attention.key_rotary", "attn.k_rope"},
	{"layers{S}.self_attention.attention_op", "attn.core"},
	{"layers{S}.self_attention.out", "attn.o"},
	{"layers{S}.self_attention", "attn"},
	{"layers{S}.post_self_attention_layer_norm", "mlp_norm"},
	{"layers{S}.mlp.wi_0", "mlp.gate"},
	{"layers{S}.mlp.wi_1", "mlp.up"},
	{"layers{S}.mlp.wo", "mlp.down"},
	{"layers{S}.mlp", "mlp"},
	/* llama.cpp graph tensors (the names its graph builders give them, by
	 * what they compute in the current graph), for dumps that carry no
	 * op line: a capture's nodes go by their op (formats/ggmlgraph.h),
	 * since a name's meaning changed (kqv_out was o_proj's output in 2024,
	 * its input since).  Qcur/Kcur are written before and after RoPE, the
	 * last write is after it; ffn_inp is the residual stream after
	 * attention, l_out the layer's output. */
	{"inp_embd", "embed"},
	{"embd", "embed"},
	{"attn_norm-{N}", "attn_norm"},
	{"Qcur-{N}", "attn.q_rope"},
	{"Kcur-{N}", "attn.k_rope"},
	{"Vcur-{N}", "attn.v"},
	{"kqv_out-{N}", "attn.core"},
	{"attn_out-{N}", "attn"},
	{"ffn_inp-{N}", "attn.resid"},
	{"ffn_norm-{N}", "mlp_norm"},
	{"ffn_gate-{N}", "mlp.gate"},
	{"ffn_up-{N}", "mlp.up"},
	{"ffn_out-{N}", "mlp"},
	{"ffn_moe_logits-{N}", "mlp.router"},
	{"ffn_moe_probs-{N}", "mlp.router_probs"},
	{"ffn_moe_topk-{N}", "mlp.topk_ids"},
	/* the combine weights as gathered, normalised and scaled: the last of
	 * them a graph holds is mlp.topk_weights (moe_cells) */
	{"ffn_moe_weights-{N}", "mlp.moe_w"},
	{"ffn_moe_weights_norm-{N}", "mlp.moe_w_norm"},
	{"ffn_moe_weights_scaled-{N}", "mlp.moe_w_scaled"},
	{"ffn_moe_out-{N}", "mlp.experts"},
	{"ffn_shexp_out-{N}", "mlp.shared"},
	{"l_out-{N}", "block"},
	{"result_norm", "final_norm"},
	{"result_output", "logits"},
	/* the raw logits files of its model-conversion scripts, named by the
	 * side that wrote them and the model: llamacpp-MODEL, pytorch-MODEL */
	{"llamacpp-{*}", "logits"},
	{"pytorch-{*}", "logits"},
	/* Meta Llama reference code */
	{"tok_embeddings", "embed"},
	{"layers.{N}.attention_norm", "attn_norm"},
	{"layers.{N}.attention.wq", "attn.q"},
	{"layers.{N}.attention.wk", "attn.k"},
	{"layers.{N}.attention.wv", "attn.v"},
	{"layers.{N}.attention.wo", "attn.o"},
	{"layers.{N}.attention", "attn"},
	{"layers.{N}.ffn_norm", "mlp_norm"},
	{"layers.{N}.feed_forward.w1", "mlp.gate"},
	{"layers.{N}.feed_forward.w3", "mlp.up"},
	{"layers.{N}.feed_forward.w2", "mlp.down"},
	{"layers.{N}.feed_forward", "mlp"},
	/* post_* aliases under a layer */
	{"layers.{N}.post_attn", "attn"},
	{"layers.{N}.post_mlp", "mlp"},
	{"layers.{N}.post_block", "block"},
	{"L{N}.post_attn", "attn"},
	{"L{N}.post_mlp", "mlp"},
	{"L{N}.post_block", "block"},
	{"layer_{N}.post_attn", "attn"},
	{"layer_{N}.post_mlp", "mlp"},
	{"layer_{N}.post_block", "block"},
	{"blocks.{N}.post_attn", "attn"},
	{"blocks.{N}.post_mlp", "mlp"},
	{"blocks.{N}.post_block", "block"},
	/* canonical names */
	{"layers.{N}.{T}", NULL},
	{"L{N}.{T}", NULL},
	{"layer_{N}.{T}", NULL},
	{"blocks.{N}.{T}", NULL},
	{"layers.{N}", "block"},
	/* MaxText golden records */
	{"layer_hidden_states[{N}]", "block"},
	{"layer_hidden_states.{N}", "block"},
	/* Hugging Face's output_hidden_states: entry 0 is the embedding output,
	 * entry N the output of layer N-1. */
	{"hidden_states[0]", "embed"},
	{"hidden_states[{M}]", "block"},
	{"hidden_states.0", "embed"},
	{"hidden_states.{M}", "block"},
	/* modular's debug-model dumper (its skill's comparator-build
	 * reference): post_embed, layer_NN (block outputs, zero-padded),
	 * post_final_norm, last_logits (the last position only:
	 * tb_name_is_last_position) */
	{"layer_{N}", "block"},
	{"post_final_norm", "final_norm"},
	{"last_logits", "logits"},
	/* vLLM's and SGLang's router replay: every layer's selected experts,
	 * [tokens, layers, k] (tb_name_layer_axis) */
	{"routed_experts{S}", "mlp.topk_ids"},
	/* model-level */
	{"embed", "embed"},
	{"post_embed", "embed"},
	{"norm", "final_norm"},
	{"final_norm", "final_norm"},
	{"lm_head", "logits"},
	{"logits", "logits"},
	{"output", "logits"},
};
const size_t tb_n_conventions = sizeof tb_conventions / sizeof tb_conventions[0];

/* One rule of a --map file. */
typedef struct map_rule {
	regex_t re;
	char *pattern; /* as written */
	char *layer; /* template ("\\1", "3") or NULL: model-level */
	char *tap;   /* template */
	int ngroups;
} map_rule;

struct tb_namer {
	char *path;    /* the map file, or NULL */
	bool no_builtins;
	map_rule *rules;
	size_t n_rules;
};

/* Match name against a convention; fills layer and tap. */
static bool match_convention(const tb_convention *cv, const char *name, tb_cell *cell)
{
	const char *pat = cv->pattern, *fixed_tap = cv->tap;
	const char *p = pat, *s = name;
	int layer = -1;

	while (*p) {
		if (!strncmp(p, "{N}", 3) || !strncmp(p, "{M}", 3)) {
			long v = 0;
			int digits = 0;
			while (*s >= '0' && *s <= '9' && digits < 8) {
				v = v * 10 + (*s++ - '0');
				digits++;
			}
			if (p[1] == 'M')
				v--;
			if (!digits || (*s >= '0' && *s <= '9') || v < 0 || v > MAX_LAYER)
				return false;
			layer = (int)v;
			p += 3;
		} else if (!strncmp(p, "{S}", 3)) {
			/* Scan-stacked: one tensor holds every layer, layer axis first. */
			layer = TB_LAYER_STACKED;
			p += 3;
		} else if (!strncmp(p, "{*}", 3)) {
			/* {*} is always last: any rest of the name, not none. */
			if (!*s)
				return false;
			s += strlen(s);
			p += 3;
		} else if (!strncmp(p, "{T}", 3)) {
			/* {T} is always last: the rest of the name is the tap. */
			if (!tb_tap_valid(s) || tb_tap_is_model_level(s))
				return false;
			tb_cell_make(cell, layer, s);
			return layer >= 0;
		} else if (*p++ != *s++) {
			return false;
		}
	}
	if (*s)
		return false;
	if (tb_tap_is_model_level(fixed_tap) != (layer == -1))
		return false;
	tb_cell_make(cell, layer, fixed_tap);
	return true;
}

/* Expand "\\1" style references from the regex match into buf. */
static bool expand(const char *tmpl, const char *name, const regmatch_t *m, int ngroups, char *buf, size_t size)
{
	size_t n = 0;

	for (const char *t = tmpl; *t; t++) {
		if (*t == '\\' && t[1] >= '0' && t[1] <= '9') {
			int g = t[1] - '0';
			size_t len;
			t++;
			if (g > ngroups || m[g].rm_so < 0)
				return false;
			len = (size_t)(m[g].rm_eo - m[g].rm_so);
			if (n + len >= size)
				return false;
			memcpy(buf + n, name + m[g].rm_so, len);
			n += len;
		} else {
			if (n + 1 >= size)
				return false;
			buf[n++] = *t;
		}
	}
	buf[n] = '\0';
	return true;
}

static bool apply_rule(const map_rule *r, const char *name, tb_cell *cell)
{
	regmatch_t m[10];
	char layer[32], tap[TB_TAP_LEN];
	char *end;
	long v = -1;

	if (regexec(&r->re, name, 10, m, 0) != 0)
		return false;
	if (!expand(r->tap, name, m, r->ngroups, tap, sizeof tap) || !tb_tap_valid(tap))
		return false;
	if (!r->layer) {
		if (!tb_tap_is_model_level(tap))
			return false;
	} else {
		if (!expand(r->layer, name, m, r->ngroups, layer, sizeof layer) || tb_tap_is_model_level(tap))
			return false;
		v = strtol(layer, &end, 10);
		if (end == layer || *end || v < 0 || v > MAX_LAYER)
			return false;
	}
	tb_cell_make(cell, (int)v, tap);
	return true;
}

/* Drop trailing ".output", ".out", ":0"; read '/' as '.'. */
/* A leading Python class name ("LlamaForCausalLM." of HF's model debugger
 * records): CamelCase, four characters or more, then a dot. */
static size_t class_prefix(const char *s)
{
	size_t n = 0;
	bool lower = false;

	if (!(s[0] >= 'A' && s[0] <= 'Z'))
		return 0;
	for (; s[n] && s[n] != '.'; n++) {
		if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9')))
			return 0;
		lower |= s[n] >= 'a' && s[n] <= 'z';
	}
	return s[n] == '.' && n >= 4 && lower ? n + 1 : 0;
}

/* A module's output item K as dumpers spell it: ".outputs_K" (vLLM) or
 * "_outputs_K" (HF's model debugger) at the end; becomes ".output.K". */
static void output_item(char *buf)
{
	char *p = strstr(buf, "outputs_");

	for (; p; p = strstr(p + 1, "outputs_")) {
		const char *d = p + 8;
		if (p == buf || (p[-1] != '.' && p[-1] != '_') || !*d || strspn(d, "0123456789") != strlen(d))
			continue;
		/* "outputs_K" -> "output.K", one byte shorter, in place */
		p[-1] = '.';
		memmove(p + 7, d, strlen(d) + 1);
		p[6] = '.';
		return;
	}
}

static void normalise(const char *raw, char *buf, size_t size);

/* A multimodal model's text decoder under another module: its paths with
 * that module's part cut, as a text-only model's would read.  transformers
 * v5 puts it under model.language_model (lm_head stays at the top), 4.x
 * LLaVA-style models under language_model with their own lm_head. */
static const struct {
	const char *from, *to;
} text_models[] = {
	{"model.language_model.", "model."},
	{"language_model.model.", "model."},
	{"language_model.lm_head", "lm_head"},
	{"model.text_model.", "model."},
};

static void text_model_path(char *buf)
{
	for (size_t i = 0; i < sizeof text_models / sizeof *text_models; i++) {
		size_t f = strlen(text_models[i].from), t = strlen(text_models[i].to);
		if (!strncmp(buf, text_models[i].from, f)) {
			memmove(buf + t, buf + f, strlen(buf + f) + 1);
			memcpy(buf, text_models[i].to, t);
			return;
		}
	}
}

/* The towers of multimodal models, by the first parts of their paths
 * (transformers: Qwen-VL's model.visual, LLaVA's vision_tower around a
 * SigLIP or CLIP vision_model, Qwen-Omni's and Qwen2-Audio's audio_tower;
 * 4.x without the "model." before them); the projector into the text
 * decoder is the vision tower's last cell.  Longer prefixes first. */
static const struct {
	const char *prefix, *tower;
	bool keep; /* the prefix is the module itself (a projector): kept in the rest */
} towers[] = {
	{"vision_tower.vision_model.", "vision", false},
	{"vision_tower.", "vision", false},
	{"visual.", "vision", false},
	{"vision_model.", "vision", false},
	{"vision_encoder.", "vision", false},
	{"audio_tower.", "audio", false},
	{"audio_encoder.", "audio", false},
	{"multi_modal_projector", "vision", true},
	{"mm_projector", "vision", true},
};

/* A tower's module paths, with the tower's prefix cut (Qwen-VL's blocks,
 * SigLIP's and CLIP's encoder.layers, Whisper-style audio encoders'
 * layers with fc1/fc2): its grid has the text decoder's rows, its patch
 * embedding as embed, its last norm as final_norm and what it hands the
 * text decoder (Qwen-VL's merger, a projector) as logits. */
static const tb_convention tower_conventions[] = {
	{"patch_embed", "embed"},
	{"embeddings", "embed"},
	{"blocks.{N}.norm1", "attn_norm"},
	{"blocks.{N}.attn", "attn"},
	{"blocks.{N}.norm2", "mlp_norm"},
	{"blocks.{N}.mlp", "mlp"},
	{"blocks.{N}", "block"},
	{"encoder.layers.{N}.layer_norm1", "attn_norm"},
	{"encoder.layers.{N}.self_attn", "attn"},
	{"encoder.layers.{N}.layer_norm2", "mlp_norm"},
	{"encoder.layers.{N}.mlp", "mlp"},
	{"encoder.layers.{N}", "block"},
	{"layers.{N}.self_attn_layer_norm", "attn_norm"},
	{"layers.{N}.self_attn", "attn"},
	{"layers.{N}.final_layer_norm", "mlp_norm"},
	{"layers.{N}.fc2", "mlp"},
	{"post_layernorm", "final_norm"},
	{"layer_norm", "final_norm"},
	{"ln_post", "final_norm"},
	{"merger", "logits"},
	{"multi_modal_projector", "logits"},
	{"mm_projector", "logits"},
};
const tb_convention *const tb_tower_conventions = tower_conventions;
const size_t tb_n_tower_conventions = sizeof tower_conventions / sizeof *tower_conventions;

/* The tower of a normalised name, and where the rest of it starts. */
static const char *tower_of(const char *norm, const char **rest)
{
	const char *p = !strncmp(norm, "model.", 6) ? norm + 6 : norm;

	for (size_t i = 0; i < sizeof towers / sizeof *towers; i++) {
		size_t n = strlen(towers[i].prefix);
		if (strncmp(p, towers[i].prefix, n) || (towers[i].keep && p[n] && p[n] != '.'))
			continue;
		*rest = towers[i].keep ? p : p + n;
		return towers[i].tower;
	}
	return NULL;
}

bool tb_tower_known(const char *name)
{
	for (size_t i = 0; i < sizeof towers / sizeof *towers; i++)
		if (!strcmp(towers[i].tower, name))
			return true;
	return false;
}

size_t tb_tower_names(const char **names, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < sizeof towers / sizeof *towers; i++) {
		size_t k = 0;
		while (k < n && strcmp(names[k], towers[i].tower))
			k++;
		if (k == n && n < max)
			names[n++] = towers[i].tower;
	}
	return n;
}

const char *tb_name_tower(const char *raw)
{
	char norm[8192];
	const char *rest;

	normalise(raw, norm, sizeof norm);
	return tower_of(norm, &rest);
}

/* A Flax capture_intermediates key (flax.linen.Module.sow: each module's
 * __call__ outputs under "__call__", a tuple, one item per call):
 * "PATH.__call__", "PATH.__call__.C" (call C) or "PATH.__call__.C.I"
 * (item I of a call's tuple output, nn.scan's (carry, None)).  Call 0's
 * output, or its item 0, is the module's; a later call or item gets a
 * name of its own (".call_C", ".item_I"), never the module's cell.
 * Returns whether the key was one. */
static bool flax_key(char *buf)
{
	char *p = strstr(buf, "__call__"), *q;
	long call = 0, item = 0;

	if (!p || (p != buf && p[-1] != '.'))
		return false;
	q = p + 8;
	if (*q == '.' && q[1] >= '0' && q[1] <= '9') {
		call = strtol(q + 1, &q, 10);
		if (*q == '.' && q[1] >= '0' && q[1] <= '9')
			item = strtol(q + 1, &q, 10);
	}
	if (*q)
		return false;
	if (p != buf)
		p--;
	if (call > 0)
		sprintf(p, ".call_%ld", call);
	else if (item > 0)
		sprintf(p, ".item_%ld", item);
	else
		*p = '\0';
	return true;
}

/* MaxText's DeepSeek decoder calls its layers dense_layers_K (the first
 * first_num_dense_layers) and moe_layers_K, K from 0 again (layers/
 * decoders.py: name=f"{layer_prefix}_{index}"): the path component at p,
 * when it is one of them, 1 for dense and 2 for MoE layers, *k its number
 * and *len the length of the word before it. */
static int deepseek_scope(const char *p, long *k, size_t *len)
{
	static const char *const words[] = {"dense_layers_", "moe_layers_"};

	for (int i = 0; i < 2; i++) {
		size_t n = strlen(words[i]);
		char *end;
		if (strncmp(p, words[i], n) || p[n] < '0' || p[n] > '9')
			continue;
		*k = strtol(p + n, &end, 10);
		*len = n - strlen("layers_");
		if (*end == '.' || *end == '/' || *end == '\0')
			return i + 1;
	}
	return 0;
}

/* Their paths read as layers_K's, the conventions' (pairing numbers the
 * MoE layers on after the dense ones: tb_name_deepseek_layer). */
static void deepseek_layers(char *buf)
{
	for (char *p = buf; *p; p++) {
		long k;
		size_t len;
		if ((p == buf || p[-1] == '.') && deepseek_scope(p, &k, &len)) {
			memmove(p, p + len, strlen(p + len) + 1);
			return;
		}
	}
}

static void normalise(const char *raw, char *buf, size_t size)
{
	static const char *const tails[] = {".output", ".out", ":0", ".outputs", "_outputs"};
	bool again = true;
	size_t n;

	snprintf(buf, size, "%s", raw + class_prefix(raw));
	for (char *s = buf; *s; s++)
		if (*s == '/')
			*s = '.';
	deepseek_layers(buf);
	/* Flax names a module's output by its call: "out" there is the
	 * attention's output projection, no output marker */
	if (flax_key(buf))
		return;
	output_item(buf);
	text_model_path(buf);
	while (again) {
		again = false;
		n = strlen(buf);
		for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
			size_t t = strlen(tails[i]);
			if (n > t && !strcmp(buf + n - t, tails[i])) {
				buf[n - t] = '\0';
				again = true;
				break;
			}
		}
	}
}

/* How a name mapped: user rule index (or -1), and the rule's text. */
typedef struct how {
	int user_rule;
	char *rule;
	size_t rule_size;
} how;

static bool user_rules(const tb_namer *namer, const char *name, tb_cell *cell, how *h)
{
	for (size_t i = 0; namer && i < namer->n_rules; i++) {
		if (apply_rule(&namer->rules[i], name, cell)) {
			h->user_rule = (int)i;
			if (h->rule)
				snprintf(h->rule, h->rule_size, "map rule %zu", i);
			return true;
		}
	}
	return false;
}

static bool map_one(const tb_namer *namer, const char *name, tb_cell *cell, how *h)
{
	if (user_rules(namer, name, cell, h))
		return true;
	for (size_t i = 0; !(namer && namer->no_builtins) && i < tb_n_conventions; i++) {
		if (match_convention(&tb_conventions[i], name, cell)) {
			if (h->rule)
				snprintf(h->rule, h->rule_size, "%s", tb_conventions[i].pattern);
			return true;
		}
	}
	return false;
}

/* A normalised name, or failing that, for a module's first output item,
 * the module: a linear layer's (out, bias), a norm's (normed, residual). */
static bool map_normalised(const tb_namer *namer, char *norm, tb_cell *cell, how *h)
{
	size_t len = strlen(norm);

	if (map_one(namer, norm, cell, h))
		return true;
	if (len > 9 && !strcmp(norm + len - 9, ".output.0")) {
		norm[len - 9] = '\0';
		/* but a decoder layer's item 0 is its MLP's output, not the layer's */
		const char *tail = strrchr(norm, '.');
		if (tail && tail - norm >= 6 && !strncmp(tail - 6, "layers", 6) && tail[1] &&
		    strspn(tail + 1, "0123456789") == strlen(tail + 1))
			return false;
		return map_one(namer, norm, cell, h);
	}
	return false;
}

static bool lookup(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, how *h)
{
	char norm[8192];
	size_t len;

	h->user_rule = -1;
	/* User rules see the raw name first, exactly as written. */
	if (user_rules(namer, raw, cell, h))
		return true;
	normalise(raw, norm, sizeof norm);
	if (map_normalised(namer, norm, cell, h))
		return true;
	len = shared ? strlen(shared) : 0;
	if (len == 0 || strncmp(raw, shared, len) != 0)
		return false;
	/* Cut the shared prefix piece by piece: "run7.model.embed_tokens"
	 * tries "model.embed_tokens", then "embed_tokens". */
	for (size_t i = 0; i < len; i++) {
		if (shared[i] != '.' && shared[i] != '/')
			continue;
		normalise(raw + i + 1, norm, sizeof norm);
		if (*norm && map_normalised(namer, norm, cell, h))
			return true;
	}
	return false;
}

/* A name with a role: the map file's rules see the raw name, the
 * conventions the role ("" maps nowhere). */
static bool lookup_role(const tb_namer *namer, const char *raw, const char *role, const char *shared, tb_cell *cell,
			how *h)
{
	char norm[1024];

	if (!role)
		return lookup(namer, raw, shared, cell, h);
	h->user_rule = -1;
	if (user_rules(namer, raw, cell, h))
		return true;
	if (!*role || (namer && namer->no_builtins))
		return false;
	snprintf(norm, sizeof norm, "%s", role);
	if (!map_normalised(namer, norm, cell, h))
		return false;
	if (h->rule)
		snprintf(h->rule, h->rule_size, "%s", "what it computes (its op)");
	return true;
}

bool tb_namer_map(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, char *rule,
		  size_t rule_size)
{
	how h = {-1, rule, rule_size};

	return lookup(namer, raw, shared, cell, &h);
}

bool tb_namer_map_rule(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, int *user_rule)
{
	return tb_namer_map_role(namer, raw, NULL, shared, cell, user_rule, NULL, 0);
}

bool tb_namer_map_role(const tb_namer *namer, const char *raw, const char *role, const char *shared, tb_cell *cell,
		       int *user_rule, char *rule, size_t rule_size)
{
	how h = {-1, rule, rule_size};
	bool mapped = lookup_role(namer, raw, role, shared, cell, &h);

	if (user_rule)
		*user_rule = h.user_rule;
	return mapped;
}

bool tb_namer_map_tower(const tb_namer *namer, const char *raw, const char *tower, tb_cell *cell, int *user_rule)
{
	how h = {-1, NULL, 0};
	char norm[8192];
	const char *rest, *tw;
	bool mapped = user_rules(namer, raw, cell, &h);

	if (user_rule)
		*user_rule = h.user_rule;
	if (mapped || (namer && namer->no_builtins))
		return mapped;
	normalise(raw, norm, sizeof norm);
	tw = tower_of(norm, &rest);
	if (!tw || strcmp(tw, tower))
		return false;
	for (size_t i = 0; i < tb_n_tower_conventions; i++)
		if (match_convention(&tower_conventions[i], rest, cell))
			return true;
	for (size_t i = 0; i < tb_n_conventions; i++)
		if (match_convention(&tb_conventions[i], rest, cell))
			return true;
	return false;
}

void tb_namer_use_builtins(tb_namer *namer, bool on)
{
	namer->no_builtins = !on;
}

size_t tb_namer_n_rules(const tb_namer *namer)
{
	return namer ? namer->n_rules : 0;
}

const char *tb_namer_rule_pattern(const tb_namer *namer, size_t i)
{
	return i < tb_namer_n_rules(namer) ? namer->rules[i].pattern : NULL;
}

const char *tb_namer_path(const tb_namer *namer)
{
	return namer && namer->path ? namer->path : "";
}

void tb_common_prefix(const char *const *names, size_t n, char *buf, size_t size)
{
	size_t len, last_dot = 0;

	buf[0] = '\0';
	if (n == 0)
		return;
	len = strlen(names[0]);
	for (size_t i = 1; i < n; i++) {
		size_t k = 0;
		while (k < len && names[i][k] == names[0][k])
			k++;
		len = k;
	}
	for (size_t k = 0; k < len; k++)
		if (names[0][k] == '.' || names[0][k] == '/')
			last_dot = k + 1;
	if (last_dot >= size)
		last_dot = 0;
	memcpy(buf, names[0], last_dot);
	buf[last_dot] = '\0';
}

static char *template_string(const cJSON *item, bool allow_int)
{
	char buf[32];

	if (cJSON_IsString(item))
		return strdup(item->valuestring);
	if (allow_int && cJSON_IsNumber(item)) {
		uint64_t v;
		if (!tb_json_uint(item, &v) || v > MAX_LAYER)
			return NULL;
		snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
		return strdup(buf);
	}
	return NULL;
}


/* The rules of a parsed map file (root is consumed). */
static int load_map(tb_namer *namer, cJSON *root, const char *path, tb_err *err)
{
	const cJSON *rules, *r;
	size_t i = 0;
	int rc = -1;

	if (!root)
		return -1;
	rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(rules)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "map file must be an object with a \"rules\" array");
		goto out;
	}
	if (cJSON_GetArraySize(rules) > MAP_MAX_RULES) {
		tb_err_setc(err, TB_ERR_LIMIT, path, "map file has more than %d rules", MAP_MAX_RULES);
		goto out;
	}
	namer->rules = calloc((size_t)cJSON_GetArraySize(rules) + 1, sizeof *namer->rules);
	if (!namer->rules) {
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(r, rules) {
		const cJSON *match = cJSON_GetObjectItemCaseSensitive(r, "match");
		const cJSON *layer = cJSON_GetObjectItemCaseSensitive(r, "layer");
		const cJSON *tap = cJSON_GetObjectItemCaseSensitive(r, "tap");
		map_rule *mr = &namer->rules[i];
		char msg[256];

		if (!cJSON_IsObject(r)) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu is not an object", i);
			goto out;
		}
		if (!cJSON_IsString(match)) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu: \"match\" must be a string", i);
			goto out;
		}
		int pc = tb_pattern_compile(&mr->re, match->valuestring, 0, msg, sizeof msg);
		if (pc < 0) {
			tb_err_setc(err, TB_ERR_FORMAT, path, pc == TB_PATTERN_REFUSED ? "map rule %zu: \"match\" %s" : "map rule %zu: \"match\": %s",
				   i, msg);
			goto out;
		}
		namer->n_rules = ++i;
		mr->pattern = strdup(match->valuestring);
		if (!mr->pattern) {
			tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
			goto out;
		}
		mr->ngroups = (int)mr->re.re_nsub;
		if (mr->ngroups > 9) {
			tb_err_setc(err, TB_ERR_LIMIT, path, "map rule %zu: \"match\" has more than 9 groups", i - 1);
			goto out;
		}
		mr->tap = template_string(tap, false);
		if (!mr->tap) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu: \"tap\" must be a string", i - 1);
			goto out;
		}
		if (!strchr(mr->tap, '\\') && !tb_tap_valid(mr->tap)) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu: \"tap\": '%s' is not a canonical tap", i - 1, mr->tap);
			goto out;
		}
		if (layer && !cJSON_IsNull(layer)) {
			mr->layer = template_string(layer, true);
			if (!mr->layer) {
				tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu: \"layer\" must be a string, a layer number or null", i - 1);
				goto out;
			}
		} else if (!strchr(mr->tap, '\\') && !tb_tap_is_model_level(mr->tap)) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "map rule %zu: tap '%s' needs a \"layer\"", i - 1, mr->tap);
			goto out;
		}
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

/* A namer for a map file's path; text: its contents when already read
 * (standard input), else NULL to read the file. */
static int namer_open(const char *map_path, const char *text, size_t len, tb_namer **out, tb_err *err)
{
	tb_namer *namer = calloc(1, sizeof *namer);
	cJSON *root;

	*out = NULL;
	if (!namer || (map_path && !(namer->path = strdup(map_path)))) {
		tb_namer_free(namer);
		return tb_err_setc(err, TB_ERR_NOMEM, map_path, "out of memory");
	}
	if (map_path) {
		root = text ? tb_json_parse(text, len, map_path, "map file", err)
			    : tb_json_load(map_path, MAP_MAX_BYTES, "map file", err);
		if (load_map(namer, root, map_path, err) < 0) {
			tb_namer_free(namer);
			return -1;
		}
	}
	*out = namer;
	return 0;
}

int tb_namer_new(const char *map_path, tb_namer **out, tb_err *err)
{
	return namer_open(map_path, NULL, 0, out, err);
}

int tb_namer_new_text(const char *name, const char *text, size_t len, tb_namer **out, tb_err *err)
{
	if (len > MAP_MAX_BYTES)
		return tb_err_setc(err, TB_ERR_FORMAT, name, "map file larger than %d bytes", MAP_MAX_BYTES);
	return namer_open(name, text, len, out, err);
}

void tb_namer_free(tb_namer *namer)
{
	if (!namer)
		return;
	for (size_t i = 0; i < namer->n_rules; i++) {
		regfree(&namer->rules[i].re);
		free(namer->rules[i].layer);
		free(namer->rules[i].tap);
		free(namer->rules[i].pattern);
	}
	free(namer->rules);
	free(namer->path);
	free(namer);
}

int tb_hidden_states_index(const char *raw)
{
	char norm[8192], *end;
	const char *p;
	long v;

	normalise(raw, norm, sizeof norm);
	p = strstr(norm, "hidden_states");
	if (!p || (p > norm && p[-1] != '.'))
		return -1;
	p += strlen("hidden_states");
	if (*p != '[' && *p != '.')
		return -1;
	v = strtol(p + 1, &end, 10);
	if (end == p + 1 || v < 0 || v > MAX_LAYER || (*p == '[' ? strcmp(end, "]") : *end) != 0)
		return -1;
	return (int)v;
}

/* "Dropout_3" and the like: Flax's auto-name of a module of this class. */
static bool auto_named(const char *base, const char *cls)
{
	size_t n = strlen(cls);

	return !strncmp(base, cls, n) && base[n] == '_' && base[n + 1] && strspn(base + n + 1, "0123456789") == strlen(base + n + 1);
}

/* A Flax capture's entry that is no tap: a dropout (its input again, when
 * deterministic), a KV cache, and the outputs of the whole model and of
 * its decoder (the logits again, and MaxText's decoder returns them). */
static bool flax_non_tap(const char *norm, const char *base)
{
	return auto_named(base, "Dropout") || !strcmp(base, "dropout") || auto_named(base, "KVCache") || !*norm ||
	       !strcmp(norm, "intermediates") || !strcmp(base, "decoder");
}

bool tb_name_is_aux(const char *raw)
{
	static const char *const names[] = {"positions", "position_ids", "cache_position", "attention_mask", "seq_lens",
					    "req_pool_indices", "rotary_emb",
					    /* what MaxText sows with record_internal_nn_metrics */
					    "activation_mean", "activation_stdev", "activation_fraction_zero"};
	char norm[8192];
	const char *base;

	if (tb_name_is_token_ids(raw))
		return true;
	/* TensorRT names the layers it adds "(Unnamed Layer* 13) [Shuffle]" */
	if (strstr(raw, "(Unnamed Layer"))
		return true;
	normalise(raw, norm, sizeof norm);
	base = strrchr(norm, '.');
	base = base ? base + 1 : norm;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strncmp(base, names[i], strlen(names[i])))
			return true;
	if (strstr(raw, "__call__") && flax_non_tap(norm, base))
		return true;
	/* what a module was called with (SGLang inputs.K, vLLM inputs_K, HF's
	 * model debugger _inputs_args_K / _inputs_kwargs_NAME), the model's
	 * own inputs and outputs (HF: Class_inputs_..., Class_outputs_...;
	 * vLLM: the inner model's output, which is the final norm's), and an
	 * ONNX graph's op outputs inside a module ("Reshape_3_output_0" of a
	 * Polygraphy mark-all dump; its modules' outputs are named apart) */
	if (strstr(norm, ".inputs.") || strstr(norm, ".inputs_") || strstr(norm, "_inputs_") ||
	    (strchr(norm, '.') == NULL && strstr(norm, "_outputs_")) || strstr(norm, ".rotary_emb") ||
	    !strcmp(norm, "model") || (strlen(norm) > 6 && !strcmp(norm + strlen(norm) - 6, ".model")) ||
	    tb_onnx_output_name(base, strlen(base)))
		return true;
	/* a vLLM or SGLang decoder layer's (hidden, residual) output pair: the
	 * MLP's output and the residual before it is added, both dumped by
	 * their own modules too */
	const char *p = strstr(norm, "layers.");
	if (p) {
		p += 7;
		p += strspn(p, "0123456789");
		if (!strncmp(p, ".output.", 8) && p[8] && strspn(p + 8, "0123456789") == strlen(p + 8))
			return true;
	}
	return false;
}

bool tb_name_is_last_block(const char *raw)
{
	char norm[8192];
	size_t n;

	static const char *const names[] = {"model.norm.output.1", "model.norm_inputs_args_0"};

	normalise(raw, norm, sizeof norm);
	n = strlen(norm);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		size_t k = strlen(names[i]);
		if (n >= k && !strcmp(norm + n - k, names[i]) && (n == k || norm[n - k - 1] == '.'))
			return true;
	}
	return false;
}

int tb_name_deepseek_layer(const char *raw, long *k)
{
	for (const char *p = raw; *p; p++) {
		size_t len;
		int kind = p == raw || p[-1] == '.' || p[-1] == '/' ? deepseek_scope(p, k, &len) : 0;
		if (kind)
			return kind;
	}
	return 0;
}

int tb_name_layer_axis(const char *raw)
{
	char norm[8192];
	const char *base;

	normalise(raw, norm, sizeof norm);
	base = strrchr(norm, '.');
	return !strcmp(base ? base + 1 : norm, "routed_experts") ? 1 : 0;
}

bool tb_name_is_last_position(const char *raw)
{
	char norm[8192];
	const char *base;

	normalise(raw, norm, sizeof norm);
	base = strrchr(norm, '.');
	return !strcmp(base ? base + 1 : norm, "last_logits");
}

bool tb_name_is_token_ids(const char *raw)
{
	static const char *const names[] = {"tokens", "input_ids", "token_ids", "prompt_tokens"};
	char norm[8192];
	const char *base;

	normalise(raw, norm, sizeof norm);
	base = strrchr(norm, '.');
	base = base ? base + 1 : norm;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strcmp(base, names[i]))
			return true;
	return false;
}
