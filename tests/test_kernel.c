/*
 * Kernel regression tests: the vectorised metric kernel, the in-place
 * bf16/f16 loaders, the block decoders and the logit kernel against naive
 * scalar references written here, on random data with NaN/Inf sprinkled
 * and on lengths that exercise every vector tail; every instruction-set
 * copy (generic, AVX2 and AVX-512 when the CPU has them) must give the
 * same bits, and so must a comparison run on any number of threads.  The
 * kernel's sums keep the error bound acc_kernel.inc states.
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

#include <cmocka.h>

#include "compare/compare.h"
#include "dumpwrite.h"
#include "compare/logits.h"
#include "compare/metrics.h"
#include "model/session.h"
#include "base/simd.h"
#include "testutil.h"

static const char *const isas[] = {"generic", "avx2", "avx512"};

/* What a case runs, its initial state: the generic copy alone, or the
 * generic copy and the next ones side by side (which must give the same
 * bits). */
static int generic_only = 1, with_avx2 = 2, with_avx512 = 3;

static int n_isas(void **state)
{
	return *(const int *)*state;
}

static bool cpu_has(const char *isa)
{
	bool has = tb_simd_force(isa) == 0;

	tb_simd_force(NULL);
	return has;
}

/* A case on a CPU without its copy: the copy must be refused, not run. */
static void test_copy_refused(void **state)
{
	const char *isa = isas[n_isas(state) - 1], *before = tb_simd_name();

	assert_int_equal(tb_simd_force(isa), -1);
	assert_string_equal(tb_simd_name(), before);
}

static void use_isa(int i)
{
	assert_int_equal(tb_simd_force(isas[i]), 0);
	assert_string_equal(tb_simd_name(), isas[i]);
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random values over many magnitudes, with exact ties, signed zeros and
 * subnormals; a fraction p_bad of NaN and +-Inf. */
static float value(double p_bad)
{
	double u = uniform();

	if (u < p_bad) {
		double v = uniform();
		return v < 0.4 ? NAN : v < 0.7 ? INFINITY : -INFINITY;
	}
	u = uniform();
	if (u < 0.02)
		return uniform() < 0.5 ? 0.0f : -0.0f;
	if (u < 0.03)
		return 1e-40f;
	return (float)((uniform() - 0.5) * pow(10, (int)(uniform() * 8) - 4));
}

static void fill_pair(float *r, float *c, size_t n, double p_bad)
{
	for (size_t i = 0; i < n; i++) {
		r[i] = value(p_bad);
		double u = uniform();
		/* Equal, close (inside allclose or not), or unrelated. */
		c[i] = u < 0.3 ? r[i] : u < 0.8 ? r[i] * (float)(1 + 1e-3 * (uniform() - 0.5)) : value(p_bad);
	}
}

/* The naive reference: one scalar loop, the rules of doc/report.md spelled out. */
static void naive(tb_acc *a, const float *r, const float *c, size_t n, double atol, double rtol)
{
	tb_acc_init(a);
	for (size_t i = 0; i < n; i++) {
		double rv = r[i], cv = c[i];
		a->n++;
		a->nan[0] += isnan(rv) != 0;
		a->nan[1] += isnan(cv) != 0;
		a->inf[0] += isinf(rv) != 0;
		a->inf[1] += isinf(cv) != 0;
		if (!isfinite(rv) || !isfinite(cv)) {
			if ((isinf(rv) && rv == cv) || (isnan(rv) && isnan(cv)))
				a->close++;
			else
				a->mismatch++;
			continue;
		}
		double d = cv - rv;
		/* |d| as float has it, as numpy's isclose on float32 arrays. */
		float ad = fabsf(c[i] - r[i]);
		a->finite++;
		a->sdd += d * d;
		a->srr += rv * rv;
		a->scc += cv * cv;
		a->src += rv * cv;
		a->sad += ad;
		a->sr += rv;
		a->sc += cv;
		a->rmin = rv < a->rmin ? rv : a->rmin;
		a->rmax = rv > a->rmax ? rv : a->rmax;
		a->cmin = cv < a->cmin ? cv : a->cmin;
		a->cmax = cv > a->cmax ? cv : a->cmax;
		a->close += ad <= (float)atol + (float)rtol * fabsf(r[i]);
		if (fabs(d) > a->max_abs) {
			a->max_abs = fabs(d);
			a->worst = i;
			a->worst_r = r[i];
			a->worst_c = c[i];
		}
	}
}

/* Sums may differ from the naive loop's by the kernel's float terms and
 * blocks (TB_ACC_BOUND of the sum of magnitudes) and by rounding; everything
 * else must be exact. */
static void assert_acc_matches(const tb_acc *got, const tb_acc *want, size_t n)
{
	const double *g[] = {&got->sdd, &got->srr, &got->scc, &got->src, &got->sad, &got->sr, &got->sc};
	const double *w[] = {&want->sdd, &want->srr, &want->scc, &want->src, &want->sad, &want->sr, &want->sc};

	assert_int_equal(got->n, want->n);
	assert_int_equal(got->finite, want->finite);
	assert_int_equal(got->close, want->close);
	assert_int_equal(got->mismatch, want->mismatch);
	for (int s = 0; s < 2; s++) {
		assert_int_equal(got->nan[s], want->nan[s]);
		assert_int_equal(got->inf[s], want->inf[s]);
	}
	for (int k = 0; k < 7; k++) {
		/* the sum of magnitudes, bounded by that of squares */
		double scale = fabs(*w[k]) + 1e-300;
		if (k == 3) /* sum |r*c| <= the product of the norms */
			scale = sqrt(want->srr * want->scc) + 1e-300;
		if (k >= 4)
			scale = want->sad + fabs(want->sr) + fabs(want->sc) + sqrt(want->srr * (double)n) +
				sqrt(want->scc * (double)n);
		assert_near(*g[k], *w[k], (TB_ACC_BOUND + 1e-15 * (double)(n + 8)) * scale);
	}
	assert_true(got->max_abs == want->max_abs);
	if (want->finite) {
		assert_int_equal(got->worst, want->worst);
		assert_true(got->worst_r == want->worst_r || (isnan(got->worst_r) && isnan(want->worst_r)));
		assert_true(got->rmin == want->rmin && got->rmax == want->rmax);
		assert_true(got->cmin == want->cmin && got->cmax == want->cmax);
	}
}

static const size_t long_lengths[] = {1000, 4099, 65537};

static size_t length(int k)
{
	return k < 72 ? (size_t)k : long_lengths[k - 72];
}

#define N_LENGTHS 75

static void test_kernel_vs_naive(void **state)
{
	static const double p_bad[] = {0, 0.002, 0.3};
	float *r = malloc(65537 * sizeof *r), *c = malloc(65537 * sizeof *c);
	int ni = n_isas(state);

	for (int k = 0; k < N_LENGTHS; k++) {
		for (int b = 0; b < 3; b++) {
			size_t n = length(k);
			tb_acc want, got[3];
			tb_run_sums run[3];
			fill_pair(r, c, n, p_bad[b]);
			naive(&want, r, c, n, 1e-4, 1e-4);
			for (int i = 0; i < ni; i++) {
				use_isa(i);
				tb_acc_init(&got[i]);
				tb_acc_run(&got[i], r, c, n, 0, 1e-4, 1e-4, &run[i]);
				assert_acc_matches(&got[i], &want, n);
				assert_true(run[i].sdd == got[i].sdd && run[i].srr == got[i].srr);
			}
			for (int i = 1; i < ni; i++) {
				assert_memory_equal(&got[i], &got[0], sizeof got[0]);
				assert_memory_equal(&run[i], &run[0], sizeof run[0]);
			}
		}
	}
	tb_simd_force(NULL);
	free(r);
	free(c);
}

/* The kernel's sums against exact ones (long double over the float
 * inputs), on data made to push a float block to its bound: in every
 * lane, a block's first term is large and the rest each fall just below
 * half a unit of it, so float drops them all.  The error must reach most
 * of TB_ACC_BOUND (so a longer float run, or float all the way, would
 * break it) and stay within it; and on random data over many magnitudes
 * it stays within it too. */
static void test_kernel_error_bound(void **state)
{
	enum { N = 8 * TB_ACC_BLOCK * 64 };
	float *r = malloc(N * sizeof *r), *c = malloc(N * sizeof *c);
	int ni = n_isas(state);

	for (int kind = 0; kind < 2; kind++) {
		long double sdd = 0, srr = 0, scc = 0, src = 0, mdd = 0, mrc = 0;
		for (size_t i = 0; i < N; i++) {
			if (kind == 0) {
				bool head = (i / 8) % TB_ACC_BLOCK == 0;
				r[i] = head ? 1.0f : 0.0f;
				c[i] = head ? 2.0f : 0x1.fp-13f;
			} else {
				r[i] = value(0);
				c[i] = r[i] + value(0);
			}
			long double rv = r[i], cv = c[i], d = cv - rv;
			sdd += d * d;
			srr += rv * rv;
			scc += cv * cv;
			src += rv * cv;
			mdd += d * d;
			mrc += fabsl(rv * cv);
		}
		for (int i = 0; i < ni; i++) {
			tb_acc a;
			use_isa(i);
			tb_acc_init(&a);
			tb_acc_run(&a, r, c, N, 0, 1e-4, 1e-4, NULL);
			double e_dd = (double)(fabsl(a.sdd - sdd) / mdd), e_rr = (double)(fabsl(a.srr - srr) / srr);
			double e_cc = (double)(fabsl(a.scc - scc) / scc), e_rc = (double)(fabsl(a.src - src) / mrc);
			assert_true(e_dd <= TB_ACC_BOUND && e_rr <= TB_ACC_BOUND);
			assert_true(e_cc <= TB_ACC_BOUND && e_rc <= TB_ACC_BOUND);
			if (kind == 0)
				assert_true(e_dd > 0.7 * TB_ACC_BOUND);
		}
	}
	tb_simd_force(NULL);
	free(r);
	free(c);
}

/* A run split anywhere merges to the same counts and extremes. */
static void test_kernel_split_runs(void **state)
{
	enum { N = 4099 };
	float *r = malloc(N * sizeof *r), *c = malloc(N * sizeof *c);
	tb_acc whole, parts, want;
	(void)state;

	fill_pair(r, c, N, 0.001);
	naive(&want, r, c, N, 1e-4, 1e-4);
	tb_acc_init(&whole);
	tb_acc_run(&whole, r, c, N, 0, 1e-4, 1e-4, NULL);
	assert_acc_matches(&whole, &want, N);
	for (size_t step = 1; step < 40; step += 3) {
		tb_acc_init(&parts);
		for (size_t lo = 0; lo < N; lo += step) {
			size_t len = N - lo < step ? N - lo : step;
			tb_acc piece;
			tb_acc_init(&piece);
			tb_acc_run(&piece, r + lo, c + lo, len, lo, 1e-4, 1e-4, NULL);
			tb_acc_merge(&parts, &piece);
		}
		assert_acc_matches(&parts, &want, N);
	}
	free(r);
	free(c);
}

static const tb_dtype kinds[] = {TB_DT_F32, TB_DT_BF16, TB_DT_F16};

/* Round x to dt and back with the scalar reference decoders; raw: the
 * encoded bytes. */
static void roundtrip(const float *x, size_t n, tb_dtype dt, float *out, void *raw)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == TB_DT_F32) {
			out[i] = x[i];
			memcpy((char *)raw + 4 * i, &x[i], 4);
			continue;
		}
		uint16_t h = dt == TB_DT_BF16 ? tb_f32_to_bf16(x[i]) : tb_f32_to_f16(x[i]);
		memcpy((char *)raw + 2 * i, &h, 2);
		out[i] = dt == TB_DT_BF16 ? tb_bf16_to_f32(h) : tb_f16_to_f32(h);
	}
}

/* Reading bf16/f16 in place gives exactly what decoding first gives, in
 * the metric kernel and the logit kernel. */
static void test_raw_dtypes_match_decoded(void **state)
{
	enum { N = 1031 };
	float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
	float *dr = malloc(N * sizeof *dr), *dc = malloc(N * sizeof *dc);
	/* One spare byte so the raw data can start misaligned. */
	unsigned char *rr = malloc(4 * N + 1), *rc = malloc(4 * N + 1);
	int ni = n_isas(state);

	fill_pair(x, y, N, 0.01);
	for (int a = 0; a < 3; a++) {
		for (int b = 0; b < 3; b++) {
			roundtrip(x, N, kinds[a], dr, rr + 1);
			roundtrip(y, N, kinds[b], dc, rc + 1);
			for (int i = 0; i < ni; i++) {
				tb_acc want, got;
				tb_run_sums sw, sg;
				tb_logit_row lrow[2];
				use_isa(i);
				for (size_t n = 0; n < N; n += n < 20 ? 1 : 97) {
					tb_acc_init(&want);
					tb_acc_init(&got);
					tb_acc_run(&want, dr, dc, n, 0, 1e-4, 1e-4, &sw);
					tb_acc_run_raw(&got, rr + 1, kinds[a], rc + 1, kinds[b], n, 0, 1e-4, 1e-4, &sg);
					assert_memory_equal(&got, &want, sizeof got);
					assert_memory_equal(&sg, &sw, sizeof sg);
					memset(lrow, 0, sizeof lrow); /* padding too, for the bitwise compare */
					tb_logits_row(dr, dc, (int64_t)n, &lrow[0]);
					tb_logits_row_raw(rr + 1, kinds[a], rc + 1, kinds[b], (int64_t)n, &lrow[1]);
					assert_memory_equal(&lrow[1], &lrow[0], sizeof lrow[0]);
				}
			}
		}
	}
	tb_simd_force(NULL);
	free(x);
	free(y);
	free(dr);
	free(dc);
	free(rr);
	free(rc);
}

/* Every half and bfloat16 bit pattern decodes as the scalar decoders say,
 * NaN payloads included, from any alignment, on every copy. */
static void test_block_decoders_exhaustive(void **state)
{
	unsigned char *raw = malloc(2 * 65536 + 1);
	float *got = malloc(65536 * sizeof *got), *want = malloc(65536 * sizeof *want);
	int ni = n_isas(state);

	for (int dt = 0; dt < 2; dt++) {
		for (uint32_t h = 0; h < 65536; h++) {
			uint16_t v = (uint16_t)h;
			memcpy(raw + 1 + 2 * h, &v, 2);
			want[h] = dt ? tb_f16_to_f32(v) : tb_bf16_to_f32(v);
		}
		for (int i = 0; i < ni; i++) {
			use_isa(i);
			memset(got, 0, 65536 * sizeof *got);
			tb_dtype_to_f32(dt ? TB_DT_F16 : TB_DT_BF16, raw + 1, 65535, false, got);
			assert_memory_equal(got, want, 65535 * sizeof *got);
			assert_true(got[65535] == 0); /* nothing written past n */
		}
	}
	tb_simd_force(NULL);
	free(raw);
	free(got);
	free(want);
}

/* The logits in long double (80-bit on x86: 11 more bits than double),
 * by the same identity as the kernel but none of its shortcuts:
 * KL = log1p(x + y) - x with x = E_p[v], y = E_p[expm1(v) - v] and
 * v = (c - r) - (c - r at ref's argmax) exact, so a KL of 1e-13 is as
 * exact as one of 1 (the textbook sum of p (log p - log q) loses a tiny
 * KL to rounding of its terms, of size 1). */
static void naive_logits(const float *r, const float *c, int64_t n, double *kl, double lp[2])
{
	long double mr = -INFINITY, mc = -INFINITY, sr = 0, sc = 0, x = 0, y = 0, k, z, q = 0;
	int64_t ir = 0;

	for (int64_t i = 0; i < n; i++) {
		if (r[i] > mr)
			mr = r[i], ir = i;
		mc = c[i] > mc ? c[i] : mc;
	}
	k = (long double)c[ir] - r[ir];
	for (int64_t i = 0; i < n; i++) {
		long double e = expl(r[i] - mr), v = ((long double)c[i] - r[i]) - k;
		sr += e;
		sc += expl(c[i] - mc);
		x += e * v;
		y += e * (expm1l(v) - v);
	}
	x /= sr;
	y /= sr;
	z = x + y;
	if (fabsl(z) < 1e-3L) {
		for (int j = 16; j >= 2; j--)
			q = q * z + (j % 2 ? 1.0L : -1.0L) / j;
		z = y + z * z * q;
	} else {
		z = log1pl(z) - x;
	}
	*kl = z < 0 ? 0 : (double)z;
	lp[0] = (double)-logl(sr);
	lp[1] = (double)-logl(sc);
}

/* One row against the reference, in every copy: within the kernel's
 * bounds, and the copies bit for bit alike. */
static void check_logit_row(const float *r, const float *c, int64_t n, int ni)
{
	tb_logit_row row[3];
	double kl, lp[2];

	naive_logits(r, c, n, &kl, lp);
	memset(row, 0, sizeof row); /* padding too, for the bitwise compare */
	for (int i = 0; i < ni; i++) {
		use_isa(i);
		tb_logits_row(r, c, n, &row[i]);
		/* plus what the kernel leaves out: terms under e^-86 of the max */
		assert_near(row[i].kl, kl, TB_LOGIT_KL_REL * kl + (double)n * 1e-33);
		assert_near(row[i].top1_logprob[0], lp[0], TB_LOGIT_LP_ABS);
		assert_near(row[i].top1_logprob[1], lp[1], TB_LOGIT_LP_ABS);
	}
	for (int i = 1; i < ni; i++)
		assert_memory_equal(&row[i], &row[0], sizeof row[0]);
}

static void test_logits_vs_naive(void **state)
{
	static const int64_t lens[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 32003};
	float *r = malloc(32003 * sizeof *r), *c = malloc(32003 * sizeof *c);
	int ni = n_isas(state);

	for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
		for (int shape = 0; shape < 4; shape++) {
			int64_t n = lens[li];
			for (int64_t i = 0; i < n; i++) {
				/* Logit-like; shape 3 spans 3000 so most terms underflow. */
				double spread = shape == 3 ? 3000 : 10 + 10 * shape;
				r[i] = (float)(spread * (uniform() - 0.9));
				c[i] = shape == 0 ? r[i] : r[i] + (float)((shape == 1 ? 1e-3 : 0.5) * (uniform() - 0.5));
			}
			check_logit_row(r, c, n, ni);
			if (shape == 0) {
				tb_logit_row row;
				tb_logits_row(r, c, n, &row);
				assert_true(row.kl == 0);
			}
		}
	}
	tb_simd_force(NULL);
	free(r);
	free(c);
}

/* The bounds hold from a KL of 1e-13 to 40: candidates that are the
 * reference plus noise of 1e-6 to 10, shifted by a constant (which the
 * softmax ignores), or scaled (a temperature), on spreads from narrow to
 * wide. */
static void test_logits_bounds(void **state)
{
	static const double noises[] = {0, 1e-6, 1e-4, 1e-2, 0.1, 0.5, 2, 10};
	enum { N = 4099 };
	float *r = malloc(N * sizeof *r), *c = malloc(N * sizeof *c);
	int ni = n_isas(state);

	for (int shape = 0; shape < 5; shape++) {
		for (size_t k = 0; k < sizeof noises / sizeof noises[0]; k++) {
			for (int i = 0; i < N; i++) {
				double g = uniform() + uniform() + uniform() - 1.5, e = uniform() + uniform() - 1;
				double x = (shape == 1 ? 20 : 4) * g;
				r[i] = (float)x;
				c[i] = (float)(shape == 2	? x + 7 + noises[k] * e
					       : shape == 3 ? x * (1 + noises[k])
					       : shape == 4 ? x - 300 + noises[k] * e
							    : x + noises[k] * e);
			}
			check_logit_row(r, c, N, ni);
		}
	}
	tb_simd_force(NULL);
	free(r);
	free(c);
}

/* Rows whose logits float can hold but whose differences it cannot
 * (near +-3.4e38) overflow the float sums: they are redone in double, the
 * same in every copy.  A KL that large has no cancellation to fear, so
 * the textbook sum in long double is the reference. */
static void test_logits_extremes(void **state)
{
	enum { N = 37 };
	float r[N], c[N];
	int ni = n_isas(state);

	for (int shape = 0; shape < 4; shape++) {
		for (int i = 0; i < N; i++) {
			r[i] = (float)(i % 7);
			c[i] = (float)(i % 5);
		}
		if (shape == 0)
			r[3] = 3e38f, c[3] = -3e38f;
		else if (shape == 1)
			r[30] = -3e38f, c[30] = 3e38f;
		else
			for (int i = 0; i < N; i++)
				r[i] = (shape == 2 ? -1 : 1) * (3e38f - (float)i * 5e36f), c[i] = -r[i];
		long double mr = -INFINITY, mc = -INFINITY, sr = 0, sc = 0, kl = 0;
		for (int i = 0; i < N; i++) {
			mr = r[i] > mr ? r[i] : mr;
			mc = c[i] > mc ? c[i] : mc;
		}
		for (int i = 0; i < N; i++) {
			sr += expl(r[i] - mr);
			sc += expl(c[i] - mc);
		}
		for (int i = 0; i < N; i++)
			kl += expl(r[i] - mr) / sr * (((long double)r[i] - mr - logl(sr)) - ((long double)c[i] - mc - logl(sc)));
		tb_logit_row row[3];
		memset(row, 0, sizeof row);
		for (int i = 0; i < ni; i++) {
			use_isa(i);
			tb_logits_row(r, c, N, &row[i]);
			assert_true(isfinite(row[i].kl));
			assert_near(row[i].kl, (double)kl, 1e-6 * (double)kl);
			assert_near(row[i].top1_logprob[0], (double)-logl(sr), TB_LOGIT_LP_ABS);
			assert_near(row[i].top1_logprob[1], (double)-logl(sc), TB_LOGIT_LP_ABS);
		}
		for (int i = 1; i < ni; i++)
			assert_memory_equal(&row[i], &row[0], sizeof row[0]);
	}
	tb_simd_force(NULL);
}

/* Top-1/top-5 skip whole blocks; the result must equal a plain scan. */
static void test_logits_topk_and_nonfinite(void **state)
{
	enum { N = 203 };
	float r[N], c[N];
	int ni = n_isas(state);

	for (int trial = 0; trial < 200; trial++) {
		for (int i = 0; i < N; i++) {
			/* Few distinct values: many ties. */
			r[i] = (float)(int)(uniform() * 12);
			c[i] = (float)(int)(uniform() * 12);
		}
		if (trial % 3 == 1)
			r[(int)(uniform() * N)] = NAN;
		if (trial % 5 == 2)
			c[(int)(uniform() * N)] = INFINITY;
		int64_t want[2][5];
		for (int s = 0; s < 2; s++) {
			const float *x = s ? c : r;
			bool used[N] = {false};
			for (int k = 0; k < 5; k++) {
				int64_t best = -1;
				for (int i = 0; i < N; i++)
					if (!used[i] && !isnan(x[i]) && (best < 0 || x[i] > x[best]))
						best = i;
				want[s][k] = best;
				used[best] = true;
			}
		}
		int common = 0;
		for (int a = 0; a < 5; a++)
			for (int b = 0; b < 5; b++)
				common += want[0][a] == want[1][b];
		for (int i = 0; i < ni; i++) {
			tb_logit_row row;
			use_isa(i);
			tb_logits_row(r, c, N, &row);
			assert_int_equal(row.top1[0], want[0][0]);
			assert_int_equal(row.top1[1], want[1][0]);
			assert_int_equal(row.top5_common, common);
			assert_int_equal(isnan(row.kl) != 0, trial % 3 == 1 || trial % 5 == 2);
		}
	}
	tb_simd_force(NULL);
}

static void put(const char *dir, const char *name, const char *descr, bool fortran, int ndim, const int64_t *shape,
		const void *data, size_t nbytes)
{
	char rel[256];

	snprintf(rel, sizeof rel, "%s.npy", name);
	assert_int_equal(dw_write_npy(tu_path(dir, rel), 1, descr, fortran, ndim, shape, data, nbytes), 0);
}

/* Write x as dtype dt (little-endian, C order). */
static void put_as(const char *dir, const char *name, tb_dtype dt, int ndim, const int64_t *shape, const float *x,
		   size_t n)
{
	size_t nbytes;
	void *buf = dw_encode(x, n, dt, &nbytes);

	put(dir, name, dw_npy_descr(dt), false, ndim, shape, buf, nbytes);
	free(buf);
}

static void assert_cells_equal(const tb_result *a, const tb_result *b)
{
	assert_int_equal(a->n_cells, b->n_cells);
	for (size_t i = 0; i < a->n_cells; i++) {
		const tb_metrics *x = &a->cells[i].m, *y = &b->cells[i].m;
		assert_int_equal(a->cells[i].status, b->cells[i].status);
		assert_true(x->rel_l2 == y->rel_l2 || (isnan(x->rel_l2) && isnan(y->rel_l2)));
		assert_true(x->cosine == y->cosine && x->max_abs == y->max_abs && x->mean_abs == y->mean_abs);
		assert_true(x->norm_ratio == y->norm_ratio && x->allclose_frac == y->allclose_frac);
		assert_true(x->mean[0] == y->mean[0] && x->std[1] == y->std[1] && x->min[0] == y->min[0]);
		assert_int_equal(x->worst_index, y->worst_index);
		assert_int_equal(x->mismatch, y->mismatch);
		assert_int_equal(x->nan[0] + 2 * x->nan[1], y->nan[0] + 2 * y->nan[1]);
		assert_int_equal(x->n_pos, y->n_pos);
		assert_int_equal(x->first_bad_position, y->first_bad_position);
		if (x->n_pos)
			assert_memory_equal(x->pos_rel_l2, y->pos_rel_l2, (size_t)x->n_pos * sizeof *x->pos_rel_l2);
		assert_int_equal(a->cells[i].logits != NULL, b->cells[i].logits != NULL);
		if (a->cells[i].logits)
			assert_memory_equal(a->cells[i].logits->rows, b->cells[i].logits->rows,
					    (size_t)a->cells[i].logits->n_pos * sizeof *a->cells[i].logits->rows);
	}
}

/* Every read path (in place f32/bf16/f16, decoded big-endian and
 * Fortran-order data, logits) on 1-4 threads and every copy of the
 * kernels: the same bits, and the decoded paths agree with in place. */
static void test_compare_threads_and_isas(void **state)
{
	enum { S = 37, H = 129, V = 1003, SL = 9 };
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[3] = {1, S, H}, shl[3] = {1, SL, V}, sh2[2] = {S, H};
	float *x = malloc(S * H * sizeof *x), *y = malloc(S * H * sizeof *y), *l1 = malloc(SL * V * sizeof *l1),
	      *l2 = malloc(SL * V * sizeof *l2);
	uint32_t *be = malloc(S * H * sizeof *be);
	float *fo = malloc(S * H * sizeof *fo);
	tb_result *first = NULL;
	tb_session s;
	tb_open_opts oo;
	tb_err err;
	int ni = n_isas(state);

	fill_pair(x, y, S * H, 0);
	for (int i = 0; i < SL * V; i++) {
		l1[i] = (float)(20 * uniform());
		l2[i] = l1[i] + (float)(0.01 * uniform());
	}
	for (int i = 0; i < S; i++)
		for (int j = 0; j < H; j++) {
			uint32_t u;
			memcpy(&u, &y[i * H + j], 4);
			be[i * H + j] = __builtin_bswap32(u);
			fo[j * S + i] = y[i * H + j];
		}
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put_as(ref, "layers.0.attn", TB_DT_F32, 3, sh, x, S * H);
	put_as(cand, "layers.0.attn", TB_DT_F32, 3, sh, y, S * H);
	put_as(ref, "layers.0.mlp", TB_DT_F32, 3, sh, x, S * H);
	put_as(cand, "layers.0.mlp", TB_DT_BF16, 3, sh, y, S * H);
	put_as(ref, "layers.0.block", TB_DT_F16, 3, sh, x, S * H);
	put_as(cand, "layers.0.block", TB_DT_F16, 3, sh, y, S * H);
	/* Decoded paths: the same values as layers.0.attn's candidate. */
	put_as(ref, "layers.1.attn", TB_DT_F32, 2, sh2, x, S * H);
	put(cand, "layers.1.attn", ">f4", false, 2, sh2, be, S * H * 4);
	put_as(ref, "layers.1.mlp", TB_DT_F32, 2, sh2, x, S * H);
	put(cand, "layers.1.mlp", "<f4", true, 2, sh2, fo, S * H * 4);
	x[5] = NAN;
	y[7] = INFINITY;
	put_as(ref, "layers.1.block", TB_DT_F32, 3, sh, x, S * H);
	put_as(cand, "layers.1.block", TB_DT_F32, 3, sh, y, S * H);
	put_as(ref, "logits", TB_DT_F32, 3, shl, l1, SL * V);
	put_as(cand, "logits", TB_DT_BF16, 3, shl, l2, SL * V);

	tb_open_opts_init(&oo);
	oo.npy_void2 = TB_DT_BF16;
	if (tb_session_open(&s, ref, cand, &oo, NULL, &err) < 0)
		fail_msg("open: %s: %s", err.file, err.msg);
	for (int i = 0; i < ni; i++) {
		use_isa(i);
		for (int t = 1; t <= 4; t++) {
			tb_compare_opts o;
			tb_result *res;
			tb_compare_opts_init(&o);
			o.threads = t;
			o.unit_elems = 1000;
			if (tb_compare(s.pairing, &o, &res, &err) < 0)
				fail_msg("compare: %s", err.msg);
			if (!first) {
				first = res;
				continue;
			}
			assert_cells_equal(res, first);
			tb_result_free(res);
		}
	}
	/* attn (in place), and layer 1's decoded attn and mlp, saw the same data. */
	const tb_metrics *m[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < first->n_cells; i++) {
		const tb_cell_result *c = &first->cells[i];
		if (!strcmp(c->cell.tap, "attn") && c->cell.layer == 0)
			m[0] = &c->m;
		if (!strcmp(c->cell.tap, "attn") && c->cell.layer == 1)
			m[1] = &c->m;
		if (!strcmp(c->cell.tap, "mlp") && c->cell.layer == 1)
			m[2] = &c->m;
		if (!strcmp(c->cell.tap, "block") && c->cell.layer == 1)
			assert_int_equal(c->m.mismatch, 2);
	}
	assert_non_null(m[0]);
	assert_non_null(m[1]);
	assert_non_null(m[2]);
	for (int k = 1; k < 3; k++) {
		assert_true(m[k]->rel_l2 == m[0]->rel_l2 && m[k]->cosine == m[0]->cosine);
		assert_true(m[k]->max_abs == m[0]->max_abs && m[k]->allclose_frac == m[0]->allclose_frac);
		assert_int_equal(m[k]->worst_index, m[0]->worst_index);
		assert_memory_equal(m[k]->pos_rel_l2, m[0]->pos_rel_l2, S * sizeof *m[0]->pos_rel_l2);
	}
	tb_result_free(first);
	tb_session_done(&s);
	tb_simd_force(NULL);
	free(x);
	free(y);
	free(l1);
	free(l2);
	free(be);
	free(fo);
}

/* The portable copy's fused multiply-add (tb_fmaf, double arithmetic
 * rounded to odd) is the correctly rounded one libm's fmaf gives: on
 * random triples of every magnitude, and where a product lies exactly
 * half way between two floats and an addend far below double's precision
 * must still decide the rounding (a plain double sum rounds it away and
 * then ties to even). */
static void test_portable_fmaf(void **state)
{
	static const float tiny[] = {0x1p-60f, -0x1p-60f, 0x1p-90f, -0x1p-90f, 0};
	float a = 1 + 0x1p-12f, mid = 1 + 0x1p-11f;
	(void)state;

	for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) {
		assert_true(tb_fmaf(a, a, tiny[i]) == fmaf(a, a, tiny[i]));
		assert_true(tb_fmaf(-a, a, -tiny[i]) == fmaf(-a, a, -tiny[i]));
	}
	assert_true(tb_fmaf(a, a, 0x1p-60f) > mid);
	assert_true(tb_fmaf(a, a, -0x1p-60f) == mid);
	for (int i = 0; i < 1000000; i++) {
		float x = (float)((uniform() - 0.5) * ldexp(1, (int)(uniform() * 40) - 20));
		float y = (float)((uniform() - 0.5) * ldexp(1, (int)(uniform() * 40) - 20));
		float z = (float)((uniform() - 0.5) * ldexp(1, (int)(uniform() * 60) - 30));
		if (i % 3 == 0)
			z = -(x * y) * (float)(1 + (uniform() - 0.5) * 0x1p-20); /* near cancellation */
		if (tb_fmaf(x, y, z) != fmaf(x, y, z))
			fail_msg("tb_fmaf(%a, %a, %a) = %a, fmaf %a", x, y, z, tb_fmaf(x, y, z), fmaf(x, y, z));
	}
}

/* A case on the generic copy, and again with the AVX2 copy beside it,
 * and the AVX-512 one.  Without the CPU for one it is a TAP skip:
 * cmocka's own skip() prints "not ok N # SKIP", which the automake driver
 * counts as a failure, so the directive goes in the name of a case that
 * checks the copy is refused. */
#define ON_COPY(f, has, isa, state)                                                            \
	{                                                                                       \
		.name = has ? #f " (" isa ")" : #f " (" isa ") # SKIP no " isa " on this CPU",   \
		.test_func = has ? f : test_copy_refused, .initial_state = state                \
	}
#define ON_EVERY_COPY(f)                                                                       \
	{.name = #f " (generic)", .test_func = f, .initial_state = &generic_only},              \
		ON_COPY(f, avx2, "avx2", &with_avx2), ON_COPY(f, avx512, "avx512", &with_avx512)

int main(void)
{
	bool avx2 = cpu_has("avx2"), avx512 = cpu_has("avx512");
	const struct CMUnitTest tests[] = {
		ON_EVERY_COPY(test_kernel_vs_naive),
		ON_EVERY_COPY(test_kernel_error_bound),
		cmocka_unit_test(test_kernel_split_runs),
		cmocka_unit_test(test_portable_fmaf),
		ON_EVERY_COPY(test_raw_dtypes_match_decoded),
		ON_EVERY_COPY(test_block_decoders_exhaustive),
		ON_EVERY_COPY(test_logits_vs_naive),
		ON_EVERY_COPY(test_logits_bounds),
		ON_EVERY_COPY(test_logits_extremes),
		ON_EVERY_COPY(test_logits_topk_and_nonfinite),
		ON_EVERY_COPY(test_compare_threads_and_isas),
	};
	return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
