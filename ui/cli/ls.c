#include "config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "compare/tolfile.h"
#include "formats/tree.h"
#include "model/naming.h"
#include "model/pairing.h"
#include "run/report.h"
#include "run/run.h"

/* One tensor of the listing with the cell its name maps to. */
typedef struct ls_entry {
	const tb_tensor *t;
	bool mapped;
	const char *tower; /* a tower's tensor (its cell in the tower's grid), or NULL */
	tb_cell cell;
	size_t at; /* its place in the tree (raw-name order) */
	char rule[256]; /* the rule that named it */
} ls_entry;

/* Forward order (embed, L0 ..., final_norm, logits) for what maps to a
 * cell, as check lists cells; raw-name order within a cell and for the
 * rest, which follows. */
static int cmp_entry(const void *pa, const void *pb)
{
	const ls_entry *a = pa, *b = pb;
	int c;

	if (a->mapped != b->mapped)
		return a->mapped ? -1 : 1;
	if (!a->tower != !b->tower)
		return a->tower ? 1 : -1;
	if (a->tower && (c = strcmp(a->tower, b->tower)) != 0)
		return c;
	if (a->mapped && (c = tb_cell_cmp(&a->cell, &b->cell)) != 0)
		return c;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* The cells pairing gives the tensors, which reads a name with the rest of
 * its tree (an MoE layer's router, the last hidden state, a module taken
 * from its last projection): where it differs from the name's own, it is
 * the one listed.  A pairing that fails leaves the names' cells. */
static void read_with_tree(const tb_tree *tree, const tb_namer *namer, ls_entry *e)
{
	tb_pairing *p;
	tb_err err;

	if (tb_pairing_build(tree, tree, namer, NULL, &p, &err) < 0)
		return;
	for (size_t i = 0; i < tree->n_tensors; i++) {
		if (!e[i].mapped || e[i].tower)
			continue;
		for (size_t k = 0; k < p->n_pairs; k++)
			if (p->pairs[k].ref == e[i].t) {
				if (!tb_cell_eq(&p->pairs[k].cell, &e[i].cell)) {
					e[i].cell = p->pairs[k].cell;
					snprintf(e[i].rule, sizeof e[i].rule, "read with the rest of its tree (tbisect-dumps(5))");
				}
				break;
			}
	}
	tb_pairing_free(p);
}

/* The tree's tensors in listing order; NULL when out of memory. */
static ls_entry *ls_entries(const tb_tree *tree, const tb_namer *namer, const tb_tree_names *tn)
{
	ls_entry *e = calloc(tree->n_tensors ? tree->n_tensors : 1, sizeof *e);

	for (size_t i = 0; e && i < tree->n_tensors; i++) {
		e[i].t = tree->tensors[i];
		e[i].at = i;
		e[i].tower = tb_name_tower(e[i].t->name);
		if (e[i].tower) {
			e[i].mapped = tb_namer_map_tower(namer, e[i].t->name, e[i].tower, &e[i].cell, NULL);
			snprintf(e[i].rule, sizeof e[i].rule, "the %s tower's conventions", e[i].tower);
		} else {
			e[i].mapped = tb_namer_map_role(namer, e[i].t->name, e[i].t->role, tn->shared, &e[i].cell, NULL,
							e[i].rule, sizeof e[i].rule);
		}
	}
	if (e)
		read_with_tree(tree, namer, e);
	if (e && tree->n_tensors)
		qsort(e, tree->n_tensors, sizeof *e, cmp_entry);
	return e;
}

/* The dtype the file gives (llama.cpp prints f16 tensors as text, held
 * here as float32). */
static const char *ls_dtype(const tb_tensor *t)
{
	return t->stored_as ? t->stored_as : tb_dtype_name(t->dtype);
}

/* The whole tensor's shape, and how many of its values a partial dump
 * printed: "[1, 1, 14, 64] (36 printed)". */
static void ls_shape(const tb_tensor *t, char *buf, size_t size)
{
	size_t n;

	if (!t->partial) {
		tb_shape_format(t->ndim, t->shape, buf, size);
		return;
	}
	tb_shape_format(t->partial->ndim, t->partial->shape, buf, size);
	n = strlen(buf);
	snprintf(buf + n, size - n, " (%llu printed)", (unsigned long long)t->partial->n);
}

static int ls_json(const tb_tree *tree, const ls_entry *e, const tb_tree_names *tn, const tb_tolfile *tf,
		   const tb_tolerance *base)
{
	cJSON *root = cJSON_CreateObject(), *arr, *notes;
	char *text;

	cJSON_AddStringToObject(root, "tree", tree->path);
	cJSON_AddStringToObject(root, "shared_prefix", tn->shared);
	arr = cJSON_AddArrayToObject(root, "tensors");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		const tb_tensor *t = e[i].t;
		cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray();
		char cell[128];

		cJSON_AddStringToObject(o, "name", t->name);
		if (e[i].tower)
			cJSON_AddStringToObject(o, "tower", e[i].tower);
		if (e[i].mapped) {
			tb_cell_name(&e[i].cell, cell, sizeof cell);
			cJSON_AddStringToObject(o, "cell", cell);
			cJSON_AddStringToObject(o, "rule", e[i].rule);
			if (tf) {
				tb_tolerance tol = *base;
				int k = tb_tolfile_apply(tf, &e[i].cell, t->name, NULL, &tol);
				cJSON *to = cJSON_AddObjectToObject(o, "tolerance");
				if (k >= 0)
					cJSON_AddStringToObject(to, "match", tb_tolfile_pattern(tf, k));
				else
					cJSON_AddNullToObject(to, "match");
				cJSON_AddNumberToObject(to, "atol", tol.atol);
				cJSON_AddNumberToObject(to, "rtol", tol.rtol);
				cJSON_AddNumberToObject(to, "diverge", tol.diverge);
				cJSON_AddStringToObject(to, "mode", tol.absolute ? "abs" : "rel");
			}
		} else {
			cJSON_AddNullToObject(o, "cell");
			if (tb_name_is_token_ids(t->name))
				cJSON_AddTrueToObject(o, "token_ids");
		}
		cJSON_AddStringToObject(o, "dtype", ls_dtype(t));
		for (int d = 0; d < (t->partial ? t->partial->ndim : t->ndim); d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber(
							    (double)(t->partial ? t->partial->shape[d] : t->shape[d])));
		cJSON_AddItemToObject(o, "shape", shape);
		if (t->partial) {
			cJSON_AddTrueToObject(o, "partial");
			cJSON_AddNumberToObject(o, "printed", (double)t->partial->n);
		}
		if (t->role && !t->role[0])
			cJSON_AddTrueToObject(o, "internal");
		if (t->origin)
			cJSON_AddStringToObject(o, "op", t->origin);
		cJSON_AddStringToObject(o, "file", t->path);
		cJSON_AddItemToArray(arr, o);
	}
	notes = cJSON_AddArrayToObject(root, "notes");
	for (size_t i = 0; i < tree->n_notes; i++)
		cJSON_AddItemToArray(notes, cJSON_CreateString(tree->notes[i]));
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return -1;
	puts(text);
	free(text);
	return 0;
}

/* The CELL column of an entry: "L0.attn", "vision:L0.attn", "(input)"... */
static void ls_cell(const ls_entry *e, char *cell, size_t size)
{
	char name[100];

	if (e->mapped) {
		tb_cell_name(&e->cell, name, sizeof name);
		snprintf(cell, size, "%s%s%s", e->tower ? e->tower : "", e->tower ? ":" : "", name);
	} else if (tb_name_is_token_ids(e->t->name)) {
		snprintf(cell, size, "(token ids)");
	} else if (tb_name_is_aux(e->t->name)) {
		snprintf(cell, size, "(input)");
	} else if (e->t->role && !e->t->role[0]) {
		snprintf(cell, size, "(internal)");
	} else {
		snprintf(cell, size, "(unmapped)");
	}
}

static void ls_text(const tb_tree *tree, const ls_entry *e, const tb_tolfile *tf, const tb_tolerance *base)
{
	size_t width = 8, cw = 14, unmapped = 0;
	char layout[160], cell[128];

	for (size_t i = 0; i < tree->n_tensors; i++) {
		size_t n = strlen(tree->tensors[i]->name);
		if (n > width)
			width = n;
		ls_cell(&e[i], cell, sizeof cell);
		if (strlen(cell) > cw)
			cw = strlen(cell);
	}
	if (width > 60)
		width = 60;
	printf("%-*s  %-*s %-10s %-28s %s%s\n", (int)width, "NAME", (int)cw, "CELL", "DTYPE", "SHAPE", "FILE",
	       tf ? "  TOLERANCE" : "");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		const tb_tensor *t = e[i].t;
		char shape[128], tols[320] = "";

		ls_cell(&e[i], cell, sizeof cell);
		if (!e[i].mapped && !strcmp(cell, "(unmapped)"))
			unmapped++;
		if (e[i].mapped && tf) {
			tb_tolerance tol = *base;
			int k = tb_tolfile_apply(tf, &e[i].cell, t->name, NULL, &tol);
			snprintf(tols, sizeof tols, "  %s: atol %g rtol %g diverge %g%s",
				 k >= 0 ? tb_tolfile_pattern(tf, k) : "(command line)", tol.atol, tol.rtol, tol.diverge,
				 tol.absolute ? " abs" : "");
		}
		ls_shape(t, shape, sizeof shape);
		printf("%-*s  %-*s %-10s %-28s %s%s\n", (int)width, t->name, (int)cw, cell, ls_dtype(t), shape, t->path,
		       tols);
	}
	printf("%zu tensors, %zu unmapped\n", tree->n_tensors, unmapped);
	tb_layout_text(&tree->layout, layout, sizeof layout);
	if (layout[0])
		printf("layout: %s\n", layout);
	for (size_t i = 0; i < tree->n_notes; i++)
		printf("note: %s\n", tree->notes[i]);
}

int tb_cmd_ls(const tb_options *o)
{
	tb_run_opts ro;
	tb_run_config cfg;
	tb_listing l;
	ls_entry *e;
	tb_err err;
	int rc = TB_EXIT_OK;

	tb_run_opts_from(o, &ro);
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (tb_run_list(&cfg, o->paths[0], &l, &err) < 0) {
		tb_run_config_done(&cfg);
		return tb_die(&err);
	}
	e = ls_entries(l.tree, l.namer, &l.names);
	if (!e || (o->json && ls_json(l.tree, e, &l.names, cfg.tolfile, &o->tol) < 0)) {
		tb_err_setc(&err, TB_ERR_NOMEM, NULL, "out of memory");
		rc = tb_die(&err);
	} else if (!o->json) {
		ls_text(l.tree, e, cfg.tolfile, &o->tol);
	}
	free(e);
	if (fflush(stdout) != 0) {
		tb_err_setc(&err, TB_ERR_IO, NULL, "cannot write to standard output");
		rc = tb_die(&err);
	}
	tb_listing_done(&l);
	tb_run_config_done(&cfg);
	return rc;
}
