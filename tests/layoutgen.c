/*
 * layoutgen: re-writes a Hugging Face-named dump tree (samples/mkdemo's)
 * in the layouts that engines' dumpers write, for the shell tests (no
 * python, no torch).  The layouts follow the dumpers' source:
 *
 *   layoutgen sglang SRC OUT TP CUTS [STALE]
 *       SGLang's dumper (python/sglang/srt/debug_utils/dumper.py): one flat
 *       folder, one torch.save file per record and rank,
 *       step=S___rank=R___dump_index=I___name=N___recompute_status=disabled[___layer_id=L].pt
 *       holding {"value": tensor, "meta": {..., "dims": ...}} on cuda:R;
 *       2-D [tokens, hidden]; the core records (input_ids, seq_lens,
 *       positions, req_pool_indices, rids) first in each step.
 *   layoutgen sglang-pd SRC OUT CUTS
 *       the same dumper collecting CUDA-graph frames (sgl-project/sglang PR
 *       #38439, python/sglang/srt/debug_utils/cuda_graph/seams.py: tags
 *       tap, occurrence, graph_runner, forward_mode, pd_role, graph_backend,
 *       graph_size after recompute_status, occurrence 0 untagged) on a
 *       prefill/decode-disaggregated server: the prefill process writes
 *       step 0 (EXTEND, eager), the decode process steps 0.. (DECODE, graph
 *       frames of graph_size 8), each decode step calling layer 0's MLP
 *       twice (occurrence=1, half its value) and holding a frame at its
 *       padded width (moe_expert_output, [16, hidden]).  One rank.
 *   layoutgen trtllm SRC OUT
 *       TensorRT-LLM's debug hook (tensorrt_llm/_torch/debug/debug_hook.py,
 *       debug_mode): OUT/rank0/ holds one torch.save tensor per file named
 *       by the call chain, "ORD.Class" joined by '-' (ORD the call's count
 *       among its parent call's children), then "-input.X.pt" for each
 *       positional argument (X its name in forward's signature) and after
 *       the call "-output.X.pt": the positional arguments again, then the
 *       outputs, X the signature's name at their count, else the count
 *       (dump_tensor, get_dump_file_path).  The calls are those of
 *       tensorrt_llm/_torch/models/modeling_llama.py: the decoder layers,
 *       attention and model called with keywords only (no inputs dumped,
 *       outputs named after arguments they are not), fused qkv_proj and
 *       gate_up_proj, RMSNorm fusing the residual add (output 2 normed,
 *       3 the sum), an AllReduce inside o_proj, the LM head at the top.
 *   layoutgen vllm SRC OUT TP CUTS [STALE]
 *       vLLM's intermediate logging (PR #21215): <uuid>/step_N/<module>/
 *       outputs[_i]_cuda_R.pt bare tensors, inputs_i_cuda_R.pt, JSON
 *       sidecars inputs.json / outputs.json, module_calls.txt; fused
 *       qkv_proj and gate_up_proj sharded per rank; decoder layers and
 *       fused add-norms return tuples.
 *   layoutgen npy SRC OUT TP CUTS [STALE]
 *       the hand-made layout: rank_K/step_N/<module>.npy, [1, tokens, width];
 *       column-parallel projections split on their last axis, o_proj and
 *       down_proj as partial sums, everything else replicated.
 *   layoutgen hfdebug SRC OUT
 *       transformers' model_addition_debugger_context(use_repr=False): a
 *       flat folder of <Class>.<module>_{inputs_args_0,outputs}.safetensors
 *       ({"data": tensor}) with <Class>_debug_tree_{FULL_TENSORS,SUMMARY}.json.
 *
 * CUTS: the positions each forward step takes ("5,1,1,1": a prefill of 5,
 * then three decode steps).  STALE: a decode step whose layer records
 * repeat the step before's (a CUDA-graph buffer dumped again).  SRC must
 * hold the sub-taps (mkdemo --sub).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumpwrite.h"
#include "formats/tree.h"

#define MAX_CUTS 64

/* Every buffer made, freed at exit (a sanitizer build checks for leaks). */
static void **arena;
static size_t n_arena, cap_arena;

static void *arena_alloc(size_t n)
{
	void *p = malloc(n + 1);

	if (n_arena == cap_arena) {
		cap_arena = cap_arena ? 2 * cap_arena : 256;
		arena = realloc(arena, cap_arena * sizeof *arena);
	}
	if (!p || !arena) {
		fputs("layoutgen: out of memory\n", stderr);
		exit(2);
	}
	arena[n_arena++] = p;
	return p;
}

static void arena_free(void)
{
	for (size_t i = 0; i < n_arena; i++)
		free(arena[i]);
	free(arena);
}

static int die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("layoutgen: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* A source tensor as f32 rows: [rows, width] (a leading batch of 1 dropped). */
typedef struct mat {
	float *x;
	int64_t rows, width;
} mat;

static mat load(const tb_tree *tree, const char *name)
{
	tb_tensor *t = tb_tree_find(tree, name);
	tb_err err = {0};
	mat m = {0};

	if (!t)
		die("%s: no tensor '%s' (write SRC with mkdemo --sub)", tree->path, name);
	m.width = t->ndim ? t->shape[t->ndim - 1] : 1;
	m.rows = m.width ? (int64_t)(t->numel / (uint64_t)m.width) : 0;
	m.x = arena_alloc(t->numel * sizeof *m.x);
	if (!m.x || tb_tensor_acquire(t, &err) < 0)
		die("%s: cannot read '%s'", tree->path, name);
	tb_tensor_read_f32(t, 0, t->numel, m.x);
	tb_tensor_release(t);
	return m;
}

/* Rows [r0, r1) and columns [c0, c1) of m, as a new matrix. */
static mat cut(mat m, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
	mat o = {arena_alloc((size_t)((r1 - r0) * (c1 - c0)) * sizeof(float)), r1 - r0, c1 - c0};

	for (int64_t r = r0; r < r1; r++)
		memcpy(o.x + (r - r0) * o.width, m.x + r * m.width + c0, (size_t)(c1 - c0) * sizeof(float));
	return o;
}

/* [a | b | c] side by side (c may be empty). */
static mat join3(mat a, mat b, mat c)
{
	mat o = {arena_alloc((size_t)(a.rows * (a.width + b.width + c.width)) * sizeof(float)), a.rows,
		 a.width + b.width + c.width};

	for (int64_t r = 0; r < a.rows; r++) {
		float *d = o.x + r * o.width;
		memcpy(d, a.x + r * a.width, (size_t)a.width * sizeof(float));
		memcpy(d + a.width, b.x + r * b.width, (size_t)b.width * sizeof(float));
		if (c.width)
			memcpy(d + a.width + b.width, c.x + r * c.width, (size_t)c.width * sizeof(float));
	}
	return o;
}

static mat scaled(mat m, float k)
{
	mat o = {arena_alloc((size_t)(m.rows * m.width) * sizeof(float)), m.rows, m.width};

	for (int64_t i = 0; i < m.rows * m.width; i++)
		o.x[i] = m.x[i] * k;
	return o;
}

static mat minus(mat a, mat b)
{
	mat o = {arena_alloc((size_t)(a.rows * a.width) * sizeof(float)), a.rows, a.width};

	for (int64_t i = 0; i < a.rows * a.width; i++)
		o.x[i] = a.x[i] - b.x[i];
	return o;
}

/* ---- torch.save records ---- */

/* One torch.save payload: a 2-D f32 matrix, or 1-D int64 values. */
typedef struct payload {
	const mat *m;         /* or */
	const int64_t *ints;
	int64_t n_ints;
} payload;

static void tensor_of(const payload *v, dw_pt_tensor *t, const char *location)
{
	memset(t, 0, sizeof *t);
	t->name = "value";
	t->location = location;
	if (v->m) {
		t->dtype = TB_DT_F32;
		t->ndim = 2;
		t->shape[0] = v->m->rows;
		t->shape[1] = v->m->width;
		t->storage = v->m->x;
		t->storage_bytes = (size_t)(v->m->rows * v->m->width) * sizeof(float);
	} else {
		t->dtype = TB_DT_I64;
		t->ndim = 1;
		t->shape[0] = v->n_ints;
		t->storage = v->ints;
		t->storage_bytes = (size_t)v->n_ints * sizeof(int64_t);
	}
}

static void pk_kv_int(dw_pk *p, const char *k, int64_t v)
{
	dw_pk_str(p, k);
	dw_pk_int(p, v);
}

static void pk_kv_str(dw_pk *p, const char *k, const char *v)
{
	dw_pk_str(p, k);
	dw_pk_str(p, v);
}

/* The file's stem is also its archive folder, as torch.save names it. */
static void stem_of(const char *path, char *stem, size_t size)
{
	const char *base = strrchr(path, '/'), *dot;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	snprintf(stem, size, "%.*s", (int)(dot ? dot - base : (long)strlen(base)), base);
}

/* ---- SGLang ---- */

typedef struct sglang {
	const char *out;
	int tp, rank, step, layer;
	int64_t index[64]; /* dump_index per rank, from 1 */
	const char *tags;  /* the CUDA-graph frames' tags after recompute_status ("___tap=t1___..."), or NULL */
	int occurrence;    /* the record's call in the pass, 0: the first (untagged) */
} sglang;

/* One record: value is a payload, or (rids) a list of strings when v is NULL. */
static void sg_record(sglang *g, const char *name, const char *dims, const payload *v)
{
	char path[4096], stem[4096], loc[32];
	dw_pt_tensor t;
	dw_pt_opts o = {0};
	dw_pk p = {0};
	int64_t idx = ++g->index[g->rank];

	snprintf(path, sizeof path, "%s/step=%d___rank=%d___dump_index=%lld___name=%s___recompute_status=disabled", g->out,
		 g->step, g->rank, (long long)idx, name);
	if (g->tags) {
		/* seams.py: tap, occurrence (left out when 0), then the runner's and the replay's tags */
		const char *rest = strstr(g->tags, "___graph_runner=");
		snprintf(path + strlen(path), sizeof path - strlen(path), "%.*s", (int)(rest ? rest - g->tags : (long)strlen(g->tags)),
			 g->tags);
		if (g->occurrence)
			snprintf(path + strlen(path), sizeof path - strlen(path), "___occurrence=%d", g->occurrence);
		if (rest)
			snprintf(path + strlen(path), sizeof path - strlen(path), "%s", rest);
	}
	if (g->layer >= 0)
		snprintf(path + strlen(path), sizeof path - strlen(path), "___layer_id=%d", g->layer);
	strcat(path, ".pt");
	stem_of(path, stem, sizeof stem);
	snprintf(loc, sizeof loc, "cuda:%d", g->rank);
	dw_pk_begin(&p, 2);
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	dw_pk_str(&p, "value");
	if (v) {
		tensor_of(v, &t, loc);
		dw_pk_tensor(&p, &t, "0", false);
	} else {
		dw_pk_op(&p, ']');
		dw_pk_put(&p);
		dw_pk_str(&p, "9f2c41d07e1b4aa5b61c2e4f0d3a8b77");
		dw_pk_op(&p, 'a');
	}
	dw_pk_str(&p, "meta");
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	pk_kv_int(&p, "step", g->step);
	pk_kv_int(&p, "rank", g->rank);
	pk_kv_int(&p, "dump_index", idx);
	pk_kv_str(&p, "name", name);
	pk_kv_str(&p, "recompute_status", "disabled");
	if (g->layer >= 0)
		pk_kv_int(&p, "layer_id", g->layer);
	pk_kv_int(&p, "world_rank", g->rank);
	pk_kv_int(&p, "world_size", g->tp);
	dw_pk_str(&p, "sglang_parallel_info");
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	pk_kv_int(&p, "tp_rank", g->rank);
	pk_kv_int(&p, "tp_size", g->tp);
	pk_kv_int(&p, "pp_rank", 0);
	pk_kv_int(&p, "pp_size", 1);
	dw_pk_str(&p, "enable_dp_attention");
	dw_pk_op(&p, 0x89);
	dw_pk_op(&p, 'u');
	pk_kv_str(&p, "tokenizer_path", "demo/tokenizer");
	if (dims)
		pk_kv_str(&p, "dims", dims);
	dw_pk_op(&p, 'u');
	dw_pk_op(&p, 'u');
	dw_pk_op(&p, '.');
	o.prefix = stem;
	if (dw_write_pt_pickle(path, p.b.p, p.b.n, &t, v ? 1 : 0, &o) < 0)
		die("cannot write %s", path);
	dw_pk_free(&p);
}

/* The positions [p0, p1) of every record of one rank and step. */
static void sglang_step(sglang *g, const tb_tree *src, int n_layers, int64_t p0, int64_t p1, int64_t total)
{
	char name[256], prev[256];
	const mat *none = NULL;
	int64_t ids[4096], pos[4096], seq = p1, pool = 0;
	mat tok = load(src, "tokens");
	payload v;

	(void)none;
	(void)total;
	for (int64_t i = p0; i < p1; i++) {
		ids[i - p0] = (int64_t)tok.x[i];
		pos[i - p0] = i;
	}
	g->layer = -1;
	v = (payload){.ints = ids, .n_ints = p1 - p0};
	sg_record(g, "input_ids", NULL, &v);
	v = (payload){.ints = &seq, .n_ints = 1};
	sg_record(g, "seq_lens", NULL, &v);
	v = (payload){.ints = pos, .n_ints = p1 - p0};
	sg_record(g, "positions", NULL, &v);
	v = (payload){.ints = &pool, .n_ints = 1};
	sg_record(g, "req_pool_indices", NULL, &v);
	sg_record(g, "rids", NULL, NULL);
	for (int l = 0; l < n_layers; l++) {
		mat m, s;
		g->layer = l;
		if (l == 0)
			snprintf(prev, sizeof prev, "model.embed_tokens");
		else
			snprintf(prev, sizeof prev, "model.layers.%d", l - 1);
		m = cut(load(src, prev), p0, p1, 0, load(src, prev).width);
		sg_record(g, "layer_input", "t h # tp:replicated", &(payload){.m = &m});
		snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj", l);
		m = load(src, name);
		s = cut(m, p0, p1, m.width / g->tp * g->rank, m.width / g->tp * (g->rank + 1));
		snprintf(name, sizeof name, "non_intrusive__model.layers.%d.self_attn.q_proj.output", l);
		sg_record(g, name, "t h[tp]", &(payload){.m = &s});
		snprintf(name, sizeof name, "model.layers.%d.self_attn", l);
		m = cut(load(src, name), p0, p1, 0, load(src, name).width);
		sg_record(g, "attn_output", "t h # tp:replicated", &(payload){.m = &m});
		snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj", l);
		m = cut(load(src, name), p0, p1, 0, load(src, name).width);
		/* partial sums: a quarter on rank 0, the rest spread on the others */
		s = g->tp == 1 ? m : g->rank == 0 ? scaled(m, 0.25f) : scaled(m, 0.75f / (float)(g->tp - 1));
		snprintf(name, sizeof name, "non_intrusive__model.layers.%d.mlp.down_proj.output", l);
		sg_record(g, name, "t h[tp:partial]", &(payload){.m = &s});
		snprintf(name, sizeof name, "model.layers.%d.mlp", l);
		m = cut(load(src, name), p0, p1, 0, load(src, name).width);
		sg_record(g, "mlp_output", "t h # tp:replicated", &(payload){.m = &m});
	}
	g->layer = -1;
	mat fn = load(src, "model.norm");
	mat f = cut(fn, p0, p1, 0, fn.width);
	sg_record(g, "non_intrusive__model.norm.output", "t h # tp:replicated", &(payload){.m = &f});
}

static int parse_cuts(const char *s, int64_t *cuts)
{
	int n = 0;

	for (char *end; *s && n < MAX_CUTS; s = *end ? end + 1 : end) {
		cuts[n++] = strtoll(s, &end, 10);
		if (end == s || cuts[n - 1] <= 0)
			die("CUTS: positive numbers joined by ','");
	}
	return n;
}

static int layers_of(const tb_tree *src)
{
	int n = 0;
	char name[64];

	for (;; n++) {
		snprintf(name, sizeof name, "model.layers.%d", n);
		if (!tb_tree_find(src, name))
			return n;
	}
}

static int cmd_sglang(const tb_tree *src, const char *out, int tp, const char *cuts_arg, int stale)
{
	int64_t cuts[MAX_CUTS], p0 = 0, total = 0;
	int n = parse_cuts(cuts_arg, cuts), layers = layers_of(src);
	sglang g = {.out = out, .tp = tp};

	for (int k = 0; k < n; k++)
		total += cuts[k];
	for (int k = 0; k < n; k++) {
		/* a stale step records the step before's positions again */
		int64_t q0 = k == stale && k > 0 ? p0 - cuts[k - 1] : p0;
		for (g.rank = 0; g.rank < tp; g.rank++) {
			g.step = k;
			sglang_step(&g, src, layers, q0, q0 + cuts[k == stale && k > 0 ? k - 1 : k], total);
		}
		p0 += cuts[k];
	}
	return 0;
}

/* A disaggregated server's two processes: the prefill's step 0, the
 * decode's steps 0.. as CUDA-graph frames (see the header). */
static int cmd_sglang_pd(const tb_tree *src, const char *out, const char *cuts_arg)
{
	int64_t cuts[MAX_CUTS], p0 = 0, total = 0;
	int n = parse_cuts(cuts_arg, cuts), layers = layers_of(src);
	sglang g = {.out = out, .tp = 1};

	for (int k = 0; k < n; k++)
		total += cuts[k];
	for (int k = 0; k < n; k++) {
		g.step = k ? k - 1 : 0;
		g.tags = k ? "___tap=t1___graph_runner=CudaGraphRunner___forward_mode=DECODE___pd_role=decode"
			     "___graph_backend=full___graph_size=8"
			   : "___tap=eager___forward_mode=EXTEND___pd_role=prefill";
		sglang_step(&g, src, layers, p0, p0 + cuts[k], total);
		if (k) {
			mat m = load(src, "model.layers.0.mlp");
			mat s = cut(m, p0, p0 + cuts[k], 0, m.width);
			mat pad = {arena_alloc((size_t)(16 * m.width) * sizeof(float)), 16, m.width};
			/* the MLP's second call in the pass: a tensor of its own (a
			 * short record name: the tags make long file names) */
			g.layer = 0;
			g.occurrence = 1;
			sg_record(&g, "mlp_output", "t h", &(payload){.m = &(mat){scaled(s, 0.5f).x, s.rows, s.width}});
			g.occurrence = 0;
			/* a frame the dumper could not trim: two slots per token at the padded size */
			memset(pad.x, 0, (size_t)(16 * m.width) * sizeof(float));
			sg_record(&g, "moe_expert_output", "t h", &(payload){.m = &pad});
		}
		p0 += cuts[k];
	}
	return 0;
}

/* ---- TensorRT-LLM ---- */

/* One call: its chain, its positional inputs (named by the signature's
 * first argument names), its outputs (named by the signature's names at
 * their counts, else by the count). */
static void trt_call(const char *dir, const char *chain, const char *const *sig, int n_sig, const payload *in, int n_in,
		     const payload *out, int n_out)
{
	char path[4096], stem[4096], x[64];
	dw_pt_tensor t;
	dw_pt_opts o = {.lone = true};

	for (int pass = 0; pass < 2; pass++) {
		int count = 0;
		for (int k = 0; k < n_in + (pass ? n_out : 0); k++, count++) {
			const payload *v = k < n_in ? &in[k] : &out[k - n_in];
			if (count < n_sig)
				snprintf(x, sizeof x, "%s", sig[count]);
			else
				snprintf(x, sizeof x, "%d", count);
			snprintf(path, sizeof path, "%s/%s-%s.%s.pt", dir, chain, pass ? "output" : "input", x);
			stem_of(path, stem, sizeof stem);
			tensor_of(v, &t, "cuda:0");
			o.prefix = stem;
			if (dw_mkdirs_for(path) < 0 || dw_write_pt(path, &t, 1, &o) < 0)
				die("cannot write %s", path);
		}
	}
}

static int cmd_trtllm(const tb_tree *src, const char *out)
{
	static const char *const emb_sig[] = {"input"}, *const norm_sig[] = {"hidden_states", "residual"},
				 *const lin_sig[] = {"input"}, *const mlp_sig[] = {"x", "all_rank_num_tokens"},
				 *const layer_sig[] = {"position_ids", "hidden_states", "attn_metadata", "residual"},
				 *const attn_sig[] = {"position_ids", "hidden_states", "attn_metadata"},
				 *const model_sig[] = {"attn_metadata", "input_ids", "position_ids"};
	char dir[4096], chain[512], name[256];
	int layers = layers_of(src);
	mat tok = load(src, "tokens"), emb = load(src, "model.embed_tokens");
	int64_t ids[4096];
	mat resid = emb, h = emb;

	snprintf(dir, sizeof dir, "%s/rank0", out);
	for (int64_t i = 0; i < tok.width && i < 4096; i++)
		ids[i] = (int64_t)tok.x[i];
	trt_call(dir, "1.LlamaModel-1.Embedding", emb_sig, 1, &(payload){.ints = ids, .n_ints = tok.width}, 1,
		 &(payload){.m = &emb}, 1);
	for (int l = 0; l < layers; l++) {
		char lc[128];
		mat normed, attn, qkv, o, mlpn, sum, gu, down, mlp, before = emb;
		snprintf(lc, sizeof lc, "1.LlamaModel-%d.LlamaDecoderLayer", l + 2);
#define LOAD(var, fmt) (snprintf(name, sizeof name, fmt, l), var = load(src, name))
		LOAD(normed, "model.layers.%d.input_layernorm");
		LOAD(attn, "model.layers.%d.self_attn");
		LOAD(o, "model.layers.%d.self_attn.o_proj");
		LOAD(mlpn, "model.layers.%d.post_attention_layernorm");
		LOAD(down, "model.layers.%d.mlp.down_proj");
		LOAD(mlp, "model.layers.%d.mlp");
		{
			mat q, k, v, g, u;
			LOAD(q, "model.layers.%d.self_attn.q_proj");
			LOAD(k, "model.layers.%d.self_attn.k_proj");
			LOAD(v, "model.layers.%d.self_attn.v_proj");
			LOAD(g, "model.layers.%d.mlp.gate_proj");
			LOAD(u, "model.layers.%d.mlp.up_proj");
			qkv = join3(q, k, v);
			gu = join3(g, u, (mat){NULL, g.rows, 0});
		}
#undef LOAD
		/* the residual stream into the layer: the embedding, or the
		 * layer before's output */
		if (l > 0) {
			snprintf(name, sizeof name, "model.layers.%d", l - 1);
			before = load(src, name);
		}
		/* layer 0's norm gets no residual: its one output takes the
		 * signature's second name */
		snprintf(chain, sizeof chain, "%s-1.RMSNorm", lc);
		if (l == 0)
			trt_call(dir, chain, norm_sig, 2, &(payload){.m = &h}, 1, &(payload){.m = &normed}, 1);
		else
			trt_call(dir, chain, norm_sig, 2, (payload[]){{.m = &h}, {.m = &resid}}, 2,
				 (payload[]){{.m = &normed}, {.m = &before}}, 2);
		snprintf(chain, sizeof chain, "%s-2.LlamaAttention-1.Linear", lc);
		trt_call(dir, chain, lin_sig, 1, &(payload){.m = &normed}, 1, &(payload){.m = &qkv}, 1);
		snprintf(chain, sizeof chain, "%s-2.LlamaAttention-2.Linear-1.AllReduce", lc);
		trt_call(dir, chain, lin_sig, 1, &(payload){.m = &o}, 1, &(payload){.m = &o}, 1);
		snprintf(chain, sizeof chain, "%s-2.LlamaAttention-2.Linear", lc);
		trt_call(dir, chain, lin_sig, 1, &(payload){.m = &o}, 1, &(payload){.m = &o}, 1);
		snprintf(chain, sizeof chain, "%s-2.LlamaAttention", lc);
		trt_call(dir, chain, attn_sig, 3, NULL, 0, &(payload){.m = &attn}, 1);
		sum = minus(before, scaled(attn, -1.0f));
		snprintf(chain, sizeof chain, "%s-3.RMSNorm", lc);
		trt_call(dir, chain, norm_sig, 2, (payload[]){{.m = &attn}, {.m = &before}}, 2,
			 (payload[]){{.m = &mlpn}, {.m = &sum}}, 2);
		snprintf(chain, sizeof chain, "%s-4.GatedMLP-1.Linear", lc);
		trt_call(dir, chain, lin_sig, 1, &(payload){.m = &mlpn}, 1, &(payload){.m = &gu}, 1);
		snprintf(chain, sizeof chain, "%s-4.GatedMLP-2.Linear", lc);
		trt_call(dir, chain, lin_sig, 1, &(payload){.m = &down}, 1, &(payload){.m = &down}, 1);
		snprintf(chain, sizeof chain, "%s-4.GatedMLP", lc);
		trt_call(dir, chain, mlp_sig, 2, &(payload){.m = &mlpn}, 1, &(payload){.m = &mlp}, 1);
		trt_call(dir, lc, layer_sig, 4, NULL, 0, (payload[]){{.m = &mlp}, {.m = &sum}}, 2);
		resid = sum;
		h = mlp;
	}
	{
		mat fin = load(src, "model.norm"), logits = load(src, "lm_head"), last;
		snprintf(name, sizeof name, "model.layers.%d", layers - 1);
		last = load(src, name);
		snprintf(chain, sizeof chain, "1.LlamaModel-%d.RMSNorm", layers + 2);
		trt_call(dir, chain, norm_sig, 2, (payload[]){{.m = &h}, {.m = &resid}}, 2,
			 (payload[]){{.m = &fin}, {.m = &last}}, 2);
		trt_call(dir, "1.LlamaModel", model_sig, 3, NULL, 0, &(payload){.m = &fin}, 1);
		trt_call(dir, "2.LMHead", lin_sig, 1, &(payload){.m = &fin}, 1, &(payload){.m = &logits}, 1);
	}
	return 0;
}

/* ---- vLLM ---- */

typedef struct vllm {
	const char *run;  /* <out>/<uuid> */
	int tp, rank, step;
	FILE *calls;      /* step_N/module_calls.txt */
} vllm;

static void json_tensor(FILE *f, int64_t rows, int64_t width, const char *dtype)
{
	if (width)
		fprintf(f, "{\"type\": \"tensor\", \"shape\": [%lld, %lld], \"dtype\": \"%s\", \"numel\": %lld}",
			(long long)rows, (long long)width, dtype, (long long)(rows * width));
	else
		fprintf(f, "{\"type\": \"tensor\", \"shape\": [%lld], \"dtype\": \"%s\", \"numel\": %lld}",
			(long long)rows, dtype, (long long)rows);
}

/* A bare tensor file: torch.save(tensor) on cuda:R. */
static void vl_save(const vllm *g, const char *dir, const char *file, const payload *v)
{
	char path[4096], stem[4096], loc[32];
	dw_pt_tensor t;
	dw_pt_opts o = {.lone = true};

	snprintf(path, sizeof path, "%s/%s_cuda_%d.pt", dir, file, g->rank);
	stem_of(path, stem, sizeof stem);
	snprintf(loc, sizeof loc, "cuda:%d", g->rank);
	tensor_of(v, &t, loc);
	o.prefix = stem;
	if (dw_mkdirs_for(path) < 0 || dw_write_pt(path, &t, 1, &o) < 0)
		die("cannot write %s", path);
}

/* One logged call: its positional tensor inputs and its outputs (a bare
 * tensor when bare, else a tuple whose None items get no file). */
static void vl_module(vllm *g, const char *module, const payload *in, int n_in, const payload *out, int n_out,
		      bool bare)
{
	char dir[4096], path[4200], file[64];
	FILE *f;

	snprintf(dir, sizeof dir, "%s/step_%d/%s", g->run, g->step, module);
	for (int i = 0; i < n_in; i++) {
		snprintf(file, sizeof file, "inputs_%d", i);
		if (in[i].m || in[i].ints)
			vl_save(g, dir, file, &in[i]);
	}
	for (int i = 0; i < n_out; i++) {
		snprintf(file, sizeof file, bare ? "outputs" : "outputs_%d", i);
		if (out[i].m || out[i].ints)
			vl_save(g, dir, file, &out[i]);
	}
	for (int side = 0; side < 2; side++) {
		const payload *v = side ? out : in;
		int n = side ? n_out : n_in;
		snprintf(path, sizeof path, "%s/%s.json", dir, side ? "outputs" : "inputs");
		if (dw_mkdirs_for(path) < 0 || !(f = fopen(path, "w")))
			die("cannot write %s", path);
		if (side && bare) {
			json_tensor(f, v[0].m ? v[0].m->rows : v[0].n_ints, v[0].m ? v[0].m->width : 0,
				    v[0].m ? "torch.float32" : "torch.int64");
		} else {
			fputs("{\n  \"type\": \"tuple\",\n  \"items\": [", f);
			for (int i = 0; i < n; i++) {
				fputs(i ? ",\n    " : "\n    ", f);
				if (v[i].m || v[i].ints)
					json_tensor(f, v[i].m ? v[i].m->rows : v[i].n_ints, v[i].m ? v[i].m->width : 0,
						    v[i].m ? "torch.float32" : "torch.int64");
				else
					fputs("null", f);
			}
			fputs("\n  ]\n}", f);
		}
		fclose(f);
	}
	fprintf(g->calls, "%s\n", module);
}

/* m's rows [p0, p1), all columns, or this rank's share of the columns. */
static mat rows_of(const tb_tree *src, const char *name, int64_t p0, int64_t p1)
{
	mat m = load(src, name);

	return cut(m, p0, p1, 0, m.width);
}

static mat shard_of(const vllm *g, mat m)
{
	return cut(m, 0, m.rows, m.width / g->tp * g->rank, m.width / g->tp * (g->rank + 1));
}

static void vllm_step(vllm *g, const tb_tree *src, int n_layers, int64_t p0, int64_t p1, const mat *logits_before)
{
	char name[256];
	int64_t ids[4096], pos[4096];
	mat tok = load(src, "tokens");
	payload none = {0};

	for (int64_t i = p0; i < p1; i++) {
		ids[i - p0] = (int64_t)tok.x[i];
		pos[i - p0] = i;
	}
	payload pids = {.ints = ids, .n_ints = p1 - p0}, ppos = {.ints = pos, .n_ints = p1 - p0};
	if (logits_before) {
		/* the step before's logits: compute_logits runs after the step counter moved */
		payload in[3] = {none, none, none}, out = {.m = logits_before};
		vl_module(g, "logits_processor", in, 3, &out, 1, true);
	}
	mat fin = rows_of(src, "model.norm", p0, p1), emb = rows_of(src, "model.embed_tokens", p0, p1);
	vl_module(g, "model", (payload[]){pids, ppos}, 2, (payload[]){{.m = &fin}}, 1, true);
	vl_module(g, "model.embed_tokens", &pids, 1, (payload[]){{.m = &emb}}, 1, true);
	mat hidden = emb, resid = {0};
	for (int l = 0; l < n_layers; l++) {
		char layer[64];
		snprintf(layer, sizeof layer, "model.layers.%d", l);
#define ROWS(tap) (snprintf(name, sizeof name, "%s.%s", layer, tap), rows_of(src, name, p0, p1))
		mat an = ROWS("input_layernorm"), q = ROWS("self_attn.q_proj"), k = ROWS("self_attn.k_proj"),
		    v = ROWS("self_attn.v_proj"), o = ROWS("self_attn.o_proj"), at = ROWS("self_attn"),
		    mn = ROWS("post_attention_layernorm"), ga = ROWS("mlp.gate_proj"), up = ROWS("mlp.up_proj"),
		    dn = ROWS("mlp.down_proj"), ml = ROWS("mlp"), bl = rows_of(src, layer, p0, p1);
#undef ROWS
		mat prev_block = l ? rows_of(src, (snprintf(name, sizeof name, "model.layers.%d", l - 1), name), p0, p1) : emb;
		mat ar = minus(bl, ml); /* the residual stream after attention */
		mat qkv = join3(shard_of(g, q), shard_of(g, k), shard_of(g, v));
		mat gu = join3(shard_of(g, ga), shard_of(g, up), (mat){0});
		mat rq = shard_of(g, q), rk = shard_of(g, k);
		payload layer_in[3] = {ppos, {.m = &hidden}, l ? (payload){.m = &resid} : none};
		vl_module(g, layer, layer_in, 3, (payload[]){{.m = &ml}, {.m = &ar}}, 2, false);
		snprintf(name, sizeof name, "%s.input_layernorm", layer);
		if (l == 0)
			vl_module(g, name, (payload[]){{.m = &hidden}}, 1, (payload[]){{.m = &an}}, 1, true);
		else
			vl_module(g, name, (payload[]){{.m = &hidden}, {.m = &resid}}, 2,
				  (payload[]){{.m = &an}, {.m = &prev_block}}, 2, false);
		snprintf(name, sizeof name, "%s.self_attn", layer);
		vl_module(g, name, NULL, 0, (payload[]){{.m = &at}}, 1, true);
		snprintf(name, sizeof name, "%s.self_attn.qkv_proj", layer);
		vl_module(g, name, (payload[]){{.m = &an}}, 1, (payload[]){{.m = &qkv}, none}, 2, false);
		/* one rotary module serves every layer: later calls get _1, _2, ... */
		if (l == 0)
			snprintf(name, sizeof name, "model.layers.0.self_attn.rotary_emb");
		else
			snprintf(name, sizeof name, "model.layers.0.self_attn.rotary_emb_%d", l);
		vl_module(g, name, (payload[]){ppos, {.m = &rq}, {.m = &rk}}, 3, (payload[]){{.m = &rq}, {.m = &rk}}, 2,
			  false);
		snprintf(name, sizeof name, "%s.self_attn.o_proj", layer);
		vl_module(g, name, NULL, 0, (payload[]){{.m = &o}, none}, 2, false);
		snprintf(name, sizeof name, "%s.post_attention_layernorm", layer);
		vl_module(g, name, (payload[]){{.m = &at}, {.m = &prev_block}}, 2, (payload[]){{.m = &mn}, {.m = &ar}},
			  2, false);
		snprintf(name, sizeof name, "%s.mlp", layer);
		vl_module(g, name, (payload[]){{.m = &mn}}, 1, (payload[]){{.m = &ml}}, 1, true);
		snprintf(name, sizeof name, "%s.mlp.gate_up_proj", layer);
		vl_module(g, name, (payload[]){{.m = &mn}}, 1, (payload[]){{.m = &gu}, none}, 2, false);
		snprintf(name, sizeof name, "%s.mlp.down_proj", layer);
		vl_module(g, name, NULL, 0, (payload[]){{.m = &dn}, none}, 2, false);
		hidden = ml;
		resid = ar;
	}
	snprintf(name, sizeof name, "model.layers.%d", n_layers - 1);
	mat last = rows_of(src, name, p0, p1);
	vl_module(g, "model.norm", (payload[]){{.m = &hidden}, {.m = &resid}}, 2, (payload[]){{.m = &fin}, {.m = &last}},
		  2, false);
}

static int cmd_vllm(const tb_tree *src, const char *out, int tp, const char *cuts_arg, int stale)
{
	int64_t cuts[MAX_CUTS], p0 = 0;
	int n = parse_cuts(cuts_arg, cuts), layers = layers_of(src);
	char run[4096], path[4200];
	vllm g = {.run = run, .tp = tp};
	mat logits = load(src, "lm_head"), prev = {0};

	snprintf(run, sizeof run, "%s/5b0c9d3e-8f1a-4c2b-9e7d-1a2b3c4d5e6f", out);
	for (int k = 0; k < n; k++) {
		int64_t q0 = k == stale && k > 0 ? p0 - cuts[k - 1] : p0, q1 = q0 + cuts[k == stale && k > 0 ? k - 1 : k];
		g.step = k;
		snprintf(path, sizeof path, "%s/step_%d/module_calls.txt", run, k);
		if (dw_mkdirs_for(path) < 0 || !(g.calls = fopen(path, "w")))
			die("cannot write %s", path);
		for (g.rank = 0; g.rank < tp; g.rank++)
			vllm_step(&g, src, layers, q0, q1, k ? &prev : NULL);
		fclose(g.calls);
		prev = cut(logits, q1 - 1, q1, 0, logits.width);
		p0 += cuts[k];
	}
	return 0;
}

/* ---- rank and step folders of .npy ---- */

static bool column_parallel(const char *name)
{
	static const char *const tails[] = {".q_proj", ".k_proj", ".v_proj", ".gate_proj", ".up_proj"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof tails / sizeof *tails; i++)
		if (n > strlen(tails[i]) && !strcmp(name + n - strlen(tails[i]), tails[i]))
			return true;
	return false;
}

static int cmd_npy(const tb_tree *src, const char *out, int tp, const char *cuts_arg, int stale)
{
	int64_t cuts[MAX_CUTS], p0 = 0;
	int n = parse_cuts(cuts_arg, cuts);

	for (int k = 0; k < n; k++) {
		int64_t q0 = k == stale && k > 0 ? p0 - cuts[k - 1] : p0, q1 = q0 + cuts[k == stale && k > 0 ? k - 1 : k];
		for (int r = 0; r < tp; r++) {
			for (size_t i = 0; i < src->n_tensors; i++) {
				const char *name = src->tensors[i]->name;
				bool tokens = !strcmp(name, "tokens");
				mat m = load(src, name), s;
				char path[4096];
				/* tokens are [1, S]: one row of S columns */
				if (tokens)
					m = (mat){m.x, m.width, 1};
				/* a stale step repeats the step before's layer outputs, not its inputs */
				int64_t a = tokens ? p0 : q0, b = tokens ? p0 + cuts[k] : q1;
				s = cut(m, a, b, 0, m.width);
				if (column_parallel(name))
					s = cut(s, 0, s.rows, s.width / tp * r, s.width / tp * (r + 1));
				else if (tp > 1 && (strstr(name, "o_proj") || strstr(name, "down_proj")))
					s = r == 0 ? scaled(s, 0.25f) : scaled(s, 0.75f / (float)(tp - 1));
				snprintf(path, sizeof path, "%s/rank_%d/step_%d/%s.npy", out, r, k, name);
				if (dw_mkdirs_for(path) < 0)
					die("cannot write %s", path);
				if (tokens) {
					int64_t *ids = arena_alloc((size_t)s.rows * sizeof *ids), shape[2] = {1, s.rows};
					for (int64_t j = 0; j < s.rows; j++)
						ids[j] = (int64_t)s.x[j];
					if (dw_write_npy(path, 1, "<i8", false, 2, shape, ids, (size_t)s.rows * sizeof *ids) < 0)
						die("cannot write %s", path);
				} else {
					int64_t shape[3] = {1, s.rows, s.width};
					if (dw_write_npy(path, 1, "<f4", false, 3, shape, s.x,
							 (size_t)(s.rows * s.width) * sizeof(float)) < 0)
						die("cannot write %s", path);
				}
			}
		}
		p0 += cuts[k];
	}
	return 0;
}

/* ---- transformers' model debugger ---- */

static void hf_save(const char *out, const char *file, const mat *m, int64_t batch_rows)
{
	char path[4096];
	dw_tensor t = {.name = "data", .dtype = TB_DT_F32, .ndim = 3, .shape = {1, batch_rows, m->width}, .data = m->x,
		       .nbytes = (size_t)(m->rows * m->width) * sizeof(float)};

	snprintf(path, sizeof path, "%s/LlamaForCausalLM%s.safetensors", out, file);
	if (dw_write_safetensors(path, &t, 1, NULL) < 0)
		die("cannot write %s", path);
}

/* A leaf module's entry of the JSON tree, pointing at its files. */
static void hf_leaf(FILE *f, const char *module, const mat *in, const mat *out, bool last)
{
	fprintf(f,
		"        {\"module_path\": \"LlamaForCausalLM.%s\", \"inputs\": {\"args\": [{\"shape\": \"torch.Size([1, %lld, %lld])\", "
		"\"dtype\": \"torch.float32\", \"value\": \"./LlamaForCausalLM.%s_inputs_args_0.safetensors\"}]}, "
		"\"outputs\": {\"shape\": \"torch.Size([1, %lld, %lld])\", \"dtype\": \"torch.float32\", "
		"\"value\": \"./LlamaForCausalLM.%s_outputs.safetensors\"}}%s\n",
		module, (long long)in->rows, (long long)in->width, module, (long long)out->rows, (long long)out->width,
		module, last ? "" : ",");
}

static int cmd_hfdebug(const tb_tree *src, const char *out)
{
	static const char *const leaves[][2] = {
		/* module, its input's source tensor */
		{"input_layernorm", NULL},
		{"self_attn.q_proj", "input_layernorm"},
		{"self_attn.k_proj", "input_layernorm"},
		{"self_attn.v_proj", "input_layernorm"},
		{"self_attn.o_proj", "self_attn.o_proj"},
		{"post_attention_layernorm", "self_attn"},
		{"mlp.gate_proj", "post_attention_layernorm"},
		{"mlp.up_proj", "post_attention_layernorm"},
		{"mlp.down_proj", "mlp.down_proj"},
	};
	int layers = layers_of(src);
	char name[256], file[300], path[4096];
	mat emb = load(src, "model.embed_tokens");
	FILE *f;

	snprintf(path, sizeof path, "%s/LlamaForCausalLM_debug_tree_FULL_TENSORS.json", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fputs("{\n  \"module_path\": \"LlamaForCausalLM\",\n  \"inputs\": {\"kwargs\": {\"input_ids\": {\"shape\": "
	      "\"torch.Size([1, 8])\", \"dtype\": \"torch.int64\", \"value\": "
	      "\"./LlamaForCausalLM_inputs_kwargs_input_ids.safetensors\"}}},\n  \"children\": [\n",
	      f);
	hf_save(out, ".model.embed_tokens_outputs", &emb, emb.rows);
	{
		mat tok = load(src, "tokens");
		int64_t *ids = arena_alloc((size_t)(tok.rows * tok.width) * sizeof *ids);
		for (int64_t i = 0; i < tok.rows * tok.width; i++)
			ids[i] = (int64_t)tok.x[i];
		dw_tensor t = {.name = "data", .dtype = TB_DT_I64, .ndim = 2, .shape = {1, tok.rows * tok.width}, .data = ids,
			       .nbytes = (size_t)(tok.rows * tok.width) * sizeof *ids};
		snprintf(path, sizeof path, "%s/LlamaForCausalLM_inputs_kwargs_input_ids.safetensors", out);
		if (dw_write_safetensors(path, &t, 1, NULL) < 0)
			die("cannot write %s", path);
	}
	for (int l = 0; l < layers; l++) {
		mat in = l ? load(src, (snprintf(name, sizeof name, "model.layers.%d", l - 1), name)) : emb;
		snprintf(file, sizeof file, ".model.layers.%d_inputs_args_0", l);
		hf_save(out, file, &in, in.rows);
		fprintf(f, "    {\"module_path\": \"LlamaForCausalLM.model.layers.%d\", \"children\": [\n", l);
		for (size_t i = 0; i < sizeof leaves / sizeof *leaves; i++) {
			char mod[128];
			snprintf(mod, sizeof mod, "model.layers.%d.%s", l, leaves[i][0]);
			mat o = load(src, mod);
			mat x = in;
			if (leaves[i][1]) {
				snprintf(name, sizeof name, "model.layers.%d.%s", l, leaves[i][1]);
				x = load(src, name);
			}
			snprintf(file, sizeof file, ".%s_outputs", mod);
			hf_save(out, file, &o, o.rows);
			snprintf(file, sizeof file, ".%s_inputs_args_0", mod);
			hf_save(out, file, &x, x.rows);
			hf_leaf(f, mod, &x, &o, i + 1 == sizeof leaves / sizeof *leaves);
		}
		fprintf(f, "    ]}%s\n", l + 1 < layers ? "," : ",");
	}
	mat fin = load(src, "model.norm"), logits = load(src, "lm_head");
	snprintf(name, sizeof name, "model.layers.%d", layers - 1);
	mat last = load(src, name);
	hf_save(out, ".model.norm_outputs", &fin, fin.rows);
	hf_save(out, ".model.norm_inputs_args_0", &last, last.rows);
	hf_save(out, ".lm_head_outputs", &logits, logits.rows);
	hf_save(out, ".lm_head_inputs_args_0", &fin, fin.rows);
	hf_save(out, "_outputs_logits", &logits, logits.rows);
	hf_leaf(f, "model.norm", &last, &fin, false);
	hf_leaf(f, "lm_head", &fin, &logits, true);
	fputs("  ]\n}\n", f);
	fclose(f);
	snprintf(path, sizeof path, "%s/LlamaForCausalLM_debug_tree_SUMMARY.json", out);
	if (!(f = fopen(path, "w")))
		die("cannot write %s", path);
	fputs("{\"module_path\": \"LlamaForCausalLM\", \"children\": []}\n", f);
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	tb_tree *src;
	tb_err err = {0};

	char probe[4096];
	int rc = -1;

	if (argc < 4)
		return die("usage: layoutgen sglang|vllm|npy|hfdebug SRC OUT ... (see the source header)");
	if (tb_tree_open(argv[2], NULL, &src, &err) < 0)
		return die("%s: %s", argv[2], err.msg);
	snprintf(probe, sizeof probe, "%s/x", argv[3]);
	if (dw_mkdirs_for(probe) < 0)
		return die("cannot create %s", argv[3]);
	if (!strcmp(argv[1], "trtllm") && argc == 4)
		rc = cmd_trtllm(src, argv[3]);
	else if (!strcmp(argv[1], "sglang-pd") && argc == 5)
		rc = cmd_sglang_pd(src, argv[3], argv[4]);
	else if (!strcmp(argv[1], "sglang") && (argc == 6 || argc == 7))
		rc = cmd_sglang(src, argv[3], atoi(argv[4]), argv[5], argc == 7 ? atoi(argv[6]) : -1);
	else if (!strcmp(argv[1], "vllm") && (argc == 6 || argc == 7))
		rc = cmd_vllm(src, argv[3], atoi(argv[4]), argv[5], argc == 7 ? atoi(argv[6]) : -1);
	else if (!strcmp(argv[1], "npy") && (argc == 6 || argc == 7))
		rc = cmd_npy(src, argv[3], atoi(argv[4]), argv[5], argc == 7 ? atoi(argv[6]) : -1);
	else if (!strcmp(argv[1], "hfdebug") && argc == 4)
		rc = cmd_hfdebug(src, argv[3]);
	tb_tree_free(src);
	arena_free();
	if (rc < 0)
		return die("usage: layoutgen sglang|vllm|hfdebug SRC OUT ... (see the source header)");
	return rc;
}
