/*
 * Pairing (src/model/pairing.c) on npy trees written here: cells in forward
 * order whatever the files' order, cells of one side only, tensors no rule
 * maps and tensors that map to a cell already taken listed per side with
 * their reason, token ids neither paired nor unpaired, and a prefix every
 * name of a tree shares cut off before naming.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/pairing.h"
#include "testutil.h"

static const float zeros[4];

static void put(const char *dir, const char *name)
{
	int64_t sh[1] = {4};

	tu_put(dir, name, TB_DT_F32, 1, sh, zeros);
}

static void put_all(const char *dir, const char *const *names)
{
	for (; *names; names++)
		put(dir, *names);
}

typedef struct trees {
	char ref[4096], cand[4096];
	tb_tree *rt, *ct;
	tb_namer *namer;
	tb_pairing *p;
} trees;

/* Two fresh directories. */
static void trees_dirs(trees *t)
{
	const char *dir = tu_tmpdir();

	memset(t, 0, sizeof *t);
	snprintf(t->ref, sizeof t->ref, "%s/ref", dir);
	snprintf(t->cand, sizeof t->cand, "%s/cand", dir);
}

static void pair(trees *t)
{
	tb_err err;

	t->rt = tu_open(t->ref, NULL);
	t->ct = tu_open(t->cand, NULL);
	assert_int_equal(tb_namer_new(NULL, &t->namer, &err), 0);
	assert_int_equal(tb_pairing_build(t->rt, t->ct, t->namer, NULL, &t->p, &err), 0);
}

/* Trees of these names (NULL-terminated lists), paired. */
static void pair_names(trees *t, const char *const *ref, const char *const *cand)
{
	trees_dirs(t);
	put_all(t->ref, ref);
	put_all(t->cand, cand);
	pair(t);
}

static void trees_done(trees *t)
{
	tb_pairing_free(t->p);
	tb_namer_free(t->namer);
	tb_tree_free(t->rt);
	tb_tree_free(t->ct);
}

static const char *cell_name(const tb_pair *p, char *buf, size_t size)
{
	tb_cell_name(&p->cell, buf, size);
	return buf;
}

/* The pairs are exactly these cells, in this order. */
static void expect_cells(const tb_pairing *p, const char *const *want)
{
	size_t n = 0;
	char got[96];

	for (; want[n]; n++) {
		if (n >= p->n_pairs)
			fail_msg("%zu pairs, expected %s at %zu", p->n_pairs, want[n], n);
		if (strcmp(cell_name(&p->pairs[n], got, sizeof got), want[n]))
			fail_msg("pair %zu is %s, expected %s", n, got, want[n]);
	}
	assert_int_equal(p->n_pairs, n);
}

/* Side s lists exactly one unpaired tensor named name, for reason. */
static void expect_unpaired(const tb_pairing *p, int s, const char *name, const char *reason)
{
	for (size_t i = 0; i < p->n_unp[s]; i++) {
		if (!strcmp(p->unp[s][i].tensor->name, name)) {
			assert_string_equal(p->unp[s][i].reason, reason);
			return;
		}
	}
	fail_msg("%s is not unpaired on side %d", name, s);
}

/* Files sort as layers.10 < layers.2 < logits; cells go in forward order. */
static void test_forward_order(void **state)
{
	static const char *const names[] = {"logits", "layers.10.block", "layers.2.mlp", "layers.2.attn", "embed",
					    "final_norm", "layers.0.mlp_norm", "layers.0.attn_norm", "layers.2.attn.q",
					    NULL};
	static const char *const want[] = {"embed", "L0.attn_norm", "L0.mlp_norm", "L2.attn.q", "L2.attn", "L2.mlp",
					   "L10.block", "final_norm", "logits", NULL};
	trees t;
	(void)state;

	pair_names(&t, names, names);
	expect_cells(t.p, want);
	assert_int_equal(t.p->n_layers, 11);
	assert_int_equal(t.p->n_unp[0], 0);
	assert_int_equal(t.p->n_unp[1], 0);
	assert_int_equal(tb_pairing_complete(t.p), 9);
	for (size_t i = 0; i < t.p->n_pairs; i++) {
		assert_non_null(t.p->pairs[i].ref);
		assert_non_null(t.p->pairs[i].cand);
		assert_string_equal(t.p->pairs[i].ref->name, t.p->pairs[i].cand->name);
		assert_int_equal(tb_pairing_find(t.p, &t.p->pairs[i].cell), (long)i);
	}
	trees_done(&t);
}

/* Each side: one cell only it has, one name no rule maps; token ids are no cell. */
static void test_unpaired_per_side(void **state)
{
	static const char *const ref[] = {"embed", "layers.0.attn", "layers.0.mlp", "notes_for_me", "tokens", NULL};
	static const char *const cand[] = {"embed", "layers.0.attn", "layers.0.block", "scratch.buffer", "input_ids",
					   NULL};
	static const char *const want[] = {"embed", "L0.attn", "L0.mlp", "L0.block", NULL};
	tb_cell mlp = {.layer = 0, .tap = "mlp"}, block = {.layer = 0, .tap = "block"}, absent = {.layer = 1, .tap = "mlp"};
	trees t;
	long k;
	(void)state;

	pair_names(&t, ref, cand);
	expect_cells(t.p, want);
	k = tb_pairing_find(t.p, &mlp);
	assert_non_null(t.p->pairs[k].ref);
	assert_null(t.p->pairs[k].cand);
	k = tb_pairing_find(t.p, &block);
	assert_null(t.p->pairs[k].ref);
	assert_non_null(t.p->pairs[k].cand);
	assert_int_equal(tb_pairing_find(t.p, &absent), -1);
	assert_int_equal(tb_pairing_complete(t.p), 2);
	assert_int_equal(t.p->n_unp[0], 2);
	expect_unpaired(t.p, 0, "notes_for_me", "no naming rule matched");
	expect_unpaired(t.p, 0, "layers.0.mlp", "no tensor of the other tree maps to its cell");
	assert_int_equal(t.p->n_unp[1], 2);
	expect_unpaired(t.p, 1, "scratch.buffer", "no naming rule matched");
	expect_unpaired(t.p, 1, "layers.0.block", "no tensor of the other tree maps to its cell");
	assert_int_equal(t.p->n_layers, 1);
	trees_done(&t);
}

/* Two names of one tree for one cell: the first by name is paired, the
 * other listed as a duplicate; the other tree is not disturbed. */
static void test_duplicates(void **state)
{
	static const char *const ref[] = {"layers.0.attn", "model.layers.0.self_attn", "layers.0.mlp", NULL};
	static const char *const cand[] = {"layers.0.attn", "layers.0.mlp", NULL};
	static const char *const want[] = {"L0.attn", "L0.mlp", NULL};
	trees t;
	(void)state;

	pair_names(&t, ref, cand);
	expect_cells(t.p, want);
	assert_string_equal(t.p->pairs[0].ref->name, "layers.0.attn");
	assert_int_equal(t.p->n_unp[0], 1);
	expect_unpaired(t.p, 0, "model.layers.0.self_attn", "another tensor of this tree maps to the same cell");
	assert_int_equal(t.p->n_unp[1], 0);
	trees_done(&t);
}

/* A port that names everything under its own prefix still pairs with
 * the reference's Hugging Face names. */
static void test_shared_prefix(void **state)
{
	static const char *const ref[] = {"model.embed_tokens", "model.layers.0.self_attn", "model.layers.0.mlp",
					  "model.norm", "lm_head", NULL};
	static const char *const cand[] = {"run42.decoder.embed", "run42.decoder.layers.0.attn",
					   "run42.decoder.layers.0.mlp", "run42.decoder.final_norm",
					   "run42.decoder.logits", NULL};
	static const char *const want[] = {"embed", "L0.attn", "L0.mlp", "final_norm", "logits", NULL};
	tb_tree_names tn;
	trees t;
	(void)state;

	pair_names(&t, ref, cand);
	tb_tree_names_init(&tn, t.ct);
	assert_string_equal(tn.shared, "run42.decoder.");
	tb_tree_names_init(&tn, t.rt);
	assert_string_equal(tn.shared, "");
	expect_cells(t.p, want);
	assert_int_equal(tb_pairing_complete(t.p), 5);
	assert_int_equal(t.p->n_unp[0] + t.p->n_unp[1], 0);
	assert_string_equal(t.p->pairs[1].cand->name, "run42.decoder.layers.0.attn");
	trees_done(&t);
}

/* A prefix every name shares is cut only from a name that does not map
 * whole: these map as they are, though they share "model.layers.". */
static void test_prefix_kept_when_the_name_maps(void **state)
{
	static const char *const names[] = {"model.layers.0.self_attn", "model.layers.1.self_attn", NULL};
	static const char *const want[] = {"L0.attn", "L1.attn", NULL};
	tb_tree_names tn;
	trees t;
	(void)state;

	pair_names(&t, names, names);
	tb_tree_names_init(&tn, t.rt);
	assert_string_equal(tn.shared, "model.layers.");
	expect_cells(t.p, want);
	trees_done(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forward_order),
		cmocka_unit_test(test_unpaired_per_side),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_shared_prefix),
		cmocka_unit_test(test_prefix_kept_when_the_name_maps),
	};
	return cmocka_run_group_tests_name("pairing", tests, NULL, NULL);
}
