#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "compare/pairstat.h"
#include "tensor/compose.h"
#include "run/structure.h"
#include "run/suggest.h"

/* Layers of a group compared at most (spread over the group), and the
 * elements of each tensor compared at most: enough to tell taps apart. */
#define MAX_LAYERS_TRIED 8
#define MAX_ELEMS_TRIED (256u * 1024u)
/* A group must find its tap's shape in at least this share of its layers. */
#define MIN_LAYER_SHARE 0.5
#define MAX_SLOTS 8
#define MAX_NAME 1024
/* An evidence line: a name pattern and the facts about it. */
#define EVIDENCE_MAX (MAX_NAME + 768)
/* The largest map file merged with a suggestion, as naming reads it. */
#define MAP_MAX_BYTES (1024 * 1024)

/* One unmapped name: its literal pieces around the digit runs. */
typedef struct parsed {
	const tb_tensor *t;
	int n_slots;
	long value[MAX_SLOTS];
	size_t start[MAX_SLOTS], len[MAX_SLOTS]; /* where each run is in the name */
} parsed;

/* Names of one shape with the layer number taken out. */
typedef struct group {
	char key[MAX_NAME];    /* the name with the layer run as '#' */
	int slot;              /* which digit run is the layer, -1: none (model-level) */
	const parsed **names;
	size_t n;
} group;

/* A group tried against a tap at an offset. */
typedef struct candidate {
	size_t group;
	char tap[64];
	int offset;
	double score;      /* mean cosine x share of layers matched */
	double cos_min;
	size_t matched;
} candidate;

static void parse(const tb_tensor *t, parsed *p)
{
	const char *s = t->name;

	memset(p, 0, sizeof *p);
	p->t = t;
	for (size_t i = 0; s[i] && p->n_slots < MAX_SLOTS;) {
		if (s[i] < '0' || s[i] > '9') {
			i++;
			continue;
		}
		size_t j = i;
		long v = 0;
		while (s[j] >= '0' && s[j] <= '9' && j - i < 9)
			v = v * 10 + (s[j++] - '0');
		while (s[j] >= '0' && s[j] <= '9')
			j++;
		p->start[p->n_slots] = i;
		p->len[p->n_slots] = j - i;
		p->value[p->n_slots++] = v;
		i = j;
	}
}

/* The name with digit run `slot` as '#' (every run when slot is -2). */
static void key_of(const parsed *p, int slot, char *buf, size_t size)
{
	const char *s = p->t->name;
	size_t at = 0, n = 0;

	for (int k = 0; k <= p->n_slots && n + 1 < size; k++) {
		size_t end = k < p->n_slots ? p->start[k] : strlen(s);
		size_t take = end - at < size - n - 1 ? end - at : size - n - 1;
		memcpy(buf + n, s + at, take);
		n += take;
		if (k == p->n_slots)
			break;
		if ((slot == -2 || slot == k) && n + 1 < size) {
			buf[n++] = '#';
		} else {
			take = p->len[k] < size - n - 1 ? p->len[k] : size - n - 1;
			memcpy(buf + n, s + p->start[k], take);
			n += take;
		}
		at = p->start[k] + p->len[k];
	}
	buf[n] = '\0';
}

/* The layer run of a set of names of one shape: the run with the most
 * distinct values (a layer number changes across them; "wi_0" does not). */
static int layer_slot(const parsed *const *names, size_t n)
{
	int best = -1;
	size_t best_distinct = 0;

	if (n == 0 || names[0]->n_slots == 0)
		return -1;
	for (int k = 0; k < names[0]->n_slots; k++) {
		size_t distinct = 0;
		for (size_t i = 0; i < n; i++) {
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = names[j]->value[k] == names[i]->value[k];
			distinct += !seen;
		}
		if (distinct > best_distinct) {
			best_distinct = distinct;
			best = k;
		}
	}
	return best;
}

static int add_group(group **gs, size_t *ng, const char *key, int slot, const parsed *p)
{
	for (size_t i = 0; i < *ng; i++) {
		group *g = &(*gs)[i];
		if (g->slot == slot && !strcmp(g->key, key)) {
			const parsed **nv = realloc(g->names, (g->n + 1) * sizeof *nv);
			if (!nv)
				return -1;
			g->names = nv;
			g->names[g->n++] = p;
			return 0;
		}
	}
	group *ngs = realloc(*gs, (*ng + 1) * sizeof *ngs);
	if (!ngs)
		return -1;
	*gs = ngs;
	group *g = &ngs[(*ng)++];
	memset(g, 0, sizeof *g);
	snprintf(g->key, sizeof g->key, "%s", key);
	g->slot = slot;
	g->names = malloc(sizeof *g->names);
	if (!g->names)
		return -1;
	g->names[g->n++] = p;
	return 0;
}

/* Group the parsed names: first by their shape with every number out,
 * then, inside a shape, by the name with only the layer number out. */
static int make_groups(const parsed *ps, size_t n, group **out, size_t *n_out)
{
	group *shapes = NULL, *gs = NULL;
	size_t n_shapes = 0, ng = 0;
	char key[MAX_NAME];
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		key_of(&ps[i], -2, key, sizeof key);
		rc = add_group(&shapes, &n_shapes, key, -2, &ps[i]);
	}
	for (size_t s = 0; s < n_shapes && rc == 0; s++) {
		int slot = layer_slot(shapes[s].names, shapes[s].n);
		for (size_t i = 0; i < shapes[s].n && rc == 0; i++) {
			key_of(shapes[s].names[i], slot < 0 ? -1 : slot, key, sizeof key);
			rc = add_group(&gs, &ng, key, slot, shapes[s].names[i]);
		}
	}
	for (size_t s = 0; s < n_shapes; s++)
		free(shapes[s].names);
	free(shapes);
	*out = gs;
	*n_out = ng;
	return rc;
}

/* The tensor the other tree has for a cell this tree lacks, or NULL. */
static tb_tensor *hole(const tb_pairing *p, int other, int layer, const char *tap)
{
	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_pair *pr = &p->pairs[i];
		tb_tensor *mine = other ? pr->ref : pr->cand, *theirs = other ? pr->cand : pr->ref;
		if (!mine && theirs && pr->cell.layer == layer && !strcmp(pr->cell.tap, tap))
			return theirs;
	}
	return NULL;
}

static double same_count_cosine(const tb_tensor *ref, const tb_tensor *cand);

/* A partial dump (llama.cpp's printed values) against a whole tensor: the
 * cosine at the elements printed, as the pairing would compare them; NaN
 * when the whole one cannot be read at them. */
static double partial_cosine(const tb_tensor *ref, const tb_tensor *cand)
{
	const tb_tensor *pt = ref->partial ? ref : cand, *wt = pt == ref ? cand : ref;
	const tb_partial *pa = pt->partial;
	uint64_t base, *at = NULL;
	tb_tensor *g = NULL;
	tb_err err;
	double cs = NAN;

	if (wt->partial || wt->sketch || !tb_partial_place(pa, wt, &base) || pt->numel != pa->n)
		return NAN;
	at = malloc(pa->n ? pa->n * sizeof *at : 1);
	if (!at)
		return NAN;
	for (uint64_t k = 0; k < pa->n; k++)
		at[k] = base + pa->index[k];
	if (tb_compose_gather((tb_tensor *)wt, at, pa->n, wt->name, &g, &err) == 0) {
		cs = pt == ref ? same_count_cosine(pt, g) : same_count_cosine(g, pt);
		tb_compose_free(g);
	}
	free(at);
	return cs;
}

/* Cosine of two tensors of one element count over their first elements,
 * or of a partial dump's printed values and the other's at their places;
 * NaN when they differ in size or cannot be read. */
static double cosine(const tb_tensor *ref, const tb_tensor *cand)
{
	return !ref->partial != !cand->partial ? partial_cosine(ref, cand) : same_count_cosine(ref, cand);
}

static double same_count_cosine(const tb_tensor *ref, const tb_tensor *cand)
{
	tb_tolerance tol;
	tb_metrics m;
	tb_err err;
	uint64_t n = ref->numel < MAX_ELEMS_TRIED ? ref->numel : MAX_ELEMS_TRIED;

	if (ref->numel != cand->numel || ref->numel == 0)
		return NAN;
	tb_tolerance_default(&tol);
	memset(&m, 0, sizeof m);
	if (tb_tensor_pair_metrics(ref, cand, n, &tol, &m, &err) < 0)
		return NAN;
	return isfinite(m.cosine) ? m.cosine : 0;
}

/* Try group g (of tree side) against tap at offset; false when too few of
 * its layers find a tensor of their size there. */
static bool try_tap(const tb_pairing *p, int side, const group *g, const char *tap, int offset, candidate *c)
{
	size_t step = g->n > MAX_LAYERS_TRIED ? (g->n + MAX_LAYERS_TRIED - 1) / MAX_LAYERS_TRIED : 1, tried = 0;
	double sum = 0, mn = 1;

	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < g->n; i += step) {
		const parsed *q = g->names[i];
		long layer = g->slot < 0 ? -1 : q->value[g->slot] + offset;
		tb_tensor *other = layer < 0 && g->slot >= 0 ? NULL : hole(p, 1 - side, (int)layer, tap);
		double cs;
		tried++;
		if (!other)
			continue;
		cs = side ? cosine(other, q->t) : cosine(q->t, other);
		if (isnan(cs))
			continue;
		c->matched++;
		sum += cs;
		mn = cs < mn ? cs : mn;
	}
	if (!c->matched || (double)c->matched < MIN_LAYER_SHARE * (double)tried)
		return false;
	snprintf(c->tap, sizeof c->tap, "%s", tap);
	c->offset = offset;
	c->score = (sum / (double)c->matched) * ((double)c->matched / (double)tried);
	c->cos_min = mn;
	return true;
}

/* The taps of the cells the other tree has and this one lacks, once each
 * (model-level ones apart from layer ones). */
static size_t hole_taps(const tb_pairing *p, int side, const char **taps, bool *model, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_pairs && n < max; i++) {
		const tb_pair *pr = &p->pairs[i];
		const tb_tensor *mine = side ? pr->cand : pr->ref, *theirs = side ? pr->ref : pr->cand;
		bool seen = false;
		if (mine || !theirs)
			continue;
		for (size_t k = 0; k < n && !seen; k++)
			seen = model[k] == (pr->cell.layer < 0) && !strcmp(taps[k], pr->cell.tap);
		if (!seen) {
			taps[n] = pr->cell.tap;
			model[n++] = pr->cell.layer < 0;
		}
	}
	return n;
}

/* Every candidate of every group: each hole tap of its scope, at offsets
 * 0 and, for layer names, -1 (names that count layers from 1). */
static int candidates(const tb_pairing *p, int side, const group *gs, size_t ng, candidate **out, size_t *n_out)
{
	const char *taps[256];
	bool model[256];
	size_t nt = hole_taps(p, side, taps, model, sizeof taps / sizeof *taps), n = 0, cap = 0;
	candidate *cs = NULL, c;

	for (size_t g = 0; g < ng; g++) {
		for (size_t t = 0; t < nt; t++) {
			if (model[t] != (gs[g].slot < 0))
				continue;
			for (int offset = 0; offset >= (gs[g].slot >= 0 ? -1 : 0); offset--) {
				if (!try_tap(p, side, &gs[g], taps[t], offset, &c))
					continue;
				c.group = g;
				if (n == cap) {
					candidate *grown = realloc(cs, (cap = cap ? cap * 2 : 32) * sizeof *cs);
					if (!grown) {
						free(cs);
						return -1;
					}
					cs = grown;
				}
				cs[n++] = c;
			}
		}
	}
	*out = cs;
	*n_out = n;
	return 0;
}

static int by_score(const void *a, const void *b)
{
	const candidate *x = a, *y = b;

	return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

/* The group's names as one anchored ERE: the layer run as ([0-9]+), or
 * fixed when name is given (one rule per layer, for an offset). */
static char *regex_of(const group *g, const parsed *name)
{
	const char *key = g->key;
	char buf[4 * MAX_NAME], *out;
	size_t n = 0;

	buf[n++] = '^';
	for (const char *s = name ? name->t->name : key; *s && n + 12 < sizeof buf; s++) {
		if (!name && *s == '#') {
			memcpy(buf + n, "([0-9]+)", 8);
			n += 8;
			continue;
		}
		if (strchr(".[](){}*+?|^$\\", *s))
			buf[n++] = '\\';
		buf[n++] = *s;
	}
	buf[n++] = '$';
	buf[n] = '\0';
	out = strdup(buf);
	return out;
}

/* The best other tap of a group, for the evidence. */
static const candidate *runner_up(const candidate *cs, size_t n, const candidate *best)
{
	for (size_t i = 0; i < n; i++)
		if (cs[i].group == best->group && &cs[i] != best && strcmp(cs[i].tap, best->tap) != 0)
			return &cs[i];
	return NULL;
}

static int add_cell(tb_suggestion *sg, int side, int layer, const char *tap)
{
	tb_cell *v = realloc(sg->cells[side], (sg->n_cells[side] + 1) * sizeof *v);

	if (!v)
		return -1;
	sg->cells[side] = v;
	tb_cell_make(&v[sg->n_cells[side]], layer, tap);
	sg->n_cells[side]++;
	return 0;
}

static int add_rule(tb_suggestion *sg, const tb_suggested_rule *r)
{
	tb_suggested_rule *v = realloc(sg->rules, (sg->n + 1) * sizeof *v);

	if (!v)
		return -1;
	sg->rules = v;
	sg->rules[sg->n++] = *r;
	return 0;
}

/* The rules for a group given its tap: one template rule, or one rule per
 * name when the layer number is off (numbered from 1). */
static int emit_rules(tb_suggestion *sg, int side, const group *g, const char *tap, int offset, double confidence,
		      const char *evidence)
{
	for (size_t i = 0; i < g->n; i++) {
		int layer = g->slot >= 0 ? (int)(g->names[i]->value[g->slot] + offset) : -1;
		if (add_cell(sg, side, layer, tap) < 0)
			return -1;
	}
	for (size_t i = 0; i < (offset ? g->n : 1); i++) {
		tb_suggested_rule r = {.layer = -1, .offset = offset, .side = side};
		snprintf(r.tap, sizeof r.tap, "%s", tap);
		r.confidence = confidence < 0 ? 0 : confidence > 1 ? 1 : confidence;
		r.match = regex_of(g, offset ? g->names[i] : NULL);
		r.evidence = strdup(evidence);
		if (g->slot >= 0 && !offset)
			r.layer_from_name = true;
		else if (g->slot >= 0)
			r.layer = (int)(g->names[i]->value[g->slot] + offset);
		if (!r.match || !r.evidence || add_rule(sg, &r) < 0) {
			free(r.match);
			free(r.evidence);
			return -1;
		}
	}
	return 0;
}

/* The rules of one chosen candidate, with its evidence. */
static int emit(tb_suggestion *sg, int side, const group *g, const candidate *c, const candidate *second)
{
	char evidence[EVIDENCE_MAX], other[160] = "";
	const char *what = side ? "candidate" : "reference";

	if (second)
		snprintf(other, sizeof other, "; the next best, %s, has cosine %.3f", second->tap, second->score);
	if (g->slot >= 0)
		snprintf(evidence, sizeof evidence,
			 "%zu %s names %s: %zu of their layers%s have the element count of the other tree's %s there, "
			 "cosine %.3f on average (lowest %.3f)%s",
			 g->n, what, g->key, c->matched, c->offset ? " (numbered from 1)" : "", c->tap, c->score, c->cos_min,
			 other);
	else
		snprintf(evidence, sizeof evidence, "%s name %s: the element count of the other tree's %s, cosine %.3f%s",
			 what, g->key, c->tap, c->score, other);
	return emit_rules(sg, side, g, c->tap, c->offset, c->score, evidence);
}

/* Neither tree names this one's cells: the tree's own identities do. */
static int structural(tb_suggestion *sg, int side, group *gs, size_t ng, tb_err *err)
{
	tb_series *series = calloc(ng + 1, sizeof *series);
	tb_tensor **singles = calloc(ng + 1, sizeof *singles);
	size_t *of_series = calloc(ng + 1, sizeof *of_series), *of_single = calloc(ng + 1, sizeof *of_single);
	size_t nse = 0, nsi = 0;
	tb_structure st;
	int rc = -1;

	if (!series || !singles || !of_series || !of_single) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
		goto out;
	}
	for (size_t g = 0; g < ng; g++) {
		if (gs[g].slot < 0) {
			singles[nsi] = (tb_tensor *)gs[g].names[0]->t;
			of_single[nsi++] = g;
			continue;
		}
		/* By layer number, for the identities between layers. */
		for (size_t i = 1; i < gs[g].n; i++)
			for (size_t j = i; j > 0 && gs[g].names[j - 1]->value[gs[g].slot] > gs[g].names[j]->value[gs[g].slot];
			     j--) {
				const parsed *tmp = gs[g].names[j];
				gs[g].names[j] = gs[g].names[j - 1];
				gs[g].names[j - 1] = tmp;
			}
		tb_tensor **t = calloc(gs[g].n, sizeof *t);
		long *num = calloc(gs[g].n, sizeof *num);
		if (!t || !num) {
			free(t);
			free(num);
			tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
			goto out;
		}
		for (size_t i = 0; i < gs[g].n; i++) {
			t[i] = (tb_tensor *)gs[g].names[i]->t;
			num[i] = gs[g].names[i]->value[gs[g].slot];
		}
		series[nse].t = t;
		series[nse].number = num;
		series[nse].n = gs[g].n;
		of_series[nse++] = g;
	}
	if (tb_structure_infer(series, nse, singles, nsi, &st, err) < 0)
		goto out;
	rc = 0;
	for (size_t i = 0; i < nse && rc == 0; i++) {
		const group *g = &gs[of_series[i]];
		/* Names that count layers from 1. */
		int offset = series[i].number[0] == 1 ? -1 : 0;
		char evidence[EVIDENCE_MAX];
		if (!st.series_tap[i])
			continue;
		snprintf(evidence, sizeof evidence, "%zu %s names %s, from the tree's own forward pass: %s", g->n,
			 side ? "candidate" : "reference", g->key, st.evidence);
		rc = emit_rules(sg, side, g, st.series_tap[i], offset, st.series_conf[i], evidence);
	}
	if (rc < 0)
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
	for (size_t i = 0; i < nsi && rc == 0; i++) {
		const group *g = &gs[of_single[i]];
		char evidence[EVIDENCE_MAX];
		if (!st.single_tap[i])
			continue;
		snprintf(evidence, sizeof evidence, "%s name %s, from the tree's own forward pass: %s",
			 side ? "candidate" : "reference", g->key,
			 !strcmp(st.single_tap[i], "logits")	    ? "a wider last axis (the vocabulary) than the hidden states"
			 : !strcmp(st.single_tap[i], "embed") ? "the first layer's input on the residual stream"
							      : "its rows point where the last layer's output does");
		rc = emit_rules(sg, side, g, st.single_tap[i], 0, st.single_conf[i], evidence);
	}
	if (rc < 0)
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
	tb_structure_done(&st);
out:
	for (size_t i = 0; series && i < nse; i++) {
		free(series[i].t);
		free((long *)series[i].number);
	}
	free(series);
	free(singles);
	free(of_series);
	free(of_single);
	return rc;
}

/* Suggest rules for one tree's unmapped names. */
static int suggest_side(const tb_session *s, int side, tb_suggestion *sg, tb_err *err)
{
	const tb_pairing *p = s->pairing;
	parsed *ps = calloc(p->n_unp[side] + 1, sizeof *ps);
	group *gs = NULL;
	candidate *cs = NULL;
	size_t n = 0, ng = 0, nc = 0, holes = 0;
	bool *group_used = NULL, *chosen = NULL;
	int rc = -1;

	if (!ps)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
	tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory suggesting a map");
	for (size_t i = 0; i < p->n_unp[side]; i++)
		if (p->unp[side][i].kind == TB_UNP_UNMAPPED)
			parse(p->unp[side][i].tensor, &ps[n++]);
	sg->unpaired[side] = n;
	for (size_t i = 0; i < p->n_pairs; i++)
		holes += side ? p->pairs[i].ref && !p->pairs[i].cand : p->pairs[i].cand && !p->pairs[i].ref;
	sg->holes[side] = holes;
	if (make_groups(ps, n, &gs, &ng) < 0)
		goto out;
	if (!holes) {
		rc = structural(sg, side, gs, ng, err);
		goto out;
	}
	if (candidates(p, side, gs, ng, &cs, &nc) < 0)
		goto out;
	if (nc > 1)
		qsort(cs, nc, sizeof *cs, by_score);
	group_used = calloc(ng + 1, sizeof *group_used);
	chosen = calloc(nc + 1, sizeof *chosen);
	if (!group_used || !chosen)
		goto out;
	/* Best first: a group takes one tap, a tap one group. */
	for (size_t i = 0; i < nc; i++) {
		bool tap_taken = false;
		if (group_used[cs[i].group] || cs[i].score <= 0)
			continue;
		for (size_t j = 0; j < i && !tap_taken; j++)
			tap_taken = chosen[j] && !strcmp(cs[j].tap, cs[i].tap) &&
				    (gs[cs[j].group].slot >= 0) == (gs[cs[i].group].slot >= 0);
		if (tap_taken)
			continue;
		group_used[cs[i].group] = true;
		chosen[i] = true;
		if (emit(sg, side, &gs[cs[i].group], &cs[i], runner_up(cs, nc, &cs[i])) < 0)
			goto out;
	}
	rc = 0;
out:
	for (size_t g = 0; g < ng; g++)
		free(gs[g].names);
	free(gs);
	free(cs);
	free(ps);
	free(group_used);
	free(chosen);
	return rc;
}

/* Whether some cell would have a tensor of both trees once the rules
 * apply: the cells either side has now, or is given. */
static bool in_common(const tb_session *s, const tb_suggestion *sg)
{
	const tb_pairing *p = s->pairing;

	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_pair *pr = &p->pairs[i];
		bool have[2] = {pr->ref != NULL, pr->cand != NULL};
		for (int side = 0; side < 2; side++)
			for (size_t k = 0; k < sg->n_cells[side] && !have[side]; k++)
				have[side] = tb_cell_eq(&sg->cells[side][k], &pr->cell);
		if (have[0] && have[1])
			return true;
	}
	for (size_t a = 0; a < sg->n_cells[0]; a++)
		for (size_t b = 0; b < sg->n_cells[1]; b++)
			if (tb_cell_eq(&sg->cells[0][a], &sg->cells[1][b]))
				return true;
	return false;
}

int tb_suggest_map(const tb_session *s, tb_suggestion *out, tb_err *err)
{
	memset(out, 0, sizeof *out);
	for (int side = 1; side >= 0; side--) {
		if (suggest_side(s, side, out, err) < 0) {
			tb_suggestion_done(out);
			return -1;
		}
	}
	if ((out->unpaired[0] || out->unpaired[1]) && !in_common(s, out)) {
		tb_suggestion_done(out);
		return tb_err_setc(err, TB_ERR_FORMAT, NULL,
				  "%s and %s have nothing in common: no cell would hold a tensor of both, by name, by shape or by the trees' own structure",
				  s->ref_path, s->cand_path);
	}
	return 0;
}

/* The suggested rules, appended to a map file's "rules" array. */
static void add_rules(cJSON *rules, const tb_suggestion *sg)
{
	for (size_t i = 0; i < sg->n; i++) {
		const tb_suggested_rule *r = &sg->rules[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "match", r->match);
		if (r->layer_from_name)
			cJSON_AddStringToObject(o, "layer", "\\1");
		else if (r->layer >= 0)
			cJSON_AddNumberToObject(o, "layer", r->layer);
		else
			cJSON_AddNullToObject(o, "layer");
		cJSON_AddStringToObject(o, "tap", r->tap);
		cJSON_AddNumberToObject(o, "confidence", round(r->confidence * 1000) / 1000);
		cJSON_AddStringToObject(o, "evidence", r->evidence);
		cJSON_AddItemToArray(rules, o);
	}
}

char *tb_suggestion_json(const tb_suggestion *sg)
{
	cJSON *root = cJSON_CreateObject(), *rules = cJSON_AddArrayToObject(root, "rules");
	char *text;

	add_rules(rules, sg);
	text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

char *tb_suggestion_merged(const tb_suggestion *sg, const char *map_path, const char *map_text, size_t map_len,
			   tb_err *err)
{
	cJSON *root = NULL, *rules;
	char *text;

	if (map_text)
		root = tb_json_parse(map_text, map_len, map_path, "map file", err);
	else if (map_path)
		root = tb_json_load(map_path, MAP_MAX_BYTES, "map file", err);
	else
		root = cJSON_CreateObject();
	if (!root)
		return NULL;
	rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
	if (!rules)
		rules = cJSON_AddArrayToObject(root, "rules");
	if (!cJSON_IsArray(rules)) {
		cJSON_Delete(root);
		tb_err_setc(err, TB_ERR_FORMAT, map_path, "map file must be an object with a \"rules\" array");
		return NULL;
	}
	add_rules(rules, sg);
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory writing the map");
	return text;
}

void tb_suggestion_done(tb_suggestion *sg)
{
	for (size_t i = 0; i < sg->n; i++) {
		free(sg->rules[i].match);
		free(sg->rules[i].evidence);
	}
	free(sg->rules);
	free(sg->cells[0]);
	free(sg->cells[1]);
	memset(sg, 0, sizeof *sg);
}
