#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/naming.h"
#include "compare/estimate.h"
#include "compare/pairstat.h"
#include "diagnose/sanity.h"

/* Elements of the first look at a shifted pair: a dump shifted by a layer
 * is shifted everywhere, so its start already shows it. */
#define OFFSET_SAMPLE (1u << 16)
/* A shift must explain this share of layers, and at least two of them. */
#define OFFSET_MIN_FRAC 0.6
/* "Matches far better": the shifted error below this share of the aligned one. */
#define OFFSET_BETTER 0.25

/* Aliasing: the tap diverges by more than ALIAS_MIN_REL, its block by
 * under ALIAS_BLOCK_SHARE of that at every position.  A port's bug in the
 * tap reaches the block scaled by |tap| / |block| position by position,
 * which is not that small (a massive activation that dwarfs the tap holds
 * few positions); a bf16 dump's own rounding of the block is 2^-9. */
#define ALIAS_MIN_REL 0.1
#define ALIAS_BLOCK_SHARE 1e-2

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

static tb_tensor *side_of(const tb_cell_result *c, int side)
{
	if (!c)
		return NULL;
	return (tb_tensor *)(side ? c->cand : c->ref);
}

/* A layer's block output; layer -1 is the embedding output. */
static const tb_cell_result *block_of(const tb_result *r, int layer)
{
	return layer < 0 ? tb_result_cell(r, -1, TB_TAP_EMBED) : tb_result_cell(r, layer, TB_TAP_BLOCK);
}

/* Both sides compared element by element: the cell has statistics. */
static bool measured(const tb_cell_result *c)
{
	return c && c->ref && c->cand && c->status != TB_ST_PENDING && c->status != TB_ST_MISSING &&
	       !c->shape_mismatch;
}

/* The comparison's statistics let the checks below skip re-reading
 * tensors.  With NaN or Inf anywhere in the cell its rel_l2 covers only
 * the finite pairs while each side's norm covers that side's own finite
 * elements, so the bounds drawn from them would not hold. */
static bool stats_usable(const tb_cell_result *c)
{
	return measured(c) && !(c->m.nan[0] | c->m.nan[1] | c->m.inf[0] | c->m.inf[1]);
}

/* rel_l2 of cand against ref over their first n elements (0: all), or
 * over all of them estimated where either is a sketch (NaN then for a
 * first n: a sketch holds no prefix). */
static double rel_between(tb_tensor *ref, tb_tensor *cand, uint64_t n, const tb_tolerance *tol)
{
	tb_metrics m;
	tb_err err;
	double rel;
	bool exact;

	if (!ref || !cand || ref->numel != cand->numel)
		return NAN;
	if (ref->sketch || cand->sketch)
		return n == 0 && tb_sketch_rel_l2(ref, cand, &rel, &exact, &err) == 0 ? rel : NAN;
	if (tb_tensor_pair_metrics(ref, cand, n, tol, &m, &err) < 0)
		return NAN;
	return m.rel_l2;
}

/* Does the candidate of `aligned` match the reference of `shifted` far
 * better (rel_l2 below better x its own)?  ||c - r|| >= | ||c|| - ||r|| |
 * bounds it from the norms alone, and the tensors' first elements must show
 * it too, so most layers need no full re-read. */
static bool shifted_better(const tb_cell_result *aligned, const tb_cell_result *shifted, const tb_tolerance *tol,
			   double aligned_rel, double better)
{
	tb_tensor *c = side_of(aligned, 1), *r = side_of(shifted, 0);
	double below = better * aligned_rel;

	if (stats_usable(aligned) && stats_usable(shifted) && shifted->m.l2[0] > 0 &&
	    fabs(aligned->m.l2[1] - shifted->m.l2[0]) / shifted->m.l2[0] >= below)
		return false;
	if (c->numel > OFFSET_SAMPLE && !c->sketch && !r->sketch && !side_of(aligned, 0)->sketch &&
	    !(rel_between(r, c, OFFSET_SAMPLE, tol) < better * rel_between(side_of(aligned, 0), c, OFFSET_SAMPLE, tol)))
		return false;
	return rel_between(r, c, 0, tol) < below;
}

static void check_offset(const tb_result *r, tb_sanity *s)
{
	int votes[2] = {0, 0};

	for (int l = 0; l < r->n_layers; l++) {
		const tb_cell_result *c = block_of(r, l);
		if (!c || !c->ref || !c->cand)
			continue;
		double aligned = stats_usable(c) ? c->m.rel_l2 : rel_between(side_of(c, 0), side_of(c, 1), 0, &r->tol);
		if (!(aligned > r->tol.diverge))
			continue;
		for (int d = 0; d < 2; d++) {
			int other = d ? l - 1 : l + 1; /* layer -1 is the embedding output */
			const tb_cell_result *o = other < r->n_layers ? block_of(r, other) : NULL;
			if (o && o->ref && shifted_better(c, o, &r->tol, aligned, OFFSET_BETTER))
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

/* Every element NaN/Inf, or every one the same value: equal across layers
 * because of an overflow or an empty buffer, not because of a hook. */
static bool degenerate(const tb_cell_result *c, int side)
{
	uint64_t bad = c->m.nan[side] + c->m.inf[side];

	if (!measured(c))
		return false;
	return bad == c->m.n || (bad == 0 && c->m.min[side] == c->m.max[side]);
}

/* Could one side of cells a and b hold the same values?  Equal tensors have
 * equal minimum and maximum and norms equal up to summation rounding. */
static bool maybe_equal(const tb_cell_result *a, const tb_cell_result *b, int side)
{
	tb_tensor *ta = side_of(a, side), *tb = side_of(b, side);

	if (!ta || !tb || ta->numel != tb->numel || !ta->numel || degenerate(a, side) || degenerate(b, side))
		return false;
	if (!stats_usable(a) || !stats_usable(b))
		return true;
	return a->m.min[side] == b->m.min[side] && a->m.max[side] == b->m.max[side] &&
	       fabs(a->m.l2[side] - b->m.l2[side]) <= 1e-9 * fmax(a->m.l2[side], b->m.l2[side]);
}

/* Layers of one side whose tensor for some tap is value-for-value another
 * layer's: the most such layers over the layer taps.  Only tensors whose
 * statistics agree are read again. */
static int duplicates_of_tap(const tb_result *r, int side, tb_tap_id tap)
{
	int n = r->n_layers > 0 ? r->n_layers : 1, count = 0;
	bool *dup = calloc((size_t)n, sizeof *dup);
	tb_err err;

	if (!dup)
		return 0;
	for (int a = 0; a < r->n_layers; a++) {
		const tb_cell_result *ca = tb_result_cell(r, a, tap);
		for (int b = a + 1; b < r->n_layers; b++) {
			const tb_cell_result *cb = tb_result_cell(r, b, tap);
			if ((dup[a] && dup[b]) || !maybe_equal(ca, cb, side))
				continue;
			if (tb_tensors_equal(side_of(ca, side), side_of(cb, side), &err) == 1)
				dup[a] = dup[b] = true;
		}
	}
	for (int l = 0; l < r->n_layers; l++)
		count += dup[l];
	free(dup);
	return count;
}

static void check_duplicates(const tb_result *r, tb_sanity *s, int side)
{
	static const tb_tap_id taps[] = {TB_TAP_ATTN_NORM, TB_TAP_ATTN, TB_TAP_MLP_NORM, TB_TAP_MLP, TB_TAP_BLOCK};

	for (size_t i = 0; i < sizeof taps / sizeof *taps; i++) {
		int n = duplicates_of_tap(r, side, taps[i]);
		if (n > s->dup_layers[side]) {
			s->dup_layers[side] = n;
			s->dup_tap[side] = tb_tap_info_of(taps[i])->name;
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
		if (!tb_name_is_token_ids(t->name) || t->numel > (1u << 24) || t->sketch)
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

/* Whether the block tensors of either side carry hidden_states names, the
 * usual source of an off-by-one dump. */
static bool names_hidden_states(const tb_result *r)
{
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		if (c->cell.id != TB_TAP_BLOCK)
			continue;
		if ((c->ref && strstr(c->ref->name, "hidden_states")) || (c->cand && strstr(c->cand->name, "hidden_states")))
			return true;
	}
	return false;
}

/* The largest rel_l2 of any position of c, or of the whole cell when it
 * has no positions. */
static double worst_position(const tb_cell_result *c)
{
	double worst = 0;

	if (c->m.n_pos <= 0 || !c->m.pos_rel_l2)
		return c->m.rel_l2;
	for (int64_t p = 0; p < c->m.n_pos; p++)
		if (!isnan(c->m.pos_rel_l2[p]) && c->m.pos_rel_l2[p] > worst)
			worst = c->m.pos_rel_l2[p];
	return worst;
}

/* The residual sum that takes cell c in: its layer's block for an
 * attention or MLP tap (or a sub-tap of one), the next layer's for a
 * block, layer 0's for the embedding; NULL for the rest (a norm's output
 * feeds ops that no dump tap sums it back from). */
static const tb_cell_result *residual_consumer(const tb_result *r, const tb_cell_result *c)
{
	tb_tap_id tap = c->cell.id, parent = tb_cell_parent(&c->cell);

	if (tap == TB_TAP_EMBED)
		return tb_result_cell(r, 0, TB_TAP_BLOCK);
	if (c->cell.layer < 0)
		return NULL;
	if (tap == TB_TAP_BLOCK)
		return tb_result_cell(r, c->cell.layer + 1, TB_TAP_BLOCK);
	if (tap == TB_TAP_ATTN || tap == TB_TAP_MLP || parent == TB_TAP_ATTN || parent == TB_TAP_MLP)
		return tb_result_cell(r, c->cell.layer, TB_TAP_BLOCK);
	return NULL;
}

long tb_sanity_aliased(const tb_result *r, long i)
{
	const tb_cell_result *c, *b;

	if (i < 0 || (size_t)i >= r->n_cells)
		return -1;
	c = &r->cells[i];
	b = residual_consumer(r, c);
	if (!measured(c) || !measured(b) || c->status != TB_ST_DIVERGED || !(c->m.rel_l2 > ALIAS_MIN_REL) ||
	    !(b->status == TB_ST_MATCH || b->status == TB_ST_CLOSE) || !(worst_position(b) < ALIAS_BLOCK_SHARE * c->m.rel_l2))
		return -1;
	return b - r->cells;
}

/* Cells that diverge while the residual sums they feed match. */
static void check_aliasing(const tb_result *r, tb_sanity *s)
{
	char cell[TB_CELL_NAME_MAX], block[TB_CELL_NAME_MAX], text[384];
	long first = -1, consumer = -1;

	for (size_t i = 0; i < r->n_cells; i++) {
		long b = tb_sanity_aliased(r, (long)i);
		if (b < 0)
			continue;
		if (!s->aliased++) {
			first = (long)i;
			consumer = b;
		}
	}
	/* a layer holding another's tensor feeds a matching sum too: that
	 * warning says more */
	if (!s->aliased || s->dup_layers[0] >= 2 || s->dup_layers[1] >= 2)
		return;
	tb_cell_name(&r->cells[first].cell, cell, sizeof cell);
	tb_cell_name(&r->cells[consumer].cell, block, sizeof block);
	snprintf(text, sizeof text,
		 "%s diverges (rel_l2 %.3g) while %s, the residual sum it feeds, matches (rel_l2 %.2g)%s: the dumped "
		 "tensor was changed after capture (a hook kept a reference, then an in-place op)?",
		 cell, r->cells[first].m.rel_l2, block, r->cells[consumer].m.rel_l2,
		 s->aliased > 1 ? ", and so do other cells" : "");
	add_warning(s, "dump-aliasing", text);
}

int tb_sanity_check(const tb_session *ss, const tb_result *r, tb_sanity *s, tb_err *err)
{
	char text[384];

	memset(s, 0, sizeof *s);
	check_tokens(ss, s);
	check_offset(r, s);
	if (s->offset && names_hidden_states(r)) {
		snprintf(text, sizeof text,
			 "candidate block of layer N matches reference layer N%+d far better than layer N in %.0f%% of layers: "
			 "hidden_states[0] is the embedding output, so hidden_states[i] is layer i-1's output; "
			 "one side saved hidden_states[i] as layer i",
			 s->offset, 100 * s->offset_frac);
		add_warning(s, "dump-offset", text);
	} else if (s->offset) {
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
	check_aliasing(r, s);
	for (int side = 0; side < 2; side++) {
		const tb_tree_layout *lo = side ? &ss->cand->layout : &ss->ref->layout;
		const char *who = side ? "candidate" : "reference";
		if (lo->stale[0]) {
			snprintf(text, sizeof text, "%s %s", who, lo->stale);
			add_warning(s, "dump-duplicate", text);
		}
		if (lo->replicas[0]) {
			snprintf(text, sizeof text, "%s ranks disagree on replicated tensors (rank 0 compared): %s", who,
				 lo->replicas);
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
