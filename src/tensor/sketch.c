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
	/* The shape alone decides, not the dtype, so that the sketches of a
	 * float32 tree and a bfloat16 one compare.  A bucket of 8 bytes per
	 * 2048 values: 0.1% of them in float32, 0.2% in bfloat16. */
	p->k = pow2_clamp(t->numel / 2048, 64, 4096);
	if (nd >= 2 && d[nd - 1] > 0 && d[nd - 2] > 0) {
		p->n_pos = d[nd - 2];
		p->row_len = (uint64_t)d[nd - 1];
		/* a row's 4 bytes of sum of squares and kp buckets of 4 within
		 * 0.25% of its values in float32 (0.5% in bfloat16), up to 8
		 * (a row of 4096 gets 8, of 2048 4, of 1024 1); rows under 512
		 * values, whose sketch cannot be small, get 8 */
		uint64_t budget = p->row_len / 100;
		p->kp = p->row_len < 512 ? pow2_clamp(p->row_len, 1, 8) : budget > 4 ? pow2_clamp((budget - 4) / 4, 1, 8) : 1;
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
		tb_sketch_done(s);
		return -1;
	}
	return 0;
}

void tb_sketch_done(tb_sketch *s)
{
	free(s->bucket);
	free(s->pos_sumsq);
	free(s->pos_bucket);
	free(s->col_sum);
	free(s->hash);
	memset(s, 0, sizeof *s);
}

/* Where the next value lands: its row's position and column, the row's
 * sum of squares and position lanes so far, and each column's sum over
 * the rows so far (cols, row_len of them, owned by who folds; all in
 * double until stored). */
typedef struct cursor {
	int64_t pos;
	uint64_t col;
	double ss;
	/* lane l of the row's position sums, for the columns in even
	 * (acc[0]) and odd (acc[1]) eighths of the row: two sums, so that
	 * the AVX-512 loop's adds need not wait for each other */
	double acc[2][8];
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

/* Add the row's sums into its position's (as float) and start over:
 * bucket b sums the lanes l = b mod kp in order. */
static void flush_row(tb_sketch *s, cursor *c)
{
	uint32_t kp = s->p.kp;

	s->pos_sumsq[c->pos] += (float)c->ss;
	c->ss = 0;
	for (uint32_t b = 0; b < kp; b++) {
		double sum = 0;
		for (uint32_t l = b; l < 8; l += kp)
			sum += c->acc[0][l] + c->acc[1][l];
		s->pos_bucket[(size_t)c->pos * kp + b] += (float)sum;
	}
	memset(c->acc, 0, sizeof c->acc);
}

static void end_row(tb_sketch *s, cursor *c)
{
	flush_row(s, c);
	c->col = 0;
	c->pos = c->pos + 1 == s->p.n_pos ? 0 : c->pos + 1;
}

/* Values folded at a time: a bfloat16 run's float32 copy stays in the
 * first-level cache. */
#define CHUNK 1024

/* Salts that make each chunk's four hashes, the blocks' rotations and the
 * lanes' multipliers other numbers (the fractional parts of square roots
 * of primes). */
#define SALT_BLOCK 0x6a09e667f3bcc909u
#define SALT_SIGN 0x9b05688c2b3e6c1fu
#define SALT_POS 0xbb67ae8584caa73bu
#define SALT_ROT 0x3c6ef372fe94f82bu
#define SALT_MULT 0xa54ff53a5f1d36f1u
#define SALT_LANE 0x510e527fade682d1u

/* The hashes of chunk g, values 64g to 64g + 63: bit i mod 64 of sign and
 * pos_sign is value i's sign in the whole tensor's sketch and in its
 * position's, rot holds its position groups' rotations, and mult (odd)
 * multiplies the chunk's block-hash terms.  One hash of each per 64
 * values, not one per value: their bits are as random. */
typedef struct chunk {
	uint64_t sign, pos_sign, rot, mult;
} chunk;

/* The seeds of a chunk's four hashes: each hashed from the sketch's seed
 * and a salt, so that the four are computed side by side. */
typedef struct chunk_seeds {
	uint64_t sign, pos_sign, rot, mult;
} chunk_seeds;

static chunk_seeds chunk_seeds_of(uint64_t seed)
{
	return (chunk_seeds){mix(seed ^ SALT_SIGN), mix(seed ^ SALT_POS), mix(seed ^ SALT_ROT), mix(seed ^ SALT_MULT)};
}

static inline __attribute__((always_inline)) chunk chunk_of(const chunk_seeds *cs, uint64_t g)
{
	return (chunk){mix(cs->sign ^ g), mix(cs->pos_sign ^ g), mix(cs->rot ^ g), mix(cs->mult ^ g) | 1};
}

static uint64_t ror(uint64_t x, unsigned n)
{
	return n ? x >> n | x << (64 - n) : x;
}

/* The rotation of the position group (kp columns) whose first value is
 * value i: bits i mod 64 and up of its chunk's rot, cyclically. */
static uint64_t group_rot(const chunk_seeds *cs, uint64_t i, uint32_t kp)
{
	return ror(mix(cs->rot ^ (i >> 6)), (unsigned)(i & 63)) & (kp - 1);
}

/* The lane of a row's position sums that column col goes to, in a group
 * rotated by r: the group's place in its eighth, plus its rotated place
 * in the group (for kp = 8, the bucket itself). */
static unsigned pos_lane(uint64_t col, uint64_t r, uint32_t kp)
{
	return (unsigned)((col & 7 & ~(uint64_t)(kp - 1)) | ((r + col) & (kp - 1)));
}

/* Does a run allow the AVX-512 pass: whole chunks of 64, and in a row of
 * whole chunks? */
static bool whole_chunks(const tb_sketch *s, const cursor *c, uint64_t i0, size_t n)
{
	return n % 64 == 0 && i0 % 64 == 0 && (s->p.n_pos <= 0 || c->col % 64 == 0);
}

/* What every run of one sketch shares, made once per part of a tensor:
 * the lanes' block-hash multipliers and, for the AVX-512 loop, the lane
 * order of each combination of its eighth's groups' rotations. */
typedef struct folder {
	chunk_seeds seeds;
	uint64_t lane_mult[64] __attribute__((aligned(64)));
	uint64_t lane_mult_hi[64] __attribute__((aligned(64))); /* their high halves, for AVX2's 32-bit multiplies */
	int64_t perm[16][8] __attribute__((aligned(64)));        /* perm[row][lane]: the column it takes */
	int32_t perm32[16][8] __attribute__((aligned(64)));      /* the same, for AVX2's float permute */
	uint8_t perm_row[256];                            /* an eighth's byte of rot: its row */
} folder;

static void folder_init(folder *fd, const tb_sketch_params *p)
{
	uint32_t kp = p->kp ? p->kp : 8;
	int kpl = __builtin_ctz(kp);

	fd->seeds = chunk_seeds_of(p->seed);
	for (uint64_t l = 0; l < 64; l++) {
		fd->lane_mult[l] = mix(p->seed ^ SALT_LANE ^ l) | 1;
		fd->lane_mult_hi[l] = fd->lane_mult[l] >> 32;
	}
	for (unsigned row = 0; row < 16; row++)
		for (unsigned lane = 0; lane < 8; lane++) {
			unsigned r = kpl ? (row >> (kpl * (lane >> kpl))) & (kp - 1) : 0;
			fd->perm[row][lane] = (lane & ~(kp - 1)) | ((lane - r) & (kp - 1));
			fd->perm32[row][lane] = (int32_t)fd->perm[row][lane];
		}
	for (unsigned byte = 0; byte < 256; byte++) {
		unsigned row = 0;
		for (unsigned u = 0; kpl && u < 8 / kp; u++)
			row |= ((byte >> (kp * u)) & (kp - 1)) << (kpl * u);
		fd->perm_row[byte] = (uint8_t)row;
	}
}

/* A run's statistics over its finite values. */
typedef struct run_stats {
	double sum, ss, mn, mx;
	uint64_t nan, inf;
} run_stats;

/* Eight lanes summed in a fixed order. */
static double reduce8(const double *l)
{
	return tb_fold4(l) + tb_fold4(l + 4);
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

/* Value i in lane i mod 16, so that no add waits for the one before, the
 * lanes folded in the order the AVX-512 copy folds them (bit for bit the
 * same sums); a run holding NaN or Inf is redone value by value.  i0 is
 * value 0's index. */
static void stats_run(uint64_t i0, const float *v, size_t n, run_stats *st)
{
	double s[16] = {0}, q[16] = {0}, ts[8], tq[8];
	float mn = INFINITY, mx = -INFINITY;

	for (size_t j = 0; j < n; j++) {
		double x = v[j];
		s[(i0 + j) & 15] += x;
		q[(i0 + j) & 15] += x * x;
	}
	for (int l = 0; l < 8; l++) {
		ts[l] = s[l] + s[l + 8];
		tq[l] = q[l] + q[l + 8];
	}
	*st = (run_stats){reduce8(ts), reduce8(tq), INFINITY, -INFINITY, 0, 0};
	if (!isfinite(st->sum + st->ss)) {
		stats_nonfinite(v, n, st);
		return;
	}
	for (size_t j = 0; j < n; j++) {
		mn = v[j] < mn ? v[j] : mn;
		mx = v[j] > mx ? v[j] : mx;
	}
	st->mn = mn;
	st->mx = mx;
}

#define SIGN 0x8000000000000000u

/* x times -1 where bit `bit` of m is set, else x: exactly. */
static inline double signed_by(double x, uint64_t m, unsigned bit)
{
	uint64_t b;

	memcpy(&b, &x, 8);
	b ^= (m << (63 - bit)) & SIGN;
	memcpy(&x, &b, 8);
	return x;
}

/* What a pass over a run keeps besides its sums: the whole-tensor buckets
 * and the run's columns (locals, as the intrinsics' stores may alias
 * anything), and the current block's rotation. */
typedef struct pass {
	double *bucket, *col; /* col: NULL without positions */
	uint64_t k, salt, block, rotation;
	int kbits;
} pass;

static pass pass_start(tb_sketch *s, cursor *c)
{
	return (pass){s->bucket, s->p.n_pos > 0 ? c->cols + c->col : NULL, s->p.k, mix(s->p.seed ^ SALT_BLOCK),
		      UINT64_MAX, 0, __builtin_ctzll(s->p.k)};
}

/* The whole-tensor bucket of value i: the values of each block of k
 * consecutive indices go, in order, to consecutive buckets from a random
 * rotation of the block, wrapping at k. */
static inline __attribute__((always_inline)) uint64_t pass_offset(pass *ps, uint64_t i)
{
	if (i >> ps->kbits != ps->block) { /* k is a power of two: no division */
		ps->block = i >> ps->kbits;
		ps->rotation = mix(ps->salt ^ ps->block);
	}
	return (ps->rotation + i) & (ps->k - 1);
}

/* A run of values [i0, i0 + n) of one row (the cursor's) and one hash
 * block, float32, value by value: statistics, whole-tensor buckets,
 * position lanes, column sums; returns the run's block-hash terms.
 * Whole-tensor buckets (pass_offset): two values of one block never
 * share a bucket; two of different blocks share one with chance 1/k, as
 * with a bucket hashed per value, and with the values' own random signs
 * that is all the estimate's variance (2/k of ||x||^4 at most) depends
 * on.  A row's
 * buckets: its columns in groups of kp, each group's values to
 * consecutive buckets from the group's random rotation, the same way.
 * A non-finite value adds a zero. */
static uint64_t fold_generic(tb_sketch *s, cursor *c, const folder *fd, uint64_t i0, const float *v, size_t n,
			     run_stats *st)
{
	const tb_sketch_params *p = &s->p;
	uint64_t kp = p->kp, hash = 0, g = UINT64_MAX, r = 0;
	pass ps = pass_start(s, c);
	chunk h = {0};

	stats_run(i0, v, n, st);
	for (size_t j = 0; j < n; j++) {
		uint64_t i = i0 + j;
		unsigned lane = (unsigned)(i & 63);
		uint32_t bits;
		double x = isfinite(v[j]) ? v[j] : 0;
		memcpy(&bits, &v[j], sizeof bits);
		if (i >> 6 != g) {
			g = i >> 6;
			h = chunk_of(&fd->seeds, g);
		}
		/* a term per value, so that shares and shards of a tensor add
		 * up to its hash */
		hash += bits * fd->lane_mult[lane] * h.mult;
		ps.bucket[pass_offset(&ps, i)] += signed_by(x, h.sign, lane);
		if (ps.col) {
			uint64_t col = c->col + j, first = i - (col & (kp - 1)); /* kp a power of two */
			if (j == 0 || (col & (kp - 1)) == 0) /* a group's first value: its rotation */
				r = first >> 6 == g ? ror(h.rot, (unsigned)(first & 63)) & (kp - 1)
						    : group_rot(&fd->seeds, first, (uint32_t)kp);
			ps.col[j] += x;
			c->acc[(col >> 3) & 1][pos_lane(col, r, (uint32_t)kp)] += signed_by(x, h.pos_sign, lane);
		}
	}
	return hash;
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>

/* The 8 values tx into buckets o.. of k, wrapping at k: where a block's
 * rotation wraps inside an eighth. */
static void add_wrapped(double *bucket, uint64_t k, uint64_t o, const double *tx)
{
	for (uint64_t l = 0; l < 8; l++)
		bucket[(o + l) & (k - 1)] += tx[l];
}

#define AVX2 __attribute__((always_inline, target("avx2"))) static inline
#define AVX512 __attribute__((always_inline, target("avx512f,avx512dq,avx512bw,avx512vl"))) static inline

/* Values j..j+7 of a run, float32 or bfloat16 (at any alignment), as
 * float32 (for both copies). */
AVX2 __m256 load8(const void *src, bool bf16, size_t j)
{
	const unsigned char *b = src;

	if (bf16)
		return avx_bf16x8(b + 2 * j);
	return _mm256_loadu_ps((const float *)src + j);
}

/* Are the 64 values of a run's chunk at j (float32, or bfloat16) free of
 * NaN and Inf?  (The AVX-512 copy's own, in 512-bit loads, is faster
 * there.) */
AVX2 bool chunk_finite_avx2(const void *src, bool bf16, size_t j)
{
	const unsigned char *b = (const unsigned char *)src + j * (bf16 ? 2 : 4);
	__m256i em = bf16 ? _mm256_set1_epi16(0x7F80) : _mm256_set1_epi32(0x7F800000), any = _mm256_setzero_si256();

	for (int q = 0; q < (bf16 ? 4 : 8); q++) {
		__m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(b + 32 * q)), em);
		any = _mm256_or_si256(any, bf16 ? _mm256_cmpeq_epi16(v, em) : _mm256_cmpeq_epi32(v, em));
	}
	return _mm256_testz_si256(any, any);
}

/* A one pass's lanes, stored: the run's statistics folded as stats_run
 * folds them, and its block-hash terms, summed as unsigned (the
 * intrinsics' reductions add signed lanes). */
static uint64_t lanes_done(const double *ls, const double *lq, const uint64_t *lh, const float *fmn, const float *fmx,
			   run_stats *st)
{
	uint64_t terms = 0;

	*st = (run_stats){reduce8(ls), reduce8(lq), INFINITY, -INFINITY, 0, 0};
	for (int l = 0; l < 8; l++) {
		terms += lh[l];
		st->mn = fmn[l] < st->mn ? fmn[l] : st->mn;
		st->mx = fmx[l] > st->mx ? fmx[l] : st->mx;
	}
	return terms;
}

/* lanes_done's reductions in registers (its stores and reloads cost 6%
 * of a sketch's time): the lanes summed in reduce8's order, so the same
 * bits, */
AVX512 double reduce8_avx512(__m512d l)
{
	l = _mm512_add_pd(l, _mm512_permute_pd(l, 0x55));                            /* l0 + l1 in lane 0 */
	l = _mm512_add_pd(l, _mm512_permutex_pd(l, _MM_SHUFFLE(1, 0, 3, 2)));         /* + (l2 + l3) */
	return _mm512_cvtsd_f64(_mm512_add_pd(l, _mm512_shuffle_f64x2(l, l, _MM_SHUFFLE(1, 0, 3, 2))));
}

/* the block-hash terms modulo 2^64 (unsigned adds: the header's
 * reduction adds signed lanes, whose overflow is undefined), */
AVX512 uint64_t sum8_avx512(__m512i h)
{
	h = _mm512_add_epi64(h, _mm512_shuffle_i64x2(h, h, _MM_SHUFFLE(1, 0, 3, 2)));
	h = _mm512_add_epi64(h, _mm512_shuffle_i64x2(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
	h = _mm512_add_epi64(h, _mm512_shuffle_epi32(h, _MM_PERM_BADC));
	return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(h));
}

/* and the extreme of 8 lanes as lanes_done's scan finds it: the first lane
 * that holds it (of -0 and +0, the one in the lower lane). */
AVX512 __m256 extreme8(__m256 a, __m256 b, bool max)
{
	return max ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
}

AVX512 float first_equal(__m256 v, bool max)
{
	__m256 m = extreme8(v, _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)), max);
	unsigned first;

	m = extreme8(m, _mm256_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)), max);
	m = extreme8(m, _mm256_permute2f128_ps(m, m, 1), max);
	first = (unsigned)__builtin_ctz((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, m, _CMP_EQ_OQ)));
	return _mm256_cvtss_f32(_mm256_permutevar8x32_ps(v, _mm256_set1_epi32((int)first)));
}

/* x with its sign flipped in the lanes where m has a bit set. */
AVX512 __m512d flip8(__m512d x, unsigned m)
{
	__m512i v = _mm512_castpd_si512(x);

	return _mm512_castsi512_pd(_mm512_mask_xor_epi64(v, _cvtu32_mask8(m & 0xFF), v, _mm512_set1_epi64((long long)SIGN)));
}

/* The one pass's running sums: statistics (value i in lane i mod 16:
 * sum[0], ss[0] the first eight), block-hash terms, the row's position
 * lanes (acc[0], acc[1] as the cursor's) and extremes. */
typedef struct lanes {
	__m512i hb, hs;
	__m512d sum0, sum1, ss0, ss1, acc0, acc1;
	__m256 mn, mx;
} lanes;

/* Eighth e of a chunk: values j + 8e .. j + 8e + 7, at off + 8e of the
 * whole-tensor buckets and, in a row, at column col + 8e. */
AVX512 void eighth(lanes *a, double *bucket, uint64_t k, const folder *fd, const void *src, bool bf16, size_t j,
		   unsigned e, chunk h, uint64_t off, double *col)
{
	uint64_t o = (off + 8 * e) & (k - 1);
	__m256 f = load8(src, bf16, j + 8 * e);
	__m512d d = _mm512_cvtps_pd(f), xs = flip8(d, (unsigned)(h.sign >> (8 * e)));

	a->hs = _mm512_add_epi64(a->hs, _mm512_mullo_epi64(_mm512_cvtepu32_epi64(_mm256_castps_si256(f)),
							   _mm512_load_si512(fd->lane_mult + 8 * e)));
	if (e & 1) {
		a->sum1 = _mm512_add_pd(a->sum1, d);
		a->ss1 = _mm512_add_pd(a->ss1, _mm512_mul_pd(d, d));
	} else {
		a->sum0 = _mm512_add_pd(a->sum0, d);
		a->ss0 = _mm512_add_pd(a->ss0, _mm512_mul_pd(d, d));
	}
	a->mn = _mm256_min_ps(f, a->mn);
	a->mx = _mm256_max_ps(f, a->mx);
	if (o + 8 <= k) {
		_mm512_storeu_pd(bucket + o, _mm512_add_pd(_mm512_loadu_pd(bucket + o), xs));
	} else {
		double tx[8];
		_mm512_storeu_pd(tx, xs);
		add_wrapped(bucket, k, o, tx);
	}
	if (col) {
		__m512d ps = flip8(d, (unsigned)(h.pos_sign >> (8 * e)));
		__m512i perm = _mm512_load_si512(fd->perm[fd->perm_row[(h.rot >> (8 * e)) & 0xFF]]);
		_mm512_storeu_pd(col + 8 * e, _mm512_add_pd(_mm512_loadu_pd(col + 8 * e), d));
		if (e & 1)
			a->acc1 = _mm512_add_pd(a->acc1, _mm512_permutexvar_pd(perm, ps));
		else
			a->acc0 = _mm512_add_pd(a->acc0, _mm512_permutexvar_pd(perm, ps));
	}
}

/* chunk_finite_avx2 in 512-bit loads. */
AVX512 bool chunk_finite(const void *src, bool bf16, size_t j)
{
	const unsigned char *b = (const unsigned char *)src + j * (bf16 ? 2 : 4);
	__mmask64 any = 0;

	if (bf16) {
		__m512i em = _mm512_set1_epi16(0x7F80);
		for (int q = 0; q < 2; q++)
			any |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(_mm512_loadu_si512(b + 64 * q), em), em);
	} else {
		__m512i em = _mm512_set1_epi32(0x7F800000);
		for (int q = 0; q < 4; q++)
			any |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(b + 64 * q), em), em);
	}
	return any == 0;
}

/* fold_generic's sums, 8 values at a time, bfloat16 widened in
 * registers, over the finite chunks a run starts with (finite_head), where
 * the run allows (whole_chunks): the same adds in the same order.  Returns
 * how many values it folded (0: none). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static size_t
fold_avx512(tb_sketch *s, cursor *c, const folder *fd, uint64_t i0, const void *src, bool bf16, size_t n,
	    run_stats *st, uint64_t *hash)
{
	pass ps = pass_start(s, c);
	size_t j = 0;
	lanes a = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_pd(), _mm512_setzero_pd(),
		   _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_loadu_pd(c->acc[0]), _mm512_loadu_pd(c->acc[1]),
		   _mm256_set1_ps(INFINITY), _mm256_set1_ps(-INFINITY)};

	if (!whole_chunks(s, c, i0, n))
		return 0;
	for (; j < n && chunk_finite(src, bf16, j); j += 64) {
		uint64_t i = i0 + j, off = pass_offset(&ps, i), k = ps.k;
		chunk h = chunk_of(&fd->seeds, i >> 6);
		double *cj = ps.col ? ps.col + j : NULL, *bucket = ps.bucket;
		a.hs = _mm512_setzero_si512();
		eighth(&a, bucket, k, fd, src, bf16, j, 0, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 1, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 2, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 3, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 4, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 5, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 6, h, off, cj);
		eighth(&a, bucket, k, fd, src, bf16, j, 7, h, off, cj);
		a.hb = _mm512_add_epi64(a.hb, _mm512_mullo_epi64(a.hs, _mm512_set1_epi64((long long)h.mult)));
	}
	if (j == 0)
		return 0;
	_mm512_storeu_pd(c->acc[0], a.acc0);
	_mm512_storeu_pd(c->acc[1], a.acc1);
	*st = (run_stats){reduce8_avx512(_mm512_add_pd(a.sum0, a.sum1)), reduce8_avx512(_mm512_add_pd(a.ss0, a.ss1)),
			  first_equal(a.mn, false), first_equal(a.mx, true), 0, 0};
	*hash += sum8_avx512(a.hb);
	return j;
}

/* The AVX2 copy of fold_avx512, for CPUs without AVX-512: 4 doubles a
 * register, a 64-bit multiply of three 32-bit ones, signs from bits
 * shifted into place, and the position groups' rotation permuting the 8
 * values as float32 before they widen (exact either way).  Its running
 * sums, as fold_avx512's lanes: statistics' lanes
 * 0-3, 4-7, 8-11 and 12-15 in sum[0..3], ss[0..3]; the row's position
 * lanes acc[0] (0-3, 4-7) and acc[1]; block-hash terms of the eighths'
 * values 0-3 and 4-7. */
typedef struct lanes2 {
	__m256i hb[2], hs[2];
	__m256d sum[4], ss[4], acc[2][2];
	__m256 mn, mx;
} lanes2;

/* a * b modulo 2^64 in 4 lanes, a below 2^32 (b_hi: b's high halves). */
AVX2 __m256i mul64_avx2(__m256i a, __m256i b, __m256i b_hi)
{
	return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(_mm256_mul_epu32(a, b_hi), 32));
}

/* a * b modulo 2^64 in 4 lanes. */
AVX2 __m256i mul64_full_avx2(__m256i a, __m256i b)
{
	__m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
					 _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));

	return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

/* The 8 values' float32 signs flipped where the byte m has a bit set
 * (lane l: bit l). */
AVX2 __m256 flip8f_avx2(__m256 f, unsigned m)
{
	__m256i bits = _mm256_sllv_epi32(_mm256_set1_epi32((int)(m & 0xFF)), _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24));

	return _mm256_xor_ps(f, _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32((int)0x80000000u))));
}

/* Eighth e of a chunk, as eighth. */
AVX2 void eighth_avx2(lanes2 *a, double *bucket, uint64_t k, const folder *fd, const void *src, bool bf16, size_t j,
		      unsigned e, chunk h, uint64_t off, double *col)
{
	uint64_t o = (off + 8 * e) & (k - 1);
	__m256 f = load8(src, bf16, j + 8 * e), xf = flip8f_avx2(f, (unsigned)(h.sign >> (8 * e)));
	__m256i u = _mm256_castps_si256(f);
	__m256d d[2] = {_mm256_cvtps_pd(_mm256_castps256_ps128(f)), _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1))};
	__m256d xs[2] = {_mm256_cvtps_pd(_mm256_castps256_ps128(xf)), _mm256_cvtps_pd(_mm256_extractf128_ps(xf, 1))};

	for (int q = 0; q < 2; q++) {
		__m256i w = _mm256_cvtepu32_epi64(q ? _mm256_extracti128_si256(u, 1) : _mm256_castsi256_si128(u));
		a->hs[q] = _mm256_add_epi64(
			a->hs[q], mul64_avx2(w, _mm256_load_si256((const __m256i *)(const void *)(fd->lane_mult + 8 * e + 4 * q)),
					     _mm256_load_si256((const __m256i *)(const void *)(fd->lane_mult_hi + 8 * e + 4 * q))));
		a->sum[2 * (e & 1) + q] = _mm256_add_pd(a->sum[2 * (e & 1) + q], d[q]);
		a->ss[2 * (e & 1) + q] = _mm256_add_pd(a->ss[2 * (e & 1) + q], _mm256_mul_pd(d[q], d[q]));
	}
	a->mn = _mm256_min_ps(f, a->mn);
	a->mx = _mm256_max_ps(f, a->mx);
	if (o + 8 <= k) {
		for (int q = 0; q < 2; q++)
			_mm256_storeu_pd(bucket + o + 4 * q, _mm256_add_pd(_mm256_loadu_pd(bucket + o + 4 * q), xs[q]));
	} else {
		double tx[8];
		_mm256_storeu_pd(tx, xs[0]);
		_mm256_storeu_pd(tx + 4, xs[1]);
		add_wrapped(bucket, k, o, tx);
	}
	if (col) {
		__m256i perm = _mm256_load_si256((const __m256i *)(const void *)fd->perm32[fd->perm_row[(h.rot >> (8 * e)) & 0xFF]]);
		__m256 pf = _mm256_permutevar8x32_ps(flip8f_avx2(f, (unsigned)(h.pos_sign >> (8 * e))), perm);
		__m256d ps[2] = {_mm256_cvtps_pd(_mm256_castps256_ps128(pf)), _mm256_cvtps_pd(_mm256_extractf128_ps(pf, 1))};
		for (int q = 0; q < 2; q++) {
			_mm256_storeu_pd(col + 8 * e + 4 * q, _mm256_add_pd(_mm256_loadu_pd(col + 8 * e + 4 * q), d[q]));
			a->acc[e & 1][q] = _mm256_add_pd(a->acc[e & 1][q], ps[q]);
		}
	}
}

/* fold_avx512 with AVX2. */
__attribute__((target("avx2"))) static size_t fold_avx2(tb_sketch *s, cursor *c, const folder *fd, uint64_t i0,
							 const void *src, bool bf16, size_t n, run_stats *st,
							 uint64_t *hash)
{
	pass ps = pass_start(s, c);
	uint64_t lh[8];
	size_t j = 0;
	double ls[8], lq[8];
	float fmn[8], fmx[8];
	lanes2 a;

	if (!whole_chunks(s, c, i0, n))
		return 0;
	memset(&a, 0, sizeof a);
	for (int q = 0; q < 2; q++)
		for (int r = 0; r < 2; r++)
			a.acc[q][r] = _mm256_loadu_pd(c->acc[q] + 4 * r);
	a.mn = _mm256_set1_ps(INFINITY);
	a.mx = _mm256_set1_ps(-INFINITY);
	for (; j < n && chunk_finite_avx2(src, bf16, j); j += 64) {
		uint64_t i = i0 + j, off = pass_offset(&ps, i), k = ps.k;
		chunk h = chunk_of(&fd->seeds, i >> 6);
		double *cj = ps.col ? ps.col + j : NULL, *bucket = ps.bucket;
		a.hs[0] = a.hs[1] = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (unsigned e = 0; e < 8; e++)
			eighth_avx2(&a, bucket, k, fd, src, bf16, j, e, h, off, cj);
		for (int q = 0; q < 2; q++)
			a.hb[q] = _mm256_add_epi64(a.hb[q], mul64_full_avx2(a.hs[q], _mm256_set1_epi64x((long long)h.mult)));
	}
	if (j == 0)
		return 0;
	for (int q = 0; q < 2; q++)
		for (int r = 0; r < 2; r++)
			_mm256_storeu_pd(c->acc[q] + 4 * r, a.acc[q][r]);
	for (int q = 0; q < 2; q++) {
		_mm256_storeu_pd(ls + 4 * q, _mm256_add_pd(a.sum[q], a.sum[2 + q]));
		_mm256_storeu_pd(lq + 4 * q, _mm256_add_pd(a.ss[q], a.ss[2 + q]));
		_mm256_storeu_si256((__m256i *)(void *)(lh + 4 * q), a.hb[q]);
	}
	_mm256_storeu_ps(fmn, a.mn);
	_mm256_storeu_ps(fmx, a.mx);
	*hash += lanes_done(ls, lq, lh, fmn, fmx, st);
	return j;
}
#endif

/* One pass over a run's finite head (see fold_avx512): how many values. */
typedef size_t (*one_pass_fn)(tb_sketch *s, cursor *c, const folder *fd, uint64_t i0, const void *src, bool bf16,
			      size_t n, run_stats *st, uint64_t *hash);

/* The AVX-512 or AVX2 copy where the CPU has one (tb_simd_level, which
 * tests can force down): the same sketch, bit for bit.  NULL: none. */
static one_pass_fn pick(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	if (tb_simd_level() == TB_SIMD_AVX512)
		return fold_avx512;
	if (tb_simd_level() == TB_SIMD_AVX2)
		return fold_avx2;
#endif
	return NULL;
}

/* from's statistics (counts, sums, extremes) into into's. */
static void add_stats(tb_sketch *into, const tb_sketch *from)
{
	into->nan += from->nan;
	into->inf += from->inf;
	into->sum += from->sum;
	into->sumsq += from->sumsq;
	into->min = from->min < into->min ? from->min : into->min;
	into->max = from->max > into->max ? from->max : into->max;
}

/* A part of a run folded: its statistics into the sketch's and the row's,
 * and the cursor past it. */
static void tally(tb_sketch *s, cursor *c, const run_stats *st, uint64_t len)
{
	add_stats(s, &(tb_sketch){.nan = st->nan, .inf = st->inf, .sum = st->sum, .sumsq = st->ss, .min = st->mn,
				  .max = st->mx});
	if (s->p.n_pos > 0) {
		c->ss += st->ss;
		c->col += len;
	}
}

/* n values of src as float32: in place, or bfloat16 widened into buf. */
static const float *as_f32(const void *src, bool bf16, size_t n, float *buf)
{
	if (!bf16)
		return src;
	tb_dtype_to_f32(TB_DT_BF16, src, n, false, buf);
	return buf;
}

/* The finite chunks a run of whole chunks starts with, in values, as the
 * AVX-512 pass takes them (0 for another run): the portable loops cut a
 * run where it does, so that the sums are the same. */
static size_t finite_head(const tb_sketch *s, const cursor *c, uint64_t i0, const float *v, size_t n)
{
	if (!whole_chunks(s, c, i0, n))
		return 0;
	for (size_t j = 0; j < n; j++)
		if (!isfinite(v[j]))
			return j - j % 64;
	return n;
}

/* Fold values [i0, i0 + n) into the sketch, a run within one row and one
 * hash block at a time: its finite head of whole chunks (in one AVX-512
 * pass where the CPU has it), then the rest as a run of its own. */
static void fold(tb_sketch *s, cursor *c, const folder *fd, const void *src, bool bf16, uint64_t i0, uint64_t n)
{
	const unsigned char *at = src;
	size_t es = bf16 ? 2 : 4;
	one_pass_fn one_pass = pick();
	const tb_sketch_params *p = &s->p;
	float buf[CHUNK];

	for (uint64_t k = 0; k < n;) {
		uint64_t run = p->n_pos > 0 ? p->row_len - c->col : n, to_block = TB_SKETCH_BLOCK - (i0 + k) % TB_SKETCH_BLOCK;
		uint64_t *hash = &s->hash[(i0 + k) / TB_SKETCH_BLOCK];
		const float *v = NULL;
		size_t head;
		run_stats st;
		if (run > n - k)
			run = n - k;
		if (run > to_block)
			run = to_block;
		if (run > CHUNK)
			run = CHUNK;
		if (one_pass) {
			head = one_pass(s, c, fd, i0 + k, at + k * es, bf16, run, &st, hash);
		} else {
			v = as_f32(at + k * es, bf16, run, buf);
			if ((head = finite_head(s, c, i0 + k, v, run)))
				*hash += fold_generic(s, c, fd, i0 + k, v, head, &st);
		}
		if (head)
			tally(s, c, &st, head);
		if (head < run) {
			if (!v)
				v = as_f32(at + k * es, bf16, run, buf);
			*hash += fold_generic(s, c, fd, i0 + k + head, v + head, run - head, &st);
			tally(s, c, &st, run - head);
		}
		if (p->n_pos > 0 && c->col == p->row_len)
			end_row(s, c);
		k += run;
	}
}

/* A part of a tensor: values [from, to), whole rows, folded into its own
 * sketch by one thread. */
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
	folder fd;

	folder_init(&fd, &s->p);
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
		fold(s, &c, &fd, direct ? (const void *)(direct + i * (bf16 ? 2 : 4)) : v, bf16, i, n);
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
	add_stats(into, from);
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

/* Values a part of a tensor holds at most: what a thread takes at a time,
 * so that a big tensor spreads over the threads and small ones go whole
 * to one each (no thread waits on another's share of a small tensor). */
#define PART_VALUES (1u << 21)

/* Part of a job: values [from, to) of job `job`. */
typedef struct part {
	size_t job;
	uint64_t from, to;
	bool last; /* the job's last part */
} part;

/* The jobs' parts, which the threads take in order; each part's sketch is
 * added to its job's first part's in order (so that the sketch is the same
 * on any number of threads), and a job's whole sketch is handed on in
 * order, by whichever thread holds the gathering (one at a time). */
typedef struct pool {
	const tb_sketch_job *jobs;
	part *parts;
	tb_sketch *sk; /* per part, from when a thread takes it until gathered */
	bool *done;
	size_t n_parts, next, gathered, window, first;
	bool gathering, failed;
	tb_sketch_done_fn on_done;
	void *ctx;
	tb_err err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
} pool;

/* The parts of a job (written to out from index at, when out is given):
 * each starts on a row, and on a read block for the page cache's sake; a
 * rank's share, or a deflated member (which inflates front to back), is
 * one part. */
static size_t parts_of(const tb_sketch_job *j, size_t job, part *out, size_t at)
{
	uint64_t numel = j->t->numel, row = j->p.n_pos > 0 ? j->p.row_len : 1, unit, len, n = 1;

	if (j->axis < 0 && !tb_tensor_streamed(j->t) && numel > 0) {
		unit = row / gcd(row, READ_BLOCK);
		unit = unit > numel / READ_BLOCK + 1 ? numel : unit * READ_BLOCK;
		len = unit * (PART_VALUES / unit ? PART_VALUES / unit : 1);
		n = (numel + len - 1) / len;
	} else {
		len = numel ? numel : 1;
	}
	for (uint64_t k = 0; out && k < n; k++)
		out[at + k] = (part){job, k * len, k + 1 == n ? numel : (k + 1) * len, k + 1 == n};
	return (size_t)n;
}

static int run_part(pool *pl, size_t j, tb_err *err)
{
	const part *pt = &pl->parts[j];
	const tb_sketch_job *jb = &pl->jobs[pt->job];
	share sh = {jb->t, &pl->sk[j], pt->from, pt->to, false};

	if (tb_sketch_alloc(&pl->sk[j], &jb->p) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, jb->t->path, "out of memory sketching tensor '%s'", jb->t->name);
	if (jb->axis >= 0)
		return tb_sketch_shard(jb->t, &pl->sk[j], jb->axis, jb->width, jb->n_parts, jb->rank, jb->ranks, err);
	if (tb_tensor_acquire(jb->t, err) < 0)
		return -1;
	sketch_share(&sh);
	tb_tensor_release(jb->t);
	return sh.nomem ? tb_err_setc(err, TB_ERR_NOMEM, jb->t->path, "out of memory sketching tensor '%s'", jb->t->name)
			: 0;
}

/* With the lock held: the first failure is the one reported. */
static void fail(pool *pl, const tb_err *err)
{
	if (!pl->failed)
		pl->err = *err;
	pl->failed = true;
}

/* With the lock held: unless another thread gathers, add the done parts
 * that come next into their jobs' sketches and hand on the jobs they
 * finish. */
static void gather(pool *pl)
{
	if (pl->gathering)
		return;
	pl->gathering = true;
	while (!pl->failed && pl->gathered < pl->n_parts && pl->done[pl->gathered]) {
		size_t j = pl->gathered;
		const part *pt = &pl->parts[j];
		tb_sketch *s = &pl->sk[pl->first];
		tb_err e = {0};
		int rc = 0;
		pthread_mutex_unlock(&pl->lock);
		if (j != pl->first) {
			tb_sketch_add(s, &pl->sk[j]);
			tb_sketch_done(&pl->sk[j]);
		}
		if (pt->last) {
			const tb_sketch_job *jb = &pl->jobs[pt->job];
			if (jb->axis < 0)
				s->finite = jb->t->numel - s->nan - s->inf;
			rc = pl->on_done(pl->ctx, pt->job, s, &e);
			memset(s, 0, sizeof *s); /* on_done's now */
		}
		pthread_mutex_lock(&pl->lock);
		if (rc < 0)
			fail(pl, &e);
		pl->gathered++;
		if (pt->last)
			pl->first = pl->gathered;
	}
	pl->gathering = false;
}

static void *work(void *arg)
{
	pool *pl = arg;

	pthread_mutex_lock(&pl->lock);
	while (!pl->failed && pl->gathered < pl->n_parts) {
		/* no further than the window past the parts gathered: their
		 * sketches wait in memory until then */
		if (pl->next < pl->n_parts && pl->next < pl->gathered + pl->window) {
			size_t j = pl->next++;
			tb_err e = {0};
			int rc;
			pthread_mutex_unlock(&pl->lock);
			rc = run_part(pl, j, &e);
			pthread_mutex_lock(&pl->lock);
			if (rc < 0)
				fail(pl, &e);
			pl->done[j] = true;
			gather(pl);
			pthread_cond_broadcast(&pl->cond);
		} else {
			pthread_cond_wait(&pl->cond, &pl->lock);
		}
	}
	pthread_cond_broadcast(&pl->cond);
	pthread_mutex_unlock(&pl->lock);
	return NULL;
}

int tb_sketch_jobs(const tb_sketch_job *jobs, size_t n, int threads, tb_sketch_done_fn on_done, void *ctx, tb_err *err)
{
	enum { MAX_THREADS = 64 };
	pthread_t tid[MAX_THREADS];
	pool pl = {.jobs = jobs, .on_done = on_done, .ctx = ctx};
	int started = 0, rc = 0;

	for (size_t i = 0; i < n; i++)
		pl.n_parts += parts_of(&jobs[i], i, NULL, 0);
	pl.parts = malloc((pl.n_parts ? pl.n_parts : 1) * sizeof *pl.parts);
	pl.sk = calloc(pl.n_parts ? pl.n_parts : 1, sizeof *pl.sk);
	pl.done = calloc(pl.n_parts ? pl.n_parts : 1, sizeof *pl.done);
	if (!pl.parts || !pl.sk || !pl.done) {
		free(pl.parts);
		free(pl.sk);
		free(pl.done);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (size_t i = 0, at = 0; i < n; i++)
		at += parts_of(&jobs[i], i, pl.parts, at);
	threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
	if ((size_t)threads > pl.n_parts)
		threads = pl.n_parts ? (int)pl.n_parts : 1;
	pl.window = 2 * (size_t)threads + 1;
	pthread_mutex_init(&pl.lock, NULL);
	pthread_cond_init(&pl.cond, NULL);
	if (threads > 1)
		tb_blas_pool_stop();
	/* fewer threads when the system refuses some: this one works too */
	while (started + 1 < threads && pthread_create(&tid[started], NULL, work, &pl) == 0)
		started++;
	work(&pl);
	for (int k = 0; k < started; k++)
		pthread_join(tid[k], NULL);
	if (pl.failed) {
		*err = pl.err;
		rc = -1;
	}
	for (size_t j = 0; j < pl.n_parts; j++)
		tb_sketch_done(&pl.sk[j]);
	pthread_cond_destroy(&pl.cond);
	pthread_mutex_destroy(&pl.lock);
	free(pl.parts);
	free(pl.sk);
	free(pl.done);
	return rc;
}

/* tb_sketch_tensor's hand-on: the one job's sketch is the caller's. */
static int take_sketch(void *ctx, size_t job, tb_sketch *s, tb_err *err)
{
	tb_sketch *out = ctx;

	(void)job;
	(void)err;
	tb_sketch_done(out);
	*out = *s;
	return 0;
}

int tb_sketch_tensor(tb_tensor *t, tb_sketch *s, int threads, tb_err *err)
{
	tb_sketch_job job = {.t = t, .p = s->p, .axis = -1};

	return tb_sketch_jobs(&job, 1, threads, take_sketch, s, err);
}

int tb_sketch_shard(tb_tensor *t, tb_sketch *s, int axis, const int64_t *width, int n_parts, int rank, int ranks,
		    tb_err *err)
{
	uint64_t inner = 1, m, dropped = 0, start[4] = {0};
	float *v;
	double *cols;
	cursor c = {0};
	folder fd;

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
	folder_init(&fd, &s->p);
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
			fold(s, &c, &fd, v + (i - p0), false, at, len);
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
	else if (a->k != b->k)
		snprintf(buf, size, "sketches of %u and %u buckets", a->k, b->k);
	else if (a->kp != b->kp)
		snprintf(buf, size, "sketches of %u and %u buckets a position", a->kp, b->kp);
	else
		return true;
	return false;
}
