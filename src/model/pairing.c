#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/pairing.h"

void tb_tree_names_init(tb_tree_names *tn, const tb_tree *tree)
{
	const char **names = malloc((tree->n_tensors ? tree->n_tensors : 1) * sizeof *names);

	tn->shared[0] = '\0';
	if (!names)
		return;
	for (size_t i = 0; i < tree->n_tensors; i++)
		names[i] = tree->tensors[i]->name;
	tb_common_prefix(names, tree->n_tensors, tn->shared, sizeof tn->shared);
	free(names);
}

/* One side's tensors with their cells, sorted by cell. */
typedef struct mapped {
	tb_cell cell;
	tb_tensor *t;
	int user_rule; /* the map file's rule that mapped it, -1: built in */
} mapped;

static int cmp_mapped(const void *a, const void *b)
{
	const mapped *x = a, *y = b;
	int c = tb_cell_cmp(&x->cell, &y->cell);

	return c ? c : strcmp(x->t->name, y->t->name);
}

const char *tb_unpaired_reason(tb_unpaired_kind kind)
{
	static const char *const reasons[] = {
		[TB_UNP_UNMAPPED] = "no naming rule matched",
		[TB_UNP_DUPLICATE] = "another tensor of this tree maps to the same cell",
		[TB_UNP_ONE_SIDED] = "no tensor of the other tree maps to its cell",
	};

	return reasons[kind];
}

static int add_unpaired(tb_pairing *p, int side, const tb_tensor *t, tb_unpaired_kind kind)
{
	tb_unpaired *u = realloc(p->unp[side], (p->n_unp[side] + 1) * sizeof *u);

	if (!u)
		return -1;
	p->unp[side] = u;
	u[p->n_unp[side]].tensor = t;
	u[p->n_unp[side]].kind = kind;
	u[p->n_unp[side]].reason = tb_unpaired_reason(kind);
	p->n_unp[side]++;
	return 0;
}

/* Two tensors of one tree that the map file puts in one cell: its rules
 * are ambiguous, which no pairing can resolve. */
static int ambiguous(const tb_namer *namer, const tb_tree *tree, const mapped *a, const mapped *b, tb_err *err)
{
	char cell[TB_CELL_NAME_MAX];

	tb_cell_name(&a->cell, cell, sizeof cell);
	if (a->user_rule == b->user_rule)
		return tb_err_set(err, tb_namer_path(namer), "map rule %d maps both %s and %s of %s to %s", a->user_rule,
				  a->t->name, b->t->name, tree->path, cell);
	return tb_err_set(err, tb_namer_path(namer), "map rules %d and %d both claim %s (%s and %s of %s)",
			  a->user_rule < b->user_rule ? a->user_rule : b->user_rule,
			  a->user_rule < b->user_rule ? b->user_rule : a->user_rule, cell, a->t->name, b->t->name,
			  tree->path);
}

/* Hugging Face decoders append the final norm's output as the last of
 * their output_hidden_states: a tree's highest hidden_states[M] is
 * final_norm, not layer M-1's output. */
static void last_hidden_state(mapped *m, size_t k)
{
	int best = 0;
	size_t at = k;

	for (size_t i = 0; i < k; i++) {
		int idx = m[i].user_rule < 0 ? tb_hidden_states_index(m[i].t->name) : -1;
		if (idx > best) {
			best = idx;
			at = i;
		}
	}
	if (at < k) {
		m[at].cell.layer = -1;
		snprintf(m[at].cell.tap, sizeof m[at].cell.tap, "final_norm");
	}
}

/* Map every tensor of a tree; unmapped and duplicate-cell tensors go to
 * unpaired.  hits counts the tensors each map rule took. */
static int map_side(tb_pairing *p, int side, const tb_tree *tree, const tb_namer *namer, mapped **out, size_t *n,
		    size_t *hits, tb_err *err)
{
	tb_tree_names tn;
	mapped *m = calloc(tree->n_tensors ? tree->n_tensors : 1, sizeof *m);
	size_t k = 0, w = 0;

	if (!m)
		return tb_err_set(err, NULL, "out of memory while pairing tensors");
	tb_tree_names_init(&tn, tree);
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		if (tb_namer_map_rule(namer, t->name, tn.shared, &m[k].cell, &m[k].user_rule)) {
			if (m[k].user_rule >= 0)
				hits[m[k].user_rule]++;
			m[k++].t = t;
		} else if (tb_name_is_token_ids(t->name)) {
			continue; /* input ids are no cell; the sanity checks compare them */
		} else if (add_unpaired(p, side, t, TB_UNP_UNMAPPED) < 0) {
			free(m);
			return tb_err_set(err, NULL, "out of memory while pairing tensors");
		}
	}
	last_hidden_state(m, k);
	qsort(m, k, sizeof *m, cmp_mapped);
	for (size_t i = 0; i < k; i++) {
		if (w > 0 && tb_cell_eq(&m[w - 1].cell, &m[i].cell)) {
			if (m[w - 1].user_rule >= 0 && m[i].user_rule >= 0) {
				ambiguous(namer, tree, &m[w - 1], &m[i], err);
				free(m);
				return -1;
			}
			if (add_unpaired(p, side, m[i].t, TB_UNP_DUPLICATE) < 0) {
				free(m);
				return tb_err_set(err, NULL, "out of memory while pairing tensors");
			}
			continue;
		}
		m[w++] = m[i];
	}
	*out = m;
	*n = w;
	return 0;
}

/* The map file's rules that took no tensor of either tree. */
static int note_unused(tb_pairing *p, const tb_namer *namer, const size_t *hits)
{
	size_t n = tb_namer_n_rules(namer);

	p->unused_rules = calloc(n ? n : 1, sizeof *p->unused_rules);
	if (!p->unused_rules)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!hits[i])
			p->unused_rules[p->n_unused_rules++] = i;
	return 0;
}

int tb_pairing_build(const tb_tree *ref, const tb_tree *cand, const tb_namer *namer, tb_pairing **out,
		     tb_err *err)
{
	tb_pairing *p = calloc(1, sizeof *p);
	size_t *hits = calloc(tb_namer_n_rules(namer) + 1, sizeof *hits);
	mapped *a = NULL, *b = NULL;
	size_t na = 0, nb = 0, i = 0, j = 0;

	*out = NULL;
	if (!p || !hits) {
		tb_err_set(err, NULL, "out of memory while pairing tensors");
		goto fail;
	}
	if (map_side(p, 0, ref, namer, &a, &na, hits, err) < 0 || map_side(p, 1, cand, namer, &b, &nb, hits, err) < 0)
		goto fail;
	p->pairs = calloc(na + nb + 1, sizeof *p->pairs);
	if (!p->pairs || note_unused(p, namer, hits) < 0)
		goto oom;
	while (i < na || j < nb) {
		tb_pair *pr = &p->pairs[p->n_pairs++];
		int c = i >= na ? 1 : j >= nb ? -1 : tb_cell_cmp(&a[i].cell, &b[j].cell);
		if (c <= 0) {
			pr->cell = a[i].cell;
			pr->ref = a[i++].t;
		}
		if (c >= 0) {
			pr->cell = b[j].cell;
			pr->cand = b[j++].t;
		}
		if (!pr->ref && add_unpaired(p, 1, pr->cand, TB_UNP_ONE_SIDED) < 0)
			goto oom;
		if (!pr->cand && add_unpaired(p, 0, pr->ref, TB_UNP_ONE_SIDED) < 0)
			goto oom;
		if (pr->cell.layer + 1 > p->n_layers)
			p->n_layers = pr->cell.layer + 1;
	}
	free(a);
	free(b);
	free(hits);
	*out = p;
	return 0;
oom:
	tb_err_set(err, NULL, "out of memory while pairing tensors");
fail:
	free(a);
	free(b);
	free(hits);
	tb_pairing_free(p);
	return -1;
}

void tb_pairing_free(tb_pairing *p)
{
	if (!p)
		return;
	free(p->pairs);
	free(p->unp[0]);
	free(p->unp[1]);
	free(p->unused_rules);
	free(p);
}

long tb_pairing_find(const tb_pairing *p, const tb_cell *cell)
{
	for (size_t i = 0; i < p->n_pairs; i++)
		if (tb_cell_eq(&p->pairs[i].cell, cell))
			return (long)i;
	return -1;
}

size_t tb_pairing_complete(const tb_pairing *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_pairs; i++)
		n += p->pairs[i].ref && p->pairs[i].cand;
	return n;
}

void tb_pairing_coverage(const tb_pairing *p, tb_coverage *c)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_pair *pr = &p->pairs[i];
		bool layer = pr->cell.layer >= 0;
		c->paired += pr->ref && pr->cand;
		c->layer_paired += layer && pr->ref && pr->cand;
		c->layer_tensors[0] += layer && pr->ref;
		c->layer_tensors[1] += layer && pr->cand;
	}
	for (int side = 0; side < 2; side++) {
		/* Every tensor is in a complete pair or unpaired, one-sided cells too. */
		c->tensors[side] = c->paired + p->n_unp[side];
		for (size_t i = 0; i < p->n_unp[side]; i++) {
			const tb_unpaired *u = &p->unp[side][i];
			/* A layer index is the likeliest number in a tensor's name. */
			if (u->kind == TB_UNP_UNMAPPED && strpbrk(u->tensor->name, "0123456789"))
				c->layer_tensors[side]++;
		}
	}
}

bool tb_coverage_poor(const tb_coverage *c)
{
	size_t smaller = c->tensors[0] < c->tensors[1] ? c->tensors[0] : c->tensors[1];

	if (c->layer_tensors[0] && c->layer_tensors[1] && !c->layer_paired)
		return true;
	return c->paired * 2 < smaller;
}

void tb_coverage_text(const tb_coverage *c, char *buf, size_t size)
{
	size_t smaller = c->tensors[0] < c->tensors[1] ? c->tensors[0] : c->tensors[1];

	if (c->paired * 2 < smaller)
		snprintf(buf, size, "only %zu of %zu tensors paired (ref %zu, cand %zu)", c->paired, smaller,
			 c->tensors[0], c->tensors[1]);
	else
		snprintf(buf, size, "no layer tensor paired, %zu of %zu tensors in all (ref %zu, cand %zu)", c->paired,
			 smaller, c->tensors[0], c->tensors[1]);
}
