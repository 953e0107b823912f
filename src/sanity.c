#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "naming.h"
#include "origin.h"
#include "pairstat.h"
#include "sanity.h"

/* A shift must explain this share of layers, and at least two of them. */
#define OFFSET_MIN_FRAC 0.6
/* "Matches far better": the shifted error below this share of the aligned one. */
#define OFFSET_BETTER 0.25

static int add_warning(tb_sanity *s, const char *id, const char *text)
{
	tb_warning *w = realloc(s->warnings, (s->n_warnings + 1) * sizeof *w);

	if (!w)
		return -1;
	s->warnings = w;
	w[s->n_warnings].id = id;
	snprintf(w[s->n_warnings].text, sizeof w[s->n_warnings].text, "%s", text);
	s->n_warnings++;
	return 0;
}

static tb_tensor *tap_of(const tb_result *r, int side, int layer, const char *tap)
{
	tb_cell c;
	long k;

	c.layer = layer;
	snprintf(c.tap, sizeof c.tap, "%s", tap);
	k = tb_result_find(r, &c);
	if (k < 0)
		return NULL;
	return (tb_tensor *)(side ? r->cells[k].cand : r->cells[k].ref);
}

/* A layer's block output; layer -1 is the embedding output. */
static tb_tensor *block_of(const tb_result *r, int side, int layer)
{
	return layer < 0 ? tap_of(r, side, -1, "embed") : tap_of(r, side, layer, "block");
}

static double rel_between(tb_tensor *ref, tb_tensor *cand, const tb_tolerance *tol)
{
	tb_metrics m;
	tb_err err;

	if (!ref || !cand || ref->numel != cand->numel || tb_tensor_pair_metrics(ref, cand, tol, &m, &err) < 0)
		return NAN;
	return m.rel_l2;
}

static void check_offset(const tb_result *r, tb_sanity *s)
{
	int votes[2] = {0, 0};

	for (int l = 0; l < r->n_layers; l++) {
		tb_tensor *cand = block_of(r, 1, l), *ref = block_of(r, 0, l);
		double aligned;
		if (!cand || !ref)
			continue;
		aligned = rel_between(ref, cand, &r->tol);
		if (!(aligned > r->tol.diverge))
			continue;
		for (int d = 0; d < 2; d++) {
			int other = d ? l - 1 : l + 1; /* layer -1 is the embedding output */
			if (other >= r->n_layers)
				continue;
			double shifted = rel_between(block_of(r, 0, other), cand, &r->tol);
			if (shifted < OFFSET_BETTER * aligned)
				votes[d]++;
		}
	}
	for (int d = 0; d < 2; d++) {
		double frac = r->n_layers ? (double)votes[d] / r->n_layers : 0;
		if (votes[d] >= 2 && frac >= OFFSET_MIN_FRAC && frac > s->offset_frac) {
			s->offset = d ? -1 : 1;
			s->offset_frac = frac;
		}
	}
}

/* Layers of one side whose tensor for some tap is value-for-value another
 * layer's: the most such layers over the layer taps. */
static int duplicates_of_tap(const tb_result *r, int side, const char *tap)
{
	int n = r->n_layers > 0 ? r->n_layers : 1, count = 0;
	float **vals = calloc((size_t)n, sizeof *vals);
	bool *dup = calloc((size_t)n, sizeof *dup);
	tb_err err;

	if (!vals || !dup)
		goto out;
	for (int l = 0; l < r->n_layers; l++) {
		tb_tensor *t = tap_of(r, side, l, tap);
		if (t && t->numel > 0)
			vals[l] = tb_tensor_load_f32(t, &err);
	}
	for (int a = 0; a < r->n_layers; a++) {
		for (int b = a + 1; b < r->n_layers && vals[a]; b++) {
			tb_tensor *ta = tap_of(r, side, a, tap), *tb = tap_of(r, side, b, tap);
			if (vals[b] && ta->numel == tb->numel && !memcmp(vals[a], vals[b], (size_t)ta->numel * sizeof(float)))
				dup[a] = dup[b] = true;
		}
	}
	for (int l = 0; l < r->n_layers; l++)
		count += dup[l];
out:
	for (int l = 0; vals && l < r->n_layers; l++)
		free(vals[l]);
	free(vals);
	free(dup);
	return count;
}

static void check_duplicates(const tb_result *r, tb_sanity *s, int side)
{
	static const char *const taps[] = {"attn_norm", "attn", "mlp_norm", "mlp", "block"};

	for (size_t i = 0; i < sizeof taps / sizeof *taps; i++) {
		int n = duplicates_of_tap(r, side, taps[i]);
		if (n > s->dup_layers[side]) {
			s->dup_layers[side] = n;
			s->dup_tap[side] = taps[i];
		}
	}
}

int64_t *tb_tree_token_ids(const tb_tree *tree, size_t *n)
{
	int64_t *ids;

	*n = 0;
	if (tree->tokens) {
		ids = malloc((tree->n_tokens ? tree->n_tokens : 1) * sizeof *ids);
		if (ids) {
			memcpy(ids, tree->tokens, tree->n_tokens * sizeof *ids);
			*n = tree->n_tokens;
		}
		return ids;
	}
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		if (!tb_name_is_token_ids(t->name) || t->numel > (1u << 24))
			continue;
		tb_err err;
		float *f = tb_tensor_load_f32(t, &err);
		if (!f)
			return NULL;
		ids = malloc((t->numel ? t->numel : 1) * sizeof *ids);
		for (uint64_t k = 0; ids && k < t->numel; k++)
			ids[k] = (int64_t)f[k];
		free(f);
		if (ids)
			*n = (size_t)t->numel;
		return ids;
	}
	return NULL;
}

static void check_tokens(const tb_session *ss, tb_sanity *s)
{
	size_t nr, nc, n, same_next = 0, same_prev = 0;
	int64_t *r = tb_tree_token_ids(ss->ref, &nr), *c = tb_tree_token_ids(ss->cand, &nc);
	char text[384];
	int len;

	s->first_token_diff = -1;
	if (!r || !c)
		goto out;
	s->tokens_compared = true;
	n = nr < nc ? nr : nc;
	for (size_t i = 0; i < n; i++) {
		if (r[i] != c[i]) {
			s->tokens_differ++;
			if (s->first_token_diff < 0)
				s->first_token_diff = (long)i;
		}
		same_next += i + 1 < nr && c[i] == r[i + 1];
		same_prev += i > 0 && c[i] == r[i - 1];
	}
	s->tokens_differ += nr > n ? nr - n : nc - n;
	if (s->tokens_differ > 1 && n > 2) {
		if (same_next + 1 >= n)
			s->token_shift = 1;
		else if (same_prev + 1 >= n)
			s->token_shift = -1;
	}
	if (!s->tokens_differ)
		goto out;
	if (nr != nc)
		len = snprintf(text, sizeof text, "token ids differ: %zu in the reference, %zu in the candidate", nr, nc);
	else
		len = snprintf(text, sizeof text, "token ids differ at %zu of %zu positions, first at %ld (ref %lld, cand %lld)",
			       s->tokens_differ, n, s->first_token_diff, (long long)r[s->first_token_diff],
			       (long long)c[s->first_token_diff]);
	if (s->token_shift && len > 0 && (size_t)len < sizeof text)
		snprintf(text + len, sizeof text - (size_t)len, "; the candidate's ids are the reference's shifted by %+d",
			 -s->token_shift);
	add_warning(s, "tokenizer", text);
out:
	free(r);
	free(c);
}

int tb_sanity_check(const tb_session *ss, const tb_result *r, tb_sanity *s, tb_err *err)
{
	char text[384];

	memset(s, 0, sizeof *s);
	check_tokens(ss, s);
	check_offset(r, s);
	if (s->offset) {
		snprintf(text, sizeof text,
			 "candidate block of layer N matches reference layer N%+d far better than layer N in %.0f%% of layers: the dump is shifted (hidden_states[i] off by one?)",
			 s->offset, 100 * s->offset_frac);
		add_warning(s, "dump-offset", text);
	}
	for (int side = 0; side < 2; side++) {
		check_duplicates(r, s, side);
		if (s->dup_layers[side] >= 2) {
			snprintf(text, sizeof text,
				 "%d layers of the %s hold identical %s tensors: a hook on the wrong module, or one buffer dumped repeatedly?",
				 s->dup_layers[side], side ? "candidate" : "reference", s->dup_tap[side]);
			add_warning(s, "dump-duplicate", text);
		}
	}
	(void)err;
	return 0;
}

void tb_sanity_done(tb_sanity *s)
{
	free(s->warnings);
	s->warnings = NULL;
	s->n_warnings = 0;
}
