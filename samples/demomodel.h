/*
 * demomodel: a tiny Llama-style decoder (token embedding, RMSNorm, RoPE
 * rotate-half, grouped-query causal attention, SwiGLU MLP, final norm,
 * lm_head) with seeded weights, run on a seeded token sequence.  The
 * forward pass records every sublayer's output as a tap and can inject any
 * set of the bugs of demobugs.h, which is how mkdemo makes the reference
 * (no bugs) and the candidate of a sample pair.
 *
 * The model owns its weights; a run owns its taps and tokens.  Nothing is
 * printed; allocation failure is reported as -1 / NULL.
 */
#ifndef TB_DEMOMODEL_H
#define TB_DEMOMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "demobugs.h"

/* Fixed dimensions of the demo model. */
#define DEMO_HIDDEN 64
#define DEMO_HEADS 8
#define DEMO_KV_HEADS 2
#define DEMO_HEAD_DIM 8
#define DEMO_MLP 128
#define DEMO_VOCAB 256

#define DEMO_MIN_LAYERS 2
#define DEMO_MAX_LAYERS 64
#define DEMO_MIN_SEQ 8
#define DEMO_MAX_SEQ 2048

/* The dense MLP's activation: silu(gate) * up, or gpt-oss's SwiGLU (DEMO_OAI_*). */
typedef enum demo_act { DEMO_ACT_SILU, DEMO_ACT_OAI } demo_act;

/* RoPE scaling (rope_scaling.rope_type of Hugging Face configs). */
typedef enum demo_rope_scaling {
	DEMO_ROPE_PLAIN,
	DEMO_ROPE_LINEAR,
	DEMO_ROPE_LLAMA3, /* low_freq_factor 1, high_freq_factor 4 */
	DEMO_ROPE_YARN,   /* beta_fast 32, beta_slow 1, attention factor 0.1 ln(factor) + 1 */
	DEMO_ROPE_DYNAMIC, /* NTK: theta raised once seq passes DEMO_ROPE_ORIG */
} demo_rope_scaling;

/* The MoE router and combine of a model family (demo_config.moe_family).
 * DeepSeek-V3: sigmoid scores, a selection bias (e_score_correction_bias)
 * added to them to choose, never to weigh, group-limited top-k
 * (DEMO_GROUPS groups, the best DEMO_TOPK_GROUP), the chosen scores
 * renormalised and times DEMO_ROUTED_SCALE, one shared expert.  Mixtral:
 * softmax scores, top-k renormalised, no shared expert.  Qwen2-MoE: softmax,
 * top-k not renormalised, a shared expert times sigmoid(x . w_gate). */
typedef enum demo_moe_family { DEMO_MOE_AUTO, DEMO_MOE_DEEPSEEK, DEMO_MOE_MIXTRAL, DEMO_MOE_QWEN2 } demo_moe_family;

typedef struct demo_config {
	int layers;    /* DEMO_MIN_LAYERS..DEMO_MAX_LAYERS */
	int seq;       /* DEMO_MIN_SEQ..DEMO_MAX_SEQ */
	int window;    /* the sliding layers' window (layer_types) and the sliding-window bug's, >= 1 */
	uint64_t seed; /* weights and tokens */
	int prefill;   /* the kv-cache bug's prefill: positions before it attend to fresh K and V, later ones (the
			* decode steps) to the cache's; 0: demo_prefill's default */
	bool moe;      /* a mixture-of-experts MLP in every layer: DEMO_EXPERTS experts of DEMO_EXPERT_FF, the top
			* DEMO_TOPK, of the family moe_family */
	demo_moe_family moe_family; /* DEMO_MOE_AUTO: DeepSeek, or what a bug implies (demo_config_imply) */
	bool sinks;    /* gpt-oss-like learned sink logits per head: one more column in each softmax, dropped after it */
	float softcap; /* Gemma-2-like final logit soft-capping, logits = C tanh(z / C); 0: none */
	demo_act act;  /* the dense MLP's activation */
	demo_rope_scaling rope_scaling; /* of every layer, or of the global layers with layer_types */
	double rope_factor;             /* its factor, > 1 */
	bool layer_types; /* Gemma-3-like: even layers sliding (theta DEMO_LOCAL_THETA, no scaling, window), odd layers
			   * global (theta DEMO_GLOBAL_THETA with rope_scaling, linear x8 by default, no window) */
	int nope;         /* > 0: layers l with (l + 1) % nope == 0 have no RoPE (Llama 4's no_rope_layer_interval) */
} demo_config;

/* The soft-cap the softcap-missing bug implies when --softcap is not given:
 * the demo's logits reach about 12, so a cap of 10 squashes the large ones. */
#define DEMO_SOFTCAP 10.0f
/* gpt-oss's SwiGLU: gate clamped to at most the limit, up to +-limit,
 * out = (up + 1) * gate * sigmoid(alpha * gate).  The demo scales gate_proj
 * and up_proj by DEMO_OAI_SCALE (and down_proj down by its square) so that
 * some values pass the limit. */
#define DEMO_OAI_ALPHA 1.702f
#define DEMO_OAI_LIMIT 7.0f
#define DEMO_OAI_SCALE 4.0f

#define DEMO_LOCAL_THETA 10000.0
#define DEMO_GLOBAL_THETA 1000000.0
#define DEMO_GLOBAL_FACTOR 8.0

#define DEMO_EXPERTS 8
#define DEMO_TOPK 2
#define DEMO_TOPK_BUG 3 /* the moe-topk-k bug's k */
#define DEMO_GROUPS 4
#define DEMO_TOPK_GROUP 2
#define DEMO_EXPERT_FF 32
#define DEMO_ROUTED_SCALE 2.5f

/* Defaults: 4 layers, 16 positions, window 8, seed 1, the default prefill, dense, plain RoPE, no sinks, no
 * soft-cap, silu. */
void demo_config_init(demo_config *cfg);
/* The model options bugs need, set in cfg where it has none: the reference
 * must have what the candidate loses (sinks-dropped: sinks, softcap-missing:
 * a soft-cap of DEMO_SOFTCAP, oai-*: the SwiGLU-OAI activation,
 * rope-scaling-* --layer-types, rope-llama3 llama3:8, yarn-* yarn:4,
 * nope-inverted --nope 4).  0, or -1 with msg when cfg contradicts one of
 * them (or nan-overflow meets the SwiGLU-OAI MLP, which cannot overflow). */
int demo_config_imply(demo_config *cfg, demo_bugset bugs, char *msg, size_t size);

typedef struct demo_model demo_model;

demo_model *demo_model_new(const demo_config *cfg);
void demo_model_free(demo_model *m);

/* One recorded activation, [rows, cols] = [seq, width] (batch 1 implied). */
typedef struct demo_tap {
	int layer;    /* -1 for embed, final_norm, logits */
	char tap[32]; /* canonical tap name: "attn", "attn.q", "mlp.topk_weights", ... */
	int64_t rows, cols;
	float *data;
} demo_tap;

typedef struct demo_run {
	demo_tap *taps; /* forward order */
	size_t n_taps;
	int64_t *tokens; /* the ids the run embedded, [seq] */
	int seq;
} demo_run;

/* Which taps a run records besides the main ones. */
typedef enum demo_taps {
	DEMO_TAPS_MAIN,   /* embed, attn_norm, attn, mlp_norm, mlp, block, final_norm, logits */
	DEMO_TAPS_SUB,    /* and attn.q, attn.k (after RoPE), attn.v, attn.o (o_proj's own
			   * output, before any multiplier), mlp.gate, mlp.up, mlp.down (an MoE
			   * layer: mlp.router, mlp.topk_ids, mlp.topk_weights, mlp.experts, mlp.shared) */
	DEMO_TAPS_REPLAY, /* and the taps a replay needs (tbisect-rules(5) CONFIRMED CAUSES): attn.q and attn.k
			   * before RoPE, attn.q_rope and attn.k_rope after it, attn.core
			   * (o_proj's input), mlp.act (down_proj's input), with attn.v,
			   * attn.o, mlp.gate, mlp.up, mlp.down */
} demo_taps;

/* Run the model with the given bugs (0: the reference), recording taps.
 * Fills *out; -1 when out of memory (*out is then empty). */
int demo_forward(const demo_model *m, demo_bugset bugs, demo_taps taps, demo_run *out);
void demo_run_free(demo_run *r);

/* The recorded tap for a cell, or NULL. */
const demo_tap *demo_run_find(const demo_run *r, int layer, const char *tap);

#endif
