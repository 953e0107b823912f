#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blaspool.h"
#include "base/simd.h"
#include "tensor/sketch.h"

#define READ_BLOCK 65536 /* values decoded at a time; TB_SKETCH_BLOCK is a multiple */
#define DROP_BLOCKS 16   /* read blocks between two drops of pages read */

/* splitmix64's finaliser: the hash of (seed, index) behind every bucket
 * and sign, so that any host sketching any shard agrees. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

static uint32_t pow2_clamp(uint64_t x, uint32_t lo, uint32_t hi)
{
	uint32_t k = lo;

	while (k < hi && (uint64_t)k * 2 <= x)
		k *= 2;
	return k;
}

void tb_sketch_params_for(const tb_tensor *t, uint64_t seed, tb_sketch_params *p)
{
	int64_t d[TB_MAX_DIMS];
	int nd = tb_tensor_squeezed(t, d);

	memset(p, 0, sizeof *p);
	p->seed = seed;
	p->numel = t->numel;
	/* a bucket of 8 bytes per 8 KB of values: 0.1% of the tensor */
	p->k = pow2_clamp(t->numel * tb_dtype_size(t->dtype) / 8192, 64, 4096);
	if (nd >= 2 && d[nd - 1] > 0 && d[nd - 2] > 0) {
		p->n_pos = d[nd - 2];
		p->row_len = (uint64_t)d[nd - 1];
		/* a row's 4 bytes of sum of squares and kp buckets of 4 within
		 * 0.5% of the row's bytes, up to 8 (an f32 row of 4096 gets 8,
		 * a bf16 row of 2048 gets 4); rows under 1 KB, whose sketch
		 * cannot be small, get 8 */
		uint64_t row_bytes = p->row_len * tb_dtype_size(t->dtype);
		p->kp = row_bytes < 1024 ? pow2_clamp(p->row_len, 1, 8) : pow2_clamp((row_bytes / 200 - 4) / 4, 1, 8);
	}
}

uint64_t tb_sketch_size(const tb_sketch_params *p)
{
	uint64_t blocks = (p->numel + TB_SKETCH_BLOCK - 1) / TB_SKETCH_BLOCK;

	return 8 * (uint64_t)p->k + (uint64_t)p->n_pos * (4 + 4 * (uint64_t)p->kp) + (p->n_pos ? 4 * p->row_len : 0) +
	       8 * blocks;
}

int tb_sketch_alloc(tb_sketch *s, const tb_sketch_params *p)
{
	memset(s, 0, sizeof *s);
	s->p = *p;
	s->ranks = 1;
	s->min = INFINITY;
	s->max = -INFINITY;
	s->n_blocks = (p->numel + TB_SKETCH_BLOCK - 1) / TB_SKETCH_BLOCK;
	s->bucket = calloc(p->k ? p->k : 1, sizeof *s->bucket);
	s->pos_sumsq = calloc(p->n_pos ? (size_t)p->n_pos : 1, sizeof *s->pos_sumsq);
	s->pos_bucket = calloc(p->n_pos ? (size_t)p->n_pos * p->kp : 1, sizeof *s->pos_bucket);
	s->col_sum = calloc(p->n_pos ? (size_t)p->row_len : 1, sizeof *s->col_sum);
	s->hash = calloc(s->n_blocks ? s->n_blocks : 1, sizeof *s->hash);
	if (!s->bucket || !s->pos_sumsq || !s->pos_bucket || !s->col_sum || !s->hash) {
		tb_sketch_free(s);
		return -1;
	}
	return 0;
}

void tb_sketch_free(tb_sketch *s)
{
	free(s->bucket);
	free(s->pos_sumsq);
	free(s->pos_bucket);
	free(s->col_sum);
	free(s->hash);
	memset(s, 0, sizeof *s);
}

/* Where the next value lands: its row's position and column, the row's
 * sum of squares and buckets so far, and each column's sum over the rows
 * so far (cols, row_len of them, owned by who folds; all in double until
 * stored). */
typedef struct cursor {
	int64_t pos;
	uint64_t col;
	double ss, acc[8];
	double *cols;
} cursor;

/* Add the column sums into the sketch's (as float) and start over. */
static void flush_cols(tb_sketch *s, cursor *c)
{
	for (uint64_t h = 0; h < s->p.row_len; h++) {
		s->col_sum[h] += (float)c->cols[h];
		c->cols[h] = 0;
	}
}

/* Add the row's sums into its position's (as float) and start over. */
static void flush_row(tb_sketch *s, cursor *c)
{
	s->pos_sumsq[c->pos] += (float)c->ss;
	c->ss = 0;
	for (uint32_t b = 0; b < s->p.kp; b++) {
		s->pos_bucket[(size_t)c->pos * s->p.kp + b] += (float)c->acc[b];
		c->acc[b] = 0;
	}
}

static void end_row(tb_sketch *s, cursor *c)
{
	flush_row(s, c);
	c->col = 0;
	c->pos = c->pos + 1 == s->p.n_pos ? 0 : c->pos + 1;
}

/* Values hashed at a time: their hashes stay in the first-level cache. */
#define CHUNK 1024

/* h[j] = mix(seed ^ (i0 + j)) for j < n. */
static void hash_run(uint64_t seed, uint64_t i0, size_t n, uint64_t *h)
{
	for (size_t j = 0; j < n; j++)
		h[j] = mix(seed ^ (i0 + j));
}

/* A run's statistics over its finite values. */
typedef struct run_stats {
	double sum, ss, mn, mx;
	uint64_t nan, inf;
} run_stats;

/* Eight lanes summed in a fixed order. */
static double reduce8(const double *l)
{
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The careful statistics of a run holding NaN or Inf, value by value. */
static void stats_nonfinite(const float *v, size_t n, run_stats *st)
{
	*st = (run_stats){0, 0, INFINITY, -INFINITY, 0, 0};
	for (size_t j = 0; j < n; j++) {
		double x = v[j];
		if (!isfinite(x)) {
			st->nan += isnan(x) != 0;
			st->inf += isinf(x) != 0; /* glibc's isinf is -1 for -Inf */
			continue;
		}
		st->sum += x;
		st->ss += x * x;
		st->mn = x < st->mn ? x : st->mn;
		st->mx = x > st->mx ? x : st->mx;
	}
}

/* Value j in lane j % 8 of the whole groups of 8, the rest in lanes of
 * their own, so that no add waits for the one before, in the order the
 * AVX-512 copy adds them (bit for bit the same sums); a run holding NaN
 * or Inf is redone value by value. */
static void stats_run(const float *v, size_t n, run_stats *st)
{
	double s[8] = {0}, q[8] = {0}, ts[8] = {0}, tq[8] = {0};
	float mn = INFINITY, mx = -INFINITY;
	size_t j = 0;

	for (; j + 8 <= n; j += 8)
		for (int l = 0; l < 8; l++) {
			double x = v[j + (size_t)l];
			s[l] += x;
			q[l] += x * x;
		}
	for (size_t t = 0; j + t < n; t++) {
		ts[t] = v[j + t];
		tq[t] = ts[t] * ts[t];
	}
	*st = (run_stats){reduce8(s) + reduce8(ts), reduce8(q) + reduce8(tq), INFINITY, -INFINITY, 0, 0};
	if (!isfinite(st->sum + st->ss)) {
		stats_nonfinite(v, n, st);
		return;
	}
	for (j = 0; j < n; j++) {
		mn = v[j] < mn ? v[j] : mn;
		mx = v[j] > mx ? v[j] : mx;
	}
	st->mn = mn;
	st->mx = mx;
}

#define SIGN 0x8000000000000000u

/* x with its sign flipped where bit 63 of m is set: x times +-1, exactly. */
static inline double flip(double x, uint64_t m)
{
	uint64_t b;

	memcpy(&b, &x, 8);
	b ^= m & SIGN;
	memcpy(&x, &b, 8);
	return x;
}

/* A salt that makes the blocks' rotations other numbers than the values' hashes. */
#define SALT_BLOCK 0x6a09e667f3bcc909u

/* The signed values of a run (whole-tensor sign from bit 63 of the
 * value's hash, the position's from bit 62; a non-finite value adds a
 * zero) and the run's block hash terms. */
static uint64_t sign_run(const float *v, const uint64_t *h, size_t n, bool nonfinite, double *xs, double *ps)
{
	uint64_t hb = 0;

	for (size_t j = 0; j < n; j++) {
		uint32_t bits;
		double x = v[j];
		memcpy(&bits, &v[j], sizeof bits);
		/* the block hash adds a term per value, so that shares and
		 * shards of a tensor add up to its hash */
		hb += bits * (h[j] | 1);
		if (nonfinite && !isfinite(x))
			x = 0;
		xs[j] = flip(x, h[j]);
		ps[j] = flip(x, h[j] << 1);
	}
	return hb;
}

/* A run's hashes, statistics, signed values and block hash terms. */
typedef uint64_t (*prep_fn)(uint64_t seed, uint64_t i0, const void *src, bool bf16, size_t n, uint64_t *h,
			    run_stats *st, double *xs, double *ps);

/* n <= CHUNK values of src, float32 or bfloat16. */
static uint64_t prep_run(uint64_t seed, uint64_t i0, const void *src, bool bf16, size_t n, uint64_t *h, run_stats *st,
			 double *xs, double *ps)
{
	float buf[CHUNK];
	const float *v = src;

	if (bf16) {
		tb_dtype_to_f32(TB_DT_BF16, src, n, false, buf);
		v = buf;
	}
	hash_run(seed, i0, n, h);
	stats_run(v, n, st);
	return sign_run(v, h, n, st->nan + st->inf > 0, xs, ps);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>

/* Values j..j+7 of a run, float32 or bfloat16 (at any alignment), as
 * float32. */
static inline __attribute__((always_inline, target("avx512f"))) __m256 load8(const void *src, bool bf16, size_t j)
{
	const unsigned char *b = src;

	if (bf16)
		return _mm256_castsi256_ps(
			_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b + 2 * j))), 16));
	return _mm256_loadu_ps((const float *)src + j);
}

/* mix() of seed ^ idx in 8 lanes (AVX-512DQ multiplies 64-bit lanes). */
static inline __attribute__((always_inline, target("avx512f,avx512dq"))) __m512i mix8(__m512i sd, __m512i idx)
{
	__m512i x = _mm512_add_epi64(_mm512_xor_si512(sd, idx), _mm512_set1_epi64((long long)0x9e3779b97f4a7c15u));

	x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
			       _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9u));
	x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
			       _mm512_set1_epi64((long long)0x94d049bb133111ebu));
	return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

/* x with its sign flipped in the lanes where bit 63 of m is set (flip). */
static inline __attribute__((always_inline, target("avx512f"))) __m512d flip8(__m512d x, __m512i m)
{
	return _mm512_castsi512_pd(
		_mm512_xor_si512(_mm512_castpd_si512(x), _mm512_and_si512(m, _mm512_set1_epi64((long long)SIGN))));
}

/* The lane order of each rotation: rot_idx[r][b] = (b - r) mod 8. */
static const int64_t rot_idx[8][8] __attribute__((aligned(64))) = {
	{0, 1, 2, 3, 4, 5, 6, 7}, {7, 0, 1, 2, 3, 4, 5, 6}, {6, 7, 0, 1, 2, 3, 4, 5}, {5, 6, 7, 0, 1, 2, 3, 4},
	{4, 5, 6, 7, 0, 1, 2, 3}, {3, 4, 5, 6, 7, 0, 1, 2}, {2, 3, 4, 5, 6, 7, 0, 1}, {1, 2, 3, 4, 5, 6, 7, 0},
};

/* 8 position values of one group rotated by r: bucket b gets the value at
 * place (b - r) mod 8 (add_pos's order). */
static inline __attribute__((always_inline, target("avx512f"))) __m512d rot8(__m512d ps, uint64_t r)
{
	return _mm512_permutexvar_pd(_mm512_load_si512(rot_idx[r & 7]), ps);
}

/* A run's 8-lane sums, value j in lane j % 8: statistics and block hash
 * terms, and the next 8 values' indices. */
typedef struct lanes8 {
	__m512i sd, idx, hb;
	__m512d sum, ss;
	__m256 mn, mx;
} lanes8;

static inline __attribute__((always_inline, target("avx512f"))) lanes8 lanes8_start(uint64_t seed, uint64_t i0)
{
	return (lanes8){_mm512_set1_epi64((long long)seed),
			_mm512_add_epi64(_mm512_set1_epi64((long long)i0), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7)),
			_mm512_setzero_si512(),
			_mm512_setzero_pd(),
			_mm512_setzero_pd(),
			_mm256_set1_ps(INFINITY),
			_mm256_set1_ps(-INFINITY)};
}

/* Values j..j+7 of src: their hashes (*x) and values widened (*d), taken
 * into the lanes. */
static inline __attribute__((always_inline, target("avx512f,avx512dq"))) void
lanes8_step(lanes8 *a, const void *src, bool bf16, size_t j, __m512i *x, __m512d *d)
{
	__m256 f = load8(src, bf16, j);

	*x = mix8(a->sd, a->idx);
	*d = _mm512_cvtps_pd(f);
	a->hb = _mm512_add_epi64(a->hb, _mm512_mullo_epi64(_mm512_cvtepu32_epi64(_mm256_castps_si256(f)),
							   _mm512_or_si512(*x, _mm512_set1_epi64(1))));
	a->sum = _mm512_add_pd(a->sum, *d);
	a->ss = _mm512_add_pd(a->ss, _mm512_mul_pd(*d, *d));
	a->mn = _mm256_min_ps(f, a->mn);
	a->mx = _mm256_max_ps(f, a->mx);
	a->idx = _mm512_add_epi64(a->idx, _mm512_set1_epi64(8));
}

/* The lanes' statistics, folded in stats_run's order; returns the block
 * hash terms, summed as unsigned (the intrinsic's reduction adds signed
 * lanes). */
static inline __attribute__((always_inline, target("avx512f"))) uint64_t lanes8_finish(const lanes8 *a,
										      run_stats *st)
{
	double ls[8], lq[8];
	float fmn[8], fmx[8];
	uint64_t lh[8], terms = 0;

	_mm512_storeu_pd(ls, a->sum);
	_mm512_storeu_pd(lq, a->ss);
	_mm256_storeu_ps(fmn, a->mn);
	_mm256_storeu_ps(fmx, a->mx);
	_mm512_storeu_si512(lh, a->hb);
	*st = (run_stats){reduce8(ls), reduce8(lq), INFINITY, -INFINITY, 0, 0};
	for (int l = 0; l < 8; l++) {
		st->mn = fmn[l] < st->mn ? fmn[l] : st->mn;
		st->mx = fmx[l] > st->mx ? fmx[l] : st->mx;
		terms += lh[l];
	}
	return terms;
}

/* The same in one pass, 8 values at a time (AVX-512DQ multiplies 64-bit
 * lanes), bfloat16 widened in registers; a run holding NaN or Inf is
 * redone by prep_run. */
__attribute__((target("avx512f,avx512dq"))) static uint64_t prep_run_avx512(uint64_t seed, uint64_t i0,
									     const void *src, bool bf16, size_t n,
									     uint64_t *h, run_stats *st, double *xs,
									     double *ps)
{
	const unsigned char *b = src; /* either dtype, at any alignment */
	lanes8 a = lanes8_start(seed, i0);
	size_t j = 0, es = bf16 ? 2 : 4;
	uint64_t terms;
	run_stats rest;

	for (; j + 8 <= n; j += 8) {
		__m512i x;
		__m512d d;
		lanes8_step(&a, src, bf16, j, &x, &d);
		_mm512_storeu_si512(h + j, x);
		_mm512_storeu_pd(xs + j, flip8(d, x));
		_mm512_storeu_pd(ps + j, flip8(d, _mm512_slli_epi64(x, 1)));
	}
	terms = lanes8_finish(&a, st);
	if (!isfinite(st->sum + st->ss))
		return prep_run(seed, i0, src, bf16, n, h, st, xs, ps);
	/* the tail (n % 8 values) as stats_run has it: lanes of its own */
	terms += prep_run(seed, i0 + j, b + j * es, bf16, n - j, h + j, &rest, xs + j, ps + j);
	if (rest.nan + rest.inf)
		return prep_run(seed, i0, src, bf16, n, h, st, xs, ps);
	st->sum += rest.sum;
	st->ss += rest.ss;
	st->mn = rest.mn < st->mn ? rest.mn : st->mn;
	st->mx = rest.mx > st->mx ? rest.mx : st->mx;
	return terms;
}

#endif

/* dst[t] += src[t] for t < n: contiguous, 8 at a time, so it vectorises. */
static inline __attribute__((always_inline)) void add_to(double *restrict dst, const double *restrict src, size_t n)
{
	size_t t = 0;

	for (; t + 8 <= n; t += 8)
		for (int u = 0; u < 8; u++)
			dst[t + (size_t)u] += src[t + (size_t)u];
	for (; t < n; t++)
		dst[t] += src[t];
}

/* Whole-tensor buckets: the values of each block of k consecutive indices
 * go, in order, to consecutive buckets from a random rotation of the
 * block, wrapping at k.  Two values of one block never share a bucket;
 * two of different blocks share one with chance 1/k, as with a bucket
 * hashed per value, and with the values' own random signs that is all the
 * estimate's variance (2/k of ||x||^4 at most) depends on. */
static inline __attribute__((always_inline)) void add_whole(tb_sketch *s, uint64_t i, const double *xs, size_t n)
{
	uint64_t k = s->p.k, salt = mix(s->p.seed ^ SALT_BLOCK);

	for (size_t j = 0; j < n;) {
		uint64_t t = i % k, len = k - t < n - j ? k - t : n - j;
		uint64_t off = (mix(salt ^ (i / k)) + t) & (k - 1), first = k - off < len ? k - off : len;
		add_to(s->bucket + off, xs + j, first);
		add_to(s->bucket, xs + j + first, len - first);
		i += len;
		j += len;
	}
}

/* A group's rotation: bits 32 and up of its first value's hash (the
 * run's h[j] when that value is in the run). */
static inline uint64_t group_rot(const tb_sketch *s, uint64_t i, const uint64_t *h, size_t j, uint64_t t)
{
	return ((t ? mix(s->p.seed ^ (i + j - t)) : h[j]) >> 32) & (s->p.kp - 1);
}

/* A row's buckets: its columns in groups of kp, each group's values to
 * consecutive buckets from the group's random rotation (see add_whole),
 * every bucket summed in index order.  i is value 0's index, h its
 * hashes. */
static inline __attribute__((always_inline)) void add_pos(tb_sketch *s, cursor *c, uint64_t i, const uint64_t *h, const double *ps, size_t n)
{
	uint64_t kp = s->p.kp;

	for (size_t j = 0; j < n;) {
		uint64_t t = (c->col + j) % kp, len = kp - t < n - j ? kp - t : n - j, r = group_rot(s, i, h, j, t);
		for (uint64_t u = 0; u < len; u++)
			c->acc[(r + t + u) & (kp - 1)] += ps[j + u];
		j += len;
	}
}

/* A run's signed values into the buckets; one copy compiled for
 * AVX-512, where each 8 adds are one instruction. */
typedef void (*add_fn)(tb_sketch *s, cursor *c, uint64_t i, const uint64_t *h, const double *xs, const double *ps,
		       size_t n);

/* Each column's sum over the rows: the values themselves, xs unsigned
 * again (a non-finite value is a zero there). */
static inline __attribute__((always_inline)) void add_cols(cursor *c, const uint64_t *h, const double *xs, size_t n)
{
	double *col = c->cols + c->col;

	for (size_t j = 0; j < n; j++)
		col[j] += flip(xs[j], h[j]);
}

static inline __attribute__((always_inline)) void add_run(tb_sketch *s, cursor *c, uint64_t i, const uint64_t *h, const double *xs,
			   const double *ps, size_t n)
{
	add_whole(s, i, xs, n);
	if (s->p.n_pos > 0) {
		add_pos(s, c, i, h, ps, n);
		add_cols(c, h, xs, n);
	}
}

static void add_run_generic(tb_sketch *s, cursor *c, uint64_t i, const uint64_t *h, const double *xs,
			    const double *ps, size_t n)
{
	add_run(s, c, i, h, xs, ps, n);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* Whole groups of 8 are rotated in a register (bucket b gets the value
 * at place (b - r) mod 8) and added to the row's buckets kept there:
 * the same adds in the same order as add_pos. */
__attribute__((target("avx512f"))) static void add_run_avx512(tb_sketch *s, cursor *c, uint64_t i,
								const uint64_t *h, const double *xs, const double *ps,
								size_t n)
{
	size_t j = 0, head;
	__m512d acc;

	add_whole(s, i, xs, n);
	if (s->p.n_pos <= 0)
		return;
	{
		/* the column sums, 8 at a time: xs unsigned again */
		double *col = c->cols + c->col;
		for (j = 0; j + 8 <= n; j += 8) {
			__m512d x = flip8(_mm512_loadu_pd(xs + j), _mm512_loadu_si512(h + j));
			_mm512_storeu_pd(col + j, _mm512_add_pd(_mm512_loadu_pd(col + j), x));
		}
		c->col += j;
		add_cols(c, h + j, xs + j, n - j);
		c->col -= j;
	}
	if (s->p.kp != 8) {
		add_pos(s, c, i, h, ps, n);
		return;
	}
	head = (8 - c->col % 8) % 8;
	head = head < n ? head : n;
	add_pos(s, c, i, h, ps, head);
	acc = _mm512_loadu_pd(c->acc);
	for (j = head; j + 8 <= n; j += 8)
		acc = _mm512_add_pd(acc, rot8(_mm512_loadu_pd(ps + j), h[j] >> 32));
	_mm512_storeu_pd(c->acc, acc);
	c->col += j;
	add_pos(s, c, i + j, h + j, ps + j, n - j);
	c->col -= j;
}


/* Does a run of n values (float32, or bfloat16) hold NaN or Inf? */
__attribute__((target("avx512f,avx512bw"))) static bool nonfinite_avx512(const void *src, bool bf16, size_t n)
{
	const unsigned char *b = src;
	size_t j = 0, es = bf16 ? 2 : 4, per = 64 / es;
	__m512i em = bf16 ? _mm512_set1_epi16(0x7F80) : _mm512_set1_epi32(0x7F800000);
	__mmask64 any = 0;

	for (; j + per <= n; j += per) {
		__m512i v = _mm512_and_si512(_mm512_loadu_si512(b + j * es), em);
		any |= bf16 ? _mm512_cmpeq_epi16_mask(v, em) : _mm512_cmpeq_epi32_mask(v, em);
	}
	for (; j < n && !any; j++) {
		uint32_t u = 0;
		memcpy((unsigned char *)&u + (bf16 ? 2 : 0), b + j * es, es);
		any = (u & 0x7F800000u) == 0x7F800000u;
	}
	return any != 0;
}

/* The whole of prep_run_avx512 and add_run_avx512 in one pass, where a
 * run allows it (finite; whole groups of 8 on the row's groups and the
 * buckets' vectors; 8 position buckets or none): the same adds in the
 * same order, without storing the signed values and hashes between the
 * passes.  Returns false, having done nothing, where it does not apply. */
__attribute__((target("avx512f,avx512dq,avx512bw"))) static bool fold_run_avx512(tb_sketch *s, cursor *c,
										       uint64_t i0, const void *src,
										       bool bf16, size_t n,
										       run_stats *st, uint64_t *hash)
{
	const tb_sketch_params *p = &s->p;
	bool pos = p->n_pos > 0;
	uint64_t k = p->k, salt = mix(p->seed ^ SALT_BLOCK), block = UINT64_MAX, rotation = 0;
	int kbits = __builtin_ctzll(k);
	lanes8 a = lanes8_start(p->seed, i0);
	__m512d acc = _mm512_setzero_pd();
	double *col = pos ? c->cols + c->col : NULL, tx[8];

	if (n % 8 || i0 % 8 || (pos && (p->kp != 8 || c->col % 8)) || nonfinite_avx512(src, bf16, n))
		return false;
	if (pos)
		acc = _mm512_loadu_pd(c->acc);
	for (size_t j = 0; j < n; j += 8) {
		uint64_t i = i0 + j, off;
		__m512i x;
		__m512d d, xs;
		lanes8_step(&a, src, bf16, j, &x, &d);
		xs = flip8(d, x);
		if (i >> kbits != block) { /* k is a power of two: no division per 8 values */
			block = i >> kbits;
			rotation = mix(salt ^ block);
		}
		off = (rotation + i) & (k - 1);
		if (off + 8 <= k) {
			_mm512_storeu_pd(s->bucket + off, _mm512_add_pd(_mm512_loadu_pd(s->bucket + off), xs));
		} else { /* the rotation wraps inside these 8 */
			_mm512_storeu_pd(tx, xs);
			for (uint64_t l = 0; l < 8; l++)
				s->bucket[(off + l) & (k - 1)] += tx[l];
		}
		if (pos) {
			uint64_t first = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(x));
			_mm512_storeu_pd(col + j, _mm512_add_pd(_mm512_loadu_pd(col + j), d));
			acc = _mm512_add_pd(acc, rot8(flip8(d, _mm512_slli_epi64(x, 1)), first >> 32));
		}
	}
	if (pos)
		_mm512_storeu_pd(c->acc, acc);
	*hash += lanes8_finish(&a, st);
	return true;
}
#endif

/* One pass over a run where it allows, else false (see fold_run_avx512). */
typedef bool (*one_pass_fn)(tb_sketch *s, cursor *c, uint64_t i0, const void *src, bool bf16, size_t n,
			    run_stats *st, uint64_t *hash);

/* A run's two passes, and the one pass where there is one. */
typedef struct kernels {
	prep_fn prep;
	add_fn add;
	one_pass_fn one_pass; /* NULL: none */
} kernels;

/* The AVX-512 copies where the CPU has them (tb_simd_level, which tests
 * can force down): the same sketch, bit for bit. */
static kernels pick(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	if (tb_simd_level() == TB_SIMD_AVX512)
		return (kernels){prep_run_avx512, add_run_avx512, fold_run_avx512};
#endif
	return (kernels){prep_run, add_run_generic, NULL};
}

/* Fold values [i0, i0 + n) into the sketch, a run within one row and one
 * hash block at a time.  Each value's hash of (seed, i) gives its signs
 * (8 at a time where the CPU can); the buckets are rotations of runs of
 * values, so every add is contiguous. */
static void fold(tb_sketch *s, cursor *c, const void *src, bool bf16, uint64_t i0, uint64_t n)
{
	const unsigned char *at = src;
	size_t es = bf16 ? 2 : 4;
	kernels kn = pick();
	const tb_sketch_params *p = &s->p;
	uint64_t h[CHUNK];
	double xs[CHUNK], ps[CHUNK];

	for (uint64_t k = 0; k < n;) {
		uint64_t run = p->n_pos > 0 ? p->row_len - c->col : n, to_block = TB_SKETCH_BLOCK - (i0 + k) % TB_SKETCH_BLOCK;
		run_stats st;
		if (run > n - k)
			run = n - k;
		if (run > to_block)
			run = to_block;
		if (run > CHUNK)
			run = CHUNK;
		uint64_t *hash = &s->hash[(i0 + k) / TB_SKETCH_BLOCK];
		if (!kn.one_pass || !kn.one_pass(s, c, i0 + k, at + k * es, bf16, run, &st, hash)) {
			*hash += kn.prep(p->seed, i0 + k, at + k * es, bf16, run, h, &st, xs, ps);
			kn.add(s, c, i0 + k, h, xs, ps, run);
		}
		s->nan += st.nan;
		s->inf += st.inf;
		s->sum += st.sum;
		s->sumsq += st.ss;
		s->min = st.mn < s->min ? st.mn : s->min;
		s->max = st.mx > s->max ? st.mx : s->max;
		if (p->n_pos > 0) {
			c->ss += st.ss;
			c->col += run;
			if (c->col == p->row_len)
				end_row(s, c);
		}
		k += run;
	}
}

/* One thread's share of a tensor: values [from, to), whole rows, folded
 * into its own sketch. */
typedef struct share {
	tb_tensor *t;
	tb_sketch *s;
	uint64_t from, to;
	bool nomem;
} share;

static void *sketch_share(void *arg)
{
	share *sh = arg;
	tb_sketch *s = sh->s;
	/* float32 and bfloat16 in place are read there; anything else
	 * decoded a block at a time */
	bool bf16 = sh->t->dtype == TB_DT_BF16 && tb_tensor_data(sh->t);
	const unsigned char *direct = tb_tensor_f32_direct(sh->t) ? tb_tensor_data(sh->t) : bf16 ? tb_tensor_data(sh->t) : NULL;
	float *v = direct ? NULL : malloc(READ_BLOCK * sizeof *v);
	cursor c = {0};

	c.cols = s->p.n_pos > 0 ? calloc((size_t)s->p.row_len, sizeof *c.cols) : NULL;
	if ((!direct && !v) || (s->p.n_pos > 0 && !c.cols)) {
		free(v);
		free(c.cols);
		sh->nomem = true;
		return NULL;
	}
	if (s->p.n_pos > 0)
		c.pos = (int64_t)((sh->from / s->p.row_len) % (uint64_t)s->p.n_pos);
	for (uint64_t i = sh->from, dropped = i; i < sh->to; i += READ_BLOCK) {
		uint64_t n = sh->to - i < READ_BLOCK ? sh->to - i : READ_BLOCK;
		if (!direct)
			tb_tensor_read_f32(sh->t, i, n, v);
		fold(s, &c, direct ? (const void *)(direct + i * (bf16 ? 2 : 4)) : v, bf16, i, n);
		/* pages given back DROP_BLOCKS read blocks at a time: each
		 * drop stops the other threads to flush their TLBs */
		if (i + n == sh->to || i + n - dropped >= DROP_BLOCKS * READ_BLOCK) {
			tb_tensor_drop(sh->t, dropped, i + n - dropped);
			dropped = i + n;
		}
	}
	if (c.cols)
		flush_cols(s, &c);
	free(c.cols);
	free(v);
	return NULL;
}

void tb_sketch_add(tb_sketch *into, const tb_sketch *from)
{
	for (uint32_t k = 0; k < into->p.k; k++)
		into->bucket[k] += from->bucket[k];
	for (int64_t q = 0; q < into->p.n_pos; q++)
		into->pos_sumsq[q] += from->pos_sumsq[q];
	for (int64_t k = 0; k < into->p.n_pos * into->p.kp; k++)
		into->pos_bucket[k] += from->pos_bucket[k];
	for (uint64_t h = 0; into->p.n_pos > 0 && h < into->p.row_len; h++)
		into->col_sum[h] += from->col_sum[h];
	for (uint64_t b = 0; b < into->n_blocks; b++)
		into->hash[b] += from->hash[b];
	into->nan += from->nan;
	into->inf += from->inf;
	into->sum += from->sum;
	into->sumsq += from->sumsq;
	into->min = from->min < into->min ? from->min : into->min;
	into->max = from->max > into->max ? from->max : into->max;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

int tb_sketch_tensor(tb_tensor *t, tb_sketch *s, int threads, tb_err *err)
{
	enum { MAX_SHARES = 64 };
	uint64_t row = s->p.n_pos > 0 ? s->p.row_len : 1, unit, units;
	share sh[MAX_SHARES];
	tb_sketch part[MAX_SHARES];
	pthread_t tid[MAX_SHARES];
	int n = threads < 1 ? 1 : threads > MAX_SHARES ? MAX_SHARES : threads, started = 0, rc = 0;

	/* shares start on a row, and on a read block for the page cache's
	 * sake (one share when that unit is longer than the tensor) */
	unit = row / gcd(row, READ_BLOCK);
	unit = unit > t->numel / READ_BLOCK + 1 ? t->numel + 1 : unit * READ_BLOCK;
	units = (t->numel + unit - 1) / unit;
	if ((uint64_t)n > units)
		n = units ? (int)units : 1;
	if (tb_tensor_streamed(t))
		n = 1; /* a deflated member inflates front to back: shares would restart it by turns */
	if (tb_tensor_acquire(t, err) < 0)
		return -1;
	for (int k = 0; k < n; k++) {
		sh[k] = (share){t, k ? &part[k] : s, units * (uint64_t)k / (uint64_t)n * unit,
				units * (uint64_t)(k + 1) / (uint64_t)n * unit, false};
		if (sh[k].to > t->numel)
			sh[k].to = t->numel;
		if (k && tb_sketch_alloc(&part[k], &s->p) < 0) {
			n = k;
			rc = tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
			break;
		}
	}
	if (n > 1)
		tb_blas_pool_stop();
	for (int k = 1; k < n && rc == 0; k++, started++)
		if (pthread_create(&tid[k], NULL, sketch_share, &sh[k]) != 0) {
			rc = tb_err_setc(err, TB_ERR_SYSTEM, NULL, "cannot start a thread");
			break;
		}
	if (rc == 0)
		sketch_share(&sh[0]);
	for (int k = 1; k <= started; k++)
		pthread_join(tid[k], NULL);
	for (int k = 0; k < n; k++) {
		if (sh[k].nomem && rc == 0)
			rc = tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
		if (k) {
			tb_sketch_add(s, &part[k]);
			tb_sketch_free(&part[k]);
		}
	}
	s->finite = t->numel - s->nan - s->inf;
	tb_tensor_release(t);
	return rc;
}

int tb_sketch_shard(tb_tensor *t, tb_sketch *s, int axis, const int64_t *width, int n_parts, int rank, int ranks,
		    tb_err *err)
{
	uint64_t inner = 1, m, dropped = 0, start[4] = {0};
	float *v;
	double *cols;
	cursor c = {0};

	if (axis < 0 || axis >= t->ndim || n_parts < 1 || n_parts > 3)
		return tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s' has no axis %d to split", t->name, axis);
	for (int d = axis + 1; d < t->ndim; d++)
		inner *= (uint64_t)t->shape[d];
	/* a chunk: the rank's values for one index of the axes before the
	 * split one, consecutive in t; in the joined tensor each part of it
	 * lies beside the other ranks' same part */
	m = (uint64_t)t->shape[axis] * inner;
	for (int k = 0; k < n_parts; k++)
		start[k + 1] = start[k] + (width[k] > 0 ? (uint64_t)width[k] : 0) * inner;
	if (m == 0 || start[n_parts] != m || t->numel % m || t->numel * (uint64_t)ranks != s->p.numel)
		return tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s' does not fit its joined shape", t->name);
	v = malloc(READ_BLOCK * sizeof *v);
	cols = s->p.n_pos > 0 ? calloc((size_t)s->p.row_len, sizeof *cols) : NULL;
	if (!v || (s->p.n_pos > 0 && !cols)) {
		free(v);
		free(cols);
		return tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
	}
	if (tb_tensor_acquire(t, err) < 0) {
		free(v);
		free(cols);
		return -1;
	}
	for (uint64_t p0 = 0; p0 < t->numel; p0 += READ_BLOCK) {
		uint64_t p1 = t->numel - p0 < READ_BLOCK ? t->numel : p0 + READ_BLOCK;
		tb_tensor_read_f32(t, p0, p1 - p0, v);
		for (uint64_t i = p0; i < p1;) {
			uint64_t off = i % m;
			int k = 0;
			while (off >= start[k + 1])
				k++;
			uint64_t len = start[k + 1] - off < p1 - i ? start[k + 1] - off : p1 - i;
			uint64_t at = i / m * m * (uint64_t)ranks + start[k] * (uint64_t)ranks +
				      (uint64_t)rank * (start[k + 1] - start[k]) + off - start[k];
			if (off == start[k] && s->p.n_pos > 0)
				c = (cursor){.pos = (int64_t)(at / s->p.row_len % (uint64_t)s->p.n_pos),
					     .col = at % s->p.row_len,
					     .cols = cols};
			fold(s, &c, v + (i - p0), false, at, len);
			/* the rest of a row begun here is other ranks' */
			if (off + len == start[k + 1] && s->p.n_pos > 0 && c.col != 0)
				flush_row(s, &c);
			i += len;
		}
		if (p1 == t->numel || p1 - dropped >= DROP_BLOCKS * READ_BLOCK) {
			tb_tensor_drop(t, dropped, p1 - dropped);
			dropped = p1;
		}
	}
	if (cols) {
		c.cols = cols;
		flush_cols(s, &c);
	}
	s->finite = t->numel - s->nan - s->inf;
	s->rank = (uint16_t)rank;
	s->ranks = (uint16_t)ranks;
	tb_tensor_release(t);
	free(cols);
	free(v);
	return 0;
}

bool tb_sketch_params_match(const tb_sketch_params *a, const tb_sketch_params *b, char *buf, size_t size)
{
	if (a->seed != b->seed)
		snprintf(buf, size, "sketched with seeds %llu and %llu", (unsigned long long)a->seed,
			 (unsigned long long)b->seed);
	else if (a->numel != b->numel || a->n_pos != b->n_pos || a->row_len != b->row_len)
		snprintf(buf, size, "sketches of %llu and %llu values", (unsigned long long)a->numel,
			 (unsigned long long)b->numel);
	else if (a->k != b->k || a->kp != b->kp)
		snprintf(buf, size, "sketches of %u and %u buckets", a->k, b->k);
	else
		return true;
	return false;
}
