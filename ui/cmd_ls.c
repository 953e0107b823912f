#include "config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "naming.h"
#include "pairing.h"
#include "tree.h"

static int ls_json(const tb_tree *tree, const tb_namer *namer, const tb_tree_names *tn)
{
	cJSON *root = cJSON_CreateObject(), *arr, *notes;
	char *text;

	cJSON_AddStringToObject(root, "tree", tree->path);
	cJSON_AddStringToObject(root, "shared_prefix", tn->shared);
	arr = cJSON_AddArrayToObject(root, "tensors");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		const tb_tensor *t = tree->tensors[i];
		cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray();
		char cell[128], rule[256];
		tb_cell c;

		cJSON_AddStringToObject(o, "name", t->name);
		if (tb_namer_map(namer, t->name, tn->shared, &c, rule, sizeof rule)) {
			tb_cell_name(&c, cell, sizeof cell);
			cJSON_AddStringToObject(o, "cell", cell);
			cJSON_AddStringToObject(o, "rule", rule);
		} else {
			cJSON_AddNullToObject(o, "cell");
		}
		cJSON_AddStringToObject(o, "dtype", tb_dtype_name(t->dtype));
		for (int d = 0; d < t->ndim; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
		cJSON_AddItemToObject(o, "shape", shape);
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

static void ls_text(const tb_tree *tree, const tb_namer *namer, const tb_tree_names *tn)
{
	size_t width = 8, unmapped = 0;

	for (size_t i = 0; i < tree->n_tensors; i++) {
		size_t n = strlen(tree->tensors[i]->name);
		if (n > width)
			width = n;
	}
	if (width > 60)
		width = 60;
	printf("%-*s  %-14s %-10s %-18s %s\n", (int)width, "NAME", "CELL", "DTYPE", "SHAPE", "FILE");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		const tb_tensor *t = tree->tensors[i];
		char cell[128], shape[128];
		tb_cell c;

		if (tb_namer_map(namer, t->name, tn->shared, &c, NULL, 0)) {
			tb_cell_name(&c, cell, sizeof cell);
		} else {
			snprintf(cell, sizeof cell, "(unmapped)");
			unmapped++;
		}
		tb_shape_format(t->ndim, t->shape, shape, sizeof shape);
		printf("%-*s  %-14s %-10s %-18s %s\n", (int)width, t->name, cell, tb_dtype_name(t->dtype), shape,
		       t->path);
	}
	printf("%zu tensors, %zu unmapped\n", tree->n_tensors, unmapped);
	for (size_t i = 0; i < tree->n_notes; i++)
		printf("note: %s\n", tree->notes[i]);
}

int tb_cmd_ls(const tb_options *o)
{
	tb_tree_names tn;
	tb_namer *namer;
	tb_tree *tree;
	tb_err err;
	int rc = TB_EXIT_OK;

	if (tb_namer_new(o->map_file, &namer, &err) < 0)
		return tb_die(&err);
	if (tb_tree_open(o->paths[0], &o->open, &tree, &err) < 0) {
		tb_namer_free(namer);
		return tb_die(&err);
	}
	tb_tree_names_init(&tn, tree);
	if (o->json) {
		if (ls_json(tree, namer, &tn) < 0) {
			tb_err_set(&err, NULL, "out of memory");
			rc = tb_die(&err);
		}
	} else {
		ls_text(tree, namer, &tn);
	}
	if (fflush(stdout) != 0) {
		tb_err_set(&err, NULL, "cannot write to standard output");
		rc = tb_die(&err);
	}
	tb_tree_free(tree);
	tb_namer_free(namer);
	return rc;
}
