#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/simd.h"
#include "tensor/digest.h"
#include "tensor/dtype.h"
#include "tensor/sketch.h"

/* Elements decoded at a time when a tensor's bytes are not in place (even,
 * so every piece starts at a whole pair of words). */
#define DECODE_CHUNK 65536

#define K1_START 0x9E3779B9u
#define K1_STEP 0x85EBCA6Bu
#define K2_START 0xC2B2AE35u
#define K2_STEP 0x27D4EB2Fu

static uint64_t nh_generic(uint64_t q, const unsigned char *p, size_t pairs)
{
	uint32_t k1 = K1_START + (uint32_t)q * K1_STEP, k2 = K2_START + (uint32_t)q * K2_STEP;
	uint64_t sum = 0;

	for (size_t j = 0; j < pairs; j++) {
		uint32_t w[2];
		memcpy(w, p + 8 * j, sizeof w);
		sum += (uint64_t)(uint32_t)(w[0] + k1) * (uint32_t)(w[1] + k2);
		k1 += K1_STEP;
		k2 += K2_STEP;
	}
	return sum;
}

#if TB_SIMD_X86
/* Four pairs a register, two registers a step; AVX-512 is no faster (the
 * loop is bound by loads and multiplies either way). */
__attribute__((target("avx2"))) static uint64_t nh_avx2(uint64_t q, const unsigned char *p, size_t pairs)
{
	uint32_t k[8];
	__m256i key, step = _mm256_set1_epi64x((long long)(((uint64_t)(4 * K2_STEP) << 32) | (uint32_t)(4 * K1_STEP)));
	__m256i a0 = _mm256_setzero_si256(), a1 = a0;
	uint64_t lane[4];
	size_t j = 0;

	for (int m = 0; m < 4; m++) {
		k[2 * m] = K1_START + (uint32_t)(q + (uint64_t)m) * K1_STEP;
		k[2 * m + 1] = K2_START + (uint32_t)(q + (uint64_t)m) * K2_STEP;
	}
	key = _mm256_loadu_si256((const void *)k);
	for (; j + 8 <= pairs; j += 8) {
		__m256i x0 = _mm256_add_epi32(_mm256_loadu_si256((const void *)(p + 8 * j)), key);
		key = _mm256_add_epi32(key, step);
		__m256i x1 = _mm256_add_epi32(_mm256_loadu_si256((const void *)(p + 8 * j + 32)), key);
		key = _mm256_add_epi32(key, step);
		a0 = _mm256_add_epi64(a0, _mm256_mul_epu32(x0, _mm256_srli_epi64(x0, 32)));
		a1 = _mm256_add_epi64(a1, _mm256_mul_epu32(x1, _mm256_srli_epi64(x1, 32)));
	}
	_mm256_storeu_si256((void *)lane, _mm256_add_epi64(a0, a1));
	return lane[0] + lane[1] + lane[2] + lane[3] + nh_generic(q + j, p + 8 * j, pairs - j);
}
#endif

uint64_t tb_digest_piece(uint64_t off, const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t q = off / 8, sum;
	size_t pairs = n / 8;
	unsigned char tail[8] = {0};

#if TB_SIMD_X86
	sum = tb_simd_level() >= TB_SIMD_AVX2 ? nh_avx2(q, b, pairs) : nh_generic(q, b, pairs);
#else
	sum = nh_generic(q, b, pairs);
#endif
	if (n % 8) {
		memcpy(tail, b + 8 * pairs, n % 8);
		sum += nh_generic(q + pairs, tail, 1);
	}
	return sum;
}

uint64_t tb_digest_final(uint64_t sum, uint64_t n_bytes)
{
	uint64_t h = sum ^ (n_bytes * 0x9E3779B97F4A7C15ull);

	h ^= h >> 33;
	h *= 0xFF51AFD7ED558CCDull;
	h ^= h >> 33;
	h *= 0xC4CEB9FE1A85EC53ull;
	return h ^ (h >> 33);
}

const void *tb_digest_source(const tb_tensor *t, size_t *elem_size)
{
	const void *in_place = tb_tensor_data(t);

	*elem_size = in_place ? tb_dtype_size(t->dtype) : sizeof(float);
	return in_place;
}

int tb_tensor_digest(tb_tensor *t, uint64_t *out, tb_err *err)
{
	const void *in_place;
	size_t size;
	float *buf;
	uint64_t sum = 0;

	if (t->sketch) {
		/* a sketch's block hashes stand for its values */
		size = (size_t)t->sketch->n_blocks * sizeof *t->sketch->hash;
		*out = tb_digest_final(tb_digest_piece(0, t->sketch->hash, size), size);
		return 0;
	}
	if (tb_tensor_acquire(t, err) < 0)
		return -1;
	in_place = tb_digest_source(t, &size);
	if (in_place) {
		*out = tb_digest_final(tb_digest_piece(0, in_place, (size_t)(t->numel * size)), t->numel * size);
		tb_tensor_release(t);
		return 0;
	}
	buf = malloc(DECODE_CHUNK * sizeof *buf);
	if (!buf) {
		tb_tensor_release(t);
		return tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory for the digest of '%s'", t->name);
	}
	for (uint64_t at = 0; at < t->numel; at += DECODE_CHUNK) {
		uint64_t n = t->numel - at < DECODE_CHUNK ? t->numel - at : DECODE_CHUNK;
		tb_tensor_read_f32(t, at, n, buf);
		sum += tb_digest_piece(at * sizeof *buf, buf, (size_t)(n * sizeof *buf));
	}
	free(buf);
	tb_tensor_release(t);
	*out = tb_digest_final(sum, t->numel * sizeof *buf);
	return 0;
}
