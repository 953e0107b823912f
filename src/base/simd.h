/*
 * simd: the few vector operations the hot kernels are written in (the fused
 * metric kernel, the logit kernel), in three interchangeable sets of
 * always-inline functions: avx_ (AVX2), sse_ (SSE2, the x86-64 baseline)
 * and gen_ (portable C, other CPUs).  A kernel is a template (*.inc)
 * that simd_stamp.h compiles once per set (and the avx_ set a second
 * time for AVX-512VL), with V(op) naming the set's op; TB_SIMD_PICK
 * calls the copy tb_simd_level() chooses at run time.
 *
 * Every set has the same lanes (d: 4 doubles, f: 8 floats, i: 8 int32) and
 * only exact IEEE operations in a fixed order, fused multiply-adds only
 * where a kernel asks for one (V(ffma); -std=c11 turns contraction off
 * elsewhere), so all copies give bit-identical results: the AVX2 copy
 * needs the FMA instructions, and the SSE2 copy rounds a * b + c once in
 * double arithmetic (tb_fmaf; 10 times slower, on CPUs older than both).
 * Tests force a copy with tb_simd_force.  Owns nothing but that switch.
 */
#ifndef TB_SIMD_H
#define TB_SIMD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* 32-byte vectors passed between always-inline helpers never cross a real
 * call, so GCC's ABI note about them does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define TB_SIMD_X86 1
#include <immintrin.h>
#else
#define TB_SIMD_X86 0
#endif

/* The copies, each needing the CPU of the one before and more.  The
 * avx512 copy (AVX-512F, VL, DQ and BW) runs the AVX2 code compiled for
 * AVX-512VL: the same operations on the same lanes, in 32 registers
 * instead of 16, so the kernels' sums stay in registers; the sketch's
 * AVX-512 loops (tensor/sketch.c) run with it too. */
enum { TB_SIMD_GENERIC, TB_SIMD_AVX2, TB_SIMD_AVX512 };

/* The copy to run: the best the CPU has, unless forced. */
int tb_simd_level(void);
/* "generic", "avx2", "avx512", or NULL to choose by the CPU again.
 * Returns -1 (and changes nothing) for an unknown name or a copy the CPU
 * cannot run. */
int tb_simd_force(const char *isa);
/* The copy in use: "generic", "avx2" or "avx512". */
const char *tb_simd_name(void);

/* Element sources the kernels read in place (little-endian). */
typedef enum tb_src {
	TB_SRC_F32,
	TB_SRC_BF16,
	TB_SRC_F16
} tb_src;

/* The (ref, cand) source pairs the kernel templates specialise for, as
 * CASE(R, C) each (one copy per pair, the sources constant in it), and
 * the switch key of a pair. */
#define TB_SRC_PAIR(R, C) ((R) * 3 + (C))
#define TB_SRC_PAIRS(CASE)                                                                        \
	CASE(TB_SRC_F32, TB_SRC_F32) CASE(TB_SRC_F32, TB_SRC_BF16) CASE(TB_SRC_F32, TB_SRC_F16)    \
	CASE(TB_SRC_BF16, TB_SRC_F32) CASE(TB_SRC_BF16, TB_SRC_BF16) CASE(TB_SRC_BF16, TB_SRC_F16) \
	CASE(TB_SRC_F16, TB_SRC_F32) CASE(TB_SRC_F16, TB_SRC_BF16) CASE(TB_SRC_F16, TB_SRC_F16)

#define TB_INLINE static inline __attribute__((always_inline))

/* --- scalar decoding, exactly as the vector loaders do it --- */

TB_INLINE float tb_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Exact half to float: exponent and mantissa moved into place and scaled
 * by 2^112 (exact for normal and subnormal halves alike); Inf and NaN get
 * the all-ones exponent and keep their payload. */
TB_INLINE float tb_half_f32(uint16_t h)
{
	uint32_t em = (uint32_t)(h & 0x7FFFu) << 13, sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t bits;

	if ((h & 0x7C00u) == 0x7C00u)
		bits = em | 0x7F800000u;
	else
		memcpy(&bits, &(float){tb_bits_f32(em) * 0x1p112f}, 4);
	return tb_bits_f32(bits | sign);
}

TB_INLINE float tb_sload(tb_src k, const void *base, uint64_t i)
{
	const unsigned char *p = base;
	uint16_t h;
	float f;

	if (k == TB_SRC_F32) {
		memcpy(&f, p + 4 * i, 4);
		return f;
	}
	memcpy(&h, p + 2 * i, 2);
	return k == TB_SRC_BF16 ? tb_bits_f32((uint32_t)h << 16) : tb_half_f32(h);
}

/* a * b + c rounded once to float, as the FMA instruction does, without
 * one: the product is exact in double, the sum is rounded to odd (when
 * inexact, its last bit is made 1 by stepping toward the exact sum, found
 * by TwoSum), and double's 29 more bits then round to float correctly
 * (Boldo and Melquiond). */
TB_INLINE float tb_fmaf(float a, float b, float c)
{
	double p = (double)a * b, s = p + c, t = s - p, e = (p - (s - t)) + (c - t);
	uint64_t u;

	memcpy(&u, &s, 8);
	if (e != 0 && !(u & 1))
		u += (e > 0) == (s > 0) ? 1 : (uint64_t)-1;
	memcpy(&s, &u, 8);
	return (float)s;
}

/* For the kernel templates (V names the set's op, see simd_stamp.h): a
 * block's 8 float lanes added into a 4-lane double sum kept in memory at D
 * (lanes i and i + 4 into lane i), and such a sum folded in a fixed order. */
#define TB_V_FLUSH(D, F) V(dstore)((D), V(add)(V(add)(V(dload)(D), V(lo)(F)), V(hi)(F)))
TB_INLINE double tb_fold4(const double l[4])
{
	return (l[0] + l[1]) + (l[2] + l[3]);
}

/* --- gen_: portable C --- */

typedef struct gen_d {
	double v[4];
} gen_d;
typedef struct gen_f {
	float v[8];
} gen_f;
typedef struct gen_i {
	int32_t v[8];
} gen_i;

#define GEN_MAP(T, N, EXPR)              \
	T r_;                            \
	for (int l = 0; l < (N); l++)    \
		r_.v[l] = (EXPR);        \
	return r_

TB_INLINE gen_d gen_dload(const double *p) { GEN_MAP(gen_d, 4, p[l]); }
TB_INLINE gen_d gen_add(gen_d a, gen_d b) { GEN_MAP(gen_d, 4, a.v[l] + b.v[l]); }
TB_INLINE gen_i gen_izero(void) { GEN_MAP(gen_i, 8, 0); }
/* cnt + (a <= b), lane by lane. */
TB_INLINE gen_i gen_count_le(gen_i cnt, gen_f a, gen_f b) { GEN_MAP(gen_i, 8, cnt.v[l] + (a.v[l] <= b.v[l])); }
TB_INLINE gen_f gen_fset(float x) { GEN_MAP(gen_f, 8, x); }
TB_INLINE gen_f gen_fadd(gen_f a, gen_f b) { GEN_MAP(gen_f, 8, a.v[l] + b.v[l]); }
TB_INLINE gen_f gen_fsub(gen_f a, gen_f b) { GEN_MAP(gen_f, 8, a.v[l] - b.v[l]); }
TB_INLINE gen_f gen_fmul(gen_f a, gen_f b) { GEN_MAP(gen_f, 8, a.v[l] * b.v[l]); }
/* fmaf: one instruction where the CPU has it (aarch64, say); x86's
 * baseline copy has none (sse_ffma). */
TB_INLINE gen_f gen_ffma(gen_f a, gen_f b, gen_f c) { GEN_MAP(gen_f, 8, fmaf(a.v[l], b.v[l], c.v[l])); }
TB_INLINE gen_f gen_fabs(gen_f a) { GEN_MAP(gen_f, 8, fabsf(a.v[l])); }
TB_INLINE gen_f gen_fmin(gen_f a, gen_f b) { GEN_MAP(gen_f, 8, a.v[l] < b.v[l] ? a.v[l] : b.v[l]); }
TB_INLINE gen_f gen_fmax(gen_f a, gen_f b) { GEN_MAP(gen_f, 8, a.v[l] > b.v[l] ? a.v[l] : b.v[l]); }
/* v where x >= lim (x > lim), else +0. */
TB_INLINE gen_f gen_fkeep_ge(gen_f x, gen_f lim, gen_f v) { GEN_MAP(gen_f, 8, x.v[l] >= lim.v[l] ? v.v[l] : 0.0f); }
TB_INLINE gen_f gen_fkeep_gt(gen_f x, gen_f lim, gen_f v) { GEN_MAP(gen_f, 8, x.v[l] > lim.v[l] ? v.v[l] : 0.0f); }
/* p * 2^n for t = n + 0x1.8p23 (n an integer, the result normal): n
 * added to p's exponent. */
TB_INLINE float tb_fscale1(float p, float t)
{
	uint32_t pb, tb, mb;
	float m = 0x1.8p23f;

	memcpy(&pb, &p, 4);
	memcpy(&tb, &t, 4);
	memcpy(&mb, &m, 4);
	pb += (tb - mb) << 23;
	memcpy(&p, &pb, 4);
	return p;
}
TB_INLINE gen_f gen_fscale(gen_f p, gen_f t) { GEN_MAP(gen_f, 8, tb_fscale1(p.v[l], t.v[l])); }
TB_INLINE gen_f gen_load(tb_src k, const void *base, uint64_t i) { GEN_MAP(gen_f, 8, tb_sload(k, base, i + (uint64_t)l)); }
/* Lanes 0-3 / 4-7 widened. */
TB_INLINE gen_d gen_lo(gen_f f) { GEN_MAP(gen_d, 4, (double)f.v[l]); }
TB_INLINE gen_d gen_hi(gen_f f) { GEN_MAP(gen_d, 4, (double)f.v[l + 4]); }
/* Does any lane exceed x? */
TB_INLINE bool gen_any_gt(gen_f f, float x)
{
	bool any = false;

	for (int l = 0; l < 8; l++)
		any |= f.v[l] > x;
	return any;
}
TB_INLINE void gen_dstore(double *o, gen_d a) { memcpy(o, a.v, sizeof a.v); }
TB_INLINE void gen_fstore(float *o, gen_f a) { memcpy(o, a.v, sizeof a.v); }
TB_INLINE void gen_istore(int32_t *o, gen_i a) { memcpy(o, a.v, sizeof a.v); }

#undef GEN_MAP

#if TB_SIMD_X86

/* --- sse_: SSE2, two registers per 4 doubles or 8 floats --- */

#define SSE_INLINE static inline __attribute__((always_inline, target("sse2")))

typedef struct sse_d {
	__m128d lo, hi;
} sse_d;
typedef struct sse_f {
	__m128 lo, hi;
} sse_f;
typedef struct sse_i {
	__m128i lo, hi;
} sse_i;

#define SSE_D2(OP, a, b) ((sse_d){OP((a).lo, (b).lo), OP((a).hi, (b).hi)})

SSE_INLINE sse_d sse_dload(const double *p) { return (sse_d){_mm_loadu_pd(p), _mm_loadu_pd(p + 2)}; }
SSE_INLINE sse_d sse_add(sse_d a, sse_d b) { return SSE_D2(_mm_add_pd, a, b); }
SSE_INLINE sse_i sse_izero(void) { return (sse_i){_mm_setzero_si128(), _mm_setzero_si128()}; }
SSE_INLINE sse_i sse_count_le(sse_i cnt, sse_f a, sse_f b)
{
	return (sse_i){_mm_sub_epi32(cnt.lo, _mm_castps_si128(_mm_cmple_ps(a.lo, b.lo))),
		       _mm_sub_epi32(cnt.hi, _mm_castps_si128(_mm_cmple_ps(a.hi, b.hi)))};
}
SSE_INLINE sse_f sse_fset(float x) { return (sse_f){_mm_set1_ps(x), _mm_set1_ps(x)}; }
SSE_INLINE sse_f sse_fadd(sse_f a, sse_f b) { return (sse_f){_mm_add_ps(a.lo, b.lo), _mm_add_ps(a.hi, b.hi)}; }
SSE_INLINE sse_f sse_fsub(sse_f a, sse_f b) { return (sse_f){_mm_sub_ps(a.lo, b.lo), _mm_sub_ps(a.hi, b.hi)}; }
SSE_INLINE sse_f sse_fmul(sse_f a, sse_f b) { return (sse_f){_mm_mul_ps(a.lo, b.lo), _mm_mul_ps(a.hi, b.hi)}; }
SSE_INLINE sse_f sse_fabs(sse_f a)
{
	__m128 m = _mm_castsi128_ps(_mm_set1_epi32(INT32_MAX));
	return (sse_f){_mm_and_ps(a.lo, m), _mm_and_ps(a.hi, m)};
}
SSE_INLINE sse_f sse_fkeep_ge(sse_f x, sse_f lim, sse_f v)
{
	return (sse_f){_mm_and_ps(_mm_cmpge_ps(x.lo, lim.lo), v.lo), _mm_and_ps(_mm_cmpge_ps(x.hi, lim.hi), v.hi)};
}
SSE_INLINE sse_f sse_fkeep_gt(sse_f x, sse_f lim, sse_f v)
{
	return (sse_f){_mm_and_ps(_mm_cmpgt_ps(x.lo, lim.lo), v.lo), _mm_and_ps(_mm_cmpgt_ps(x.hi, lim.hi), v.hi)};
}
SSE_INLINE __m128 sse_fscale4(__m128 p, __m128 t)
{
	__m128i n = _mm_sub_epi32(_mm_castps_si128(t), _mm_castps_si128(_mm_set1_ps(0x1.8p23f)));
	return _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(p), _mm_slli_epi32(n, 23)));
}
SSE_INLINE sse_f sse_fscale(sse_f p, sse_f t) { return (sse_f){sse_fscale4(p.lo, t.lo), sse_fscale4(p.hi, t.hi)}; }
SSE_INLINE sse_f sse_fmin(sse_f a, sse_f b) { return (sse_f){_mm_min_ps(a.lo, b.lo), _mm_min_ps(a.hi, b.hi)}; }
SSE_INLINE sse_f sse_fmax(sse_f a, sse_f b) { return (sse_f){_mm_max_ps(a.lo, b.lo), _mm_max_ps(a.hi, b.hi)}; }
SSE_INLINE __m128 sse_half4(__m128i u)
{
	__m128i em = _mm_slli_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7FFF)), 13);
	__m128i scaled = _mm_castps_si128(_mm_mul_ps(_mm_castsi128_ps(em), _mm_set1_ps(0x1p112f)));
	__m128i special = _mm_cmpeq_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7C00)), _mm_set1_epi32(0x7C00));
	__m128i bits = _mm_or_si128(_mm_andnot_si128(special, scaled),
				    _mm_and_si128(special, _mm_or_si128(em, _mm_set1_epi32(0x7F800000))));
	return _mm_castsi128_ps(_mm_or_si128(bits, _mm_slli_epi32(_mm_and_si128(u, _mm_set1_epi32(0x8000)), 16)));
}
SSE_INLINE sse_f sse_load(tb_src k, const void *base, uint64_t i)
{
	__m128i z = _mm_setzero_si128(), h;

	if (k == TB_SRC_F32) {
		const float *p = (const float *)base + i;
		return (sse_f){_mm_loadu_ps(p), _mm_loadu_ps(p + 4)};
	}
	h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)base + i));
	if (k == TB_SRC_BF16)
		return (sse_f){_mm_castsi128_ps(_mm_unpacklo_epi16(z, h)), _mm_castsi128_ps(_mm_unpackhi_epi16(z, h))};
	return (sse_f){sse_half4(_mm_unpacklo_epi16(h, z)), sse_half4(_mm_unpackhi_epi16(h, z))};
}
SSE_INLINE sse_d sse_lo(sse_f f) { return (sse_d){_mm_cvtps_pd(f.lo), _mm_cvtps_pd(_mm_movehl_ps(f.lo, f.lo))}; }
SSE_INLINE sse_d sse_hi(sse_f f) { return (sse_d){_mm_cvtps_pd(f.hi), _mm_cvtps_pd(_mm_movehl_ps(f.hi, f.hi))}; }
SSE_INLINE bool sse_any_gt(sse_f f, float x)
{
	__m128 t = _mm_set1_ps(x);
	return _mm_movemask_ps(_mm_or_ps(_mm_cmpgt_ps(f.lo, t), _mm_cmpgt_ps(f.hi, t))) != 0;
}
SSE_INLINE void sse_dstore(double *o, sse_d a)
{
	_mm_storeu_pd(o, a.lo);
	_mm_storeu_pd(o + 2, a.hi);
}
SSE_INLINE void sse_fstore(float *o, sse_f a)
{
	_mm_storeu_ps(o, a.lo);
	_mm_storeu_ps(o + 4, a.hi);
}
SSE_INLINE sse_f sse_ffma(sse_f a, sse_f b, sse_f c)
{
	float x[8], y[8], z[8];

	sse_fstore(x, a);
	sse_fstore(y, b);
	sse_fstore(z, c);
	for (int l = 0; l < 8; l++)
		x[l] = tb_fmaf(x[l], y[l], z[l]);
	return (sse_f){_mm_loadu_ps(x), _mm_loadu_ps(x + 4)};
}
SSE_INLINE void sse_istore(int32_t *o, sse_i a)
{
	_mm_storeu_si128((__m128i *)(void *)o, a.lo);
	_mm_storeu_si128((__m128i *)(void *)(o + 4), a.hi);
}

#undef SSE_D2

/* --- avx_: AVX2, one register per 4 doubles or 8 floats --- */

/* What the avx2 copy needs of the CPU (tb_simd_level checks the same),
 * and the avx512 copy besides. */
#define TB_SIMD_AVX2_TARGET "avx2,fma"
#define TB_SIMD_AVX512_TARGET TB_SIMD_AVX2_TARGET ",avx512f,avx512vl"

#define AVX_INLINE static inline __attribute__((always_inline, target(TB_SIMD_AVX2_TARGET)))

typedef __m256d avx_d;
typedef __m256 avx_f;
typedef __m256i avx_i;

AVX_INLINE avx_d avx_dload(const double *p) { return _mm256_loadu_pd(p); }
AVX_INLINE avx_d avx_add(avx_d a, avx_d b) { return _mm256_add_pd(a, b); }
AVX_INLINE avx_i avx_izero(void) { return _mm256_setzero_si256(); }
AVX_INLINE avx_i avx_count_le(avx_i cnt, avx_f a, avx_f b)
{
	return _mm256_sub_epi32(cnt, _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LE_OQ)));
}
AVX_INLINE avx_f avx_fset(float x) { return _mm256_set1_ps(x); }
AVX_INLINE avx_f avx_fadd(avx_f a, avx_f b) { return _mm256_add_ps(a, b); }
AVX_INLINE avx_f avx_fsub(avx_f a, avx_f b) { return _mm256_sub_ps(a, b); }
AVX_INLINE avx_f avx_fmul(avx_f a, avx_f b) { return _mm256_mul_ps(a, b); }
AVX_INLINE avx_f avx_ffma(avx_f a, avx_f b, avx_f c) { return _mm256_fmadd_ps(a, b, c); }
AVX_INLINE avx_f avx_fabs(avx_f a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MAX))); }
AVX_INLINE avx_f avx_fkeep_ge(avx_f x, avx_f lim, avx_f v) { return _mm256_and_ps(_mm256_cmp_ps(x, lim, _CMP_GE_OQ), v); }
AVX_INLINE avx_f avx_fkeep_gt(avx_f x, avx_f lim, avx_f v) { return _mm256_and_ps(_mm256_cmp_ps(x, lim, _CMP_GT_OQ), v); }
AVX_INLINE avx_f avx_fscale(avx_f p, avx_f t)
{
	__m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(_mm256_set1_ps(0x1.8p23f)));
	return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(n, 23)));
}
AVX_INLINE avx_f avx_fmin(avx_f a, avx_f b) { return _mm256_min_ps(a, b); }
AVX_INLINE avx_f avx_fmax(avx_f a, avx_f b) { return _mm256_max_ps(a, b); }
/* The 8 bfloat16 at p (any alignment) as float32: each moved to the high
 * half of its lane by one byte shuffle of the 8 broadcast to both halves
 * (zero-extending and shifting takes two operations).  AVX2 alone, so
 * the sketch's AVX2 code can take it too. */
static inline __attribute__((always_inline, target("avx2"))) __m256 avx_bf16x8(const void *p)
{
	__m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));

	return _mm256_castsi256_ps(_mm256_shuffle_epi8(x, _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1,
									      -1, 6, 7, -1, -1, 8, 9, -1, -1, 10, 11, -1,
									      -1, 12, 13, -1, -1, 14, 15)));
}
AVX_INLINE avx_f avx_load(tb_src k, const void *base, uint64_t i)
{
	__m256i u;

	if (k == TB_SRC_F32)
		return _mm256_loadu_ps((const float *)base + i);
	if (k == TB_SRC_BF16)
		return avx_bf16x8((const uint16_t *)base + i);
	u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)base + i)));
	__m256i em = _mm256_slli_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFF)), 13);
	__m256i scaled = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(em), _mm256_set1_ps(0x1p112f)));
	__m256i special = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7C00)), _mm256_set1_epi32(0x7C00));
	__m256i bits = _mm256_blendv_epi8(scaled, _mm256_or_si256(em, _mm256_set1_epi32(0x7F800000)), special);
	return _mm256_castsi256_ps(
		_mm256_or_si256(bits, _mm256_slli_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x8000)), 16)));
}
AVX_INLINE avx_d avx_lo(avx_f f) { return _mm256_cvtps_pd(_mm256_castps256_ps128(f)); }
AVX_INLINE avx_d avx_hi(avx_f f) { return _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)); }
AVX_INLINE bool avx_any_gt(avx_f f, float x) { return _mm256_movemask_ps(_mm256_cmp_ps(f, _mm256_set1_ps(x), _CMP_GT_OQ)) != 0; }
AVX_INLINE void avx_dstore(double *o, avx_d a) { _mm256_storeu_pd(o, a); }
AVX_INLINE void avx_fstore(float *o, avx_f a) { _mm256_storeu_ps(o, a); }
AVX_INLINE void avx_istore(int32_t *o, avx_i a) { _mm256_storeu_si256((__m256i *)(void *)o, a); }

#endif /* TB_SIMD_X86 */

/*
 * The op set and target attribute of the "generic" copy (SSE2 on x86,
 * portable C elsewhere), and the copy to call: TB_SIMD_PICK(prefix, name)
 * is prefix_avx512_name, prefix_avx2_name or prefix_generic_name (see
 * simd_stamp.h).
 */
#if TB_SIMD_X86
#define TB_SIMD_GENERIC_SET(x) sse_##x
#define TB_SIMD_GENERIC_ATTR __attribute__((target("sse2")))
#define TB_SIMD_PICK(prefix, name)                                                                     \
	(tb_simd_level() == TB_SIMD_AVX512 ? prefix##_avx512_##name                                    \
	 : tb_simd_level() == TB_SIMD_AVX2 ? prefix##_avx2_##name                                      \
					   : prefix##_generic_##name)
#else
#define TB_SIMD_GENERIC_SET(x) gen_##x
#define TB_SIMD_GENERIC_ATTR
#define TB_SIMD_PICK(prefix, name) prefix##_generic_##name
#endif

#endif
