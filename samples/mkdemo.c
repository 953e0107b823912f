/*
 * mkdemo: runs the demo decoder (demomodel) and writes the per-sublayer
 * activations of a reference and of a candidate with injected bugs, as a
 * dump pair for tbisect: the bundled samples, the walkthrough chain, and
 * the end-to-end tests of every bug of the catalogue (demobugs).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demobugs.h"
#include "demomodel.h"
#include "dumpwrite.h"

typedef struct output {
	const char *format; /* "npy" or "safetensors" */
	const char *naming; /* "hf" or "canonical" */
	tb_dtype dtype;
	demo_taps taps;
} output;

/* Hugging Face module paths of the taps (%d: the layer). */
static const struct {
	const char *tap, *hf;
} hf_names[] = {
	{"embed", "model.embed_tokens"},
	{"attn_norm", "model.layers.%d.input_layernorm"},
	{"attn.q", "model.layers.%d.self_attn.q_proj"},
	{"attn.k", "model.layers.%d.self_attn.k_proj"},
	{"attn.v", "model.layers.%d.self_attn.v_proj"},
	{"attn.o", "model.layers.%d.self_attn.o_proj"},
	{"attn", "model.layers.%d.self_attn"},
	{"mlp_norm", "model.layers.%d.post_attention_layernorm"},
	{"mlp.gate", "model.layers.%d.mlp.gate_proj"},
	{"mlp.up", "model.layers.%d.mlp.up_proj"},
	{"mlp.down", "model.layers.%d.mlp.down_proj"},
	/* DeepSeek-V3's module and output names: the router is the MLP's gate */
	{"mlp.router", "model.layers.%d.mlp.gate"},
	{"mlp.topk_ids", "model.layers.%d.mlp.topk_idx"},
	{"mlp.topk_weights", "model.layers.%d.mlp.topk_weight"},
	{"mlp.experts", "model.layers.%d.mlp.experts"},
	{"mlp.shared", "model.layers.%d.mlp.shared_experts"},
	{"mlp", "model.layers.%d.mlp"},
	{"block", "model.layers.%d"},
	{"final_norm", "model.norm"},
	{"logits", "lm_head"},
};

static void tap_name(const output *o, const demo_tap *t, char *buf, size_t size)
{
	if (!strcmp(o->naming, "hf")) {
		for (size_t i = 0; i < sizeof hf_names / sizeof *hf_names; i++) {
			if (!strcmp(hf_names[i].tap, t->tap)) {
				snprintf(buf, size, hf_names[i].hf, t->layer);
				return;
			}
		}
	}
	if (t->layer < 0)
		snprintf(buf, size, "%s", t->tap);
	else
		snprintf(buf, size, "layers.%d.%s", t->layer, t->tap);
}

static int die(const char *what, const char *detail)
{
	fprintf(stderr, "mkdemo: %s: %s\n", what, detail);
	return 2;
}

/* Write one run into dir: DIR/NAME.npy per tensor, or DIR/activations.safetensors. */
static int write_run(const output *o, const demo_run *r, const char *dir)
{
	size_t n = r->n_taps + 1;
	dw_tensor *ts = calloc(n, sizeof *ts);
	char (*names)[128] = calloc(n, sizeof *names);
	float *ids = malloc((size_t)r->seq * sizeof *ids);
	char path[4096];
	int rc = 0;

	if (!ts || !names || !ids) {
		errno = ENOMEM;
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < r->n_taps && rc == 0; i++) {
		const demo_tap *t = &r->taps[i];
		tap_name(o, t, names[i], sizeof names[i]);
		ts[i] = (dw_tensor){names[i], o->dtype, 3, {1, t->rows, t->cols}, NULL, 0};
		ts[i].data = dw_encode(t->data, (size_t)(t->rows * t->cols), o->dtype, &ts[i].nbytes);
		if (!ts[i].data)
			rc = -1;
	}
	for (int i = 0; i < r->seq; i++)
		ids[i] = (float)r->tokens[i];
	ts[n - 1] = (dw_tensor){"tokens", TB_DT_I64, 2, {1, r->seq}, NULL, 0};
	ts[n - 1].data = dw_encode(ids, (size_t)r->seq, TB_DT_I64, &ts[n - 1].nbytes);
	if (rc < 0 || !ts[n - 1].data) {
		rc = -1;
		goto out;
	}
	snprintf(path, sizeof path, "%s/tokens", dir);
	if (dw_mkdirs_for(path) < 0) {
		rc = -1;
		goto out;
	}
	if (!strcmp(o->format, "safetensors")) {
		snprintf(path, sizeof path, "%s/activations.safetensors", dir);
		rc = dw_write_safetensors(path, ts, n, "{\"format\":\"pt\"}");
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		snprintf(path, sizeof path, "%s/%s.npy", dir, ts[i].name);
		rc = dw_write_npy(path, 1, dw_npy_descr(ts[i].dtype), false, ts[i].ndim, ts[i].shape, ts[i].data,
				  ts[i].nbytes);
	}
	if (rc == 0 && o->dtype == TB_DT_BF16) {
		/* bf16 has no npy descr: the manifest tells readers what '<V2' holds. */
		FILE *f;
		snprintf(path, sizeof path, "%s/dtypes.json", dir);
		f = fopen(path, "w");
		if (!f || fputs("{\"*\": \"bfloat16\"}\n", f) < 0 || fclose(f) != 0)
			rc = -1;
	}
out:
	if (ts)
		for (size_t i = 0; i < n; i++)
			free((void *)ts[i].data);
	free(ts);
	free(names);
	free(ids);
	return rc;
}

static int run_and_write(const demo_model *m, demo_bugset bugs, const output *o, const char *dir)
{
	demo_run r;

	if (demo_forward(m, bugs, o->taps, &r) < 0)
		return die(dir, "out of memory");
	if (write_run(o, &r, dir) < 0) {
		int e = errno;
		demo_run_free(&r);
		return die(dir, strerror(e));
	}
	demo_run_free(&r);
	return 0;
}

static void usage(FILE *out)
{
	fputs("usage: mkdemo [OPTIONS] REF_DIR CAND_DIR      write a reference and a candidate\n"
	      "       mkdemo [OPTIONS] --ref-only REF_DIR     write the reference only\n"
	      "       mkdemo [OPTIONS] --cand-only CAND_DIR   write the candidate only\n"
	      "       mkdemo --list                           list the bugs\n"
	      "       mkdemo [OPTIONS] --expect LIST          the first divergence tbisect must find\n"
	      "\n"
	      "options:\n"
	      "  --bug LIST     bugs injected into the candidate: none (default) or names\n"
	      "                 joined by commas (rope-style,mlp-activation)\n"
	      "  --format F     npy (a tree of .npy files, default) or safetensors (one file)\n"
	      "  --naming N     hf (Hugging Face module paths, default for npy) or\n"
	      "                 canonical (layers.N.attn, default for safetensors)\n"
	      "  --dtype D      f32 (default), bf16 or f16\n"
	      "  --sub          also write attn.q, attn.k (after RoPE), attn.v, attn.o, mlp.gate,\n"
	      "                 mlp.up, mlp.down\n"
	      "  --replay       also write the taps a replay needs: attn.q, attn.k (before RoPE),\n"
	      "                 attn.v, attn.q_rope, attn.k_rope, attn.core (o_proj's input),\n"
	      "                 attn.o, mlp.gate, mlp.up, mlp.act (down_proj's input), mlp.down\n"
	      "  --seq S        positions, 8..2048 (default 16)\n"
	      "  --layers N     decoder layers, 2..64 (default 4)\n"
	      "  --window W     the window of the sliding layers (--layer-types) and of the\n"
	      "                 sliding-window bug, which puts it on every layer (default 8)\n"
	      "  --prefill P    the kv-cache bug's prefill: positions from P on are decode steps,\n"
	      "                 reading K and V from an fp8 e4m3 cache (default half of --seq)\n"
	      "  --seed N       seed of the weights and tokens (default 1)\n"
	      "  --moe          a DeepSeek-V3-like mixture-of-experts MLP in every layer: 8\n"
	      "                 experts, sigmoid scores, a selection bias added to them to\n"
	      "                 choose (not to weigh) the top 2 within the best 2 of 4 groups,\n"
	      "                 the chosen scores renormalised and scaled by 2.5, one shared\n"
	      "                 expert; --sub writes mlp.router, mlp.topk_ids,\n"
	      "                 mlp.topk_weights, mlp.experts and mlp.shared (the ids as floats)\n"
	      "  --moe-router F the MoE of a family: deepseek (--moe), mixtral (softmax, top 2\n"
	      "                 renormalised, no shared expert) or qwen2 (softmax, top 2 not\n"
	      "                 renormalised, a shared expert times sigmoid(x . w_gate))\n"
	      "  --sinks        gpt-oss-like learned sink logits, one per head and layer: one\n"
	      "                 more column in each attention softmax, dropped after it\n"
	      "  --softcap C    Gemma-2-like final logit soft-capping: logits = C tanh(z / C)\n"
	      "                 (the logits reach about 12; 10 squashes the large ones)\n"
	      "  --mlp-act A    the dense MLP's activation: silu (default) or oai, gpt-oss's\n"
	      "                 SwiGLU: gate clamped to at most 7, up to +-7,\n"
	      "                 (up + 1) gate sigmoid(1.702 gate); gate_proj and up_proj are\n"
	      "                 scaled by 4 so that the clamps bite\n"
	      "  --rope-scaling T:F  RoPE scaling of every layer (of the global layers with\n"
	      "                 --layer-types): linear, llama3 (low_freq_factor 1, high_freq_factor\n"
	      "                 4), yarn (beta_fast 32, beta_slow 1, attention factor\n"
	      "                 0.1 ln(F) + 1) or dynamic (NTK: theta times\n"
	      "                 (F seq / 16 - F + 1)^(8/6) past 16 positions), factor F > 1,\n"
	      "                 original_max_position_embeddings 16\n"
	      "  --layer-types  Gemma-3-like layers: even layers sliding (theta 10000, no\n"
	      "                 scaling, a window of --window), odd layers global (theta\n"
	      "                 1000000, --rope-scaling or linear:8, no window)\n"
	      "  --nope N       layers l with (l + 1) % N == 0 have no RoPE (no_rope_layers)\n"
	      "\n"
	      "sinks-dropped implies --sinks, softcap-missing --softcap 10, oai-* --mlp-act\n"
	      "oai, rope-scaling-missing and rope-scaling-all --layer-types, rope-llama3\n"
	      "--rope-scaling llama3:8, rope-dynamic dynamic:4, the yarn bugs yarn:4,\n"
	      "nope-inverted --nope 4,\n"
	      "moe-shared-gate --moe-router qwen2 (with --moe);\n"
	      "an option contradicting them is refused, nan-overflow with --mlp-act\n"
	      "oai (its clamps keep float16 finite), and a moe-* bug of a part the\n"
	      "family lacks (moe-softmax, moe-scaling, moe-bias-weights and moe-group\n"
	      "are DeepSeek's, moe-renorm not Qwen2's, moe-shared not Mixtral's).  The implied options are the\n"
	      "reference's too: give --ref-only the candidate's --bug (the reference\n"
	      "stays without it).\n"
	      "\n"
	      "The model: hidden 64, 8 heads of 8 channels, 2 kv heads, MLP 128, vocab 256.\n"
	      "A directory gets one .npy per tensor (or activations.safetensors) and\n"
	      "'tokens' (int64 ids); files of the same names are replaced.\n",
	      out);
}

static void list_bugs(void)
{
	/* the cause column is what the sweeps score the diagnosis by (doc/testing.md) */
	printf("%-20s %-17s %s\n", "none", "-", "the correct port: the candidate equals the reference");
	for (int i = 0; i < DEMO_N_BUGS; i++)
		printf("%-20s %-17s %s\n", demo_bugs[i].name, demo_bugs[i].cause, demo_bugs[i].what);
}

static int int_opt(const char *name, const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi) {
		fprintf(stderr, "mkdemo: --%s: '%s' is not an integer in %ld..%ld\n", name, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

enum { OPT_BUG = 256, OPT_FORMAT, OPT_NAMING, OPT_DTYPE, OPT_SUB, OPT_REPLAY, OPT_SEQ, OPT_LAYERS, OPT_WINDOW, OPT_SEED,
       OPT_REF_ONLY, OPT_CAND_ONLY, OPT_LIST, OPT_EXPECT, OPT_HELP, OPT_MOE, OPT_SINKS, OPT_SOFTCAP, OPT_MLP_ACT,
       OPT_PREFILL, OPT_ROPE_SCALING, OPT_LAYER_TYPES, OPT_NOPE, OPT_MOE_ROUTER };

/* --rope-scaling T:F.  0, or -1 after a message. */
static int rope_scaling_opt(const char *s, demo_config *cfg)
{
	static const struct {
		const char *name;
		demo_rope_scaling kind;
	} kinds[] = {{"linear", DEMO_ROPE_LINEAR}, {"llama3", DEMO_ROPE_LLAMA3}, {"yarn", DEMO_ROPE_YARN},
		     {"dynamic", DEMO_ROPE_DYNAMIC}};
	const char *colon = strchr(s, ':');
	char *end;
	double f;

	for (size_t i = 0; colon && i < sizeof kinds / sizeof *kinds; i++) {
		if (strlen(kinds[i].name) != (size_t)(colon - s) || strncmp(kinds[i].name, s, (size_t)(colon - s)))
			continue;
		errno = 0;
		f = strtod(colon + 1, &end);
		if (end == colon + 1 || *end || errno || !(f > 1 && f <= 1024))
			break;
		cfg->rope_scaling = kinds[i].kind;
		cfg->rope_factor = f;
		return 0;
	}
	fprintf(stderr,
		"mkdemo: --rope-scaling: '%s' is not linear:F, llama3:F, yarn:F or dynamic:F with F in (1, 1024]\n", s);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"bug", required_argument, NULL, OPT_BUG},       {"format", required_argument, NULL, OPT_FORMAT},
		{"naming", required_argument, NULL, OPT_NAMING}, {"dtype", required_argument, NULL, OPT_DTYPE},
		{"sub", no_argument, NULL, OPT_SUB},             {"seq", required_argument, NULL, OPT_SEQ},
		{"layers", required_argument, NULL, OPT_LAYERS}, {"window", required_argument, NULL, OPT_WINDOW},
		{"seed", required_argument, NULL, OPT_SEED},     {"ref-only", no_argument, NULL, OPT_REF_ONLY},
		{"cand-only", no_argument, NULL, OPT_CAND_ONLY}, {"list", no_argument, NULL, OPT_LIST},
		{"expect", required_argument, NULL, OPT_EXPECT}, {"help", no_argument, NULL, OPT_HELP},
		{"replay", no_argument, NULL, OPT_REPLAY},       {"moe", no_argument, NULL, OPT_MOE},
		{"sinks", no_argument, NULL, OPT_SINKS},         {"softcap", required_argument, NULL, OPT_SOFTCAP},
		{"mlp-act", required_argument, NULL, OPT_MLP_ACT},
		{"prefill", required_argument, NULL, OPT_PREFILL},
		{"rope-scaling", required_argument, NULL, OPT_ROPE_SCALING},
		{"layer-types", no_argument, NULL, OPT_LAYER_TYPES},
		{"nope", required_argument, NULL, OPT_NOPE},
		{"moe-router", required_argument, NULL, OPT_MOE_ROUTER},
		{NULL, 0, NULL, 0},
	};
	output o = {"npy", NULL, TB_DT_F32, false};
	demo_config cfg;
	demo_bugset bugs = 0;
	const char *expect = NULL;
	bool ref_only = false, cand_only = false;
	char msg[256];
	long v;
	int c, rc = 0, want;
	demo_model *m;

	demo_config_init(&cfg);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_BUG:
			if (demo_bugs_parse(optarg, &bugs, msg, sizeof msg) < 0)
				return die("--bug", msg);
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "npy") && strcmp(optarg, "safetensors"))
				return die("--format", "expected npy or safetensors");
			o.format = optarg;
			break;
		case OPT_NAMING:
			if (strcmp(optarg, "hf") && strcmp(optarg, "canonical"))
				return die("--naming", "expected hf or canonical");
			o.naming = optarg;
			break;
		case OPT_DTYPE:
			if (!strcmp(optarg, "f32"))
				o.dtype = TB_DT_F32;
			else if (!strcmp(optarg, "bf16"))
				o.dtype = TB_DT_BF16;
			else if (!strcmp(optarg, "f16"))
				o.dtype = TB_DT_F16;
			else
				return die("--dtype", "expected f32, bf16 or f16");
			break;
		case OPT_SUB: o.taps = DEMO_TAPS_SUB; break;
		case OPT_REPLAY: o.taps = DEMO_TAPS_REPLAY; break;
		case OPT_SEQ:
			if (int_opt("seq", optarg, DEMO_MIN_SEQ, DEMO_MAX_SEQ, &v) < 0)
				return 2;
			cfg.seq = (int)v;
			break;
		case OPT_LAYERS:
			if (int_opt("layers", optarg, DEMO_MIN_LAYERS, DEMO_MAX_LAYERS, &v) < 0)
				return 2;
			cfg.layers = (int)v;
			break;
		case OPT_WINDOW:
			if (int_opt("window", optarg, 1, DEMO_MAX_SEQ, &v) < 0)
				return 2;
			cfg.window = (int)v;
			break;
		case OPT_SEED:
			if (int_opt("seed", optarg, 0, 2147483647L, &v) < 0)
				return 2;
			cfg.seed = (uint64_t)v;
			break;
		case OPT_PREFILL:
			if (int_opt("prefill", optarg, 1, DEMO_MAX_SEQ, &v) < 0)
				return 2;
			cfg.prefill = (int)v;
			break;
		case OPT_MOE: cfg.moe = true; break;
		case OPT_MOE_ROUTER:
			if (!strcmp(optarg, "deepseek"))
				cfg.moe_family = DEMO_MOE_DEEPSEEK;
			else if (!strcmp(optarg, "mixtral"))
				cfg.moe_family = DEMO_MOE_MIXTRAL;
			else if (!strcmp(optarg, "qwen2"))
				cfg.moe_family = DEMO_MOE_QWEN2;
			else
				return die("--moe-router", "expected deepseek, mixtral or qwen2");
			cfg.moe = true;
			break;
		case OPT_SINKS: cfg.sinks = true; break;
		case OPT_SOFTCAP: {
			char *end;
			double cap = strtod(optarg, &end);
			if (end == optarg || *end || !(cap >= 1 && cap <= 1000))
				return die("--softcap", "expected a number in 1..1000");
			cfg.softcap = (float)cap;
			break;
		}
		case OPT_MLP_ACT:
			if (!strcmp(optarg, "silu"))
				cfg.act = DEMO_ACT_SILU;
			else if (!strcmp(optarg, "oai"))
				cfg.act = DEMO_ACT_OAI;
			else
				return die("--mlp-act", "expected silu or oai");
			break;
		case OPT_ROPE_SCALING:
			if (rope_scaling_opt(optarg, &cfg) < 0)
				return 2;
			break;
		case OPT_LAYER_TYPES: cfg.layer_types = true; break;
		case OPT_NOPE:
			if (int_opt("nope", optarg, 1, DEMO_MAX_LAYERS, &v) < 0)
				return 2;
			cfg.nope = (int)v;
			break;
		case OPT_REF_ONLY: ref_only = true; break;
		case OPT_CAND_ONLY: cand_only = true; break;
		case OPT_LIST: list_bugs(); return 0;
		case OPT_EXPECT: expect = optarg; break;
		case OPT_HELP: usage(stdout); return 0;
		default:
			fprintf(stderr, "mkdemo: unknown option or missing argument '%s'\n", argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (expect && demo_bugs_parse(expect, &bugs, msg, sizeof msg) < 0)
		return die("--expect", msg);
	if (demo_config_imply(&cfg, bugs, msg, sizeof msg) < 0)
		return die(expect ? "--expect" : "--bug", msg);
	if (expect) {
		demo_expect_ctx ctx = {cfg.layers, cfg.seq, cfg.window, o.taps == DEMO_TAPS_SUB, o.taps == DEMO_TAPS_REPLAY,
				       cfg.moe, cfg.prefill, cfg.layer_types};
		demo_expect(bugs, &ctx, msg, sizeof msg);
		puts(msg);
		return 0;
	}
	want = ref_only || cand_only ? 1 : 2;
	if (ref_only && cand_only)
		return die("--ref-only", "cannot be combined with --cand-only");
	if (argc - optind != want) {
		usage(stderr);
		return 2;
	}
	if (!o.naming)
		o.naming = !strcmp(o.format, "npy") ? "hf" : "canonical";
	m = demo_model_new(&cfg);
	if (!m)
		return die("model", "out of memory");
	if (!cand_only)
		rc = run_and_write(m, 0, &o, argv[optind]);
	if (rc == 0 && !ref_only)
		rc = run_and_write(m, bugs, &o, argv[argc - 1]);
	demo_model_free(m);
	return rc;
}
