/*
 * tbbench-gen: writes a large synthetic reference/candidate dump pair for
 * `make bench`, laid out like a real transformer dump: L layers x 5 taps
 * (attn_norm, attn, mlp_norm, mlp, block) of shape [1, S, H], plus logits
 * [1, S, V], with Hugging Face names.  The candidate is the reference plus
 * noise that grows with depth, diverging from the middle layer on, so every
 * status (match, close, diverged) occurs.  Tensors are produced one at a time,
 * so the generator's memory is that of one tensor, never of the tree.
 *
 *   tbbench-gen [--preset small|medium|large] [--size MB] [--layers L]
 *               [--seq S] [--hidden H] [--vocab V] [--dtype f32|bf16]
 *               [--format npy|safetensors] [--ranks N] [--moe E:K] [--seed N] OUT_DIR
 *
 * --moe E:K (npy) makes every MLP a mixture of E experts with K active: the
 * router's logits [1, S, E] (mlp.gate), the chosen experts [1, S, K] (int64,
 * mlp.selected_experts), their renormalised softmax weights
 * (mlp.routing_weights) and the experts' sum (mlp.experts, the MLP's output
 * as a layer without a shared expert has it).  Every 64th position's K-th
 * and K+1-th scores tie to 1e-6 and the candidate swaps them: near-tie
 * flips, which tbisect leaves out of every later cell.
 *
 * Writes OUT_DIR/ref and OUT_DIR/cand.  --ranks N (npy) writes the candidate
 * as N tensor-parallel ranks, OUT_DIR/cand/rank_K/, each holding its share
 * of every tensor's last axis (tbisect joins them with --shard TAP='b s h[tp]').  --size picks the layer count so each
 * tree holds about that many MB (the presets: 256, 1024, 4096).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dumpwrite.h"

#define N_TAPS 5

typedef struct preset {
	const char *name;
	long size_mb, seq, hidden, vocab;
} preset;

static const preset presets[] = {
	{"small", 256, 512, 2048, 16000},
	{"medium", 1024, 1024, 4096, 32000},
	{"large", 4096, 2048, 4096, 32000},
};

static const char *const tap_names[N_TAPS] = {
	"model.layers.%d.input_layernorm",
	"model.layers.%d.self_attn",
	"model.layers.%d.post_attention_layernorm",
	"model.layers.%d.mlp",
	"model.layers.%d",
};

typedef struct gen {
	long layers, seq, hidden, vocab, size_mb;
	tb_dtype dtype;
	const char *format;
	long ranks;
	long experts, active; /* --moe E:K; 0: a dense MLP */
	uint64_t seed;
	const char *out;
} gen;

/* One tensor to write. */
typedef struct spec {
	char name[96];
	int64_t shape[3];
	uint64_t numel;
	double noise; /* candidate noise relative to the signal */
	uint64_t seed;
} spec;

static uint64_t next(uint64_t *s)
{
	/* xorshift64*: fast and plenty for synthetic activations. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Roughly normal (sum of two uniforms) values; candidate = ref + noise. */
static void fill(const spec *sp, float *ref, float *cand)
{
	uint64_t s = sp->seed | 1;
	const float k = 0x1p-31f;

	for (uint64_t i = 0; i < sp->numel; i++) {
		uint64_t a = next(&s), b = next(&s);
		float x = ((float)(int32_t)(uint32_t)a + (float)(int32_t)(uint32_t)(a >> 32)) * k;
		float e = ((float)(int32_t)(uint32_t)b + (float)(int32_t)(uint32_t)(b >> 32)) * k;
		ref[i] = x;
		cand[i] = x + (float)sp->noise * e;
	}
}

static int die(const char *what, const char *path)
{
	fprintf(stderr, "tbbench-gen: %s: %s: %s\n", path, what, strerror(errno));
	return 1;
}

static void *encode(const float *x, uint64_t n, tb_dtype dt, size_t *nbytes)
{
	if (dt == TB_DT_F32) {
		*nbytes = (size_t)n * 4;
		return (void *)x;
	}
	uint16_t *h = malloc((size_t)n * 2);
	if (!h)
		return NULL;
	for (uint64_t i = 0; i < n; i++)
		h[i] = tb_f32_to_bf16(x[i]);
	*nbytes = (size_t)n * 2;
	return h;
}

static int write_npy_side(const gen *g, const char *side, const spec *sp, const float *x)
{
	char path[4096];
	size_t nbytes;
	void *data = encode(x, sp->numel, g->dtype, &nbytes);
	int rc;

	if (!data)
		return die("out of memory", side);
	snprintf(path, sizeof path, "%s/%s/%s.npy", g->out, side, sp->name);
	rc = dw_write_npy(path, 1, dw_npy_descr(g->dtype), false, 3, sp->shape, data, nbytes);
	if (data != x)
		free(data);
	return rc < 0 ? die("cannot write", path) : 0;
}

/* The candidate as g->ranks shards of the last axis, rank_K/<name>.npy. */
static int write_npy_ranks(const gen *g, const spec *sp, const float *x)
{
	int64_t w = sp->shape[2] / g->ranks, shape[3] = {sp->shape[0], sp->shape[1], w};
	uint64_t rows = sp->numel / (uint64_t)sp->shape[2];
	float *part = malloc((size_t)(rows * (uint64_t)w) * sizeof *part);
	int rc = 0;

	if (!part)
		return die("out of memory", g->out);
	for (long r = 0; r < g->ranks && rc == 0; r++) {
		char path[4096];
		size_t nbytes;
		for (uint64_t i = 0; i < rows; i++)
			memcpy(part + i * (uint64_t)w, x + i * (uint64_t)sp->shape[2] + (uint64_t)(r * w),
			       (size_t)w * sizeof *part);
		void *data = encode(part, rows * (uint64_t)w, g->dtype, &nbytes);
		if (!data) {
			rc = die("out of memory", g->out);
			break;
		}
		snprintf(path, sizeof path, "%s/cand/rank_%ld/%s.npy", g->out, r, sp->name);
		if (dw_write_npy(path, 1, dw_npy_descr(g->dtype), false, 3, shape, data, nbytes) < 0)
			rc = die("cannot write", path);
		if (data != part)
			free(data);
	}
	free(part);
	return rc;
}

/* The K largest of row's E scores, largest first. */
static void top_k(const float *row, long e, long k, int64_t *ids)
{
	for (long j = 0; j < k; j++) {
		long best = -1;
		for (long x = 0; x < e; x++) {
			bool taken = false;
			for (long i = 0; i < j && !taken; i++)
				taken = ids[i] == x;
			if (!taken && (best < 0 || row[x] > row[best]))
				best = x;
		}
		ids[j] = best;
	}
}

/* Softmax over the row, renormalised over the chosen experts. */
static void weigh(const float *row, long e, const int64_t *ids, long k, float *w)
{
	double top = -INFINITY, sum = 0;

	for (long x = 0; x < e; x++)
		top = row[x] > top ? row[x] : top;
	for (long j = 0; j < k; j++)
		sum += exp(row[ids[j]] - top);
	for (long j = 0; j < k; j++)
		w[j] = (float)(exp(row[ids[j]] - top) / sum);
}

static int write_ids(const gen *g, const char *side, const char *name, const int64_t *ids)
{
	char path[4096];
	int64_t shape[3] = {1, g->seq, g->active};

	snprintf(path, sizeof path, "%s/%s/%s.npy", g->out, side, name);
	if (dw_write_npy(path, 1, "<i8", false, 3, shape, ids, (size_t)(g->seq * g->active) * sizeof *ids) < 0)
		return die("cannot write", path);
	return 0;
}

/* Layer l's MoE taps (--moe) beside its MLP output mlp (the experts' sum,
 * there being no shared expert).  noise as the layer's other taps. */
static int write_moe(const gen *g, const spec *mlp, const float *mlp_ref, const float *mlp_cand, int layer)
{
	size_t se = (size_t)(g->seq * g->experts), sk = (size_t)(g->seq * g->active);
	float *lr = malloc(se * sizeof *lr), *lc = malloc(se * sizeof *lc);
	float *wr = malloc(sk * sizeof *wr), *wc = malloc(sk * sizeof *wc);
	int64_t *ir = malloc(sk * sizeof *ir), *ic = malloc(sk * sizeof *ic);
	spec sp = *mlp;
	int rc = 0;

	if (!lr || !lc || !wr || !wc || !ir || !ic) {
		rc = die("out of memory", g->out);
		goto out;
	}
	sp.shape[2] = g->experts;
	sp.numel = se;
	sp.seed = mlp->seed * 31u + 7;
	fill(&sp, lr, lc);
	for (long p = 0; p < g->seq; p++) {
		float *r = lr + (size_t)p * (size_t)g->experts, *c = lc + (size_t)p * (size_t)g->experts;
		int64_t *idr = ir + (size_t)p * (size_t)g->active, *idc = ic + (size_t)p * (size_t)g->active;
		if (p % 64 == 0) {
			/* A near tie the candidate breaks the other way. */
			int64_t order[1025];
			top_k(r, g->experts, g->active + 1, order);
			r[order[g->active]] = r[order[g->active - 1]] - 1e-6f;
			memcpy(c, r, (size_t)g->experts * sizeof *c);
			c[order[g->active - 1]] = r[order[g->active]] - 1e-6f;
		}
		top_k(r, g->experts, g->active, idr);
		top_k(c, g->experts, g->active, idc);
		weigh(r, g->experts, idr, g->active, wr + (size_t)p * (size_t)g->active);
		weigh(c, g->experts, idc, g->active, wc + (size_t)p * (size_t)g->active);
	}
	const char *sides[2] = {"ref", "cand"};
	for (int s = 0; s < 2 && rc == 0; s++) {
		spec t = *mlp;
		snprintf(t.name, sizeof t.name, "model.layers.%d.mlp.experts", layer);
		rc = write_npy_side(g, sides[s], &t, s ? mlp_cand : mlp_ref);
		snprintf(t.name, sizeof t.name, "model.layers.%d.mlp.gate", layer);
		t.shape[2] = g->experts;
		t.numel = se;
		rc = rc ? rc : write_npy_side(g, sides[s], &t, s ? lc : lr);
		snprintf(t.name, sizeof t.name, "model.layers.%d.mlp.routing_weights", layer);
		t.shape[2] = g->active;
		t.numel = sk;
		rc = rc ? rc : write_npy_side(g, sides[s], &t, s ? wc : wr);
		snprintf(t.name, sizeof t.name, "model.layers.%d.mlp.selected_experts", layer);
		rc = rc ? rc : write_ids(g, sides[s], t.name, s ? ic : ir);
	}
out:
	free(lr);
	free(lc);
	free(wr);
	free(wc);
	free(ir);
	free(ic);
	return rc;
}

/* Safetensors: the header is known up front, so each tensor is appended as
 * it is generated. */
static FILE *st_open(const gen *g, const char *side, const spec *specs, size_t n)
{
	char path[4096], *hdr;
	size_t cap = 256 + n * 256, len = 0, es = tb_dtype_size(g->dtype);
	uint64_t off = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s/model.safetensors", g->out, side);
	hdr = malloc(cap);
	if (!hdr || dw_mkdirs_for(path) < 0 || !(f = fopen(path, "wb"))) {
		free(hdr);
		die("cannot create", path);
		return NULL;
	}
	len += (size_t)snprintf(hdr + len, cap - len, "{");
	for (size_t i = 0; i < n; i++) {
		uint64_t nb = specs[i].numel * es;
		len += (size_t)snprintf(hdr + len, cap - len,
					"%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld],\"data_offsets\":[%llu,%llu]}",
					i ? "," : "", specs[i].name, dw_st_dtype(g->dtype), (long long)specs[i].shape[0],
					(long long)specs[i].shape[1], (long long)specs[i].shape[2], (unsigned long long)off,
					(unsigned long long)(off + nb));
		off += nb;
	}
	len += (size_t)snprintf(hdr + len, cap - len, "}");
	/* Pad so the data (and every f32 tensor) starts 8-byte aligned. */
	while ((8 + len) % 64)
		hdr[len++] = ' ';
	unsigned char lenbytes[8];
	for (int i = 0; i < 8; i++)
		lenbytes[i] = (unsigned char)((uint64_t)len >> (8 * i));
	if (fwrite(lenbytes, 1, 8, f) != 8 || fwrite(hdr, 1, len, f) != len) {
		fclose(f);
		f = NULL;
		die("cannot write", path);
	}
	free(hdr);
	return f;
}

static int st_append(FILE *f, const gen *g, const spec *sp, const float *x)
{
	size_t nbytes;
	void *data = encode(x, sp->numel, g->dtype, &nbytes);
	int rc = 0;

	if (!data)
		return die("out of memory", g->out);
	if (fwrite(data, 1, nbytes, f) != nbytes)
		rc = die("cannot write", g->out);
	if (data != x)
		free(data);
	return rc;
}

static long parse_long(const char *s, const char *opt)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0) {
		fprintf(stderr, "tbbench-gen: %s: expected a positive integer, got '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr, "usage: tbbench-gen [--preset small|medium|large] [--size MB] [--layers L] [--seq S]\n"
			"                   [--hidden H] [--vocab V] [--dtype f32|bf16] [--format npy|safetensors]\n"
			"                   [--ranks N] [--moe E:K] [--seed N] OUT_DIR\n");
	exit(2);
}

static void parse_args(gen *g, int argc, char **argv)
{
	const preset *p = &presets[0];
	long layers = 0, size = 0, seq = 0, hidden = 0, vocab = 0;

	g->dtype = TB_DT_F32;
	g->format = "npy";
	g->seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-' || !strcmp(a, "-")) {
			if (g->out)
				usage();
			g->out = a;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--preset")) {
			p = NULL;
			for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++)
				if (!strcmp(v, presets[k].name))
					p = &presets[k];
			if (!p)
				usage();
		} else if (!strcmp(a, "--size")) {
			size = parse_long(v, a);
		} else if (!strcmp(a, "--layers")) {
			layers = parse_long(v, a);
		} else if (!strcmp(a, "--seq")) {
			seq = parse_long(v, a);
		} else if (!strcmp(a, "--hidden")) {
			hidden = parse_long(v, a);
		} else if (!strcmp(a, "--vocab")) {
			vocab = parse_long(v, a);
		} else if (!strcmp(a, "--ranks")) {
			g->ranks = parse_long(v, a);
		} else if (!strcmp(a, "--moe")) {
			char *end;
			g->experts = strtol(v, &end, 10);
			g->active = *end == ':' ? strtol(end + 1, &end, 10) : 0;
			if (*end || g->active <= 0 || g->active >= g->experts || g->experts > 1024)
				usage();
		} else if (!strcmp(a, "--seed")) {
			g->seed = (uint64_t)parse_long(v, a);
		} else if (!strcmp(a, "--dtype")) {
			if (!strcmp(v, "f32"))
				g->dtype = TB_DT_F32;
			else if (!strcmp(v, "bf16"))
				g->dtype = TB_DT_BF16;
			else
				usage();
		} else if (!strcmp(a, "--format")) {
			if (strcmp(v, "npy") && strcmp(v, "safetensors"))
				usage();
			g->format = v;
		} else {
			usage();
		}
	}
	if (!g->out || ((g->ranks > 1 || g->experts) && strcmp(g->format, "npy")) || (g->ranks > 1 && g->experts))
		usage();
	g->seq = seq ? seq : p->seq;
	g->hidden = hidden ? hidden : p->hidden;
	g->vocab = vocab ? vocab : p->vocab;
	g->size_mb = size ? size : p->size_mb;
	if (layers) {
		g->layers = layers;
	} else {
		double es = (double)tb_dtype_size(g->dtype), mb = 1024.0 * 1024.0;
		double logits = (double)g->seq * (double)g->vocab * es / mb;
		double tap = (double)g->seq * (double)g->hidden * es / mb;
		g->layers = (long)(((double)g->size_mb - logits) / (N_TAPS * tap) + 0.5);
		if (g->layers < 1)
			g->layers = 1;
	}
}

int main(int argc, char **argv)
{
	gen g = {0};
	size_t n, cap = 0;
	spec *specs;
	float *ref, *cand;
	FILE *st[2] = {NULL, NULL};
	const char *sides[2] = {"ref", "cand"};
	int rc = 0;

	parse_args(&g, argc, argv);
	n = (size_t)g.layers * N_TAPS + 1;
	specs = calloc(n, sizeof *specs);
	if (!specs)
		return die("out of memory", g.out);
	for (size_t i = 0; i < n; i++) {
		spec *sp = &specs[i];
		int layer = (int)(i / N_TAPS);
		bool logits = i + 1 == n;
		if (logits)
			snprintf(sp->name, sizeof sp->name, "lm_head");
		else
			snprintf(sp->name, sizeof sp->name, tap_names[i % N_TAPS], layer);
		sp->shape[0] = 1;
		sp->shape[1] = g.seq;
		sp->shape[2] = logits ? g.vocab : g.hidden;
		sp->numel = (uint64_t)g.seq * (uint64_t)sp->shape[2];
		/* Close (bf16-level noise) in the first half, diverged after. */
		sp->noise = logits || layer >= g.layers / 2 ? 0.05 : 1e-5 * (1 + layer);
		sp->seed = g.seed * 1000003u + i;
		if (sp->numel > cap)
			cap = sp->numel;
	}
	ref = malloc(cap * sizeof *ref);
	cand = malloc(cap * sizeof *cand);
	if (!ref || !cand)
		return die("out of memory", g.out);
	if (mkdir(g.out, 0777) < 0 && errno != EEXIST)
		return die("cannot create", g.out);
	if (!strcmp(g.format, "safetensors")) {
		for (int s = 0; s < 2; s++)
			if (!(st[s] = st_open(&g, sides[s], specs, n)))
				return 1;
	} else if (g.dtype == TB_DT_BF16) {
		for (int s = 0; s < 2 && rc == 0; s++) {
			char path[4096];
			FILE *f;
			snprintf(path, sizeof path, "%s/%s/dtypes.json", g.out, sides[s]);
			if (dw_mkdirs_for(path) < 0 || !(f = fopen(path, "w")) || fputs("{\"*\": \"bfloat16\"}\n", f) < 0 ||
			    fclose(f) != 0)
				rc = die("cannot write", path);
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		fill(&specs[i], ref, cand);
		for (int s = 0; s < 2 && rc == 0; s++)
			rc = st[s]		 ? st_append(st[s], &g, &specs[i], s ? cand : ref)
			     : s && g.ranks > 1 ? write_npy_ranks(&g, &specs[i], cand)
						 : write_npy_side(&g, sides[s], &specs[i], s ? cand : ref);
		if (rc == 0 && g.experts && i + 1 < n && i % N_TAPS == 3)
			rc = write_moe(&g, &specs[i], ref, cand, (int)(i / N_TAPS));
	}
	for (int s = 0; s < 2; s++)
		if (st[s] && fclose(st[s]) != 0 && rc == 0)
			rc = die("cannot write", g.out);
	if (rc == 0)
		printf("tbbench-gen: %s: %ld layers x %d taps x [1, %ld, %ld] + logits [1, %ld, %ld], %s, %s%s\n", g.out,
		       g.layers, N_TAPS, g.seq, g.hidden, g.seq, g.vocab, tb_dtype_name(g.dtype), g.format,
		       g.experts ? ", MoE taps" : "");
	free(ref);
	free(cand);
	free(specs);
	return rc;
}
