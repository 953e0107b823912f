/*
 * test_mapfile: files are mapped read-only with their bytes in place, and
 * big files are mapped at 2 MB boundaries (the page cache's large folios
 * then map a 2 MB block at a fault) whose bits 21-26 differ from file to
 * file: two big files of one size (a safetensors file per tree) are never
 * mapped a multiple of 128 MB apart, where a value and its pair on the
 * other side would share the low bits of their addresses that the first
 * cache's way predictor hashes.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "base/mapfile.h"

enum { BIG = 3 << 20, SMALL = 5000, APART = 128 << 20 };

static unsigned char *pattern(size_t n, unsigned char salt)
{
	unsigned char *b = malloc(n);

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 131 + salt + (i >> 12));
	return b;
}

static void test_bytes_in_place(void **state)
{
	const char *dir = tu_tmpdir();
	unsigned char *big = pattern(BIG, 1), *small = pattern(SMALL, 2);
	tb_file *f[2];
	tb_err err = {0};

	(void)state;
	tu_write(tu_path(dir, "big.bin"), big, BIG);
	tu_write(tu_path(dir, "small.bin"), small, SMALL);
	assert_int_equal(tb_file_open(tu_path(dir, "big.bin"), &f[0], &err), 0);
	assert_int_equal(tb_file_open(tu_path(dir, "small.bin"), &f[1], &err), 0);
	assert_int_equal(f[0]->size, BIG);
	assert_int_equal(f[1]->size, SMALL);
	assert_memory_equal(f[0]->data, big, BIG);
	assert_memory_equal(f[1]->data, small, SMALL);
	tb_file_free(f[0]);
	tb_file_free(f[1]);
	free(big);
	free(small);
}

/* Four files of 128 MB (sparse): mapped side by side, as the kernel
 * places them, they would lie exactly 128 MB apart. */
static void test_big_files_apart(void **state)
{
	const char *dir = tu_tmpdir();
	unsigned char *b = pattern(SMALL, 3);
	tb_file *f[4];
	tb_err err = {0};

	(void)state;
	for (int k = 0; k < 4; k++) {
		char name[32];
		snprintf(name, sizeof name, "same%d.bin", k);
		tu_write(tu_path(dir, name), b, SMALL);
		assert_int_equal(truncate(tu_path(dir, name), APART), 0);
		assert_int_equal(tb_file_open(tu_path(dir, name), &f[k], &err), 0);
		assert_int_equal(f[k]->size, APART);
		assert_memory_equal(f[k]->data, b, SMALL);
		assert_int_equal(f[k]->data[APART - 1], 0);
	}
	for (int k = 0; k < 4; k++)
		assert_int_equal((uintptr_t)f[k]->data % (2u << 20), 0);
	for (int k = 1; k < 4; k++) {
		uintptr_t d = (uintptr_t)f[k]->data - (uintptr_t)f[k - 1]->data;
		assert_true(d % APART != 0);
	}
	for (int k = 0; k < 4; k++)
		tb_file_free(f[k]);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_in_place),
		cmocka_unit_test(test_big_files_apart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
