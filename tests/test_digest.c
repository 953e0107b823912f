/*
 * The values digest (src/tensor/digest.c): a tensor's pieces add up to
 * the whole wherever they are cut at whole pairs of words, the portable
 * and AVX2 copies agree, the last pair is filled with zeros, and one
 * changed bit, two values swapped, or one more zero change it.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/simd.h"
#include "tensor/digest.h"

#define BYTES 4099

static unsigned char *noise(size_t n)
{
	unsigned char *b = malloc(n);
	uint64_t x = 0x243F6A8885A308D3ull;

	assert_non_null(b);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b[i] = (unsigned char)x;
	}
	return b;
}

static uint64_t whole(const unsigned char *b, size_t n)
{
	return tb_digest_final(tb_digest_piece(0, b, n), n);
}

static void test_pieces_add_up(void **state)
{
	unsigned char *b = noise(BYTES);
	uint64_t want = whole(b, BYTES);
	(void)state;

	for (size_t cut = 0; cut <= BYTES; cut += 8 * 7) {
		for (size_t cut2 = cut; cut2 <= BYTES; cut2 += 8 * 61) {
			uint64_t sum = tb_digest_piece(0, b, cut) + tb_digest_piece(cut, b + cut, cut2 - cut) +
				       tb_digest_piece(cut2, b + cut2, BYTES - cut2);
			assert_int_equal(tb_digest_final(sum, BYTES), want);
		}
	}
	free(b);
}

static void test_copies_agree(void **state)
{
	unsigned char *b = noise(BYTES);
	uint64_t want[BYTES / 97 + 1];
	(void)state;

	assert_int_equal(tb_simd_force("generic"), 0);
	for (size_t n = 0, k = 0; n <= BYTES; n += 97, k++)
		want[k] = tb_digest_piece(8 * n, b + 1, BYTES - 1 - n / 2);
	for (int level = 1; level <= 2; level++) {
		if (tb_simd_force(level == 1 ? "avx2" : "avx512") < 0)
			continue;
		for (size_t n = 0, k = 0; n <= BYTES; n += 97, k++)
			assert_int_equal(tb_digest_piece(8 * n, b + 1, BYTES - 1 - n / 2), want[k]);
	}
	tb_simd_force(NULL);
	free(b);
}

static void test_changes_show(void **state)
{
	unsigned char *b = noise(BYTES + 8), *z = calloc(BYTES + 8, 1);
	uint64_t want = whole(b, BYTES), zeros = whole(z, BYTES);
	(void)state;

	for (size_t i = 0; i < BYTES; i += 13) {
		for (int bit = 0; bit < 8; bit += 3) {
			b[i] ^= (unsigned char)(1u << bit);
			assert_int_not_equal(whole(b, BYTES), want);
			b[i] ^= (unsigned char)(1u << bit);
		}
	}
	/* two float32 values swapped */
	unsigned char t[4];
	memcpy(t, b + 40, 4);
	memcpy(b + 40, b + 1024, 4);
	memcpy(b + 1024, t, 4);
	assert_int_not_equal(whole(b, BYTES), want);
	/* all zeros, and one zero byte more: the length counts */
	assert_int_not_equal(whole(z, BYTES + 1), zeros);
	assert_int_not_equal(zeros, whole(z, BYTES - 1));
	free(b);
	free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pieces_add_up),
		cmocka_unit_test(test_copies_agree),
		cmocka_unit_test(test_changes_show),
	};
	return cmocka_run_group_tests_name("digest", tests, NULL, NULL);
}
