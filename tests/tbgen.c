/*
 * tbgen: writes a synthetic reference/candidate dump pair with one injected
 * fault, in a chosen format, naming convention and dtype per side.  The
 * tensors are seeded random activations (not a model: samples/mkdemo runs a
 * real tiny decoder); what matters here is exact control over which cell
 * diverges and how, for the end-to-end tests and the build's sample pair.
 *
 *   tbgen [options] REF_DIR CAND_DIR
 *     --layers N --seq S --hidden H --vocab V --seed N
 *     --naming C | --ref-naming C | --cand-naming C   hf canonical gpt2 meta short
 *     --format F | --ref-format F | --cand-format F   npy npy-nested safetensors sharded
 *     --dtype D  | --ref-dtype D  | --cand-dtype D    f32 f16 bf16 f64
 *     --bug KIND[@CELL][:ARG]   none scale noise pos nan shape missing precision
 *                               drift[:growth]  every layer's cells off by 1e-3 * growth^layer
 *                               offset  candidate block N holds reference block N-1 (block 0: embed)
 *                               duplicate  every candidate block holds block 0
 *                               tokens[:P]  the candidate's token id at position P differs
 *     --tokens                  also write a "tokens" tensor of int64 ids
 *     --sub                     also write attn.q/k/v and mlp.gate/up sub-taps
 *     --prefix P                prepend P to every candidate name
 *     --no-propagate            leave cells after the faulty one exact
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumpwrite.h"
#include "model/taps.h"

typedef struct gen_cell {
	tb_cell cell;
	int64_t shape[3];
	float *ref, *cand;
	size_t n;
	bool cand_missing;
	int64_t cand_seq; /* positions in the candidate (shape bug) */
} gen_cell;

typedef struct side {
	const char *naming, *format;
	tb_dtype dtype;
	const char *dir;
} side;

static uint64_t rng_state;

static double uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
	return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static const char *name_for(const char *naming, const tb_cell *c, char *buf, size_t size)
{
	static const struct {
		const char *naming, *tap, *fmt; /* fmt: %d is the layer */
	} names[] = {
		{"hf", "embed", "model.embed_tokens"},
		{"hf", "attn_norm", "model.layers.%d.input_layernorm"},
		{"hf", "attn.q", "model.layers.%d.self_attn.q_proj"},
		{"hf", "attn.k", "model.layers.%d.self_attn.k_proj"},
		{"hf", "attn.v", "model.layers.%d.self_attn.v_proj"},
		{"hf", "attn", "model.layers.%d.self_attn"},
		{"hf", "mlp_norm", "model.layers.%d.post_attention_layernorm"},
		{"hf", "mlp.gate", "model.layers.%d.mlp.gate_proj"},
		{"hf", "mlp.up", "model.layers.%d.mlp.up_proj"},
		{"hf", "mlp", "model.layers.%d.mlp"},
		{"hf", "block", "model.layers.%d"},
		{"hf", "final_norm", "model.norm"},
		{"hf", "logits", "lm_head"},
		{"gpt2", "embed", "transformer.wte"},
		{"gpt2", "attn_norm", "transformer.h.%d.ln_1"},
		{"gpt2", "attn", "transformer.h.%d.attn"},
		{"gpt2", "mlp_norm", "transformer.h.%d.ln_2"},
		{"gpt2", "mlp", "transformer.h.%d.mlp"},
		{"gpt2", "block", "transformer.h.%d"},
		{"gpt2", "final_norm", "transformer.ln_f"},
		{"gpt2", "logits", "lm_head"},
		{"meta", "embed", "tok_embeddings"},
		{"meta", "attn_norm", "layers.%d.attention_norm"},
		{"meta", "attn", "layers.%d.attention"},
		{"meta", "mlp_norm", "layers.%d.ffn_norm"},
		{"meta", "mlp", "layers.%d.feed_forward"},
		{"meta", "block", "layers.%d"},
		{"meta", "final_norm", "norm"},
		{"meta", "logits", "output"},
	};

	if (!strcmp(naming, "canonical") || !strcmp(naming, "short")) {
		if (c->layer < 0)
			snprintf(buf, size, "%s", c->tap);
		else
			snprintf(buf, size, !strcmp(naming, "short") ? "L%d.%s" : "layers.%d.%s", c->layer, c->tap);
		return buf;
	}
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		if (!strcmp(names[i].naming, naming) && !strcmp(names[i].tap, c->tap)) {
			snprintf(buf, size, names[i].fmt, c->layer);
			return buf;
		}
	}
	/* Conventions without a name for a sub-tap fall back to canonical. */
	snprintf(buf, size, "layers.%d.%s", c->layer, c->tap);
	return buf;
}

static int write_side(const side *s, gen_cell *cells, size_t n, bool cand, const char *prefix)
{
	dw_tensor *ts = calloc(n, sizeof *ts);
	char (*names)[256] = calloc(n, sizeof *names);
	void **bufs = calloc(n, sizeof *bufs);
	size_t k = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		gen_cell *g = &cells[i];
		size_t nbytes, count = g->n;
		if (cand && g->cand_missing)
			continue;
		snprintf(names[k], sizeof names[k], "%s", prefix);
		name_for(s->naming, &g->cell, names[k] + strlen(prefix), sizeof names[k] - strlen(prefix));
		ts[k].name = names[k];
		ts[k].dtype = s->dtype;
		ts[k].ndim = 3;
		memcpy(ts[k].shape, g->shape, sizeof g->shape);
		if (cand && g->cand_seq != g->shape[1]) {
			ts[k].shape[1] = g->cand_seq;
			count = (size_t)(g->cand_seq * g->shape[2]);
		}
		bufs[k] = dw_encode(cand ? g->cand : g->ref, count, s->dtype, &nbytes);
		ts[k].data = bufs[k];
		ts[k].nbytes = nbytes;
		k++;
	}
	if (!strcmp(s->format, "safetensors")) {
		char path[4096];
		snprintf(path, sizeof path, "%s/dump.safetensors", s->dir);
		rc = dw_write_safetensors(path, ts, k, "{\"format\":\"pt\"}");
	} else if (!strcmp(s->format, "sharded")) {
		rc = dw_write_safetensors_sharded(s->dir, "model", ts, k, 2);
	} else {
		bool nested = !strcmp(s->format, "npy-nested");
		for (size_t i = 0; i < k && rc == 0; i++) {
			char path[4096], rel[256];
			snprintf(rel, sizeof rel, "%s", ts[i].name);
			if (nested)
				for (char *p = rel; *p; p++)
					if (*p == '.')
						*p = '/';
			snprintf(path, sizeof path, "%s/%s.npy", s->dir, rel);
			rc = dw_write_npy(path, 1, dw_npy_descr(ts[i].dtype), false, ts[i].ndim, ts[i].shape, ts[i].data,
					  ts[i].nbytes);
		}
	}
	for (size_t i = 0; i < k; i++)
		free(bufs[i]);
	free(bufs);
	free(names);
	free(ts);
	return rc;
}

static int parse_dtype(const char *s, tb_dtype *dt)
{
	if (tb_dtype_parse(s, dt) < 0) {
		fprintf(stderr, "tbgen: unknown dtype '%s'\n", s);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int layers = 4, seq = 8, hidden = 64, vocab = 128, seed = 1;
	bool sub = false, propagate = true, tokens = false;
	const char *bug = "none", *prefix = "", *paths[2] = {NULL, NULL};
	side sides[2] = {{"hf", "npy", TB_DT_F32, NULL}, {"hf", "npy", TB_DT_F32, NULL}};
	char kind[32] = "none", where[64] = "", *colon;
	double arg = NAN;
	int np = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool both = false;
#define VAL()                                                             \
	do {                                                              \
		if (!v) {                                                 \
			fprintf(stderr, "tbgen: %s needs a value\n", a); \
			return 2;                                         \
		}                                                         \
		i++;                                                      \
	} while (0)
		if (!strcmp(a, "--layers")) { VAL(); layers = atoi(v); }
		else if (!strcmp(a, "--seq")) { VAL(); seq = atoi(v); }
		else if (!strcmp(a, "--hidden")) { VAL(); hidden = atoi(v); }
		else if (!strcmp(a, "--vocab")) { VAL(); vocab = atoi(v); }
		else if (!strcmp(a, "--seed")) { VAL(); seed = atoi(v); }
		else if (!strcmp(a, "--bug")) { VAL(); bug = v; }
		else if (!strcmp(a, "--prefix")) { VAL(); prefix = v; }
		else if (!strcmp(a, "--sub")) sub = true;
		else if (!strcmp(a, "--no-propagate")) propagate = false;
		else if (!strcmp(a, "--tokens")) tokens = true;
		else if ((both = !strcmp(a, "--naming")) || !strcmp(a, "--ref-naming") || !strcmp(a, "--cand-naming")) {
			VAL();
			if (both || a[2] == 'r') sides[0].naming = v;
			if (both || a[2] == 'c') sides[1].naming = v;
		} else if ((both = !strcmp(a, "--format")) || !strcmp(a, "--ref-format") || !strcmp(a, "--cand-format")) {
			VAL();
			if (both || a[2] == 'r') sides[0].format = v;
			if (both || a[2] == 'c') sides[1].format = v;
		} else if ((both = !strcmp(a, "--dtype")) || !strcmp(a, "--ref-dtype") || !strcmp(a, "--cand-dtype")) {
			tb_dtype dt;
			VAL();
			if (parse_dtype(v, &dt) < 0)
				return 2;
			if (both || a[2] == 'r') sides[0].dtype = dt;
			if (both || a[2] == 'c') sides[1].dtype = dt;
		} else if (a[0] == '-') {
			fprintf(stderr, "tbgen: unknown option %s\n", a);
			return 2;
		} else if (np < 2) {
			paths[np++] = a;
		}
	}
	if (np != 2 || layers < 1 || seq < 1 || hidden < 2 || vocab < 2) {
		fprintf(stderr, "usage: tbgen [options] REF_DIR CAND_DIR\n");
		return 2;
	}
	sides[0].dir = paths[0];
	sides[1].dir = paths[1];
	snprintf(kind, sizeof kind, "%s", bug);
	if ((colon = strchr(kind, '@')))
		*colon = '\0';
	{
		const char *at = strchr(bug, '@');
		if (at) {
			snprintf(where, sizeof where, "%s", at + 1);
			if ((colon = strchr(where, ':'))) {
				arg = atof(colon + 1);
				*colon = '\0';
			}
		} else if ((colon = strchr(kind, ':'))) {
			arg = atof(colon + 1);
			*colon = '\0';
		}
	}

	/* The cells, in forward order. */
	static const char *const layer_taps[] = {"attn_norm", "attn.q", "attn.k", "attn.v", "attn",
						 "mlp_norm", "mlp.gate", "mlp.up", "mlp", "block"};
	size_t max = 3 + (size_t)layers * 10, n = 0;
	gen_cell *cells = calloc(max, sizeof *cells);
	tb_cell bugcell = {.layer = -2};
	long bug_at = -1;

	if (where[0] && tb_cell_parse(where, &bugcell) < 0) {
		fprintf(stderr, "tbgen: bad cell '%s'\n", where);
		return 2;
	}
	tb_cell_make(&cells[n++].cell, -1, "embed");
	for (int l = 0; l < layers; l++) {
		for (size_t t = 0; t < sizeof layer_taps / sizeof *layer_taps; t++) {
			if (!sub && strchr(layer_taps[t], '.'))
				continue;
			tb_cell_make(&cells[n++].cell, l, layer_taps[t]);
		}
	}
	tb_cell_make(&cells[n++].cell, -1, "final_norm");
	tb_cell_make(&cells[n++].cell, -1, "logits");

	rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed * 0x2545F4914F6CDD1Dull;
	for (size_t i = 0; i < n; i++) {
		gen_cell *g = &cells[i];
		int64_t width = !strcmp(g->cell.tap, "logits") ? vocab
				: !strcmp(g->cell.tap, "attn.k") || !strcmp(g->cell.tap, "attn.v") ? hidden / 2
				: !strncmp(g->cell.tap, "mlp.", 4) ? 2 * hidden
				: hidden;
		double amp = !strcmp(g->cell.tap, "logits") ? 3.0 : 1.0 + 0.1 * (g->cell.layer + 1);
		g->shape[0] = 1;
		g->shape[1] = seq;
		g->shape[2] = width;
		g->cand_seq = seq;
		g->n = (size_t)(seq * width);
		g->ref = malloc(g->n * sizeof *g->ref);
		g->cand = malloc(g->n * sizeof *g->cand);
		for (size_t k = 0; k < g->n; k++)
			g->ref[k] = (float)(amp * gauss());
		memcpy(g->cand, g->ref, g->n * sizeof *g->cand);
		if (bugcell.layer != -2 && tb_cell_eq(&g->cell, &bugcell))
			bug_at = (long)i;
	}
	if (where[0] && bug_at < 0) {
		fprintf(stderr, "tbgen: cell '%s' is not generated\n", where);
		return 2;
	}
	if (!strcmp(kind, "drift")) {
		double g = isnan(arg) ? 1.5 : arg;
		for (size_t i = 0; i < n; i++) {
			int l = cells[i].cell.layer < 0 ? (i == 0 ? 0 : layers) : cells[i].cell.layer;
			double rel = 1e-3 * pow(g, l);
			for (size_t k = 0; k < cells[i].n; k++)
				cells[i].cand[k] += (float)(rel * cells[i].ref[k] * gauss());
		}
	} else if (!strcmp(kind, "offset") || !strcmp(kind, "duplicate")) {
		gen_cell *first = NULL, *prev = &cells[0]; /* embed */
		for (size_t i = 0; i < n; i++) {
			gen_cell *g = &cells[i];
			if (strcmp(g->cell.tap, "block") != 0)
				continue;
			if (!first)
				first = g;
			if (!strcmp(kind, "offset"))
				memcpy(g->cand, prev->ref, g->n * sizeof *g->cand);
			else
				memcpy(g->cand, first->ref, g->n * sizeof *g->cand);
			prev = g;
		}
	} else if (!strcmp(kind, "precision")) {
		double rel = isnan(arg) ? 2e-4 : arg;
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < cells[i].n; k++)
				cells[i].cand[k] += (float)(rel * (1 + 0.2 * (double)i / (double)n) * cells[i].ref[k] * gauss());
	} else if (strcmp(kind, "none") != 0 && strcmp(kind, "tokens") != 0) {
		gen_cell *g;
		if (bug_at < 0) {
			fprintf(stderr, "tbgen: bug '%s' needs @CELL\n", kind);
			return 2;
		}
		g = &cells[bug_at];
		if (!strcmp(kind, "scale")) {
			double f = isnan(arg) ? 1.5 : arg;
			for (size_t k = 0; k < g->n; k++)
				g->cand[k] = (float)(g->ref[k] * f);
		} else if (!strcmp(kind, "noise")) {
			double r = isnan(arg) ? 0.3 : arg;
			for (size_t k = 0; k < g->n; k++)
				g->cand[k] += (float)(r * g->ref[k] * gauss());
		} else if (!strcmp(kind, "pos")) {
			int64_t p0 = isnan(arg) ? 3 : (int64_t)arg;
			for (int64_t p = p0; p < g->shape[1]; p++)
				for (int64_t h = 0; h < g->shape[2]; h++)
					g->cand[p * g->shape[2] + h] += (float)(0.5 * gauss());
		} else if (!strcmp(kind, "nan")) {
			g->cand[g->n / 2] = NAN;
		} else if (!strcmp(kind, "shape")) {
			g->cand_seq = g->shape[1] - 1;
		} else if (!strcmp(kind, "missing")) {
			g->cand_missing = true;
		} else {
			fprintf(stderr, "tbgen: unknown bug kind '%s'\n", kind);
			return 2;
		}
		if (propagate && strcmp(kind, "missing") != 0)
			for (size_t i = (size_t)bug_at + 1; i < n; i++)
				for (size_t k = 0; k < cells[i].n; k++)
					cells[i].cand[k] += (float)(0.2 * cells[i].ref[k] * gauss());
	}
	if (write_side(&sides[0], cells, n, false, "") < 0 || write_side(&sides[1], cells, n, true, prefix) < 0) {
		perror("tbgen: write");
		return 1;
	}
	if (tokens || !strcmp(kind, "tokens")) {
		int64_t ids[4096], shape[1] = {seq > 4096 ? 4096 : seq};
		for (int sd = 0; sd < 2; sd++) {
			char path[4096];
			for (int64_t p = 0; p < shape[0]; p++)
				ids[p] = (p * 7919 + 13) % vocab;
			if (sd && !strcmp(kind, "tokens")) {
				int64_t p = isnan(arg) ? 2 : (int64_t)arg;
				if (p < shape[0])
					ids[p] = (ids[p] + 1) % vocab;
			}
			snprintf(path, sizeof path, "%s/tokens.npy", sides[sd].dir);
			if (dw_write_npy(path, 1, "<i8", false, 1, shape, ids, (size_t)shape[0] * 8) < 0) {
				perror("tbgen: write tokens");
				return 1;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		free(cells[i].ref);
		free(cells[i].cand);
	}
	free(cells);
	return 0;
}
