/*
 * test_polygraphy: Polygraphy RunResults JSON files written here (base64
 * npy arrays in the serializer's layout, and its legacy tags), read
 * through tb_tree_open: exact values in every dtype, the runner each side
 * reads, --record's iteration, module names for ONNX op outputs, and the
 * refusals, each naming the file.
 */
#include "config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "testutil.h"
#include "formats/tree.h"

/* How an output is encoded. */
typedef enum pg_kind {
	PG_LAZY,      /* {"values": ndarray, "polygraphy_class": "LazyArray"} (current) */
	PG_LAZY_OLD,  /* the same tagged "LazyNumpyArray" */
	PG_BARE,      /* the ndarray alone */
	PG_LEGACY,    /* "__polygraphy_encoded_<Type>" markers in place of polygraphy_class */
	PG_TENSOR,    /* a torch tensor: {"tensor": ..., "polygraphy_class": "Tensor"} */
	PG_RAW,       /* the JSON text in raw */
} pg_kind;

typedef struct pg_out {
	const char *name;
	pg_kind kind;
	tb_dtype dt;
	int ndim;
	int64_t shape[4];
	const char *raw; /* PG_RAW: the value as written */
} pg_out;

typedef struct pg_runner {
	const char *name;
	int n_iters;
} pg_runner;

/* ---- the generator ------------------------------------------------------ */

static void put(dw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(dw_buf *b, const char *fmt, ...)
{
	char text[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof text);
	assert_int_equal(dw_buf_add(b, text, (size_t)n), 0);
}

/* base64.b64encode: standard alphabet, '=' padding. */
static void put_b64(dw_buf *b, const unsigned char *p, size_t n)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
		char q[4] = {abc[v >> 18 & 63], abc[v >> 12 & 63], i + 1 < n ? abc[v >> 6 & 63] : '=',
			     i + 2 < n ? abc[v & 63] : '='};
		assert_int_equal(dw_buf_add(b, q, 4), 0);
	}
}

static size_t numel(const pg_out *o)
{
	size_t n = 1;

	for (int i = 0; i < o->ndim; i++)
		n *= (size_t)o->shape[i];
	return n;
}

/* The values output k of runner r holds at iteration it: distinct per
 * output, runner and iteration, exact in every dtype (bool: 0 and 1). */
static float *values(const pg_out *o, int k, int r, int it)
{
	size_t n = numel(o);
	float *x = malloc((n ? n : 1) * sizeof *x);

	assert_non_null(x);
	for (size_t i = 0; i < n; i++) {
		size_t v = i + 7 * (size_t)k + 3 * (size_t)r + 11 * (size_t)it;
		if (o->dt == TB_DT_BOOL)
			x[i] = (float)(v % 2);
		else if (!tb_dtype_is_float(o->dt))
			x[i] = (float)(v % 90) - 30.0f; /* fits int8 */
		else
			x[i] = (float)i - 3.25f + 100.0f * (float)k + 10.0f * (float)r + 1000.0f * (float)it;
	}
	return x;
}

/* The ndarray object of an output, tagged as kind says. */
static void put_ndarray(dw_buf *b, const pg_out *o, int k, int r, int it, bool legacy)
{
	float *x = values(o, k, r, it);
	size_t nbytes;
	void *data = dw_encode(x, numel(o), o->dt, &nbytes);
	dw_buf npy = {0};

	assert_int_equal(dw_npy_bytes(&npy, 1, dw_npy_descr(o->dt), false, o->ndim, o->shape, data, nbytes), 0);
	if (legacy)
		put(b, "{\"__polygraphy_encoded_ndarray\": \"polygraphy_serialized_json_type\", \"array\": \"");
	else
		put(b, "{\n    \"array\": \"");
	put_b64(b, npy.p, npy.n);
	put(b, legacy ? "\"}" : "\",\n    \"polygraphy_class\": \"ndarray\"\n}");
	dw_buf_free(&npy);
	free(data);
	free(x);
}

static void put_output(dw_buf *b, const pg_out *o, int k, int r, int it)
{
	put(b, "\"%s\": ", o->name);
	switch (o->kind) {
	case PG_LAZY:
	case PG_LAZY_OLD:
		put(b, "{\"values\": ");
		put_ndarray(b, o, k, r, it, false);
		put(b, ", \"polygraphy_class\": \"%s\"}", o->kind == PG_LAZY ? "LazyArray" : "LazyNumpyArray");
		break;
	case PG_BARE:
		put_ndarray(b, o, k, r, it, false);
		break;
	case PG_LEGACY:
		put(b, "{\"__polygraphy_encoded_LazyArray\": \"polygraphy_serialized_json_type\", \"values\": ");
		put_ndarray(b, o, k, r, it, true);
		put(b, "}");
		break;
	case PG_TENSOR:
		put(b, "{\"values\": {\"tensor\": \"UEsDBA==\", \"polygraphy_class\": \"Tensor\"}, \"polygraphy_class\": \"LazyArray\"}");
		break;
	case PG_RAW:
		put(b, "%s", o->raw);
		break;
	}
}

/* Write RunResults of these runners, each iteration holding every output. */
static void pg_write(const char *path, const pg_runner *rs, size_t n_rs, const pg_out *outs, size_t n_outs)
{
	dw_buf b = {0};

	put(&b, "{\n    \"lst\": [");
	for (size_t r = 0; r < n_rs; r++) {
		put(&b, "%s\n        [\"%s\", [", r ? "," : "", rs[r].name);
		for (int it = 0; it < rs[r].n_iters; it++) {
			put(&b, "%s{\"outputs\": {", it ? ", " : "");
			for (size_t k = 0; k < n_outs; k++) {
				put(&b, k ? ",\n" : "\n");
				put_output(&b, &outs[k], (int)k, (int)r, it);
			}
			put(&b, "}, \"runtime\": 0.0012, \"runner_name\": \"%s\", \"polygraphy_class\": \"IterationResult\"}",
			    rs[r].name);
		}
		put(&b, "]]");
	}
	put(&b, "\n    ],\n    \"polygraphy_class\": \"RunResults\"\n}");
	tu_write(path, b.p, b.n);
	dw_buf_free(&b);
}

/* The tensor named name holds output k of runner r at iteration it. */
static void expect_output(const tb_tree *tree, const char *name, const pg_out *o, int k, int r, int it)
{
	float *x = values(o, k, r, it);
	tb_tensor *t = tu_tensor(tree, name);

	assert_int_equal(t->dtype, o->dt);
	assert_int_equal(t->ndim, o->ndim);
	for (int i = 0; i < o->ndim; i++)
		assert_int_equal(t->shape[i], o->shape[i]);
	tu_expect_values(t, x, numel(o));
	free(x);
}

static void expect_note(const tb_tree *tree, const char *want)
{
	for (size_t i = 0; i < tree->n_notes; i++)
		if (strstr(tree->notes[i], want))
			return;
	for (size_t i = 0; i < tree->n_notes; i++)
		print_message("# note '%s'\n", tree->notes[i]);
	fail_msg("no note says \"%s\"", want);
}

static tb_open_opts opts_for(int side, int record)
{
	tb_open_opts o;

	tb_open_opts_init(&o);
	o.side = side;
	o.record = record;
	return o;
}

#define ONNXRT "onnxrt-runner-N0-07/07/26-13:42:10"
#define TRT "trt-runner-N0-07/07/26-13:42:10"

static const pg_runner one[] = {{ONNXRT, 1}};
static const pg_runner two[] = {{ONNXRT, 1}, {TRT, 1}};

/* ---- the tests ------------------------------------------------------------ */

#define LAZY(arr) "{\"values\": {\"array\": \"" arr "\", \"polygraphy_class\": \"ndarray\"}, \"polygraphy_class\": \"LazyArray\"}"
/* np.save of float32 [1.0, -2.0]: a 128-byte header and 8 bytes of data. */
#define NPY2 "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIA/AAAAwA=="
/* The same without its last 4 bytes. */
#define NPY2_SHORT "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIA/"
/* np.save of ['hi'] ('<U2'): an array, but of no tensor type. */
#define NPY_STR "k05VTVBZAQB2AHsnZGVzY3InOiAnPFUyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDEsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIApoAAAAaQAAAA=="


/* Every dtype npy carries, exact; names lose their leading '/'. */
static void test_values(void **state)
{
	static const pg_out outs[] = {
		{"/hidden", PG_LAZY, TB_DT_F32, 3, {1, 4, 8}, NULL},
		{"half", PG_LAZY, TB_DT_F16, 2, {3, 5}, NULL},
		{"double", PG_LAZY, TB_DT_F64, 1, {7}, NULL},
		{"positions", PG_LAZY, TB_DT_I64, 1, {3}, NULL},
		{"ids", PG_LAZY, TB_DT_I32, 2, {2, 3}, NULL},
		{"small", PG_LAZY, TB_DT_I8, 1, {4}, NULL},
		{"mask", PG_LAZY, TB_DT_BOOL, 2, {2, 2}, NULL},
		{"scalar", PG_LAZY, TB_DT_F32, 0, {0}, NULL},
		{"empty", PG_LAZY, TB_DT_F32, 2, {0, 4}, NULL},
	};
	const size_t n = sizeof outs / sizeof *outs;
	const char *path = tu_path(tu_tmpdir(), "out.json");
	tb_tree *tree;
	char note[256];
	(void)state;

	pg_write(path, one, 1, outs, n);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, n);
	for (size_t k = 0; k < n; k++)
		expect_output(tree, outs[k].name + (outs[k].name[0] == '/'), &outs[k], (int)k, 0, 0);
	/* f32 data sits aligned after the 128-byte header: read in place. */
	assert_int_equal(tu_tensor(tree, "hidden")->offset, 128);
	snprintf(note, sizeof note, "%s: runner %s, iteration 0 of 1", path, ONNXRT);
	expect_note(tree, note);
	tb_tree_free(tree);
}

/* Two runners: the reference reads the first, the candidate the second;
 * one runner serves both. */
static void test_sides(void **state)
{
	static const pg_out outs[] = {
		{"/model/layers.0/Add_1_output_0", PG_LAZY, TB_DT_F32, 3, {1, 4, 8}, NULL},
		{"logits", PG_LAZY, TB_DT_F32, 3, {1, 4, 8}, NULL},
	};
	const char *dir = tu_tmpdir();
	tb_open_opts o;
	tu_compared c;
	tb_tree *tree;
	char note[256];
	(void)state;

	pg_write(tu_path(dir, "two.json"), two, 2, outs, 2);
	pg_write(tu_path(dir, "one.json"), one, 1, outs, 2);
	for (int side = 0; side < 2; side++) {
		o = opts_for(side, 0);
		tree = tu_open(tu_path(dir, "two.json"), &o);
		expect_output(tree, "model/layers.0", &outs[0], 0, side, 0);
		expect_output(tree, "logits", &outs[1], 1, side, 0);
		snprintf(note, sizeof note, "runner %s, iteration 0 of 1", side ? TRT : ONNXRT);
		expect_note(tree, note);
		tb_tree_free(tree);
		tree = tu_open(tu_path(dir, "one.json"), &o);
		expect_output(tree, "logits", &outs[1], 1, 0, 0);
		tb_tree_free(tree);
	}
	/* A session gives the file's two runners to its two sides. */
	tu_compare(&c, tu_path(dir, "two.json"), tu_path(dir, "two.json"), NULL);
	expect_output(c.s.ref, "logits", &outs[1], 1, 0, 0);
	expect_output(c.s.cand, "logits", &outs[1], 1, 1, 0);
	assert_int_equal(tu_cell(c.res, "logits")->status, TB_ST_DIVERGED);
	tu_compared_done(&c);
	tu_compare(&c, tu_path(dir, "one.json"), tu_path(dir, "one.json"), NULL);
	assert_int_equal(tu_cell(c.res, "L0.block")->status, TB_ST_MATCH);
	tu_compared_done(&c);
}

/* --record K reads iteration K of the runner. */
static void test_iterations(void **state)
{
	static const pg_out outs[] = {{"x", PG_LAZY, TB_DT_F32, 2, {2, 3}, NULL}};
	static const pg_runner rs[] = {{ONNXRT, 3}, {TRT, 2}};
	const char *path = tu_path(tu_tmpdir(), "iters.json");
	tb_open_opts o;
	tb_tree *tree;
	(void)state;

	pg_write(path, rs, 2, outs, 1);
	for (int it = 0; it < 3; it++) {
		o = opts_for(0, it);
		tree = tu_open(path, &o);
		expect_output(tree, "x", &outs[0], 0, 0, it);
		tb_tree_free(tree);
	}
	o = opts_for(1, 1);
	tree = tu_open(path, &o);
	expect_output(tree, "x", &outs[0], 0, 1, 1);
	expect_note(tree, "runner " TRT ", iteration 1 of 2");
	tb_tree_free(tree);
	o = opts_for(1, 2);
	tu_expect_refused(path, &o, NULL, "runner " TRT " holds 2 iterations; --record 2 is out of range");
	o = opts_for(0, 3);
	tu_expect_refused(path, &o, NULL, "runner " ONNXRT " holds 3 iterations; --record 3 is out of range");
}

/* Older files: "LazyNumpyArray", a bare ndarray, "__polygraphy_encoded_"
 * markers; a torch tensor is skipped with a note naming it. */
static void test_legacy_tags(void **state)
{
	static const pg_out outs[] = {
		{"old", PG_LAZY_OLD, TB_DT_F32, 1, {5}, NULL},
		{"bare", PG_BARE, TB_DT_F16, 1, {5}, NULL},
		{"legacy", PG_LEGACY, TB_DT_I64, 1, {5}, NULL},
		{"torch", PG_TENSOR, TB_DT_F32, 0, {0}, NULL},
	};
	const char *path = tu_path(tu_tmpdir(), "legacy.json");
	tb_tree *tree;
	char note[512];
	(void)state;

	pg_write(path, two, 2, outs, 4);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, 3);
	for (int k = 0; k < 3; k++)
		expect_output(tree, outs[k].name, &outs[k], k, 0, 0);
	snprintf(note, sizeof note, "%s: skipped output 'torch': a torch tensor", path);
	expect_note(tree, note);
	tb_tree_free(tree);

	/* The whole file in the legacy markers, whitespace as JSON allows. */
	tu_write_str(path, " \n\t{ \"lst\" :[[\"r\", [{\"__polygraphy_encoded_IterationResult\": \"polygraphy_serialized_json_type\", "
			   "\"outputs\": {\"a\": {\"__polygraphy_encoded_LazyNumpyArray\": \"polygraphy_serialized_json_type\", "
			   "\"values\": {\"__polygraphy_encoded_ndarray\": \"polygraphy_serialized_json_type\", \"array\": \"" NPY2 "\"}}}}]]], "
			   "\"__polygraphy_encoded_RunResults\": \"polygraphy_serialized_json_type\"}\n");
	tree = tu_open(path, NULL);
	tu_expect_values(tu_tensor(tree, "a"), (const float[]){1.0f, -2.0f}, 2);
	tb_tree_free(tree);
}

/* A mark-all dump: the last op output inside a module is named after the
 * innermost module it ends; the others keep their names. */
static void test_module_names(void **state)
{
	static const struct {
		const char *onnx, *name;
	} graph[] = {
		{"/model/embed_tokens/Gather_output_0", "model/embed_tokens"},
		{"/model/layers.0/input_layernorm/Cast_output_0", "model/layers.0/input_layernorm/Cast_output_0"},
		{"/model/layers.0/input_layernorm/Mul_1_output_0", "model/layers.0/input_layernorm"},
		{"/model/layers.0/self_attn/q_proj/MatMul_output_0", "model/layers.0/self_attn/q_proj"},
		{"/model/layers.0/self_attn/Shape_output_0", "model/layers.0/self_attn/Shape_output_0"},
		{"/model/layers.0/self_attn/Reshape_3_output_0", "model/layers.0/self_attn/Reshape_3_output_0"},
		{"/model/layers.0/self_attn/o_proj/MatMul_output_0", "model/layers.0/self_attn/o_proj"},
		{"/model/layers.0/Add_output_0", "model/layers.0/Add_output_0"},
		{"/model/layers.0/mlp/down_proj/MatMul_output_0", "model/layers.0/mlp/down_proj"},
		{"/model/layers.0/Add_1_output_0", "model/layers.0"},
		/* a module whose outputs are not together: its last one names it */
		{"/model/a/x/MatMul_output_0", "model/a/x"},
		{"/model/b/Add_output_0", "model/b"},
		{"/model/a/Add_output_0", "model/a"},
		/* a module name that is another output's own name stays unused */
		{"model/extra", "model/extra"},
		{"/model/extra/Relu_output_0", "model/extra/Relu_output_0"},
		/* not ONNX op outputs: names kept */
		{"/model/c/weird_name", "model/c/weird_name"},
		{"/model/c/Add_output_", "model/c/Add_output_"},
		{"/Add_output_0", "Add_output_0"},
		{"nopath/Mul_output_3", "nopath"},
		{"/model/norm/Mul_1_output_0", "model/norm"},
		{"logits", "logits"},
	};
	const size_t n = sizeof graph / sizeof *graph;
	pg_out outs[sizeof graph / sizeof *graph];
	const char *path = tu_path(tu_tmpdir(), "markall.json");
	tb_tree *tree;
	(void)state;

	for (size_t k = 0; k < n; k++)
		outs[k] = (pg_out){graph[k].onnx, PG_LAZY, TB_DT_F32, 2, {2, 2}, NULL};
	pg_write(path, one, 1, outs, n);
	tree = tu_open(path, NULL);
	assert_int_equal(tree->n_tensors, n);
	for (size_t k = 0; k < n; k++)
		expect_output(tree, graph[k].name, &outs[k], (int)k, 0, 0);
	tb_tree_free(tree);
}

/* In a directory the file is claimed by content; other JSON is skipped,
 * and names take the directory's prefix. */
static void test_in_tree(void **state)
{
	static const pg_out outs[] = {{"/model/norm/Mul_1_output_0", PG_LAZY, TB_DT_F32, 1, {3}, NULL}};
	const char *dir = tu_tmpdir();
	char note[512];
	tb_tree *tree;
	(void)state;

	pg_write(tu_path(dir, "runs/results.txt"), one, 1, outs, 1);
	tu_write_str(tu_path(dir, "config.json"), "{\"model\": \"llama\", \"lst\": []}");
	tu_write_str(tu_path(dir, "nested.json"), "{\"x\": {\"lst\": []}}");
	tree = tu_open(dir, NULL);
	assert_int_equal(tree->n_tensors, 1);
	expect_output(tree, "runs.model/norm", &outs[0], 0, 0, 0);
	snprintf(note, sizeof note, "skipped %s: not a tensor file", tu_path(dir, "config.json"));
	expect_note(tree, note);
	snprintf(note, sizeof note, "skipped %s: not a tensor file", tu_path(dir, "nested.json"));
	expect_note(tree, note);
	tb_tree_free(tree);
}

/* An output whose value is written as raw, for the refusals. */
static void refuse_output(const char *dir, const char *raw, const char *want)
{
	const pg_out outs[] = {{"/m/x", PG_RAW, TB_DT_F32, 0, {0}, raw}};
	const char *path = tu_path(dir, "bad.json");

	pg_write(path, one, 1, outs, 1);
	tu_expect_refused(path, NULL, NULL, want);
}

/* A whole file as written, refused. */
static void refuse_text(const char *dir, const char *text, const char *want)
{
	const char *path = tu_path(dir, "bad.json");

	tu_write_str(path, text);
	tu_expect_refused(path, NULL, NULL, want);
}

static void test_refusals(void **state)
{
	const char *dir = tu_tmpdir();
	tb_open_opts o = opts_for(1, 0);
	tb_tree *tree;
	(void)state;

	/* the fixture, good */
	tu_write_str(tu_path(dir, "good.json"), "{\"lst\": [[\"r\", [{\"outputs\": {\"/m/x\": " LAZY(NPY2) "}}]]]}");
	tree = tu_open(tu_path(dir, "good.json"), NULL);
	tu_expect_values(tu_tensor(tree, "m/x"), (const float[]){1.0f, -2.0f}, 2);
	tb_tree_free(tree);
	/* the arrays */
	refuse_output(dir, LAZY("k05VTVBZ!QB2"), "output '/m/x': its array is not valid base64 (byte 8 is not a base64 digit)");
	refuse_output(dir, LAZY("k05VTVBZAQB"), "output '/m/x': its array is not valid base64 (its length 11 is not a multiple of 4)");
	refuse_output(dir, LAZY("k05V\\nTVB"), "output '/m/x': its array is not valid base64 (byte 4 is not a base64 digit)");
	refuse_output(dir, LAZY("k0=VTVBZ"), "output '/m/x': its array is not valid base64 (byte 2 is not a base64 digit)");
	refuse_output(dir, LAZY("k05VTVBZ===="), "output '/m/x': its array is not valid base64 (byte 8 is not a base64 digit)");
	refuse_output(dir, LAZY("k05VTVB-"), "output '/m/x': its array is not valid base64 (byte 7 is not a base64 digit)");
	refuse_output(dir, LAZY(NPY2_SHORT), "output '/m/x': npy data truncated: 8 bytes expected, 4 present");
	refuse_output(dir, LAZY("k05VTVBZAQB2AHsn"), "output '/m/x': npy header length 118 runs past the end of the file");
	refuse_output(dir, LAZY("aGVsbG8="), "output '/m/x': not an npy file (bad magic)");
	refuse_output(dir, LAZY(""), "output '/m/x': not an npy file (bad magic)");
	/* the output objects */
	refuse_output(dir, "[1, 2]", "output '/m/x' is not an object");
	refuse_output(dir, "\"k05VTVBZ\"", "output '/m/x' is not an object");
	refuse_output(dir, "{\"array\": \"" NPY2 "\"}", "output '/m/x' is an untagged object, not an encoded array");
	refuse_output(dir, "{\"values\": 3, \"polygraphy_class\": \"LazyArray\"}",
		      "output '/m/x': its LazyArray has no \"values\" object");
	refuse_output(dir, "{\"values\": {\"polygraphy_class\": \"ndarray\"}, \"polygraphy_class\": \"LazyArray\"}",
		      "output '/m/x': its ndarray has no \"array\" string");
	refuse_output(dir, "{\"values\": {\"x\": 1, \"polygraphy_class\": \"Foo\"}, \"polygraphy_class\": \"LazyArray\"}",
		      "output '/m/x' is a 'Foo', not an encoded array");
	/* strings are an array, not a tensor: noted and skipped, leaving nothing */
	refuse_output(dir, LAZY(NPY_STR), "no tensors found; ");
	/* the structure around them */
	refuse_text(dir, "{\"lst\": {}}", "Polygraphy results without a \"lst\" array of runners");
	refuse_text(dir, "{\"lst\": null, \"polygraphy_class\": \"RunResults\"}", "without a \"lst\" array of runners");
	refuse_text(dir, "{\"lst\": []}", "Polygraphy results hold no runners");
	refuse_text(dir, "{\"lst\": [[\"r\", []]]}", "runner r holds no iterations");
	refuse_text(dir, "{\"lst\": [[\"r\"]]}", "runner 0 of \"lst\" is not a [name, iterations] pair");
	refuse_text(dir, "{\"lst\": [[1, [{}]]]}", "runner 0 of \"lst\" is not a [name, iterations] pair");
	tu_expect_refused(tu_path(dir, "bad.json"), &o, NULL, "runner 0 of \"lst\" is not a [name, iterations] pair");
	tu_write_str(tu_path(dir, "bad.json"), "{\"lst\": [[\"a\", [{}]], 7]}");
	tu_expect_refused(tu_path(dir, "bad.json"), &o, NULL, "runner 1 of \"lst\" is not a [name, iterations] pair");
	refuse_text(dir, "{\"lst\": [[\"r\", [{\"runtime\": 1}]]]}", "runner r, iteration 0: no \"outputs\" object");
	refuse_text(dir, "{\"lst\": [[\"r\", [7]]]}", "runner r, iteration 0: no \"outputs\" object");
	refuse_text(dir, "{\"lst\": [[\"r\", [{\"outputs\": {\"\": 1}}]]]}", "an output with an empty name");
	refuse_text(dir, "{\"lst\": [[\"r\", [{\"outputs\": {\"/x\": " LAZY(NPY2) ", \"x\": " LAZY(NPY2) "}}]]]}",
		    "duplicate tensor name 'x'");
	refuse_text(dir, "{\"lst\": [], \"lst\": [[\"r\", []]]}", "Polygraphy results repeat the key \"lst\"");
	refuse_text(dir, "{\"lst\": [[\"r\", [{\"outputs\": {", "Polygraphy results is not valid JSON");
	refuse_text(dir, "{\"lst\": [] } trailing", "Polygraphy results has trailing bytes after the JSON value");
	/* no "lst" first: not claimed, so not recognised at all */
	refuse_text(dir, "{\"polygraphy_class\": \"RunResults\", \"lst\": []}", "not a recognised tensor file");
}

/* The cap on what is parsed, on a sparse file of 4 GiB and a byte. */
static void test_size_cap(void **state)
{
	const char *path = tu_path(tu_tmpdir(), "huge.json");
	int fd;
	(void)state;

	tu_write_str(path, "{\"lst\": []}");
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	if (ftruncate(fd, (off_t)(4ull << 30) + 1) < 0) {
		close(fd);
		skip();
	}
	close(fd);
	tu_expect_refused(path, NULL, NULL, "Polygraphy results of 4294967297 bytes exceed the 4 GiB this reader parses");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),       cmocka_unit_test(test_sides),
		cmocka_unit_test(test_iterations),   cmocka_unit_test(test_legacy_tags),
		cmocka_unit_test(test_module_names), cmocka_unit_test(test_in_tree),
		cmocka_unit_test(test_refusals),     cmocka_unit_test(test_size_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
