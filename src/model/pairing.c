#include "config.h"

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
} mapped;

static int cmp_mapped(const void *a, const void *b)
{
	const mapped *x = a, *y = b;
	int c = tb_cell_cmp(&x->cell, &y->cell);

	return c ? c : strcmp(x->t->name, y->t->name);
}

static int add_unpaired(tb_pairing *p, int side, const tb_tensor *t, const char *reason)
{
	tb_unpaired *u = realloc(p->unp[side], (p->n_unp[side] + 1) * sizeof *u);

	if (!u)
		return -1;
	p->unp[side] = u;
	u[p->n_unp[side]].tensor = t;
	u[p->n_unp[side]].reason = reason;
	p->n_unp[side]++;
	return 0;
}

/* Map every tensor of a tree; unmapped and duplicate-cell tensors go to unpaired. */
static int map_side(tb_pairing *p, int side, const tb_tree *tree, const tb_namer *namer, mapped **out, size_t *n)
{
	tb_tree_names tn;
	mapped *m = calloc(tree->n_tensors ? tree->n_tensors : 1, sizeof *m);
	size_t k = 0, w = 0;

	if (!m)
		return -1;
	tb_tree_names_init(&tn, tree);
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		if (tb_namer_map(namer, t->name, tn.shared, &m[k].cell, NULL, 0)) {
			m[k++].t = t;
		} else if (tb_name_is_token_ids(t->name)) {
			continue; /* input ids are no cell; the sanity checks compare them */
		} else if (add_unpaired(p, side, t, "no naming rule matched") < 0) {
			free(m);
			return -1;
		}
	}
	qsort(m, k, sizeof *m, cmp_mapped);
	for (size_t i = 0; i < k; i++) {
		if (w > 0 && tb_cell_eq(&m[w - 1].cell, &m[i].cell)) {
			if (add_unpaired(p, side, m[i].t, "another tensor of this tree maps to the same cell") < 0) {
				free(m);
				return -1;
			}
			continue;
		}
		m[w++] = m[i];
	}
	*out = m;
	*n = w;
	return 0;
}

int tb_pairing_build(const tb_tree *ref, const tb_tree *cand, const tb_namer *namer, tb_pairing **out,
		     tb_err *err)
{
	tb_pairing *p = calloc(1, sizeof *p);
	mapped *a = NULL, *b = NULL;
	size_t na = 0, nb = 0, i = 0, j = 0;

	*out = NULL;
	if (!p || map_side(p, 0, ref, namer, &a, &na) < 0 || map_side(p, 1, cand, namer, &b, &nb) < 0)
		goto oom;
	p->pairs = calloc(na + nb + 1, sizeof *p->pairs);
	if (!p->pairs)
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
		if (!pr->ref && add_unpaired(p, 1, pr->cand, "no tensor of the other tree maps to its cell") < 0)
			goto oom;
		if (!pr->cand && add_unpaired(p, 0, pr->ref, "no tensor of the other tree maps to its cell") < 0)
			goto oom;
		if (pr->cell.layer + 1 > p->n_layers)
			p->n_layers = pr->cell.layer + 1;
	}
	free(a);
	free(b);
	*out = p;
	return 0;
oom:
	free(a);
	free(b);
	tb_pairing_free(p);
	return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
}

void tb_pairing_free(tb_pairing *p)
{
	if (!p)
		return;
	free(p->pairs);
	free(p->unp[0]);
	free(p->unp[1]);
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
