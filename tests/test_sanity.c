/*
 * The dump sanity checks (src/diagnose/sanity.c) on trees written here:
 * candidate blocks shifted by a layer either way, layers of one side that
 * hold the same tensor (and the degenerate tensors that must not count),
 * token ids that differ, are shifted, or differ in length.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose/sanity.h"
#include "testutil.h"

#define N_LAYERS 6

/* Six layers of block taps; the candidate's layer l holds the reference's
 * layer cand_of(l) (a NaN at nan_at on both sides, unless -1). */
static void write_blocks(const char *ref, const char *cand, int nan_at, int (*cand_of)(int))
{
	int64_t sh[3] = {1, 8, 16};
	char name[64];

	for (int l = 0; l < N_LAYERS; l++) {
		float *x = tu_ramp(128, 1.0f + 0.5f * (float)l), *y = tu_ramp(128, 1.0f + 0.5f * (float)cand_of(l));
		if (nan_at >= 0)
			x[nan_at] = y[nan_at] = NAN;
		snprintf(name, sizeof name, "layers.%d.block", l);
		tu_put(ref, name, TB_DT_F32, 3, sh, x);
		tu_put(cand, name, TB_DT_F32, 3, sh, y);
		free(x);
		free(y);
	}
}

static int same_layer(int l)
{
	return l;
}

static int all_layer0(int l)
{
	(void)l;
	return 0;
}

static int previous_layer(int l)
{
	return l > 0 ? l - 1 : N_LAYERS - 1;
}

static int next_layer(int l)
{
	return l + 1 < N_LAYERS ? l + 1 : 0;
}

/* Token ids as an int64 "tokens" tensor of dir. */
static void put_tokens(const char *dir, const float *ids, int64_t n)
{
	tu_put(dir, "tokens", TB_DT_I64, 1, &n, ids);
}

/* The pair in two fresh trees: blocks by cand_of, then tokens if given. */
static void sanity_of(int nan_at, int (*cand_of)(int), const float *ref_ids, int64_t n_ref, const float *cand_ids,
		      int64_t n_cand, tb_sanity *out)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	tu_compared f;
	tb_err err;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	write_blocks(ref, cand, nan_at, cand_of);
	if (ref_ids)
		put_tokens(ref, ref_ids, n_ref);
	if (cand_ids)
		put_tokens(cand, cand_ids, n_cand);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tb_sanity_check(&f.s, f.res, out, &err), 0);
	tu_compared_done(&f);
}

/* The one warning with this id (fails when there is none or several). */
static const tb_warning *warning(const tb_sanity *s, const char *id)
{
	const tb_warning *w = NULL;

	for (size_t i = 0; i < s->n_warnings; i++) {
		if (!strcmp(s->warnings[i].id, id)) {
			assert_null(w);
			w = &s->warnings[i];
		}
	}
	if (!w)
		fail_msg("no %s warning", id);
	return w;
}

static void assert_contains(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("\"%s\" does not contain \"%s\"", text, want);
}

static void test_clean_pair(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, same_layer, NULL, 0, NULL, 0, &s);
	assert_int_equal(s.offset, 0);
	assert_int_equal(s.dup_layers[0], 0);
	assert_int_equal(s.dup_layers[1], 0);
	assert_false(s.tokens_compared);
	assert_int_equal(s.first_token_diff, -1);
	assert_int_equal(s.n_warnings, 0);
	tb_sanity_done(&s);
}

/* Duplicates are found from the comparison's statistics, and re-read
 * whole when NaN makes those statistics partial. */
static void test_duplicates(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, all_layer0, NULL, 0, NULL, 0, &s);
	assert_int_equal(s.dup_layers[1], N_LAYERS);
	assert_string_equal(s.dup_tap[1], "block");
	assert_int_equal(s.dup_layers[0], 0);
	assert_contains(warning(&s, "dump-duplicate")->text, "6 layers of the candidate hold identical block tensors");
	assert_int_equal(s.offset, 0);
	tb_sanity_done(&s);
	sanity_of(5, all_layer0, NULL, 0, NULL, 0, &s);
	assert_int_equal(s.dup_layers[1], N_LAYERS);
	warning(&s, "dump-duplicate");
	tb_sanity_done(&s);
}

/* Layers of one side that are all zeros are equal for an empty buffer's
 * reason, not a hook's: no duplicate. */
static void test_constant_layers_are_no_duplicates(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096], name[64];
	int64_t sh[3] = {1, 8, 16};
	float zero[128] = {0};
	tu_compared f;
	tb_sanity s;
	tb_err err;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	for (int l = 0; l < 4; l++) {
		float *x = tu_ramp(128, 1.0f + (float)l);
		snprintf(name, sizeof name, "layers.%d.block", l);
		tu_put(ref, name, TB_DT_F32, 3, sh, x);
		tu_put(cand, name, TB_DT_F32, 3, sh, zero);
		free(x);
	}
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tb_sanity_check(&f.s, f.res, &s, &err), 0);
	assert_int_equal(s.dup_layers[1], 0);
	assert_int_equal(s.n_warnings, 0);
	tb_sanity_done(&s);
	tu_compared_done(&f);
}

static void test_offset_previous(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, previous_layer, NULL, 0, NULL, 0, &s);
	assert_int_equal(s.offset, -1);
	/* Layers 1-5 hold their predecessor; layer 0 has no embed to match. */
	assert_near(s.offset_frac, 5.0 / 6, 1e-12);
	assert_int_equal(s.dup_layers[1], 0);
	assert_contains(warning(&s, "dump-offset")->text, "matches reference layer N-1 far better than layer N in 83% of layers");
	tb_sanity_done(&s);
}

static void test_offset_next(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, next_layer, NULL, 0, NULL, 0, &s);
	assert_int_equal(s.offset, 1);
	assert_near(s.offset_frac, 5.0 / 6, 1e-12);
	assert_contains(warning(&s, "dump-offset")->text, "reference layer N+1");
	tb_sanity_done(&s);
}

static const float ids[8] = {11, 12, 13, 14, 15, 16, 17, 18};

static void test_tokens_equal(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, same_layer, ids, 8, ids, 8, &s);
	assert_true(s.tokens_compared);
	assert_int_equal(s.tokens_differ, 0);
	assert_int_equal(s.first_token_diff, -1);
	assert_int_equal(s.n_warnings, 0);
	tb_sanity_done(&s);
}

static void test_tokens_differ(void **state)
{
	float cand[8];
	tb_sanity s;
	(void)state;

	memcpy(cand, ids, sizeof cand);
	cand[3] = 99;
	sanity_of(-1, same_layer, ids, 8, cand, 8, &s);
	assert_int_equal(s.tokens_differ, 1);
	assert_int_equal(s.first_token_diff, 3);
	assert_int_equal(s.token_shift, 0);
	assert_string_equal(warning(&s, "tokenizer")->text,
			    "token ids differ at 1 of 8 positions, first at 3 (ref 14, cand 99)");
	tb_sanity_done(&s);
}

/* The candidate's ids are the reference's moved one place left (a BOS lost). */
static void test_tokens_shifted(void **state)
{
	float cand[8];
	tb_sanity s;
	(void)state;

	memcpy(cand, ids + 1, 7 * sizeof *cand);
	cand[7] = 19;
	sanity_of(-1, same_layer, ids, 8, cand, 8, &s);
	assert_int_equal(s.tokens_differ, 8);
	assert_int_equal(s.first_token_diff, 0);
	assert_int_equal(s.token_shift, 1);
	assert_contains(warning(&s, "tokenizer")->text, "the candidate's ids are the reference's shifted by -1");
	tb_sanity_done(&s);
}

static void test_tokens_length(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, same_layer, ids, 8, ids, 7, &s);
	assert_int_equal(s.tokens_differ, 1);
	assert_string_equal(warning(&s, "tokenizer")->text, "token ids differ: 8 in the reference, 7 in the candidate");
	tb_sanity_done(&s);
}

/* One side without ids: nothing to compare, no warning. */
static void test_tokens_one_side(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, same_layer, ids, 8, NULL, 0, &s);
	assert_false(s.tokens_compared);
	assert_int_equal(s.n_warnings, 0);
	tb_sanity_done(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_pair),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_constant_layers_are_no_duplicates),
		cmocka_unit_test(test_offset_previous),
		cmocka_unit_test(test_offset_next),
		cmocka_unit_test(test_tokens_equal),
		cmocka_unit_test(test_tokens_differ),
		cmocka_unit_test(test_tokens_shifted),
		cmocka_unit_test(test_tokens_length),
		cmocka_unit_test(test_tokens_one_side),
	};
	return cmocka_run_group_tests_name("sanity", tests, NULL, NULL);
}
