#include "config.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "run/report.h"
#include "model/session.h"
#include "testutil.h"

static void put(const char *dir, const char *name, int ndim, const int64_t *shape, const float *x, size_t n)
{
	char rel[256];

	snprintf(rel, sizeof rel, "%s.npy", name);
	assert_int_equal(dw_write_npy(tu_path(dir, rel), 1, "<f4", false, ndim, shape, x, n * 4), 0);
}

typedef struct built {
	tb_session s;
	tb_result *res;
	cJSON *json;
	char *text;
} built;

static void build(built *b, const char *ref, const char *cand)
{
	tb_compare_opts o;
	tb_report rep = {0};
	tb_err err;

	tb_compare_opts_init(&o);
	assert_int_equal(tb_session_open(&b->s, ref, cand, NULL, NULL, &err), 0);
	assert_int_equal(tb_compare(b->s.pairing, &o, &b->res, &err), 0);
	rep.ref_path = ref;
	rep.cand_path = cand;
	rep.pairing = b->s.pairing;
	rep.result = b->res;
	rep.diag = NULL;
	rep.show_features = false;
	b->text = tb_report_json(&rep);
	assert_non_null(b->text);
	b->json = cJSON_Parse(b->text);
	assert_non_null(b->json);
}

static void unbuild(built *b)
{
	cJSON_Delete(b->json);
	free(b->text);
	tb_result_free(b->res);
	tb_session_done(&b->s);
}

static const cJSON *get(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!v)
		fail_msg("missing key '%s'", k);
	return v;
}

static void two_trees(char *ref, char *cand, size_t size)
{
	const char *dir = tu_tmpdir();
	int64_t sh[2] = {3, 4}, lsh[2] = {3, 5};
	float x[12], y[12], z[12] = {0}, l[15], lc[15];

	for (int i = 0; i < 12; i++) {
		x[i] = (float)(i + 1);
		y[i] = i == 5 ? 100.0f : (float)(i + 1);
	}
	for (int i = 0; i < 15; i++)
		l[i] = lc[i] = (float)(i % 5);
	lc[10] = 9;
	snprintf(ref, size, "%s/ref", dir);
	snprintf(cand, size, "%s/cand", dir);
	put(ref, "model.embed_tokens", 2, sh, x, 12);
	put(cand, "model.embed_tokens", 2, sh, x, 12);
	put(ref, "model.layers.0.self_attn", 2, sh, x, 12);
	put(cand, "model.layers.0.self_attn", 2, sh, y, 12);
	put(ref, "model.layers.0.mlp", 2, sh, z, 12); /* zero reference: rel_l2 is infinite */
	put(cand, "model.layers.0.mlp", 2, sh, x, 12);
	put(ref, "model.layers.0", 2, sh, x, 12);
	put(ref, "lm_head", 2, lsh, l, 15);
	put(cand, "lm_head", 2, lsh, lc, 15);
	put(cand, "extra_tensor", 2, sh, x, 12);
}

static void test_json_schema(void **state)
{
	char ref[4096], cand[4096];
	const cJSON *cells, *c, *fd, *tol, *unp;
	built b;
	(void)state;

	two_trees(ref, cand, sizeof ref);
	build(&b, ref, cand);
	assert_string_equal(get(b.json, "tool")->valuestring, "tbisect");
	assert_int_equal(get(b.json, "schema")->valueint, 1);
	assert_string_equal(get(b.json, "ref")->valuestring, ref);
	assert_string_equal(get(b.json, "cand")->valuestring, cand);
	tol = get(b.json, "tolerance");
	assert_near(get(tol, "atol")->valuedouble, 1e-4, 0);
	assert_near(get(tol, "rtol")->valuedouble, 1e-4, 0);
	assert_near(get(tol, "diverge")->valuedouble, 1e-2, 0);
	assert_near(get(tol, "max_kl")->valuedouble, 0.015, 0);
	assert_string_equal(get(b.json, "verdict")->valuestring, "diverged");
	fd = get(b.json, "first_divergence");
	assert_int_equal(get(fd, "layer")->valueint, 0);
	assert_string_equal(get(fd, "tap")->valuestring, "attn");
	assert_string_equal(get(fd, "ref_name")->valuestring, "model.layers.0.self_attn");
	assert_string_equal(get(fd, "cand_name")->valuestring, "model.layers.0.self_attn");
	assert_int_equal(get(fd, "first_bad_position")->valueint, 1);
	assert_true(cJSON_IsArray(get(b.json, "causes")));
	cells = get(b.json, "cells");
	assert_int_equal(cJSON_GetArraySize(cells), 5);
	/* forward order: embed, L0.attn, L0.mlp, L0.block, logits */
	c = cJSON_GetArrayItem(cells, 0);
	assert_true(cJSON_IsNull(get(c, "layer")));
	assert_string_equal(get(c, "tap")->valuestring, "embed");
	assert_string_equal(get(c, "status")->valuestring, "match");
	assert_true(cJSON_IsArray(get(c, "shape")));
	assert_int_equal(cJSON_GetArrayItem(get(c, "shape"), 1)->valueint, 4);
	static const char *const numeric[] = {"max_abs", "mean_abs", "rel_l2", "cosine", "norm_ratio", "allclose_frac"};
	for (size_t k = 0; k < 6; k++)
		assert_true(cJSON_IsNumber(get(c, numeric[k])));
	assert_int_equal(cJSON_GetArraySize(get(c, "nan")), 2);
	assert_int_equal(cJSON_GetArraySize(get(c, "inf")), 2);
	assert_true(cJSON_IsNull(get(c, "first_bad_position")));
	c = cJSON_GetArrayItem(cells, 1);
	assert_string_equal(get(c, "status")->valuestring, "diverged");
	assert_near(get(c, "max_abs")->valuedouble, 94, 0);
	c = cJSON_GetArrayItem(cells, 2);
	assert_string_equal(get(c, "tap")->valuestring, "mlp");
	assert_true(cJSON_IsNull(get(c, "rel_l2"))); /* infinite: null, never a bare token */
	assert_true(cJSON_IsNull(get(c, "norm_ratio")));
	c = cJSON_GetArrayItem(cells, 3);
	assert_string_equal(get(c, "tap")->valuestring, "block");
	assert_string_equal(get(c, "status")->valuestring, "missing");
	assert_true(cJSON_IsNull(get(c, "cand_name")));
	assert_true(cJSON_IsNull(get(c, "rel_l2")));
	c = cJSON_GetArrayItem(cells, 4);
	assert_string_equal(get(c, "tap")->valuestring, "logits");
	const cJSON *lg = get(b.json, "logits");
	assert_true(cJSON_IsNumber(get(lg, "kl_mean")));
	assert_true(cJSON_IsNumber(get(lg, "kl_last")));
	assert_near(get(lg, "top1_agree")->valuedouble, 2 / 3.0, 1e-12);
	assert_true(cJSON_IsNumber(get(lg, "top5_overlap")));
	unp = get(b.json, "unpaired");
	assert_int_equal(cJSON_GetArraySize(get(unp, "ref")), 1);
	assert_string_equal(cJSON_GetArrayItem(get(unp, "ref"), 0)->valuestring, "model.layers.0");
	assert_int_equal(cJSON_GetArraySize(get(unp, "cand")), 1);
	assert_string_equal(cJSON_GetArrayItem(get(unp, "cand"), 0)->valuestring, "extra_tensor");
	assert_null(strstr(b.text, "NaN"));
	assert_null(strstr(b.text, "Infinity"));
	assert_null(strstr(b.text, ": nan"));
	assert_null(strstr(b.text, ": inf"));
	unbuild(&b);
}

static void test_json_match(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[1] = {4};
	float x[4] = {1, 2, 3, 4};
	built b;
	(void)state;

	snprintf(ref, sizeof ref, "%s/r", dir);
	snprintf(cand, sizeof cand, "%s/c", dir);
	put(ref, "layers.0.attn", 1, sh, x, 4);
	put(cand, "layers.0.attn", 1, sh, x, 4);
	build(&b, ref, cand);
	assert_string_equal(get(b.json, "verdict")->valuestring, "match");
	assert_true(cJSON_IsNull(get(b.json, "first_divergence")));
	assert_int_equal(cJSON_GetArraySize(get(b.json, "causes")), 0);
	assert_true(cJSON_IsNull(get(b.json, "logits")));
	unbuild(&b);
}

static void test_text_report(void **state)
{
	char ref[4096], cand[4096], *buf = NULL;
	size_t len = 0;
	tb_report rep = {0};
	built b;
	FILE *f;
	(void)state;

	two_trees(ref, cand, sizeof ref);
	build(&b, ref, cand);
	f = open_memstream(&buf, &len);
	rep.ref_path = ref;
	rep.cand_path = cand;
	rep.pairing = b.s.pairing;
	rep.result = b.res;
	rep.diag = NULL;
	rep.show_features = false;
	assert_int_equal(tb_report_text(f, &rep), 0);
	fclose(f);
	assert_non_null(strstr(buf, "first divergence: L0.attn"));
	assert_non_null(strstr(buf, "first bad position: 1 of 3"));
	assert_non_null(strstr(buf, "verdict: diverged"));
	assert_non_null(strstr(buf, "unpaired in cand:\n  extra_tensor"));
	/* the grid: L0 row shows diverged attn, missing-in-cand block as '-' */
	assert_non_null(strstr(buf, "\nL0          X    X   -\n"));
	for (char *p = buf; (p = strchr(p, '\n')); p++)
		if (p > buf && p[-1] == ' ')
			fail_msg("trailing space in text report");
	free(buf);
	unbuild(&b);
}

static void test_index_format(void **state)
{
	int64_t sh[3] = {2, 3, 4};
	char buf[64];
	(void)state;

	tb_index_format(23, 3, sh, buf, sizeof buf);
	assert_string_equal(buf, "[1, 2, 3]");
	tb_index_format(5, 3, sh, buf, sizeof buf);
	assert_string_equal(buf, "[0, 1, 1]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_schema),
		cmocka_unit_test(test_json_match),
		cmocka_unit_test(test_text_report),
		cmocka_unit_test(test_index_format),
	};
	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
