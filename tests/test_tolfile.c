#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "compare/tolfile.h"

static tb_tolfile *load(const char *json)
{
	const char *path = tu_path(tu_tmpdir(), "tol.json");
	tb_tolfile *tf;
	tb_err err;

	tu_write_str(path, json);
	if (tb_tolfile_load(path, &tf, &err) < 0)
		fail_msg("%s", err.msg);
	return tf;
}

static void test_first_full_match_wins(void **state)
{
	tb_tolerance base, t;
	tb_cell c;
	tb_tolfile *tf;
	(void)state;

	tb_tolerance_default(&base);
	tf = load("[{\"match\": \"L[0-9]+\\\\.attn\", \"diverge\": 0.5},"
		  " {\"match\": \"L3\\\\..*\", \"atol\": 1, \"mode\": \"abs\"},"
		  " {\"match\": \"lm_head\", \"max_kl\": 2}]");
	tb_cell_parse("L3.attn", &c);
	t = base;
	assert_int_equal(tb_tolfile_apply(tf, &c, "model.layers.3.self_attn", NULL, &t), 0);
	assert_near(t.diverge, 0.5, 0);
	assert_near(t.atol, 1e-4, 0); /* unset fields keep the command line's */
	assert_false(t.absolute);
	tb_cell_parse("L3.mlp", &c);
	t = base;
	assert_int_equal(tb_tolfile_apply(tf, &c, NULL, NULL, &t), 1);
	assert_true(t.absolute);
	assert_near(t.atol, 1, 0);
	/* "L3.attn.q" is not a full match of the first entry's regex */
	tb_cell_parse("L13.attn.q", &c);
	t = base;
	assert_int_equal(tb_tolfile_apply(tf, &c, NULL, NULL, &t), -1);
	assert_near(t.diverge, 1e-2, 0);
	/* raw names match too */
	tb_cell_parse("logits", &c);
	assert_int_equal(tb_tolfile_apply(tf, &c, "lm_head", "logits", &t), 2);
	assert_near(t.max_kl, 2, 0);
	assert_string_equal(tb_tolfile_pattern(tf, 1), "L3\\..*");
	tb_tolfile_free(tf);

	tf = load("{\"tolerances\": [{\"match\": \"embed\", \"rtol\": 0.1}]}");
	tb_cell_parse("embed", &c);
	assert_int_equal(tb_tolfile_apply(tf, &c, NULL, NULL, &t), 0);
	assert_near(t.rtol, 0.1, 0);
	tb_tolfile_free(tf);
}

/* An entry sets only the fields it names: the others follow the tolerance
 * it is applied over, even one changed after the file was loaded. */
static void test_overlay_follows_the_base(void **state)
{
	tb_tolerance base, t;
	tb_cell c;
	tb_tolfile *tf;
	(void)state;

	tf = load("[{\"match\": \"L0\\\\.mlp\", \"diverge\": 0.5, \"mode\": \"abs\"}]");
	tb_cell_parse("L0.mlp", &c);
	tb_tolerance_default(&base);
	base.atol = 3;
	base.max_kl = 0.25;
	t = base;
	assert_int_equal(tb_tolfile_apply(tf, &c, NULL, NULL, &t), 0);
	assert_near(t.diverge, 0.5, 0);
	assert_true(t.absolute);
	assert_near(t.atol, 3, 0);
	assert_near(t.rtol, base.rtol, 0);
	assert_near(t.max_kl, 0.25, 0);
	tb_tolfile_free(tf);
}

static void tol_error(const char *json, const char *want)
{
	const char *path = tu_path(tu_tmpdir(), "bad.json");
	tb_tolfile *tf;
	tb_err err;

	tu_write_str(path, json);
	assert_int_equal(tb_tolfile_load(path, &tf, &err), -1);
	assert_null(tf);
	assert_string_equal(err.file, path);
	if (!strstr(err.msg, want))
		fail_msg("%s: '%s' lacks '%s'", json, err.msg, want);
}

static void test_errors(void **state)
{
	(void)state;
	tol_error("{", "not valid JSON");
	tol_error("{\"x\": 1}", "JSON list");
	tol_error("[{\"match\": \"a\"}, 3]", "entry 1 is not an object");
	tol_error("[{\"atol\": 1}]", "entry 0: \"match\" must be a string");
	tol_error("[{\"match\": \"(\"}]", "entry 0: \"match\":");
	tol_error("[{\"match\": \"a\", \"atol\": -1}]", "entry 0: \"atol\" must be a non-negative number");
	tol_error("[{\"match\": \"a\"}, {\"match\": \"b\", \"mode\": \"x\"}]", "entry 1: \"mode\"");
	tol_error("[{\"match\": \"a\", \"tol\": 1}]", "entry 0: unknown field \"tol\"");
	tol_error("[{\"match\": \"(a)\\\\1\"}]", "back-reference");
	tol_error("[{\"match\": \"L\\\\d+\\\\.attn\"}]", "entry 0: \"match\" uses \\d, a Perl class");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_full_match_wins),
		cmocka_unit_test(test_overlay_follows_the_base),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests_name("tolfile", tests, NULL, NULL);
}
