#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose/features.h"
#include "diagnose/rules.h"
#include "testutil.h"

static void blank(double *f)
{
	for (int i = 0; i < TB_F_COUNT; i++)
		f[i] = NAN;
}

static tb_ruleset *load(const char *json)
{
	tb_ruleset *rs = tb_ruleset_new();
	tb_err err;

	if (tb_ruleset_add_text(rs, json, strlen(json), "test.json", &err) < 0)
		fail_msg("load: %s", err.msg);
	return rs;
}

static void test_conditions_and_scores(void **state)
{
	tb_ruleset *rs = load("{\"rules\": ["
			      "{\"id\": \"rope-style\", \"weight\": 0.8, \"require\": [\"at_attn\", \"pos0_ok\", \"bad_pos_frac >= 0.5\"],"
			      " \"prefer\": [\"cosine < 0.9\", {\"if\": \"log_norm_ratio in [0, 0.1]\", \"weight\": 3}],"
			      " \"why\": \"cos {cosine:.2f} at {cell}, layer {layer}, missing {pos1_rel}\", \"look_at\": \"rope in {ref_name}\"},"
			      "{\"id\": \"softmax-scale\", \"weight\": 0.9, \"require\": [\"at_attn\"], \"unless\": [\"!pos0_ok\", \"cosine <= 0.5\"],"
			      " \"why\": \"w\", \"look_at\": \"l\"},"
			      "{\"id\": \"rope-style\", \"weight\": 0.3, \"require\": [\"at_attn\"], \"why\": \"weaker\", \"look_at\": \"l\"}"
			      "]}");
	tb_rule_ctx ctx = {"L0.attn", "attn", "model.layers.0.self_attn", "layers.0.attn", 0, NULL, NULL, NULL, NULL};
	double f[TB_F_COUNT];
	tb_causes c;
	tb_err err;
	(void)state;

	blank(f);
	f[TB_F_AT_ATTN] = 1;
	f[TB_F_POS0_OK] = 1;
	f[TB_F_BAD_POS_FRAC] = 0.75;
	f[TB_F_COSINE] = 0.4;
	f[TB_F_LOG_NORM_RATIO] = 0.02;
	assert_int_equal(tb_ruleset_eval(rs, f, NULL, NULL, &ctx, 5, &c, &err), 0);
	/* softmax-scale vetoed by "cosine <= 0.5"; rope-style keeps its best score */
	assert_int_equal(c.n, 1);
	assert_string_equal(c.v[0].id, "rope-style");
	assert_near(c.v[0].score, 0.8, 1e-12);
	assert_string_equal(c.v[0].why, "cos 0.40 at L0.attn, layer 0, missing n/a");
	assert_string_equal(c.v[0].look_at, "rope in model.layers.0.self_attn");
	tb_causes_done(&c);

	f[TB_F_COSINE] = 0.95; /* first prefer fails, second holds: 0.8 * (1+3)/(1+4) */
	assert_int_equal(tb_ruleset_eval(rs, f, NULL, NULL, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.v[0].id, "softmax-scale");
	assert_near(c.v[0].score, 0.9, 1e-12);
	assert_near(c.v[1].score, 0.8 * 4 / 5, 1e-12);
	tb_causes_done(&c);

	f[TB_F_POS0_OK] = NAN; /* unknown: "pos0_ok" fails and "!pos0_ok" too */
	assert_int_equal(tb_ruleset_eval(rs, f, NULL, NULL, &ctx, 1, &c, &err), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.v[0].id, "softmax-scale");
	tb_causes_done(&c);
	f[TB_F_AT_ATTN] = 0;
	assert_int_equal(tb_ruleset_eval(rs, f, NULL, NULL, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 0);
	tb_causes_done(&c);
	tb_ruleset_free(rs);
}

/* Estimated features (a sketch's cosine) span an interval: a rule that
 * matches at the estimate keeps its score, one that matches only
 * elsewhere in the span gets half its best there, and both say the
 * estimates cannot settle it when they match in part of the span; a rule
 * that holds over the whole span says nothing more. */
static void test_spanned_estimates(void **state)
{
	tb_ruleset *rs = load("{\"rules\": ["
			      "{\"id\": \"qk-norm\", \"weight\": 0.8, \"require\": [\"cosine >= 0.94\"], \"why\": \"kept\", \"look_at\": \"l\"},"
			      "{\"id\": \"rope-style\", \"weight\": 0.86, \"require\": [\"at_attn\"], \"unless\": [\"cosine >= 0.94\"],"
			      " \"why\": \"turned\", \"look_at\": \"l\"},"
			      "{\"id\": \"rope-theta\", \"weight\": 0.5, \"require\": [\"cosine > 0.5\"], \"why\": \"drift\", \"look_at\": \"l\"},"
			      "{\"id\": \"partial-rope\", \"weight\": 0.6, \"require\": [\"cosine in [0.8, 0.9]\"], \"why\": \"part\", \"look_at\": \"l\"}"
			      "]}");
	tb_rule_ctx ctx = {"L0.attn", "attn", NULL, NULL, 0, NULL, NULL, NULL, NULL};
	double f[TB_F_COUNT], lo[TB_F_COUNT], hi[TB_F_COUNT];
	tb_causes c;
	tb_err err;
	(void)state;

	blank(f);
	f[TB_F_AT_ATTN] = 1;
	f[TB_F_COSINE] = 0.941;
	memcpy(lo, f, sizeof lo);
	memcpy(hi, f, sizeof hi);
	assert_int_equal(tb_ruleset_eval(rs, f, lo, hi, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 2); /* equal spans: the estimates alone */
	assert_string_equal(c.v[0].id, "qk-norm");
	assert_string_equal(c.v[0].why, "kept");
	tb_causes_done(&c);

	lo[TB_F_COSINE] = 0.7;
	hi[TB_F_COSINE] = 0.95;
	assert_int_equal(tb_ruleset_eval(rs, f, lo, hi, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 4); /* partial-rope inside the span only, between its ends and the estimate */
	assert_string_equal(c.v[3].id, "partial-rope");
	assert_near(c.v[3].score, 0.3, 1e-12);
	assert_string_equal(c.v[0].id, "qk-norm");
	assert_near(c.v[0].score, 0.8, 1e-12);
	assert_string_equal(c.v[0].why, "kept; a sketch's estimates cannot settle it: cosine 0.7 to 0.95");
	assert_string_equal(c.v[1].id, "rope-theta");
	assert_string_equal(c.v[1].why, "drift");
	assert_string_equal(c.v[2].id, "rope-style");
	assert_near(c.v[2].score, 0.43, 1e-12);
	assert_string_equal(c.v[2].why, "turned; a sketch's estimates cannot settle it: cosine 0.7 to 0.95");
	tb_causes_done(&c);

	hi[TB_F_COSINE] = 0.941; /* the estimate at the span's top, 0.94 inside */
	lo[TB_F_COSINE] = 0.94;
	assert_int_equal(tb_ruleset_eval(rs, f, lo, hi, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 2); /* cosine >= 0.94 all through: rope-style never */
	assert_string_equal(c.v[0].why, "kept");
	tb_causes_done(&c);
	tb_ruleset_free(rs);

	/* The best score elsewhere in the span is where a prefer condition
	 * holds too, though no require or unless threshold and neither end of
	 * the span lies there: 0.5 * 0.6 * (1 + 1) / (1 + 1). */
	rs = load("{\"rules\": [{\"id\": \"mlp-activation\", \"weight\": 0.6, \"require\": [\"cosine >= 0.9\"],"
		  " \"prefer\": [\"cosine in [0.92, 0.93]\"], \"why\": \"act\", \"look_at\": \"l\"}]}");
	f[TB_F_COSINE] = 0.85;
	lo[TB_F_COSINE] = 0.8;
	hi[TB_F_COSINE] = 0.96;
	assert_int_equal(tb_ruleset_eval(rs, f, lo, hi, &ctx, 5, &c, &err), 0);
	assert_int_equal(c.n, 1);
	assert_near(c.v[0].score, 0.3, 1e-12);
	tb_causes_done(&c);
	tb_ruleset_free(rs);
}

static void rule_error(const char *json, const char *want)
{
	tb_ruleset *rs = tb_ruleset_new();
	tb_err err;

	assert_int_equal(tb_ruleset_add_text(rs, json, strlen(json), "bad.json", &err), -1);
	assert_string_equal(err.file, "bad.json");
	if (!strstr(err.msg, want))
		fail_msg("rules %s: message '%s' lacks '%s'", json, err.msg, want);
	assert_int_equal(tb_ruleset_count(rs), 0);
	tb_ruleset_free(rs);
}

#define OK_RULE "{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"why\": \"w\", \"look_at\": \"l\"}"

static void test_errors(void **state)
{
	(void)state;
	rule_error("{", "not valid JSON");
	rule_error("[]", "\"rules\" list");
	rule_error("{\"rules\": [1]}", "rule 0 is not an object");
	rule_error("{\"rules\": [" OK_RULE ", {\"id\": \"Bad Id\"}]}", "rule 1: \"id\"");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 2, \"require\": [\"at_attn\"], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "rule 0 (x): \"weight\"");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_atn\"], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "rule 0: require[0]: unknown feature 'at_atn'");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\", \"cosine <\"], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "rule 0: require[1]: 'cosine <': expected a number");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"cosine in [2, 1]\"], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "expected 'feature in [a, b]'");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"cosine ~ 1\"], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "expected an operator");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "at least one condition");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"why\": \"{nope}\", \"look_at\": \"l\"}]}",
		   "rule 0 (x): \"why\": template names unknown feature 'nope'");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"why\": \"{cosine:%s}\", \"look_at\": \"l\"}]}",
		   "bad format");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"why\": \"w\"}]}",
		   "\"look_at\" must be");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"why\": \"w\", \"look_at\": \"l\", \"when\": 1}]}",
		   "rule 0: unknown field \"when\"");
	rule_error("{\"rules\": [{\"id\": \"x\", \"weight\": 1, \"require\": [\"at_attn\"], \"prefer\": [{\"if\": \"deep\", \"weight\": -1}], \"why\": \"w\", \"look_at\": \"l\"}]}",
		   "prefer[0]: \"weight\"");
}

/* The shipped table loads, names only the ids of tbisect-rules(5) CAUSE IDS, and covers all of them. */
static void test_shipped_table(void **state)
{
	const char *dir = getenv("TBISECT_DATADIR");
	char path[4096];
	tb_ruleset *rs = tb_ruleset_new();
	cJSON *root;
	FILE *f;
	char *text;
	long n;
	tb_err err;
	(void)state;

	assert_non_null(dir);
	snprintf(path, sizeof path, "%s/rules.json", dir);
	assert_int_equal(tb_ruleset_add_file(rs, path, &err), 0);
	assert_true(tb_ruleset_count(rs) >= tb_n_cause_ids);
	tb_ruleset_free(rs);

	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = malloc((size_t)n + 1);
	assert_int_equal(fread(text, 1, (size_t)n, f), n);
	text[n] = 0;
	fclose(f);
	root = cJSON_Parse(text);
	assert_non_null(root);
	bool covered[64] = {false};
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(root, "rules")) {
		const char *id = cJSON_GetObjectItem(r, "id")->valuestring;
		size_t k;
		for (k = 0; k < tb_n_cause_ids && strcmp(tb_cause_ids[k], id); k++)
			;
		if (k == tb_n_cause_ids)
			fail_msg("shipped rule id '%s' is not a cause id of tbisect-rules(5)", id);
		covered[k] = true;
	}
	for (size_t k = 0; k < tb_n_cause_ids; k++)
		if (!covered[k])
			fail_msg("no shipped rule for cause id '%s'", tb_cause_ids[k]);
	cJSON_Delete(root);
	free(text);
}

static void test_builtin_copy_matches(void **state)
{
	tb_ruleset *a = tb_ruleset_new(), *b = tb_ruleset_new();
	char path[4096];
	tb_err err;
	(void)state;

	/* With no data dir the compiled-in copy is used; it must be the same table. */
	snprintf(path, sizeof path, "%s/rules.json", getenv("TBISECT_DATADIR"));
	assert_int_equal(tb_ruleset_add_file(a, path, &err), 0);
	setenv("TBISECT_DATADIR", "/nonexistent", 1);
	assert_int_equal(tb_ruleset_add_standard(b, NULL, &err), 0);
	/* an installed copy in pkgdatadir would win; a build tree has none */
	if (!strcmp(tb_ruleset_shipped_source(b), "built-in"))
		assert_int_equal(tb_ruleset_count(a), tb_ruleset_count(b));
	else
		assert_non_null(strstr(tb_ruleset_shipped_source(b), "rules.json"));
	tb_ruleset_free(a);
	tb_ruleset_free(b);
}

static void test_feature_table(void **state)
{
	(void)state;
	for (int i = 0; i < TB_F_COUNT; i++) {
		assert_int_equal(tb_feature_lookup(tb_feature_table[i].name), i);
		assert_true(strlen(tb_feature_table[i].meaning) > 10);
	}
	assert_int_equal(tb_feature_lookup("bogus"), -1);
}

/* tbisect-rules(5) documents every feature and cause id. */
static void test_man_page_lists_everything(void **state)
{
	const char *top = getenv("top_srcdir");
	char path[4096], line[512];
	bool seen_f[TB_F_COUNT] = {false}, seen_c[64] = {false};
	FILE *f;
	(void)state;

	snprintf(path, sizeof path, "%s/man/tbisect-rules.5", top ? top : ".");
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		char name[128];
		if (sscanf(line, ".It Li %127s", name) != 1)
			continue;
		for (int i = 0; i < TB_F_COUNT; i++)
			seen_f[i] = seen_f[i] || !strcmp(name, tb_feature_table[i].name);
		for (size_t k = 0; k < tb_n_cause_ids; k++)
			seen_c[k] = seen_c[k] || !strcmp(name, tb_cause_ids[k]);
	}
	fclose(f);
	for (int i = 0; i < TB_F_COUNT; i++)
		if (!seen_f[i])
			fail_msg("feature '%s' is not documented in %s", tb_feature_table[i].name, path);
	for (size_t k = 0; k < tb_n_cause_ids; k++)
		if (!seen_c[k])
			fail_msg("cause id '%s' is not documented in %s", tb_cause_ids[k], path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conditions_and_scores), cmocka_unit_test(test_spanned_estimates), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_shipped_table),         cmocka_unit_test(test_builtin_copy_matches),
		cmocka_unit_test(test_feature_table),         cmocka_unit_test(test_man_page_lists_everything),
	};
	return cmocka_run_group_tests_name("rules", tests, NULL, NULL);
}
