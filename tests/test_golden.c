/*
 * test_golden: MaxText golden logits files: JSON lines as the generator's
 * jsonlines writer spells them (bare NaN/Infinity, huge lines, several
 * records picked with --record), and the pickle variant at protocols 2, 4
 * and 5 (numpy _reconstruct and _frombuffer), all through tb_tree_open.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "testutil.h"
#include "formats/tree.h"

#define S 3
#define V 4
#define H 2

static float logits[2][S * V], hid[2][S * H];
static const int64_t toks[2][S] = {{1, 15043, 3186}, {1, 2, 3}};

static void make_records(dw_golden_rec recs[2], const float *const hidden[2][2])
{
	for (int r = 0; r < 2; r++) {
		for (int i = 0; i < S * V; i++)
			logits[r][i] = (float)(i - 5) / 8.0f + (float)r * 100.0f;
		for (int i = 0; i < S * H; i++)
			hid[r][i] = (float)i * 0.1f - (float)r;
		recs[r] = (dw_golden_rec){.prompt = r ? "second" : "first", .tokens = toks[r], .n_tokens = S,
					  .logits = logits[r], .seq = S, .vocab = V, .hidden = hidden[r],
					  .n_layers = 2, .hid = H};
	}
	logits[0][1] = NAN;
	logits[0][2] = INFINITY;
	logits[0][3] = -INFINITY;
	logits[0][4] = -2.3841855067985307e-07f;
}

static void expect_record(const char *path, int record)
{
	tb_open_opts opts;
	tb_tree *tree;
	float h2[S * H];

	tb_open_opts_init(&opts);
	opts.record = record;
	tree = tu_open(path, &opts);
	assert_int_equal(tree->n_tensors, 3);
	assert_int_equal(tu_tensor(tree, "logits")->shape[1], V);
	tu_expect_values(tu_tensor(tree, "logits"), logits[record], S * V);
	tu_expect_values(tu_tensor(tree, "layer_hidden_states[0]"), hid[record], S * H);
	for (int i = 0; i < S * H; i++)
		h2[i] = hid[record][i] * 2.0f;
	tu_expect_values(tu_tensor(tree, "layer_hidden_states[1]"), h2, S * H);
	assert_int_equal(tree->n_tokens, S);
	for (int i = 0; i < S; i++)
		assert_int_equal(tree->tokens[i], toks[record][i]);
	tb_tree_free(tree);
}

static void test_jsonl_and_pickles(void **state)
{
	const char *dir = tu_tmpdir();
	static float h1[2][S * H];
	const float *hidden[2][2];
	dw_golden_rec recs[2];
	(void)state;

	for (int r = 0; r < 2; r++) {
		hidden[r][0] = hid[r];
		hidden[r][1] = h1[r];
	}
	make_records(recs, hidden);
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < S * H; i++)
			h1[r][i] = hid[r][i] * 2.0f;
	assert_int_equal(dw_write_golden_jsonl(tu_path(dir, "g.jsonl"), recs, 2), 0);
	expect_record(tu_path(dir, "g.jsonl"), 0);
	expect_record(tu_path(dir, "g.jsonl"), 1);
	for (int proto = 2; proto <= 5; proto += proto == 2 ? 2 : 1) {
		char name[32];
		snprintf(name, sizeof name, "p%d.jsonl", proto);
		assert_int_equal(dw_write_golden_pickle(tu_path(dir, name), recs, 2, proto), 0);
		expect_record(tu_path(dir, name), 0);
		expect_record(tu_path(dir, name), 1);
	}
}

static void expect_bad(const char *dir, const char *name, const char *text, const char *want)
{
	tu_write_str(tu_path(dir, name), text);
	tu_expect_refused(tu_path(dir, name), NULL, NULL, want);
}

static void test_jsonl_refused(void **state)
{
	const char *dir = tu_tmpdir();
	tb_open_opts opts;
	char *deep;
	(void)state;

	expect_bad(dir, "ragged.jsonl", "{\"logits\": [[1.0, 2.0], [3.0]]}\n", "ragged array: 1 items where 2 were expected");
	expect_bad(dir, "ragged2.jsonl", "{\"logits\": [[1.0], 2.0]}\n", "ragged array: a number where an array was expected");
	expect_bad(dir, "ragged3.jsonl", "{\"logits\": [1.0, [2.0]]}\n", "ragged array: an array where a number was expected");
	expect_bad(dir, "num.jsonl", "{\"logits\": [1.0.5]}\n", "expected ',' or ']' in an array");
	expect_bad(dir, "num2.jsonl", "{\"logits\": [nan]}\n", "expected a number");
	expect_bad(dir, "num3.jsonl", "{\"logits\": [1e]}\n", "expected a number");
	expect_bad(dir, "dup.jsonl", "{\"logits\": [1.0], \"logits\": [2.0]}\n", "duplicate key \"logits\"");
	expect_bad(dir, "none.jsonl", "{\"prompt\": \"x\", \"tokens\": [1]}\n", "no \"logits\" or \"layer_hidden_states\"");
	expect_bad(dir, "tok.jsonl", "{\"tokens\": [1.5], \"logits\": [1.0]}\n", "expected ',' or ']' in an array");
	expect_bad(dir, "tok2.jsonl", "{\"tokens\": [99999999999999999999], \"logits\": [1.0]}\n", "token id 99999999999999999999 is out of range");
	expect_bad(dir, "str.jsonl", "{\"prompt\": \"unterminated, \"logits\": [1.0]}\n", "expected ',' or '}' after a value");
	expect_bad(dir, "trail.jsonl", "{\"logits\": [1.0]} x\n", "trailing bytes after the record");
	expect_bad(dir, "open.jsonl", "{\"logits\": [1.0, 2.0\n", "record ends inside an array");
	expect_bad(dir, "notobj.jsonl", "[1, 2]\n", "record is not a JSON object");
	expect_bad(dir, "empty.jsonl", "\n\n", "golden file holds no records");
	expect_bad(dir, "long.jsonl", "{\"logits\": [1.00000000000000000000000000000000000000000000000000000000000000000000]}\n",
		   "number longer than 64 characters");
	deep = malloc(400);
	strcpy(deep, "{\"x\": ");
	for (int i = 0; i < 150; i++)
		strcat(deep, "[");
	strcat(deep, "]}\n");
	expect_bad(dir, "deep.jsonl", deep, "nested deeper than 128");
	free(deep);
	tu_write_str(tu_path(dir, "two.jsonl"), "{\"logits\": [1.0]}\n{\"logits\": [2.0]}\n");
	tb_open_opts_init(&opts);
	opts.record = 2;
	tu_expect_refused(tu_path(dir, "two.jsonl"), &opts, NULL, "golden file holds 2 records; --record 2 is out of range");
	/* A pickle with a payload: refused by name, nothing run. */
	tu_write(tu_path(dir, "evil.jsonl"), "\x80\x02" "cposix\nsystem\nX\x02\x00\x00\x00id\x85R.", 27);
	tu_expect_refused(tu_path(dir, "evil.jsonl"), NULL, NULL, "pickle global posix.system is not allowed");
}

/* One record of S x V numbers on one line: parsed in one pass. */
static void test_huge_line(void **state)
{
	const char *dir = tu_tmpdir();
	const int64_t seq = 16, vocab = 100000;
	float *x = malloc((size_t)(seq * vocab) * sizeof *x);
	dw_golden_rec rec = {.prompt = "big", .logits = x, .seq = seq, .vocab = vocab};
	struct timespec t0, t1;
	tb_tree *tree;
	tb_tensor *t;
	float got[2];
	tb_err err;
	(void)state;

	for (int64_t i = 0; i < seq * vocab; i++)
		x[i] = (float)((i * 7919) % 10007) * -3.0517578125e-05f;
	assert_int_equal(dw_write_golden_jsonl(tu_path(dir, "big.jsonl"), &rec, 1), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tree = tu_open(tu_path(dir, "big.jsonl"), NULL);
	t = tu_tensor(tree, "logits");
	assert_int_equal(t->numel, (uint64_t)(seq * vocab));
	assert_int_equal(tb_tensor_acquire(t, &err), 0);
	tb_tensor_read_f32(t, 123457, 1, got);
	tb_tensor_read_f32(t, t->numel - 1, 1, got + 1);
	tb_tensor_release(t);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(got[0] == x[123457]);
	assert_true(got[1] == x[seq * vocab - 1]);
	print_message("# 1.6M-number line indexed and parsed in %.2f s\n",
		      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
	tb_tree_free(tree);
	free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jsonl_and_pickles),
		cmocka_unit_test(test_jsonl_refused),
		cmocka_unit_test(test_huge_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
