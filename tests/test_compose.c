/*
 * test_compose: composite tensors read through to their parts: shards
 * joined on any axis (the values land where numpy's concatenate puts
 * them, for every start and length, strided parts included), partial
 * outputs summed, column ranges of a composite (a fused projection split
 * after its ranks are joined), nested composites, gathers of elements
 * (the values a partial dump printed), and the refusals.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "tensor/compose.h"
#include "tensor/view.h"

/* A contiguous f32 tensor over caller-owned values. */
typedef struct fixture {
	tb_tensor t;
	tb_blob *blob;
} fixture;

static void make(fixture *f, const char *name, int ndim, const int64_t *shape, float *values)
{
	tb_err err = {0};
	uint64_t n = 1;

	memset(f, 0, sizeof *f);
	for (int d = 0; d < ndim; d++)
		n *= (uint64_t)shape[d];
	f->blob = tb_blob_new();
	f->blob->data = (unsigned char *)values; /* borrowed: never set as owned */
	f->blob->size = n * sizeof(float);
	f->blob->refs = 1;
	f->t.name = (char *)name;
	f->t.path = "mem";
	f->t.dtype = TB_DT_F32;
	f->t.blob = f->blob;
	assert_int_equal(tb_tensor_set_shape(&f->t, ndim, shape, "mem", &err), 0);
}

static void unmake(fixture *f)
{
	f->blob->data = NULL;
	f->blob->refs = 0;
	tb_blob_free(f->blob);
}

/* Every range [s, s+n) of t reads as want[s..s+n). */
static void expect_ranges(tb_tensor *t, const float *want, size_t total)
{
	float got[64];
	tb_err err = {0};

	assert_true(total <= 64);
	assert_int_equal(t->numel, total);
	assert_int_equal(tb_tensor_acquire(t, &err), 0);
	assert_null(tb_tensor_data(t));
	for (size_t s = 0; s < total; s++)
		for (size_t n = 1; s + n <= total; n++) {
			memset(got, 0xff, sizeof got);
			tb_tensor_read_f32(t, s, n, got);
			for (size_t i = 0; i < n; i++)
				if (got[i] != want[s + i])
					fail_msg("%s: element %zu (range %zu+%zu) is %g, want %g", t->name, s + i, s, n,
						 (double)got[i], (double)want[s + i]);
		}
	tb_tensor_release(t);
}

static void test_concat_axes(void **state)
{
	/* a: [2, 3], b: [2, 2]; joined on axis 1 -> [2, 5] */
	float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {10, 20, 30, 40};
	float want1[10] = {1, 2, 3, 10, 20, 4, 5, 6, 30, 40};
	float c[6] = {7, 8, 9, 11, 12, 13};
	float want0[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13};
	fixture fa, fb, fc;
	tb_tensor *j, *parts[2];
	tb_err err = {0};
	(void)state;

	make(&fa, "a", 2, (int64_t[]){2, 3}, a);
	make(&fb, "b", 2, (int64_t[]){2, 2}, b);
	make(&fc, "c", 2, (int64_t[]){2, 3}, c);
	parts[0] = &fa.t;
	parts[1] = &fb.t;
	assert_int_equal(tb_compose_concat(parts, 2, 1, "ab", &j, &err), 0);
	assert_int_equal(j->shape[0], 2);
	assert_int_equal(j->shape[1], 5);
	expect_ranges(j, want1, 10);
	tb_compose_free(j);

	parts[1] = &fc.t;
	assert_int_equal(tb_compose_concat(parts, 2, 0, "ac", &j, &err), 0);
	assert_int_equal(j->shape[0], 4);
	expect_ranges(j, want0, 12);
	tb_compose_free(j);
	unmake(&fa);
	unmake(&fb);
	unmake(&fc);
}

static void test_strided_part(void **state)
{
	/* b^T of a [3, 2] buffer is a [2, 3] strided part */
	float a[6] = {1, 2, 3, 4, 5, 6}, bt[6] = {10, 40, 20, 50, 30, 60};
	float want[12] = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};
	fixture fa, fb;
	tb_tensor *j, *parts[2];
	tb_err err = {0};
	(void)state;

	make(&fa, "a", 2, (int64_t[]){2, 3}, a);
	make(&fb, "bt", 2, (int64_t[]){3, 2}, bt);
	fb.t.shape[0] = 2;
	fb.t.shape[1] = 3;
	fb.t.stride[0] = 1;
	fb.t.stride[1] = 2;
	fb.t.contiguous = false;
	parts[0] = &fa.t;
	parts[1] = &fb.t;
	assert_int_equal(tb_compose_concat(parts, 2, 1, "j", &j, &err), 0);
	expect_ranges(j, want, 12);
	tb_compose_free(j);
	unmake(&fa);
	unmake(&fb);
}

static void test_sum_and_nested_columns(void **state)
{
	float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, 0.25f, -3, 1, 1, 1};
	float wsum[6] = {1.5f, 2.25f, 0, 5, 6, 7};
	/* columns 1..2 of [a | b] joined on axis 1: rows [2 3 0.5] [5 6 1] */
	float wcols[6] = {2, 3, 0.5f, 5, 6, 1};
	fixture fa, fb;
	tb_tensor *s, *j, *cols, *parts[2];
	tb_err err = {0};
	(void)state;

	make(&fa, "a", 2, (int64_t[]){2, 3}, a);
	make(&fb, "b", 2, (int64_t[]){2, 3}, b);
	parts[0] = &fa.t;
	parts[1] = &fb.t;
	assert_int_equal(tb_compose_sum(parts, 2, "sum", &s, &err), 0);
	expect_ranges(s, wsum, 6);

	assert_int_equal(tb_compose_concat(parts, 2, 1, "ab", &j, &err), 0);
	assert_int_equal(tb_view_columns(j, 1, 3, ".mid", &cols, &err), 0);
	assert_string_equal(cols->name, "ab.mid");
	expect_ranges(cols, wcols, 6);
	tb_view_free(cols);
	assert_int_equal(tb_view_index0(j, 0, ".0", &cols, &err), -1);
	assert_non_null(strstr(err.msg, "cannot be cut by layer"));
	tb_compose_free(s);
	tb_compose_free(j);
	unmake(&fa);
	unmake(&fb);
}

/* The elements of a [3, 4] tensor that llama.cpp prints of it with one
 * value kept at each end of an axis: rows 0 and 2, columns 0 and 3; then
 * the same elements of the tensor joined from two [3, 2] shards. */
static void test_gather(void **state)
{
	float a[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, l[6] = {0, 1, 4, 5, 8, 9}, r[6] = {2, 3, 6, 7, 10, 11};
	const uint64_t index[] = {0, 3, 8, 11}, runs[] = {1, 2, 3, 9, 10};
	float want[4] = {0, 3, 8, 11}, want_runs[5] = {1, 2, 3, 9, 10};
	fixture fa, fl, fr;
	tb_tensor *g, *j, *parts[2];
	tb_err err = {0};
	(void)state;

	make(&fa, "a", 2, (int64_t[]){3, 4}, a);
	assert_int_equal(tb_compose_gather(&fa.t, index, 4, "a.some", &g, &err), 0);
	assert_int_equal(g->ndim, 1);
	assert_int_equal(g->shape[0], 4);
	assert_string_equal(g->name, "a.some");
	expect_ranges(g, want, 4);
	tb_compose_free(g);
	/* runs of neighbours, read a run at a time */
	assert_int_equal(tb_compose_gather(&fa.t, runs, 5, "a.runs", &g, &err), 0);
	expect_ranges(g, want_runs, 5);
	tb_compose_free(g);

	make(&fl, "l", 2, (int64_t[]){3, 2}, l);
	make(&fr, "r", 2, (int64_t[]){3, 2}, r);
	parts[0] = &fl.t;
	parts[1] = &fr.t;
	assert_int_equal(tb_compose_concat(parts, 2, 1, "lr", &j, &err), 0);
	assert_int_equal(tb_compose_gather(j, index, 4, "lr.some", &g, &err), 0);
	expect_ranges(g, want, 4);
	tb_compose_free(g);

	assert_int_equal(tb_compose_gather(&fa.t, (const uint64_t[]){3, 12}, 2, "x", &g, &err), -1);
	assert_null(g);
	assert_non_null(strstr(err.msg, "no element 12 (it has 12)"));
	tb_compose_free(j);
	unmake(&fa);
	unmake(&fl);
	unmake(&fr);
}

static void test_refusals(void **state)
{
	float a[6] = {0}, b[8] = {0};
	fixture fa, fb;
	tb_tensor *j, *parts[2];
	tb_err err = {0};
	(void)state;

	make(&fa, "a", 2, (int64_t[]){2, 3}, a);
	make(&fb, "b", 2, (int64_t[]){4, 2}, b);
	parts[0] = &fa.t;
	parts[1] = &fb.t;
	assert_int_equal(tb_compose_concat(parts, 2, 1, "x", &j, &err), -1);
	assert_null(j);
	assert_non_null(strstr(err.msg, "parts of shape [2, 3] and [4, 2] do not join on axis 1"));
	assert_int_equal(tb_compose_sum(parts, 2, "x", &j, &err), -1);
	assert_non_null(strstr(err.msg, "do not add up"));
	assert_int_equal(tb_compose_concat(parts, 2, 2, "x", &j, &err), -1);
	assert_non_null(strstr(err.msg, "no axis 2"));
	fb.t.dtype = TB_DT_F16;
	assert_int_equal(tb_compose_sum(parts, 2, "x", &j, &err), -1);
	assert_non_null(strstr(err.msg, "mix f32 and f16"));
	unmake(&fa);
	unmake(&fb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concat_axes),
		cmocka_unit_test(test_strided_part),
		cmocka_unit_test(test_sum_and_nested_columns),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
