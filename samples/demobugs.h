/*
 * demobugs: the catalogue of porting bugs the demo model (demomodel) can
 * inject into its candidate, with the cell each bug must first show in.
 * One table (DEMO_BUG_LIST) gives the enum, the names for --bug and --list,
 * the cause id each must be named by, and the expectations that mkdemo
 * --expect prints and the tests check.
 * Pure data and pure functions; used by mkdemo and tests/test_demomodel.
 */
#ifndef TB_DEMOBUGS_H
#define TB_DEMOBUGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Expected first divergence of a bug alone: layer (a number, DEMO_MID for
 * the middle layer, DEMO_GLOBAL for the first layer without a window, -1
 * for model-level taps) and tap, or a verdict. */
#define DEMO_MID (-2)
#define DEMO_GLOBAL (-3) /* layer 0, or 1 with --layer-types (whose even layers are sliding) */

/* rope_scaling.original_max_position_embeddings of every scaling: small, so
 * that the wavelength bands of llama3 and YaRN split the 8 channels of a
 * head (and a dynamic scaling shows past it) */
#define DEMO_ROPE_ORIG 16

/* Visibility: when the bug changes anything at all. */
typedef enum demo_shows {
	DEMO_SHOWS_ALWAYS,
	DEMO_SHOWS_PAST_WINDOW, /* only when seq > --window */
	DEMO_SHOWS_PAST_100,    /* only when seq > 100 */
	DEMO_SHOWS_DENSE,       /* only with the dense MLP (a bug of its gate, up or down projection) */
	DEMO_SHOWS_MOE,         /* only with the MoE MLP (mkdemo --moe) */
	DEMO_SHOWS_PAST_PREFILL, /* only when seq > --prefill */
	DEMO_SHOWS_PAST_ORIG,   /* only when seq > original_max_position_embeddings (DEMO_ROPE_ORIG) */
} demo_shows;

/*      id                name                cause               layer  tap           with --sub  with --replay  shows                 what */
#define DEMO_BUG_LIST(X) \
	X(TOKENIZER,        "tokenizer",        "tokenizer",        -1, "embed",      NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "token 5 has another id (the port's tokenizer merges differently)") \
	X(TOKENIZER_BOS,    "tokenizer-bos",    "tokenizer",        -1, "embed",      NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "BOS added twice: the candidate's tokens are shifted right by one") \
	X(EMBEDDING_WEIGHTS, "embedding-weights", "embedding-weights",-1, "embed",    NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "embedding rows read off by one (token t gets row t+1)") \
	X(EMBEDDING_SCALE,  "embedding-scale",  "embedding-scale",  -1, "embed",      NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "embeddings multiplied by sqrt(hidden), as Gemma does but this model does not") \
	X(NORM_FORMULATION, "norm-formulation", "norm-formulation", 0, "attn_norm",   NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "RMSNorm computes x*(1+w) instead of x*w") \
	X(NORM_EPSILON,     "norm-epsilon",     "norm-epsilon",     0, "attn_norm",   NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "RMSNorm epsilon 1e-5 instead of 1e-6") \
	X(ROPE_STYLE,       "rope-style",       "rope-style",       0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "RoPE pairs interleaved channels (2i, 2i+1) instead of rotate-half (i, i+d/2)") \
	X(ROPE_THETA,       "rope-theta",       "rope-theta",       0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "RoPE base 500000 instead of 10000") \
	X(ROTATE_HALF_SIGN, "rotate-half-sign", "rotate-half-sign", 0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "rotate_half returns (x2, -x1) instead of (-x2, x1): rotation by -theta") \
	X(PARTIAL_ROPE,     "partial-rope",     "partial-rope",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "RoPE applied to the first half of each head's channels only") \
	X(DECODE_POSITION,  "decode-position",  "decode-position",  0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_PAST_100,    "RoPE table of 100 positions: later positions reuse position 99") \
	X(QK_NORM,          "qk-norm",          "qk-norm",          0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "per-head RMSNorm on q and k that the model does not have") \
	X(ATTENTION_LAYOUT, "attention-layout", "attention-layout", 0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "q_proj output viewed as [seq, head_dim, heads] instead of [seq, heads, head_dim]") \
	X(GQA_REPEAT,       "gqa-repeat",       "gqa-repeat",       0, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_ALWAYS,      "kv heads tiled (h % kv_heads) instead of repeated (h / group)") \
	X(SOFTMAX_SCALE,    "softmax-scale",    "softmax-scale",    0, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_ALWAYS,      "attention scores not divided by sqrt(head_dim)") \
	X(ATTENTION_MASK,   "attention-mask",   "attention-mask",   0, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_ALWAYS,      "no causal mask: every position attends to the whole sequence") \
	X(SLIDING_WINDOW,   "sliding-window",   "sliding-window",   DEMO_GLOBAL, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_PAST_WINDOW, "a sliding window of --window positions the model does not have") \
	X(SCALE_MULTIPLIER, "scale-multiplier", "scale-multiplier", 0, "attn",        NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "attention output multiplied by 0.5 (a MuP/residual multiplier from another model)") \
	X(MLP_ACTIVATION,   "mlp-activation",   "mlp-activation",   0, "mlp",         "mlp.down", "mlp.act",     DEMO_SHOWS_DENSE,       "MLP activation gelu_tanh instead of silu") \
	X(MLP_GATING,       "mlp-gating",       "mlp-gating",       0, "mlp",         "mlp.down", "mlp.act",     DEMO_SHOWS_DENSE,       "activation applied to up instead of gate: act(up)*gate") \
	X(MLP_BIAS,         "mlp-bias",         "mlp-bias",         0, "mlp",         "mlp.down", NULL,          DEMO_SHOWS_DENSE,       "a down_proj bias the model does not have (a constant offset per channel)") \
	X(RESIDUAL_WIRING,  "residual-wiring",  "residual-wiring",  0, "block",       NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "second residual taken from the norm output: block = mlp_norm + mlp") \
	X(WEIGHT_MAPPING,   "weight-mapping",   "weight-mapping",   DEMO_MID, "attn", "attn.o",   NULL,          DEMO_SHOWS_ALWAYS,      "the middle layer's o_proj weight loaded transposed; earlier layers exact") \
	X(NAN_OVERFLOW,     "nan-overflow",     "nan-overflow",     1, "mlp",         "mlp.down", "mlp.act",     DEMO_SHOWS_DENSE,       "layer 1's MLP computed in float16: its large intermediate values overflow to inf/NaN") \
	X(DTYPE_PRECISION,  "dtype-precision",  "dtype-precision",  -1, "close",      NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "hidden states between layers and logits kept in bfloat16: close, not diverged") \
	X(FINAL_NORM,       "final-norm",       "final-norm",       -1, "final_norm", NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "final norm weight not loaded (ones)") \
	X(LM_HEAD,          "lm-head",          "lm-head",          -1, "logits",     NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "lm_head rows off by one (logit v computed with row v+1)") \
	X(TIED_EMBEDDINGS,  "tied-embeddings",  "tied-embeddings",  -1, "logits",     NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "lm_head tied to embed_tokens though the model has its own lm_head weight") \
	X(DUMP_OFFSET,      "dump-offset",      "dump-offset",      0, "block",       NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "block taps written off by one (hidden_states[i] as layer i: block N holds block N-1)") \
	X(DUMP_DUPLICATE,   "dump-duplicate",   "dump-duplicate",   1, "mlp",         NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "every layer's mlp tap holds layer 0's (the hook registered on layers[0].mlp)") \
	X(MOE_SOFTMAX,      "moe-softmax",      "moe-routing",      0, "mlp",         "mlp.topk_ids", NULL,      DEMO_SHOWS_MOE,         "MoE router scores by softmax instead of sigmoid (DeepSeek-V3 scores by sigmoid; with its bias they choose other experts)") \
	X(MOE_RENORM,       "moe-renorm",       "moe-routing",      0, "mlp",         "mlp.topk_weights", NULL,  DEMO_SHOWS_MOE,         "MoE top-k weights not renormalised (norm_topk_prob ignored)") \
	X(MOE_SCALING,      "moe-scaling",      "moe-routing",      0, "mlp",         "mlp.topk_weights", NULL,  DEMO_SHOWS_MOE,         "MoE routed scaling factor 2.5 applied twice") \
	X(MOE_EXPERT_ORDER, "moe-expert-order", "expert-mapping",   0, "mlp",         "mlp.experts", NULL,       DEMO_SHOWS_MOE,         "MoE experts converted in reverse order (expert e loads expert E-1-e)") \
	X(MOE_SHARED,       "moe-shared",       "shared-expert",    0, "mlp",         "mlp.shared", NULL,        DEMO_SHOWS_MOE,         "MoE shared expert left out") \
	X(SINKS_DROPPED,    "sinks-dropped",    "attention-sink",   0, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_ALWAYS,      "learned per-head attention sinks ignored (gpt-oss; implies --sinks)") \
	X(SOFTCAP_MISSING,  "softcap-missing",  "final-softcap",    -1, "logits",     NULL,       NULL,          DEMO_SHOWS_ALWAYS,      "final logit soft-capping left out (Gemma 2; implies --softcap 10)") \
	X(OAI_PLUS_ONE,     "oai-plus-one",     "mlp-activation",   0, "mlp",         "mlp.down", "mlp.act",     DEMO_SHOWS_DENSE,       "SwiGLU-OAI computed glu*up instead of glu*(up+1) (implies --mlp-act oai)") \
	X(OAI_CLAMP,        "oai-clamp",        "mlp-activation",   0, "mlp",         "mlp.down", "mlp.act",     DEMO_SHOWS_DENSE,       "SwiGLU-OAI without its clamps of gate and up to 7 (implies --mlp-act oai)") \
	X(KV_CACHE,         "kv-cache",         "kv-cache",         0, "attn",        "attn.o",   "attn.core",   DEMO_SHOWS_PAST_PREFILL, "decode positions (>= --prefill) read K and V back from an fp8 e4m3 cache") \
	X(DUMP_ALIASING,    "dump-aliasing",    "dump-aliasing",    0, "mlp",         "mlp.down", NULL,          DEMO_SHOWS_ALWAYS,      "mlp taps saved by reference, then the residual added in place: they hold block") \
	X(ROPE_SCALING_MISSING, "rope-scaling-missing", "rope-scaling",     1, "attn", "attn.q", "attn.q_rope", DEMO_SHOWS_ALWAYS,      "the global layers' linear RoPE scaling (x8) not applied (implies --layer-types)") \
	X(ROPE_SCALING_ALL, "rope-scaling-all", "rope-scaling",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "the global layers' RoPE theta and scaling used on the sliding layers too (implies --layer-types)") \
	X(ROPE_LLAMA3,      "rope-llama3",      "rope-scaling",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "llama3 RoPE scaling with low_freq_factor and high_freq_factor swapped (implies --rope-scaling llama3:8)") \
	X(ROPE_DYNAMIC,     "rope-dynamic",     "rope-scaling",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_PAST_ORIG,   "dynamic NTK RoPE scaling left out, as llama.cpp has none (implies --rope-scaling dynamic:4)") \
	X(YARN_MSCALE,      "yarn-mscale",      "yarn-scaling",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "YaRN attention factor (0.1 ln(factor) + 1) dropped (implies --rope-scaling yarn:4)") \
	X(YARN_MSCALE_TWICE, "yarn-mscale-twice", "yarn-scaling",     0, "attn",      "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "YaRN attention factor applied twice (implies --rope-scaling yarn:4)") \
	X(YARN_RAMP,        "yarn-ramp",        "yarn-scaling",     0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "YaRN without its ramp: every frequency divided by the factor (implies --rope-scaling yarn:4)") \
	X(NOPE_INVERTED,    "nope-inverted",    "nope-layers",      0, "attn",        "attn.q",   "attn.q_rope", DEMO_SHOWS_ALWAYS,      "no_rope_layers read the wrong way round: RoPE on the NoPE layers only (implies --nope 4)") \
	X(MOE_BIAS_WEIGHTS, "moe-bias-weights", "moe-routing",      0, "mlp",         "mlp.topk_weights", NULL,  DEMO_SHOWS_MOE,         "MoE selection bias (e_score_correction_bias) added into the weights too, not only to choose (DeepSeek)") \
	X(MOE_GROUP,        "moe-group",        "moe-routing",      0, "mlp",         "mlp.topk_ids", NULL,      DEMO_SHOWS_MOE,         "MoE group-limited top-k ignored: the top 2 of all 8 experts, not of the best 2 of 4 groups (DeepSeek)") \
	X(MOE_SHARED_GATE,  "moe-shared-gate",  "shared-expert",    0, "mlp",         "mlp.shared", NULL,        DEMO_SHOWS_MOE,         "MoE shared expert's sigmoid gate not applied (Qwen2-MoE; implies --moe-router qwen2)") \
	X(MOE_TOPK_K,       "moe-topk-k",       "moe-routing",      0, "mlp",         "mlp.topk_ids", NULL,      DEMO_SHOWS_MOE,         "MoE top-3 experts chosen instead of top-2")

typedef enum demo_bug {
#define DEMO_BUG_ENUM(id, name, cause, layer, tap, sub, replay, shows, what) DEMO_BUG_##id,
	DEMO_BUG_LIST(DEMO_BUG_ENUM)
#undef DEMO_BUG_ENUM
	DEMO_N_BUGS
} demo_bug;

/* A set of bugs: bit (1 << DEMO_BUG_x).  0 is the correct port. */
typedef uint64_t demo_bugset;

#define DEMO_HAS(set, id) (((set) >> DEMO_BUG_##id) & 1u)

typedef struct demo_bug_info {
	const char *name;
	const char *cause;   /* the cause id tbisect must name for it (tbisect-rules(5)) */
	int layer;           /* expected first divergence: layer, DEMO_MID or -1 */
	const char *tap;     /* ... its tap, or "close" (a verdict, no divergence) */
	const char *sub_tap; /* the tap instead when sub-taps are written; NULL: same */
	const char *replay_tap; /* the tap instead when the replay taps are written; NULL: sub_tap's */
	demo_shows shows;
	const char *what;    /* one line for --list */
} demo_bug_info;

extern const demo_bug_info demo_bugs[DEMO_N_BUGS];

/* Parse "none" or a comma-separated list of names.  0, or -1 with msg. */
int demo_bugs_parse(const char *list, demo_bugset *out, char *msg, size_t size);
/* "none" or the names joined with commas, in table order. */
void demo_bugs_format(demo_bugset set, char *buf, size_t size);

/* The shape of the run an expectation is for. */
typedef struct demo_expect_ctx {
	int layers, seq, window;
	bool sub;    /* attn.q/k/v and mlp.gate/up written */
	bool replay; /* and the replay taps (attn.q_rope, attn.core, mlp.act, ...) */
	bool moe;    /* the MoE MLP (mkdemo --moe) */
	int prefill; /* the kv-cache bug's prefill (demo_prefill); 0: the default for seq */
	bool layer_types; /* mkdemo --layer-types: the even layers have the window already */
} demo_expect_ctx;

/* The kv-cache bug's prefill length: prefill, or when 0 half of seq (8 of
 * 16: a prefill and eight decode steps). */
int demo_prefill(int seq, int prefill);

/* What `tbisect check` must report for a candidate with these bugs: the
 * first diverged cell ("L0.attn", "embed"), or "close" or "match" when
 * nothing diverges.  Several bugs: the earliest in forward order. */
void demo_expect(demo_bugset set, const demo_expect_ctx *ctx, char *buf, size_t size);

#endif
