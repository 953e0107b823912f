#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demomodel.h"
#include "tensor/dtype.h"

#define H DEMO_HIDDEN
#define NH DEMO_HEADS
#define NKV DEMO_KV_HEADS
#define HD DEMO_HEAD_DIM
#define FF DEMO_MLP
#define V DEMO_VOCAB
#define GROUP (NH / NKV)

#define BOS 1
#define EPS 1e-6f
#define EPS_BUG 1e-5f
#define THETA_BUG 500000.0
#define ROPE_TABLE_BUG 100 /* positions the decode-position bug's RoPE table holds */
#define TOKENIZER_BUG_POS 5
/* Embeddings are small, as in trained checkpoints (std 0.01): this is what
 * makes the norm-epsilon bug visible in the first norm. */
#define EMBED_STD 0.01
#define NORM_W_STD 0.1
#define LM_HEAD_STD (3.0 / 8.0) /* logits of std ~3: a peaked softmax */
#define MLP_BIAS_STD 0.1
#define SCALE_MULTIPLIER 0.5f
/* Layer 1's MLP is "hot", as in T5 v1.1: gate and up are scaled up and
 * down_proj scaled down by the square, so the output has the usual size
 * while the intermediate values exceed the float16 range (65504) at some
 * positions (every seed tried, at 16 and 128 positions). */
#define HOT_LAYER 1
#define HOT_SCALE 128.0f

struct demo_layer {
	float *sinks;           /* [NH] sink logits (demo_config.sinks) */
	float *in_norm, *wq, *wk, *wv, *wo, *post_norm, *wg, *wu, *wd;
	float *router;          /* MoE: [DEMO_EXPERTS, H] */
	float *eg, *eu, *ed;    /* MoE: the experts' gate, up [E, EF, H] and down [E, H, EF] */
	float *sg, *su, *sd;    /* MoE: the shared expert's */
	float *bias;            /* MoE, DeepSeek: [E] e_score_correction_bias, added to the scores to choose */
	float *sgate;           /* MoE, Qwen2: [H] shared_expert_gate, the shared expert times sigmoid(x . sgate) */
};

struct demo_model {
	demo_config cfg;
	float *embed, *final_norm, *lm_head, *mlp_bias;
	struct demo_layer *layer;
	int64_t *tokens;
	float *blob; /* every weight, one allocation */
};

void demo_config_init(demo_config *cfg)
{
	cfg->layers = 4;
	cfg->seq = 16;
	cfg->window = 8;
	cfg->seed = 1;
	cfg->prefill = 0;
	cfg->moe = false;
	cfg->moe_family = DEMO_MOE_AUTO;
	cfg->sinks = false;
	cfg->softcap = 0;
	cfg->act = DEMO_ACT_SILU;
	cfg->rope_scaling = DEMO_ROPE_PLAIN;
	cfg->rope_factor = 1;
	cfg->layer_types = false;
	cfg->nope = 0;
}

/* The MoE families each MoE bug applies to (bit 1 << demo_moe_family). */
#define FAM(f) (1u << DEMO_MOE_##f)
static const struct {
	demo_bug bug;
	unsigned families;
} moe_bugs[] = {
	{DEMO_BUG_MOE_SOFTMAX, FAM(DEEPSEEK)},
	{DEMO_BUG_MOE_RENORM, FAM(DEEPSEEK) | FAM(MIXTRAL)},
	{DEMO_BUG_MOE_SCALING, FAM(DEEPSEEK)},
	{DEMO_BUG_MOE_SHARED, FAM(DEEPSEEK) | FAM(QWEN2)},
	{DEMO_BUG_MOE_BIAS_WEIGHTS, FAM(DEEPSEEK)},
	{DEMO_BUG_MOE_GROUP, FAM(DEEPSEEK)},
	{DEMO_BUG_MOE_SHARED_GATE, FAM(QWEN2)},
};

static const char *const family_names[] = {"", "deepseek", "mixtral", "qwen2"};

/* Settle cfg's MoE family (moe-shared-gate implies qwen2, else deepseek)
 * and refuse a bug its router does not have. */
static int moe_family(demo_config *cfg, demo_bugset bugs, char *msg, size_t size)
{
	if (cfg->moe_family == DEMO_MOE_AUTO)
		cfg->moe_family = DEMO_HAS(bugs, MOE_SHARED_GATE) ? DEMO_MOE_QWEN2 : DEMO_MOE_DEEPSEEK;
	for (size_t i = 0; i < sizeof moe_bugs / sizeof *moe_bugs; i++) {
		char fams[32] = "";
		if (!((bugs >> moe_bugs[i].bug) & 1u) || moe_bugs[i].families & (1u << cfg->moe_family))
			continue;
		for (int f = DEMO_MOE_DEEPSEEK; f <= DEMO_MOE_QWEN2; f++)
			if (moe_bugs[i].families & (1u << f))
				snprintf(fams + strlen(fams), sizeof fams - strlen(fams), "%s%s", fams[0] ? " or " : "",
					 family_names[f]);
		snprintf(msg, size, "%s: the %s router has nothing it changes (use --moe-router %s)",
			 demo_bugs[moe_bugs[i].bug].name, family_names[cfg->moe_family], fams);
		return -1;
	}
	return 0;
}
#undef FAM

int demo_config_imply(demo_config *cfg, demo_bugset bugs, char *msg, size_t size)
{
	bool yarn = DEMO_HAS(bugs, YARN_MSCALE) || DEMO_HAS(bugs, YARN_MSCALE_TWICE) || DEMO_HAS(bugs, YARN_RAMP);
	bool llama3 = DEMO_HAS(bugs, ROPE_LLAMA3), dynamic = DEMO_HAS(bugs, ROPE_DYNAMIC);
	demo_rope_scaling need = yarn ? DEMO_ROPE_YARN : llama3 ? DEMO_ROPE_LLAMA3 : DEMO_ROPE_DYNAMIC;
	const char *bug = yarn ? "a yarn bug" : llama3 ? "rope-llama3" : "rope-dynamic";

	if (DEMO_HAS(bugs, SINKS_DROPPED))
		cfg->sinks = true;
	if (DEMO_HAS(bugs, SOFTCAP_MISSING) && cfg->softcap == 0)
		cfg->softcap = DEMO_SOFTCAP;
	if (DEMO_HAS(bugs, OAI_PLUS_ONE) || DEMO_HAS(bugs, OAI_CLAMP))
		cfg->act = DEMO_ACT_OAI;
	if (cfg->act == DEMO_ACT_OAI && DEMO_HAS(bugs, NAN_OVERFLOW) && !cfg->moe) {
		/* nothing to expect: the pair is match or close by length */
		snprintf(msg, size, "nan-overflow: SwiGLU-OAI's clamps keep its MLP within float16's range (use --mlp-act silu)");
		return -1;
	}
	if (cfg->moe && moe_family(cfg, bugs, msg, size) < 0)
		return -1;
	if (DEMO_HAS(bugs, ROPE_SCALING_MISSING) || DEMO_HAS(bugs, ROPE_SCALING_ALL))
		cfg->layer_types = true;
	if (DEMO_HAS(bugs, NOPE_INVERTED) && !cfg->nope)
		cfg->nope = 4;
	if (yarn + llama3 + dynamic > 1) {
		snprintf(msg, size, "rope-llama3, rope-dynamic and the yarn bugs need different --rope-scaling");
		return -1;
	}
	if (!(yarn || llama3 || dynamic))
		return 0;
	if (cfg->layer_types) {
		/* the bugs' table expects them in layer 0, which --layer-types makes a sliding layer */
		snprintf(msg, size, "%s scales every layer: not with --layer-types", bug);
		return -1;
	}
	if (cfg->rope_scaling == DEMO_ROPE_PLAIN) {
		cfg->rope_scaling = need;
		cfg->rope_factor = llama3 ? 8 : 4;
	}
	if (cfg->rope_scaling != need) {
		snprintf(msg, size, "%s needs --rope-scaling %s:F", bug, yarn ? "yarn" : llama3 ? "llama3" : "dynamic");
		return -1;
	}
	return 0;
}

/* --- seeded random numbers: one stream per tensor, so a tensor's values
 * depend only on the seed and the tensor, not on the other dimensions --- */

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static rng rng_for(uint64_t seed, uint64_t stream)
{
	uint64_t x = seed * 0x100000001B3ull + stream;
	rng r = {splitmix(&x) | 1};

	return r;
}

static double uniform(rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return ((r->s >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(rng *r)
{
	double u = uniform(r), v = uniform(r);

	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Weights are bfloat16 values, as in a bf16 checkpoint: rounding them to
 * bf16 changes nothing, only rounding activations does. */
static void fill(float *w, size_t n, double mean, double std, uint64_t seed, uint64_t stream)
{
	rng r = rng_for(seed, stream);

	for (size_t i = 0; i < n; i++)
		w[i] = tb_bf16_to_f32(tb_f32_to_bf16((float)(mean + std * gauss(&r))));
}

/* Tensor streams: model-level ones, then 16 per layer. */
enum { ST_EMBED = 1, ST_FINAL_NORM, ST_LM_HEAD, ST_MLP_BIAS, ST_TOKENS, ST_LAYER0 = 16 };
/* The MoE weights' streams, 16 per layer after every dense layer's. */
#define ST_MOE0 ((uint64_t)1 << 20)
#define E DEMO_EXPERTS
#define EF DEMO_EXPERT_FF
#define MOE_PER_LAYER ((size_t)E * H + (size_t)(E + 1) * 3 * H * EF + E + H)
/* The selection bias: as large as the sigmoid scores' spread between
 * neighbouring experts, so that it changes some choices. */
#define BIAS_STD 0.05

demo_model *demo_model_new(const demo_config *cfg)
{
	size_t per_layer = NH + 2 * H + (size_t)H * NH * HD * 2 + (size_t)H * NKV * HD * 2 + (size_t)3 * H * FF;
	size_t total = (size_t)V * H * 2 + 2 * H + (per_layer + (cfg->moe ? MOE_PER_LAYER : 0)) * (size_t)cfg->layers;
	demo_model *m = calloc(1, sizeof *m);
	float *p;

	if (!m)
		return NULL;
	m->cfg = *cfg;
	if (m->cfg.moe_family == DEMO_MOE_AUTO)
		m->cfg.moe_family = DEMO_MOE_DEEPSEEK;
	m->blob = malloc(total * sizeof *m->blob);
	m->layer = calloc((size_t)cfg->layers, sizeof *m->layer);
	m->tokens = malloc((size_t)cfg->seq * sizeof *m->tokens);
	if (!m->blob || !m->layer || !m->tokens) {
		demo_model_free(m);
		return NULL;
	}
	p = m->blob;
#define TAKE(n) (p += (n), p - (n))
	m->embed = TAKE((size_t)V * H);
	m->lm_head = TAKE((size_t)V * H);
	m->final_norm = TAKE(H);
	m->mlp_bias = TAKE(H);
	fill(m->embed, (size_t)V * H, 0, EMBED_STD, cfg->seed, ST_EMBED);
	fill(m->lm_head, (size_t)V * H, 0, LM_HEAD_STD, cfg->seed, ST_LM_HEAD);
	fill(m->final_norm, H, 1, NORM_W_STD, cfg->seed, ST_FINAL_NORM);
	fill(m->mlp_bias, H, 0, MLP_BIAS_STD, cfg->seed, ST_MLP_BIAS);
	for (int l = 0; l < cfg->layers; l++) {
		struct demo_layer *L = &m->layer[l];
		uint64_t st = ST_LAYER0 + 16 * (uint64_t)l;
		double hot = l == HOT_LAYER ? HOT_SCALE : 1, wide = cfg->act == DEMO_ACT_OAI ? DEMO_OAI_SCALE : 1;
		L->sinks = TAKE(NH);
		L->in_norm = TAKE(H);
		L->post_norm = TAKE(H);
		L->wq = TAKE((size_t)NH * HD * H);
		L->wo = TAKE((size_t)H * NH * HD);
		L->wk = TAKE((size_t)NKV * HD * H);
		L->wv = TAKE((size_t)NKV * HD * H);
		L->wg = TAKE((size_t)FF * H);
		L->wu = TAKE((size_t)FF * H);
		L->wd = TAKE((size_t)H * FF);
		fill(L->in_norm, H, 1, NORM_W_STD, cfg->seed, st + 0);
		fill(L->post_norm, H, 1, NORM_W_STD, cfg->seed, st + 1);
		fill(L->wq, (size_t)NH * HD * H, 0, 1 / sqrt(H), cfg->seed, st + 2);
		fill(L->wk, (size_t)NKV * HD * H, 0, 1 / sqrt(H), cfg->seed, st + 3);
		fill(L->wv, (size_t)NKV * HD * H, 0, 1 / sqrt(H), cfg->seed, st + 4);
		fill(L->wo, (size_t)H * NH * HD, 0, 1 / sqrt(NH * HD), cfg->seed, st + 5);
		fill(L->wg, (size_t)FF * H, 0, hot * wide / sqrt(H), cfg->seed, st + 6);
		fill(L->wu, (size_t)FF * H, 0, hot * wide / sqrt(H), cfg->seed, st + 7);
		fill(L->wd, (size_t)H * FF, 0, 1 / sqrt(FF) / (hot * hot * wide * wide), cfg->seed, st + 8);
		fill(L->sinks, NH, 0, 1, cfg->seed, st + 9);
		if (!cfg->moe)
			continue;
		st = ST_MOE0 + 16 * (uint64_t)l;
		L->router = TAKE((size_t)E * H);
		L->eg = TAKE((size_t)E * EF * H);
		L->eu = TAKE((size_t)E * EF * H);
		L->ed = TAKE((size_t)E * H * EF);
		L->sg = TAKE((size_t)EF * H);
		L->su = TAKE((size_t)EF * H);
		L->sd = TAKE((size_t)H * EF);
		L->bias = TAKE(E);
		L->sgate = TAKE(H);
		fill(L->router, (size_t)E * H, 0, 1 / sqrt(H), cfg->seed, st + 0);
		fill(L->eg, (size_t)E * EF * H, 0, 1 / sqrt(H), cfg->seed, st + 1);
		fill(L->eu, (size_t)E * EF * H, 0, 1 / sqrt(H), cfg->seed, st + 2);
		fill(L->ed, (size_t)E * H * EF, 0, 1 / sqrt(EF), cfg->seed, st + 3);
		fill(L->sg, (size_t)EF * H, 0, 1 / sqrt(H), cfg->seed, st + 4);
		fill(L->su, (size_t)EF * H, 0, 1 / sqrt(H), cfg->seed, st + 5);
		fill(L->sd, (size_t)H * EF, 0, 1 / sqrt(EF), cfg->seed, st + 6);
		fill(L->bias, E, 0, BIAS_STD, cfg->seed, st + 7);
		fill(L->sgate, H, 0, 1 / sqrt(H), cfg->seed, st + 8);
	}
#undef TAKE
	{
		rng r = rng_for(cfg->seed, ST_TOKENS);
		m->tokens[0] = BOS;
		for (int i = 1; i < cfg->seq; i++)
			m->tokens[i] = 2 + (int64_t)(uniform(&r) * (V - 2));
	}
	return m;
}

void demo_model_free(demo_model *m)
{
	if (!m)
		return;
	free(m->blob);
	free(m->layer);
	free(m->tokens);
	free(m);
}

/* --- the forward pass --- */

typedef struct fwd {
	const demo_model *m;
	demo_bugset bugs;
	demo_taps taps;
	int S;
	demo_run *run;
	int failed;
} fwd;

static void emit(fwd *f, int layer, const char *tap, const float *x, int64_t cols)
{
	demo_run *r = f->run;
	demo_tap *t, *grown;
	size_t n = (size_t)f->S * (size_t)cols;

	if (f->failed)
		return;
	grown = realloc(r->taps, (r->n_taps + 1) * sizeof *r->taps);
	if (!grown) {
		f->failed = 1;
		return;
	}
	r->taps = grown;
	t = &r->taps[r->n_taps];
	t->data = malloc(n * sizeof *t->data);
	if (!t->data) {
		f->failed = 1;
		return;
	}
	memcpy(t->data, x, n * sizeof *x);
	t->layer = layer;
	snprintf(t->tap, sizeof t->tap, "%s", tap);
	t->rows = f->S;
	t->cols = cols;
	r->n_taps++;
}

/* Round in place to bfloat16 (the dtype-precision bug: the hidden states
 * between layers and the logits are kept in bf16; rounding inside the
 * sublayers too would push this 4-layer model past rel_l2 1e-2) or to
 * float16 (the hot layer of the nan-overflow bug: past 65504 is inf). */
static void to_bf16(const fwd *f, float *x, size_t n)
{
	if (!DEMO_HAS(f->bugs, DTYPE_PRECISION))
		return;
	for (size_t i = 0; i < n; i++)
		x[i] = tb_bf16_to_f32(tb_f32_to_bf16(x[i]));
}

static void to_f16(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tb_f16_to_f32(tb_f32_to_f16(x[i]));
}

/* y[rows, out] = x[rows, in] W^T for a torch-layout W [out, in]; transposed:
 * y = x W, the weight read the wrong way round (square W only). */
static void linear(const float *x, int rows, int in, const float *w, int out, float *y, bool transposed)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasNoTrans : CblasTrans, rows, out, in, 1.0f, x, in, w,
		    transposed ? out : in, 0.0f, y, out);
}

static void rmsnorm(const fwd *f, const float *x, const float *w, bool unit_weight, float *y)
{
	float eps = DEMO_HAS(f->bugs, NORM_EPSILON) ? EPS_BUG : EPS;

	for (int i = 0; i < f->S; i++) {
		const float *xi = x + (size_t)i * H;
		double ss = 0;
		for (int c = 0; c < H; c++)
			ss += (double)xi[c] * xi[c];
		float inv = 1.0f / sqrtf((float)(ss / H) + eps);
		for (int c = 0; c < H; c++) {
			float wc = unit_weight ? 1.0f : DEMO_HAS(f->bugs, NORM_FORMULATION) ? 1.0f + w[c] : w[c];
			y[(size_t)i * H + c] = xi[c] * inv * wc;
		}
	}
}

/* RMSNorm over one head's channels, unit weight (the qk-norm bug). */
static void head_norm(float *v)
{
	double ss = 0;

	for (int d = 0; d < HD; d++)
		ss += (double)v[d] * v[d];
	float inv = 1.0f / sqrtf((float)(ss / HD) + EPS);
	for (int d = 0; d < HD; d++)
		v[d] *= inv;
}

/* The RoPE of one layer: its base, scaling and attention factor, or none. */
typedef struct rope_params {
	double theta, factor, mscale;
	demo_rope_scaling kind;
	double low_ff, high_ff; /* llama3's low_freq_factor, high_freq_factor */
	bool none;
} rope_params;

/* Gemma 3's sliding layers (--layer-types): the even ones. */
static bool sliding_layer(const demo_config *cfg, int l)
{
	return cfg->layer_types && l % 2 == 0;
}

static rope_params layer_rope(const fwd *f, int l)
{
	const demo_config *cfg = &f->m->cfg;
	bool global = !sliding_layer(cfg, l), nope = cfg->nope > 0 && (l + 1) % cfg->nope == 0;
	rope_params rp = {DEMO_LOCAL_THETA, 1, 1, DEMO_ROPE_PLAIN, 1, 4, false};

	if (global || DEMO_HAS(f->bugs, ROPE_SCALING_ALL)) {
		rp.kind = cfg->rope_scaling;
		rp.factor = cfg->rope_factor;
		if (cfg->layer_types) {
			rp.theta = DEMO_GLOBAL_THETA;
			if (rp.kind == DEMO_ROPE_PLAIN) { /* Gemma 3: rope_scaling linear x8 on the global layers */
				rp.kind = DEMO_ROPE_LINEAR;
				rp.factor = DEMO_GLOBAL_FACTOR;
			}
		}
	}
	if (DEMO_HAS(f->bugs, ROPE_SCALING_MISSING))
		rp.kind = DEMO_ROPE_PLAIN;
	if (DEMO_HAS(f->bugs, ROPE_THETA))
		rp.theta = THETA_BUG;
	if (DEMO_HAS(f->bugs, ROPE_LLAMA3)) {
		rp.low_ff = 4;
		rp.high_ff = 1;
	}
	/* Hugging Face's dynamic NTK at a prefill of seq positions:
	 * theta (F seq / original - F + 1)^(rot / (rot - 2)); llama.cpp has none */
	if (rp.kind == DEMO_ROPE_DYNAMIC && cfg->seq > DEMO_ROPE_ORIG && !DEMO_HAS(f->bugs, ROPE_DYNAMIC))
		rp.theta *= pow(rp.factor * cfg->seq / DEMO_ROPE_ORIG - rp.factor + 1, (double)HD / (HD - 2));
	if (rp.kind == DEMO_ROPE_YARN) {
		double m = 0.1 * log(rp.factor) + 1;
		rp.mscale = DEMO_HAS(f->bugs, YARN_MSCALE) ? 1 : DEMO_HAS(f->bugs, YARN_MSCALE_TWICE) ? m * m : m;
	}
	rp.none = DEMO_HAS(f->bugs, NOPE_INVERTED) ? !nope : nope;
	return rp;
}

/* YaRN's find_correction_dim: the channel whose wavelength fits rotations times in the original context. */
static double yarn_dim(double rotations, int dim, double theta)
{
	return dim * log(DEMO_ROPE_ORIG / (rotations * 2 * M_PI)) / (2 * log(theta));
}

/* Inverse frequencies of the rot/2 channel pairs, as transformers'
 * modeling_rope_utils computes them (_compute_linear_scaling_rope_parameters,
 * _compute_llama3_parameters, _compute_yarn_parameters with beta_fast 32,
 * beta_slow 1, truncate). */
static void inv_freqs(const fwd *f, const rope_params *rp, int rot, double *inv)
{
	double lo = fmax(floor(yarn_dim(32, rot, rp->theta)), 0), hi = fmin(ceil(yarn_dim(1, rot, rp->theta)), rot - 1);

	if (lo == hi)
		hi += 0.001;
	for (int i = 0; i < rot / 2; i++) {
		double base = pow(rp->theta, -2.0 * i / rot), F = rp->factor, wl = 2 * M_PI / base;
		switch (rp->kind) {
		case DEMO_ROPE_PLAIN:
		case DEMO_ROPE_DYNAMIC: inv[i] = base; break;
		case DEMO_ROPE_LINEAR: inv[i] = base / F; break;
		case DEMO_ROPE_LLAMA3: {
			double v = wl > DEMO_ROPE_ORIG / rp->low_ff ? base / F : base;
			double smooth = (DEMO_ROPE_ORIG / wl - rp->low_ff) / (rp->high_ff - rp->low_ff);
			bool medium = !(wl < DEMO_ROPE_ORIG / rp->high_ff) && !(wl > DEMO_ROPE_ORIG / rp->low_ff);
			inv[i] = medium ? (1 - smooth) * v / F + smooth * v : v;
			break;
		}
		case DEMO_ROPE_YARN: {
			double extrapolate = 1 - fmin(fmax((i - lo) / (hi - lo), 0), 1);
			if (DEMO_HAS(f->bugs, YARN_RAMP))
				extrapolate = 0;
			inv[i] = base / F * (1 - extrapolate) + base * extrapolate;
			break;
		}
		}
	}
}

/* Rotate one head vector for position pos: HF rotate-half by default. */
static void rope(const fwd *f, const rope_params *rp, const double *inv, float *v, int pos)
{
	int rot = DEMO_HAS(f->bugs, PARTIAL_ROPE) ? HD / 2 : HD;
	float sign = DEMO_HAS(f->bugs, ROTATE_HALF_SIGN) ? -1.0f : 1.0f;
	float out[HD];

	if (rp->none)
		return;
	if (DEMO_HAS(f->bugs, DECODE_POSITION) && pos >= ROPE_TABLE_BUG)
		pos = ROPE_TABLE_BUG - 1;
	memcpy(out, v, sizeof out);
	for (int i = 0; i < rot / 2; i++) {
		double ang = pos * inv[i];
		/* YaRN's attention factor scales cos and sin, so q and k */
		float c = (float)(rp->mscale * cos(ang)), s = sign * (float)(rp->mscale * sin(ang));
		int a = i, b = i + rot / 2;
		if (DEMO_HAS(f->bugs, ROPE_STYLE)) {
			a = 2 * i;
			b = 2 * i + 1;
		}
		out[a] = v[a] * c - v[b] * s;
		out[b] = v[b] * c + v[a] * s;
	}
	memcpy(v, out, sizeof out);
}

/* q [S, NH*HD] and k [S, NKV*HD] of layer l in place: layout, qk-norm, RoPE. */
static void position_qk(const fwd *f, int l, float *q, float *k)
{
	float tmp[NH * HD];
	rope_params rp = layer_rope(f, l);
	double inv[HD / 2];

	inv_freqs(f, &rp, DEMO_HAS(f->bugs, PARTIAL_ROPE) ? HD / 2 : HD, inv);
	for (int i = 0; i < f->S; i++) {
		float *qi = q + (size_t)i * NH * HD, *ki = k + (size_t)i * NKV * HD;
		if (DEMO_HAS(f->bugs, ATTENTION_LAYOUT)) {
			for (int h = 0; h < NH; h++)
				for (int d = 0; d < HD; d++)
					tmp[h * HD + d] = qi[d * NH + h];
			memcpy(qi, tmp, sizeof tmp);
		}
		for (int h = 0; h < NH; h++) {
			if (DEMO_HAS(f->bugs, QK_NORM))
				head_norm(qi + h * HD);
			rope(f, &rp, inv, qi + h * HD, i);
		}
		for (int g = 0; g < NKV; g++) {
			if (DEMO_HAS(f->bugs, QK_NORM))
				head_norm(ki + g * HD);
			rope(f, &rp, inv, ki + g * HD, i);
		}
	}
}

/* The kv-cache bug: what the decode steps read back, K and V through fp8
 * e4m3 at scale 1, as vLLM's fp8 KV cache stores them (csrc/quantization/fp8:
 * a saturating cast to __nv_fp8_e4m3, to nearest even). */
static void cache_round(float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = tb_f32_round_f8(src[i], TB_DT_F8_E4M3FN);
}

/* Scaled dot-product attention of every head: ctx [S, NH*HD].  With sinks
 * the head's sink logit joins each row's softmax and its share is dropped
 * (gpt-oss: modeling_gpt_oss.eager_attention_forward concatenates the sinks
 * as a last column, subtracts the row maximum over both, drops the column).
 * With the kv-cache bug, positions from the prefill on (the decode steps)
 * read the cached kc and vc instead of k and v.  Layer l's keys are the
 * last --window ones on a sliding layer, and on every layer with the
 * sliding-window bug. */
static void attend(const fwd *f, int l, const float *q, const float *k, const float *v, const float *kc,
		   const float *vc, const float *sinks, float *ctx, float *p)
{
	int S = f->S, prefill = demo_prefill(S, f->m->cfg.prefill);
	bool windowed = DEMO_HAS(f->bugs, SLIDING_WINDOW) || sliding_layer(&f->m->cfg, l);
	bool sink = f->m->cfg.sinks && !DEMO_HAS(f->bugs, SINKS_DROPPED);
	const float *k0 = k, *v0 = v;
	float scale = DEMO_HAS(f->bugs, SOFTMAX_SCALE) ? 1.0f : 1.0f / sqrtf(HD);

	for (int h = 0; h < NH; h++) {
		int g = DEMO_HAS(f->bugs, GQA_REPEAT) ? h % NKV : h / GROUP;
		for (int i = 0; i < S; i++) {
			int lo = 0, hi = DEMO_HAS(f->bugs, ATTENTION_MASK) ? S - 1 : i;
			const float *qi = q + (size_t)i * NH * HD + h * HD;
			float mx = sink ? sinks[h] : -INFINITY, sum = 0;
			bool cached = DEMO_HAS(f->bugs, KV_CACHE) && i >= prefill;
			k = cached ? kc : k0;
			v = cached ? vc : v0;
			if (windowed && i - f->m->cfg.window + 1 > 0)
				lo = i - f->m->cfg.window + 1;
			for (int j = lo; j <= hi; j++) {
				const float *kj = k + (size_t)j * NKV * HD + g * HD;
				float s = 0;
				for (int d = 0; d < HD; d++)
					s += qi[d] * kj[d];
				p[j] = s * scale;
				if (p[j] > mx)
					mx = p[j];
			}
			if (sink)
				sum = expf(sinks[h] - mx);
			for (int j = lo; j <= hi; j++) {
				p[j] = expf(p[j] - mx);
				sum += p[j];
			}
			for (int j = lo; j <= hi; j++)
				p[j] /= sum;
			for (int d = 0; d < HD; d++) {
				float acc = 0;
				for (int j = lo; j <= hi; j++)
					acc += p[j] * v[(size_t)j * NKV * HD + g * HD + d];
				ctx[(size_t)i * NH * HD + h * HD + d] = acc;
			}
		}
	}
}

static float silu(float x)
{
	return x / (1.0f + expf(-x));
}

static float gelu_tanh(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* gpt-oss's SwiGLU (modeling_gpt_oss.GptOssExperts._apply_gate): gate
 * clamped to at most the limit, up to +-limit, glu = gate sigmoid(alpha
 * gate), out = (up + 1) glu; the oai-* bugs drop the clamps or the +1. */
static float swiglu_oai(const fwd *f, float gate, float up)
{
	if (!DEMO_HAS(f->bugs, OAI_CLAMP)) {
		gate = fminf(gate, DEMO_OAI_LIMIT);
		up = fminf(fmaxf(up, -DEMO_OAI_LIMIT), DEMO_OAI_LIMIT);
	}
	return (DEMO_HAS(f->bugs, OAI_PLUS_ONE) ? up : up + 1) * gate / (1.0f + expf(-DEMO_OAI_ALPHA * gate));
}

typedef struct scratch {
	float *x, *xn, *q, *k, *v, *ctx, *o, *h, *mn, *g, *u, *a, *mlp, *mlp0, *prev, *logits, *p;
	float *kc, *vc, *alias; /* the kv-cache bug's cached K and V; the dump-aliasing bug's mlp tap */
	float *rl, *ids, *w, *ex, *sh; /* MoE: router logits [S, E], top-k ids and weights [S, K], experts, shared */
} scratch;

/* One SwiGLU expert on one position: y += scale * down(silu(gate x) * up x). */
static void expert(const float *x, const float *g, const float *u, const float *d, float scale, float *y)
{
	float a[EF];

	for (int j = 0; j < EF; j++) {
		float gj = 0, uj = 0;
		for (int c = 0; c < H; c++) {
			gj += g[(size_t)j * H + c] * x[c];
			uj += u[(size_t)j * H + c] * x[c];
		}
		a[j] = silu(gj) * uj;
	}
	for (int c = 0; c < H; c++) {
		float acc = 0;
		for (int j = 0; j < EF; j++)
			acc += d[(size_t)c * EF + j] * a[j];
		y[c] += scale * acc;
	}
}

/* The index of the largest of v[0..n) not yet taken, marked taken. */
static int take_top(const float *v, int n, bool *taken)
{
	int best = -1;

	for (int e = 0; e < n; e++)
		if (!taken[e] && (best < 0 || v[e] > v[best]))
			best = e;
	taken[best] = true;
	return best;
}

/* DeepSeek-V3's group-limited choice: experts in DEMO_GROUPS groups, a
 * group scored by the sum of its top two choice scores; the experts outside
 * the best DEMO_TOPK_GROUP groups cannot be chosen. */
static void limit_groups(float *choice)
{
	enum { PER = E / DEMO_GROUPS };
	float gs[DEMO_GROUPS];
	bool taken[DEMO_GROUPS] = {false};

	for (int g = 0; g < DEMO_GROUPS; g++) {
		bool t[PER] = {false};
		const float *c = choice + g * PER;
		gs[g] = c[take_top(c, PER, t)];
		gs[g] += c[take_top(c, PER, t)];
	}
	for (int j = 0; j < DEMO_TOPK_GROUP; j++)
		take_top(gs, DEMO_GROUPS, taken);
	for (int e = 0; e < E; e++)
		if (!taken[e / PER])
			choice[e] = -INFINITY;
}

/* The MoE MLP (demo_config.moe) of each family (demo_moe_family): the
 * router's scores (sigmoid for DeepSeek, softmax else; the other with
 * moe-softmax), the top k (3 with moe-topk-k) of the scores plus DeepSeek's
 * selection bias within its best groups (plain top-k with moe-group); the
 * weights are the chosen scores (plus the bias with moe-bias-weights),
 * renormalised unless Qwen2 or moe-renorm, times DEMO_ROUTED_SCALE for
 * DeepSeek (twice with moe-scaling); the chosen experts (read in reverse
 * order with moe-expert-order) and the shared expert of DeepSeek and Qwen2
 * (left out with moe-shared), Qwen2's times its sigmoid gate (not with
 * moe-shared-gate). */
static void moe(fwd *f, int l, scratch *s)
{
	const struct demo_layer *L = &f->m->layer[l];
	demo_moe_family fam = f->m->cfg.moe_family;
	bool ds = fam == DEMO_MOE_DEEPSEEK, softmax = ds == DEMO_HAS(f->bugs, MOE_SOFTMAX);
	bool renorm = fam != DEMO_MOE_QWEN2 && !DEMO_HAS(f->bugs, MOE_RENORM);
	int k = DEMO_HAS(f->bugs, MOE_TOPK_K) ? DEMO_TOPK_BUG : DEMO_TOPK;
	float scale = ds ? DEMO_ROUTED_SCALE : 1;

	if (ds && DEMO_HAS(f->bugs, MOE_SCALING))
		scale *= DEMO_ROUTED_SCALE;
	linear(s->mn, f->S, H, L->router, E, s->rl, false);
	memset(s->ex, 0, (size_t)f->S * H * sizeof *s->ex);
	memset(s->sh, 0, (size_t)f->S * H * sizeof *s->sh);
	for (int i = 0; i < f->S; i++) {
		const float *r = s->rl + (size_t)i * E, *x = s->mn + (size_t)i * H;
		float sc[E], choice[E], top = -INFINITY, sum = 0, chosen = 0;
		bool taken[E] = {false};
		for (int e = 0; e < E; e++)
			top = fmaxf(top, r[e]);
		for (int e = 0; e < E; e++) {
			sc[e] = softmax ? expf(r[e] - top) : 1.0f / (1.0f + expf(-r[e]));
			sum += sc[e];
		}
		for (int e = 0; e < E; e++) {
			sc[e] /= softmax ? sum : 1;
			choice[e] = sc[e] + (ds ? L->bias[e] : 0);
		}
		if (ds && !DEMO_HAS(f->bugs, MOE_GROUP))
			limit_groups(choice);
		for (int j = 0; j < k; j++) {
			int best = take_top(choice, E, taken);
			s->ids[(size_t)i * k + j] = (float)best;
			s->w[(size_t)i * k + j] = sc[best] + (DEMO_HAS(f->bugs, MOE_BIAS_WEIGHTS) ? L->bias[best] : 0);
			chosen += s->w[(size_t)i * k + j];
		}
		for (int j = 0; j < k; j++) {
			float *w = &s->w[(size_t)i * k + j];
			int e = (int)s->ids[(size_t)i * k + j];
			if (DEMO_HAS(f->bugs, MOE_EXPERT_ORDER))
				e = E - 1 - e;
			*w = (renorm ? *w / chosen : *w) * scale;
			expert(x, L->eg + (size_t)e * EF * H, L->eu + (size_t)e * EF * H, L->ed + (size_t)e * H * EF, *w,
			       s->ex + (size_t)i * H);
		}
		if (fam != DEMO_MOE_MIXTRAL && !DEMO_HAS(f->bugs, MOE_SHARED)) {
			float gate = 1, z = 0;
			for (int c = 0; c < H && fam == DEMO_MOE_QWEN2 && !DEMO_HAS(f->bugs, MOE_SHARED_GATE); c++)
				z += L->sgate[c] * x[c];
			if (fam == DEMO_MOE_QWEN2 && !DEMO_HAS(f->bugs, MOE_SHARED_GATE))
				gate = 1.0f / (1.0f + expf(-z));
			expert(x, L->sg, L->su, L->sd, gate, s->sh + (size_t)i * H);
		}
	}
	for (size_t i = 0; i < (size_t)f->S * H; i++)
		s->mlp[i] = s->ex[i] + s->sh[i];
	if (f->taps != DEMO_TAPS_MAIN) {
		emit(f, l, "mlp.router", s->rl, E);
		emit(f, l, "mlp.topk_ids", s->ids, k);
		emit(f, l, "mlp.topk_weights", s->w, k);
		emit(f, l, "mlp.experts", s->ex, H);
		if (fam != DEMO_MOE_MIXTRAL)
			emit(f, l, "mlp.shared", s->sh, H);
	}
}

/* The residual sum the layer outputs (block). */
static void residual_sum(const fwd *f, const scratch *s, float *out)
{
	size_t nx = (size_t)f->S * H;

	for (size_t i = 0; i < nx; i++)
		out[i] = (DEMO_HAS(f->bugs, RESIDUAL_WIRING) ? s->mn[i] : s->h[i]) + s->mlp[i];
	to_bf16(f, out, nx);
}

/* What a hook on the MLP (or its down_proj, the same tensor) dumps: its
 * output, or with the dump-aliasing bug the residual sum the layer later
 * adds into that tensor in place (the hook kept a reference, not a copy:
 * ndif-team/nnsight #630). */
static const float *mlp_seen(const fwd *f, scratch *s)
{
	if (!DEMO_HAS(f->bugs, DUMP_ALIASING))
		return s->mlp;
	residual_sum(f, s, s->alias);
	return s->alias;
}

static void mlp(fwd *f, int l, scratch *s)
{
	if (f->m->cfg.moe) {
		moe(f, l, s);
		return;
	}
	const struct demo_layer *L = &f->m->layer[l];
	size_t n = (size_t)f->S * FF;
	bool half = l == HOT_LAYER && DEMO_HAS(f->bugs, NAN_OVERFLOW);

	if (half)
		to_f16(s->mn, (size_t)f->S * H);
	linear(s->mn, f->S, H, L->wg, FF, s->g, false);
	linear(s->mn, f->S, H, L->wu, FF, s->u, false);
	if (half) {
		to_f16(s->g, n);
		to_f16(s->u, n);
	}
	if (f->taps != DEMO_TAPS_MAIN) {
		emit(f, l, "mlp.gate", s->g, FF);
		emit(f, l, "mlp.up", s->u, FF);
	}
	for (size_t i = 0; i < n; i++) {
		float gate = s->g[i], up = s->u[i];
		if (DEMO_HAS(f->bugs, MLP_GATING)) {
			gate = s->u[i];
			up = s->g[i];
		}
		/* on the OAI model the mlp-activation bug is a port that keeps the plain silu(gate) up */
		if (f->m->cfg.act == DEMO_ACT_OAI && !DEMO_HAS(f->bugs, MLP_ACTIVATION))
			s->a[i] = swiglu_oai(f, gate, up);
		else if (f->m->cfg.act == DEMO_ACT_OAI)
			s->a[i] = silu(gate) * up;
		else
			s->a[i] = (DEMO_HAS(f->bugs, MLP_ACTIVATION) ? gelu_tanh(gate) : silu(gate)) * up;
	}
	if (half)
		to_f16(s->a, n);
	if (f->taps == DEMO_TAPS_REPLAY)
		emit(f, l, "mlp.act", s->a, FF);
	linear(s->a, f->S, FF, L->wd, H, s->mlp, false);
	if (DEMO_HAS(f->bugs, MLP_BIAS))
		for (int i = 0; i < f->S; i++)
			for (int c = 0; c < H; c++)
				s->mlp[(size_t)i * H + c] += f->m->mlp_bias[c];
	if (half)
		to_f16(s->mlp, (size_t)f->S * H);
	if (f->taps != DEMO_TAPS_MAIN)
		emit(f, l, "mlp.down", mlp_seen(f, s), H);
}

static void layer(fwd *f, int l, scratch *s)
{
	const struct demo_layer *L = &f->m->layer[l];
	size_t nx = (size_t)f->S * H;

	memcpy(s->prev, s->x, nx * sizeof *s->x);
	rmsnorm(f, s->x, L->in_norm, false, s->xn);
	emit(f, l, "attn_norm", s->xn, H);

	linear(s->xn, f->S, H, L->wq, NH * HD, s->q, false);
	linear(s->xn, f->S, H, L->wk, NKV * HD, s->k, false);
	linear(s->xn, f->S, H, L->wv, NKV * HD, s->v, false);
	if (f->taps == DEMO_TAPS_REPLAY) {
		emit(f, l, "attn.q", s->q, NH * HD);
		emit(f, l, "attn.k", s->k, NKV * HD);
		emit(f, l, "attn.v", s->v, NKV * HD);
	}
	position_qk(f, l, s->q, s->k);
	if (f->taps == DEMO_TAPS_SUB) {
		emit(f, l, "attn.q", s->q, NH * HD);
		emit(f, l, "attn.k", s->k, NKV * HD);
		emit(f, l, "attn.v", s->v, NKV * HD);
	} else if (f->taps == DEMO_TAPS_REPLAY) {
		emit(f, l, "attn.q_rope", s->q, NH * HD);
		emit(f, l, "attn.k_rope", s->k, NKV * HD);
	}
	if (DEMO_HAS(f->bugs, KV_CACHE)) {
		cache_round(s->kc, s->k, (size_t)f->S * NKV * HD);
		cache_round(s->vc, s->v, (size_t)f->S * NKV * HD);
	}
	attend(f, l, s->q, s->k, s->v, s->kc, s->vc, L->sinks, s->ctx, s->p);
	if (f->taps == DEMO_TAPS_REPLAY)
		emit(f, l, "attn.core", s->ctx, NH * HD);
	linear(s->ctx, f->S, NH * HD, L->wo, H, s->o, DEMO_HAS(f->bugs, WEIGHT_MAPPING) && l == f->m->cfg.layers / 2);
	if (f->taps != DEMO_TAPS_MAIN)
		emit(f, l, "attn.o", s->o, H);
	if (DEMO_HAS(f->bugs, SCALE_MULTIPLIER))
		for (size_t i = 0; i < nx; i++)
			s->o[i] *= SCALE_MULTIPLIER;
	emit(f, l, "attn", s->o, H);

	for (size_t i = 0; i < nx; i++)
		s->h[i] = s->x[i] + s->o[i];
	rmsnorm(f, s->h, L->post_norm, false, s->mn);
	emit(f, l, "mlp_norm", s->mn, H);

	mlp(f, l, s);
	if (l == 0)
		memcpy(s->mlp0, s->mlp, nx * sizeof *s->mlp);
	emit(f, l, "mlp", DEMO_HAS(f->bugs, DUMP_DUPLICATE) ? s->mlp0 : mlp_seen(f, s), H);

	residual_sum(f, s, s->x);
	emit(f, l, "block", DEMO_HAS(f->bugs, DUMP_OFFSET) ? s->prev : s->x, H);
}

/* The ids the candidate embeds. */
static void tokens_for(const fwd *f, int64_t *ids)
{
	const int64_t *t = f->m->tokens;

	memcpy(ids, t, (size_t)f->S * sizeof *ids);
	if (DEMO_HAS(f->bugs, TOKENIZER))
		ids[TOKENIZER_BUG_POS] = 2 + (t[TOKENIZER_BUG_POS] - 2 + 101) % (V - 2);
	if (DEMO_HAS(f->bugs, TOKENIZER_BOS))
		memcpy(ids + 1, t, (size_t)(f->S - 1) * sizeof *ids);
}

int demo_forward(const demo_model *m, demo_bugset bugs, demo_taps taps, demo_run *out)
{
	int S = m->cfg.seq;
	size_t nx = (size_t)S * H;
	fwd f = {m, bugs, taps, S, out, 0};
	scratch s;
	float *blob;
	size_t need = nx * 11 + (size_t)S * NH * HD * 2 + (size_t)S * NKV * HD * 4 + (size_t)S * FF * 3 +
		      (size_t)S * V + (size_t)S + (size_t)S * (E + 2 * DEMO_TOPK_BUG);

	memset(out, 0, sizeof *out);
	out->seq = S;
	out->tokens = malloc((size_t)S * sizeof *out->tokens);
	blob = malloc(need * sizeof *blob);
	if (!out->tokens || !blob) {
		free(blob);
		demo_run_free(out);
		return -1;
	}
	{
		float *p = blob;
#define TAKE(n) (p += (n), p - (n))
		s.x = TAKE(nx);
		s.xn = TAKE(nx);
		s.o = TAKE(nx);
		s.h = TAKE(nx);
		s.mn = TAKE(nx);
		s.mlp = TAKE(nx);
		s.mlp0 = TAKE(nx);
		s.prev = TAKE(nx);
		s.q = TAKE((size_t)S * NH * HD);
		s.ctx = TAKE((size_t)S * NH * HD);
		s.k = TAKE((size_t)S * NKV * HD);
		s.v = TAKE((size_t)S * NKV * HD);
		s.kc = TAKE((size_t)S * NKV * HD);
		s.vc = TAKE((size_t)S * NKV * HD);
		s.alias = TAKE(nx);
		s.g = TAKE((size_t)S * FF);
		s.u = TAKE((size_t)S * FF);
		s.a = TAKE((size_t)S * FF);
		s.logits = TAKE((size_t)S * V);
		s.p = TAKE((size_t)S);
		s.rl = TAKE((size_t)S * E);
		s.ids = TAKE((size_t)S * DEMO_TOPK_BUG);
		s.w = TAKE((size_t)S * DEMO_TOPK_BUG);
		s.ex = TAKE(nx);
		s.sh = TAKE(nx);
#undef TAKE
	}
	/* Tiny matrices: one thread is fastest, and keeps runs reproducible. */
	openblas_set_num_threads(1);

	tokens_for(&f, out->tokens);
	for (int i = 0; i < S; i++) {
		int64_t t = out->tokens[i];
		if (DEMO_HAS(bugs, EMBEDDING_WEIGHTS))
			t = (t + 1) % V;
		for (int c = 0; c < H; c++) {
			float e = m->embed[(size_t)t * H + c];
			s.x[(size_t)i * H + c] = DEMO_HAS(bugs, EMBEDDING_SCALE) ? e * sqrtf(H) : e;
		}
	}
	to_bf16(&f, s.x, nx);
	emit(&f, -1, "embed", s.x, H);

	for (int l = 0; l < m->cfg.layers; l++)
		layer(&f, l, &s);

	rmsnorm(&f, s.x, m->final_norm, DEMO_HAS(bugs, FINAL_NORM), s.xn);
	emit(&f, -1, "final_norm", s.xn, H);
	linear(s.xn, S, H, DEMO_HAS(bugs, TIED_EMBEDDINGS) ? m->embed : m->lm_head, V, s.logits, false);
	if (DEMO_HAS(bugs, LM_HEAD)) {
		/* Logit v from row v+1: rotate each row left by one. */
		for (int i = 0; i < S; i++) {
			float *row = s.logits + (size_t)i * V, first = row[0];
			memmove(row, row + 1, (V - 1) * sizeof *row);
			row[V - 1] = first;
		}
	}
	/* Gemma 2: logits = C tanh(logits / C) (modeling_gemma2.Gemma2ForCausalLM.forward) */
	if (m->cfg.softcap > 0 && !DEMO_HAS(bugs, SOFTCAP_MISSING))
		for (size_t i = 0; i < (size_t)S * V; i++)
			s.logits[i] = m->cfg.softcap * tanhf(s.logits[i] / m->cfg.softcap);
	to_bf16(&f, s.logits, (size_t)S * V);
	emit(&f, -1, "logits", s.logits, V);

	free(blob);
	if (f.failed) {
		demo_run_free(out);
		return -1;
	}
	return 0;
}

void demo_run_free(demo_run *r)
{
	for (size_t i = 0; i < r->n_taps; i++)
		free(r->taps[i].data);
	free(r->taps);
	free(r->tokens);
	memset(r, 0, sizeof *r);
}

const demo_tap *demo_run_find(const demo_run *r, int layer, const char *tap)
{
	for (size_t i = 0; i < r->n_taps; i++)
		if (r->taps[i].layer == layer && !strcmp(r->taps[i].tap, tap))
			return &r->taps[i];
	return NULL;
}
