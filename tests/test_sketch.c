/*
 * test_sketch: the fingerprint of sketch.h.  Its statistics are exact; it
 * is linear (the sketch of c - r is the difference of the sketches, so
 * shards sketched apart add up); equal tensors are known equal; over many
 * random pairs and seeds the estimated rel_l2 lies inside its stated bound
 * (a bound too tight, or a biased estimator, fails here); proportional
 * tensors get cosine 1; the AVX-512 and portable loops agree bit for bit;
 * sketches of other seeds refuse to compare.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/simd.h"
#include "compare/estimate.h"

typedef struct fixture {
	tb_tensor t;
	tb_blob *blob;
} fixture;

/* values: float32, or bfloat16 when dtype says so. */
static void make_as(fixture *f, int64_t rows, int64_t cols, void *values, tb_dtype dtype)
{
	tb_err err = {0};
	int64_t shape[2] = {rows, cols};

	memset(f, 0, sizeof *f);
	f->blob = tb_blob_new();
	f->blob->data = values; /* borrowed: never set as owned */
	f->blob->size = (uint64_t)(rows * cols) * tb_dtype_size(dtype);
	f->blob->refs = 1;
	f->t.name = (char *)"x";
	f->t.path = "mem";
	f->t.dtype = dtype;
	f->t.blob = f->blob;
	assert_int_equal(tb_tensor_set_shape(&f->t, 2, shape, "mem", &err), 0);
}

static void unmake(fixture *f)
{
	f->blob->data = NULL;
	f->blob->refs = 0;
	tb_blob_free(f->blob);
}

static uint64_t rng_state = 12345;

static double gauss(void)
{
	double u, v;

	rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
	u = ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
	rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
	v = ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Sketch n values of a dtype shaped [rows, cols] with a seed (and the
 * parameters of another sketch, as tbisect sketches a tree against one),
 * on some threads. */
static void sketch_as(void *v, tb_dtype dtype, int64_t rows, int64_t cols, uint64_t seed, const tb_sketch *like,
		      int threads, tb_sketch *s)
{
	fixture f;
	tb_sketch_params p;
	tb_err err = {0};

	make_as(&f, rows, cols, v, dtype);
	tb_sketch_params_for(&f.t, seed, &p);
	if (like)
		p = like->p;
	assert_int_equal(tb_sketch_alloc(s, &p), 0);
	assert_int_equal(tb_sketch_tensor(&f.t, s, threads, &err), 0);
	unmake(&f);
}

static void sketch_on(float *v, int64_t rows, int64_t cols, uint64_t seed, int threads, tb_sketch *s)
{
	sketch_as(v, TB_DT_F32, rows, cols, seed, NULL, threads, s);
}

static void sketch_of(float *v, int64_t rows, int64_t cols, uint64_t seed, tb_sketch *s)
{
	sketch_on(v, rows, cols, seed, 1, s);
}

static void test_statistics_exact(void **state)
{
	/* -Inf counts as one Inf (glibc's isinf says -1 for it) */
	float v[6] = {1, -2, NAN, 4, -INFINITY, 0.5f};
	tb_sketch s;

	(void)state;
	sketch_of(v, 2, 3, 1, &s);
	assert_int_equal(s.nan, 1);
	assert_int_equal(s.inf, 1);
	assert_int_equal(s.finite, 4);
	assert_float_equal(s.sum, 3.5, 1e-12);
	assert_float_equal(s.sumsq, 1 + 4 + 16 + 0.25, 1e-12);
	assert_float_equal(s.min, -2, 0);
	assert_float_equal(s.max, 4, 0);
	assert_float_equal(s.pos_sumsq[0], 5, 1e-12);
	assert_float_equal(s.pos_sumsq[1], 16.25, 1e-12);
	/* column sums over the rows, non-finite values left out */
	assert_float_equal(s.col_sum[0], 1 + 4, 0);
	assert_float_equal(s.col_sum[1], -2, 0);
	assert_float_equal(s.col_sum[2], 0.5, 0);
	tb_sketch_done(&s);
}

/* The sketch of a + b is the sum of the sketches, bucket by bucket. */
static void test_linear(void **state)
{
	enum { R = 16, C = 256 };
	float *a = malloc(R * C * sizeof *a), *b = malloc(R * C * sizeof *b), *sum = malloc(R * C * sizeof *sum);
	tb_sketch sa, sb, ss;

	(void)state;
	for (int i = 0; i < R * C; i++) {
		a[i] = (float)gauss();
		b[i] = i % 3 ? 0 : (float)gauss();
		sum[i] = a[i] + b[i];
	}
	sketch_of(a, R, C, 9, &sa);
	sketch_of(b, R, C, 9, &sb);
	sketch_of(sum, R, C, 9, &ss);
	for (uint32_t k = 0; k < ss.p.k; k++)
		assert_float_equal(ss.bucket[k], sa.bucket[k] + sb.bucket[k], 1e-4);
	for (int64_t k = 0; k < ss.p.n_pos * ss.p.kp; k++)
		assert_float_equal(ss.pos_bucket[k], sa.pos_bucket[k] + sb.pos_bucket[k], 1e-4);
	tb_sketch_done(&sa);
	tb_sketch_done(&sb);
	tb_sketch_done(&ss);
	free(a);
	free(b);
	free(sum);
}

static void test_equal_is_exact(void **state)
{
	enum { R = 8, C = 128 };
	float a[R * C], b[R * C];
	tb_sketch sa, sb;
	tb_sketch_estimate e;
	tb_err err = {0};

	(void)state;
	for (int i = 0; i < R * C; i++)
		a[i] = b[i] = (float)gauss();
	sketch_of(a, R, C, 3, &sa);
	sketch_of(b, R, C, 3, &sb);
	assert_int_equal(tb_sketch_compare(&sa, &sb, &e, &err), 0);
	assert_true(e.exact);
	tb_sketch_estimate_done(&e);
	b[R * C - 1] = nextafterf(b[R * C - 1], INFINITY);
	tb_sketch_done(&sb);
	sketch_of(b, R, C, 3, &sb);
	assert_int_equal(tb_sketch_compare(&sa, &sb, &e, &err), 0);
	assert_false(e.exact);
	tb_sketch_estimate_done(&e);
	tb_sketch_done(&sa);
	tb_sketch_done(&sb);
}

/* The true rel_l2 of c against r, shaped [R, C], and the estimate from
 * their sketches of one seed (e is the caller's to free). */
static double estimate_pair(float *r, float *c, int64_t R, int64_t C, uint64_t seed, tb_sketch_estimate *e)
{
	tb_sketch sr, sc;
	tb_err err = {0};
	double dd = 0, rr = 0;

	for (int64_t i = 0; i < R * C; i++) {
		dd += ((double)c[i] - r[i]) * ((double)c[i] - r[i]);
		rr += (double)r[i] * r[i];
	}
	sketch_of(r, R, C, seed, &sr);
	sketch_of(c, R, C, seed, &sc);
	assert_int_equal(tb_sketch_compare(&sr, &sc, e, &err), 0);
	tb_sketch_done(&sr);
	tb_sketch_done(&sc);
	return sqrt(dd / rr);
}

/* Over many pairs of several error shapes, sizes and seeds, the true
 * rel_l2 lies inside the bound, and the estimate is unbiased enough that
 * the mean of estimated over true squares stays near 1. */
static void test_bound_holds(void **state)
{
	static const int64_t sizes[][2] = {{16, 64}, {64, 256}, {128, 1024}};
	double ratio_sum = 0;
	int trials = 0, outside = 0;

	(void)state;
	for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
		int64_t R = sizes[z][0], C = sizes[z][1], n = R * C;
		float *r = malloc((size_t)n * sizeof *r), *c = malloc((size_t)n * sizeof *c);
		for (int seed = 1; seed <= 40; seed++) {
			tb_sketch_estimate e;
			double truth;
			for (int64_t i = 0; i < n; i++) {
				r[i] = (float)gauss();
				/* noise everywhere, a spike on one channel, or a few rows off */
				double d = seed % 3 == 0 ? 0.01 * gauss() : seed % 3 == 1 ? (i % C == 5 ? 0.5 * gauss() : 0)
											 : (i / C > R - 3 ? gauss() : 0);
				c[i] = (float)(r[i] + d);
			}
			truth = estimate_pair(r, c, R, C, (uint64_t)seed, &e);
			outside += !(e.rel_l2_lo <= truth && truth <= e.rel_l2_hi);
			ratio_sum += (e.rel_l2 * e.rel_l2) / (truth * truth);
			trials++;
			tb_sketch_estimate_done(&e);
		}
		free(r);
		free(c);
	}
	assert_int_equal(outside, 0);
	assert_true(fabs(ratio_sum / trials - 1) < 0.1);
}

/* A difference of two equal values in two rows: where they share a
 * whole-tensor bucket with opposite signs (one seed in 2k) that estimate
 * is 0, and the bound holds only by the positions' estimate, whose
 * buckets never mix rows. */
static void test_bound_holds_sparse(void **state)
{
	enum { R = 8, C = 256, N = R * C, SEEDS = 600 };
	float *r = malloc(N * sizeof *r), *c = malloc(N * sizeof *c);
	int outside = 0, collided = 0;

	(void)state;
	for (int seed = 1; seed <= SEEDS; seed++) {
		tb_sketch_estimate e;
		int64_t a = seed * 37 % C, b = C * 5 + seed * 101 % C;
		double truth;
		for (int64_t i = 0; i < N; i++)
			c[i] = r[i] = (float)gauss();
		c[a] += 0.25f;
		c[b] -= 0.25f;
		truth = estimate_pair(r, c, R, C, (uint64_t)seed, &e);
		outside += !(e.rel_l2_lo <= truth && truth <= e.rel_l2_hi);
		tb_sketch_estimate_done(&e);
		/* the whole tensor's buckets alone: a 1-D tensor has no positions */
		estimate_pair(r, c, 1, N, (uint64_t)seed, &e);
		collided += e.rel_l2 < 0.1 * truth;
		tb_sketch_estimate_done(&e);
	}
	free(r);
	free(c);
	assert_int_equal(outside, 0);
	/* the case arises: the whole-tensor estimate alone lost both values */
	assert_true(collided > 0);
}

static void test_proportional_cosine(void **state)
{
	enum { R = 32, C = 256 };
	float *r = malloc(R * C * sizeof *r), *c = malloc(R * C * sizeof *c);
	tb_sketch sr, sc;
	tb_sketch_estimate e;
	tb_err err = {0};

	(void)state;
	for (int i = 0; i < R * C; i++) {
		r[i] = (float)gauss();
		c[i] = 8 * r[i];
	}
	sketch_of(r, R, C, 5, &sr);
	sketch_of(c, R, C, 5, &sc);
	assert_int_equal(tb_sketch_compare(&sr, &sc, &e, &err), 0);
	assert_float_equal(e.cosine, 1, 1e-6);
	assert_float_equal(e.norm_ratio, 8, 1e-6);
	tb_sketch_estimate_done(&e);
	tb_sketch_done(&sr);
	tb_sketch_done(&sc);
	free(r);
	free(c);
}

/* Threads split a tensor in shares of whole rows and hash blocks: the
 * same sketch as one thread's, hashes exactly, sums to rounding. */
static void assert_same_sketch(const tb_sketch *a, const tb_sketch *b);

/* A tensor is cut into parts that threads take in turn, added in order:
 * the same sketch, bit for bit, on any number of threads (here a tensor
 * of several parts, with NaN). */
static void test_threads_agree(void **state)
{
	enum { R = 1100, C = 4096 };
	float *v = malloc((size_t)R * C * sizeof *v);
	tb_sketch one, three;

	(void)state;
	for (int i = 0; i < R * C; i++)
		v[i] = i % 100000 == 7 ? NAN : (float)gauss();
	sketch_on(v, R, C, 4, 1, &one);
	sketch_on(v, R, C, 4, 3, &three);
	assert_int_equal(one.finite, three.finite);
	assert_same_sketch(&one, &three);
	tb_sketch_done(&one);
	tb_sketch_done(&three);
	free(v);
}

static void assert_same_sketch(const tb_sketch *a, const tb_sketch *b)
{
	assert_true(a->sum == b->sum && a->sumsq == b->sumsq);
	/* bitwise: of -0 and +0 extremes, the same one */
	assert_memory_equal(&a->min, &b->min, sizeof a->min);
	assert_memory_equal(&a->max, &b->max, sizeof a->max);
	assert_int_equal(a->nan, b->nan);
	assert_memory_equal(a->bucket, b->bucket, a->p.k * sizeof *a->bucket);
	assert_memory_equal(a->pos_sumsq, b->pos_sumsq, (size_t)a->p.n_pos * sizeof *a->pos_sumsq);
	assert_memory_equal(a->pos_bucket, b->pos_bucket, (size_t)a->p.n_pos * a->p.kp * sizeof *a->pos_bucket);
	assert_memory_equal(a->col_sum, b->col_sum, (size_t)a->p.row_len * sizeof *a->col_sum);
	assert_memory_equal(a->hash, b->hash, a->n_blocks * sizeof *a->hash);
}

/* The AVX-512 and AVX2 loops (where the CPU has them) and the portable
 * one give the same sketch, bit for bit, so that hosts of any kind can sketch the
 * two sides: rows of whole chunks of 64 with 8, 4, 2 and 1 position
 * buckets, 64 whole-tensor buckets (a block's rotation wraps in most
 * chunks) and 256 (in few), rows not a multiple of 64 or of 8, rows
 * shorter than 8, a
 * tensor without positions across a hash block, runs holding NaN, and
 * tensors whose minimum or maximum is a zero held as -0 and +0; in
 * float32 and in bfloat16, whose sketch (of the same parameters) is the
 * float32 one of the same values. */
static void test_copies_agree(void **state)
{
	static const int64_t shapes[][2] = {{300, 64},	{77, 1000}, {120, 13}, {64, 5},	  {9, 4099},
					    {40, 2048}, {24, 2048}, {30, 1024}, {30, 640}, {30, 512},
					    {1, 70000}, {33, 192},  {130, 4096}, {16, 4096}, {16, 4096}};

	(void)state;
	for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
		int64_t R = shapes[z][0], C = shapes[z][1];
		float *v = malloc((size_t)(R * C) * sizeof *v);
		uint16_t *h = malloc((size_t)(R * C) * sizeof *h);
		tb_sketch a, b, c, d;
		for (int64_t i = 0; i < R * C; i++) {
			uint32_t bits;
			/* magnitudes far apart, so that sums in another order differ */
			v[i] = (z == 1 || z == 6 || z == 12) && i == 4321 ? NAN : (float)(gauss() * ldexp(1, (int)(i % 41) - 20));
			if (z >= 13) /* values of one sign and zeros of both: an extreme is a zero */
				v[i] = i % 13 == 0 ? ((i / 13) % 2 ? -0.0f : 0.0f) : (z == 13 ? 1 : -1) * (1.5f + (float)(i % 7));
			/* the same values in bfloat16 */
			memcpy(&bits, &v[i], sizeof bits);
			bits &= 0xFFFF0000u;
			memcpy(&v[i], &bits, sizeof bits);
			h[i] = (uint16_t)(bits >> 16);
		}
		assert_int_equal(tb_simd_force("generic"), 0);
		sketch_on(v, R, C, 9, 2, &a);
		sketch_as(h, TB_DT_BF16, R, C, 9, &a, 2, &c);
		assert_same_sketch(&a, &c);
		tb_sketch_done(&c);
		/* every copy the CPU has */
		for (int level = 1; level < 3; level++) {
			if (tb_simd_force(level == 1 ? "avx2" : "avx512") < 0)
				continue;
			sketch_on(v, R, C, 9, 2, &b);
			sketch_as(h, TB_DT_BF16, R, C, 9, &a, 2, &d);
			assert_same_sketch(&a, &b);
			assert_same_sketch(&a, &d);
			tb_sketch_done(&b);
			tb_sketch_done(&d);
		}
		tb_sketch_done(&a);
		free(v);
		free(h);
	}
	tb_simd_force(NULL);
}

/* A sketch's parameters follow the shape alone, not the dtype, so that
 * the sketches of a float32 reference and a bfloat16 candidate compare
 * (rows of 2048 and 4096 values once had other bucket counts per dtype). */
static void test_params_dtype_free(void **state)
{
	static const int64_t shapes[][2] = {{128, 2048}, {64, 4096}, {3, 1000}, {40, 300}, {1, 70000}};
	float *v = calloc(70000 * 2, sizeof *v);

	(void)state;
	assert_non_null(v);
	for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
		fixture a, b;
		tb_sketch_params pa, pb;
		make_as(&a, shapes[z][0], shapes[z][1], v, TB_DT_F32);
		make_as(&b, shapes[z][0], shapes[z][1], v, TB_DT_BF16);
		tb_sketch_params_for(&a.t, 3, &pa);
		tb_sketch_params_for(&b.t, 3, &pb);
		assert_memory_equal(&pa, &pb, sizeof pa);
		unmake(&a);
		unmake(&b);
	}
	free(v);
}

static void test_other_seed_refused(void **state)
{
	float v[64];
	tb_sketch a, b;
	tb_sketch_estimate e;
	tb_err err = {0};

	(void)state;
	for (int i = 0; i < 64; i++)
		v[i] = (float)i;
	sketch_of(v, 4, 16, 1, &a);
	sketch_of(v, 4, 16, 2, &b);
	assert_int_equal(tb_sketch_compare(&a, &b, &e, &err), -1);
	assert_non_null(strstr(err.msg, "seeds 1 and 2"));
	tb_sketch_done(&a);
	tb_sketch_done(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_statistics_exact), cmocka_unit_test(test_linear),
		cmocka_unit_test(test_equal_is_exact),   cmocka_unit_test(test_bound_holds),
		cmocka_unit_test(test_bound_holds_sparse),
		cmocka_unit_test(test_proportional_cosine), cmocka_unit_test(test_threads_agree),
		cmocka_unit_test(test_copies_agree),       cmocka_unit_test(test_params_dtype_free),
		cmocka_unit_test(test_other_seed_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
