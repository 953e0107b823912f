/*
 * test_zip: the zip container reader on archives written by dumpwrite
 * (stored, deflated, numpy-style zip64 extras, zip64 central entries and
 * end records, torch-style aligned data), on archives patched byte by
 * byte into every shape the reader must refuse, and on a deflated member
 * read through its window in every order readers use.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "testutil.h"
#include "formats/zip.h"

static const char text_a[] = "hello, stored member";
static unsigned char big[100000]; /* compressible: repeats a short pattern */

static void fill_big(void)
{
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (unsigned char)("abcdefgh"[i % 8] + (i / 4096) % 3);
}

/* Write z to dir/name and open it as a zip; returns the error status. */
static int open_zip(dw_zip *z, bool z64end, const char *path, tb_file **f, tb_zip **zip, tb_err *err)
{
	tb_err ferr;

	assert_int_equal(dw_zip_write(z, path, z64end), 0);
	assert_int_equal(tb_file_open(path, f, &ferr), 0);
	return tb_zip_open(*f, zip, err);
}

/* The member's bytes, whichever way they are stored, compared with want. */
static void expect_member(const tb_zip *zip, const char *name, const void *want, size_t n)
{
	const tb_zip_entry *e = tb_zip_find(zip, name);
	const unsigned char *data;
	unsigned char *owned, head[16];
	size_t got;
	tb_blob *blob;
	tb_err err;

	assert_non_null(e);
	assert_int_equal(e->usize, n);
	assert_int_equal(tb_zip_read(zip, e, n, &data, &owned, &err), 0);
	assert_memory_equal(data, want, n);
	free(owned);
	assert_int_equal(tb_zip_read_head(zip, e, head, sizeof head, &got, &err), 0);
	assert_int_equal(got, n < sizeof head ? n : sizeof head);
	assert_memory_equal(head, want, got);
	blob = tb_blob_new();
	assert_int_equal(tb_zip_blob(zip, e, blob, &err), 0);
	assert_int_equal(blob->size, n);
	tb_tensor t = {.name = (char *)name, .dtype = TB_DT_U8, .blob = blob};
	assert_int_equal(tb_tensor_acquire(&t, &err), 0);
	assert_memory_equal(blob->data, want, n);
	tb_tensor_release(&t);
	tb_blob_free(blob);
}

static void test_stored_and_deflated(void **state)
{
	const char *dir = tu_tmpdir();
	const dw_zip_opts deflate = {.deflate = true};
	const dw_zip_opts np64 = {.zip64_local = true};
	const dw_zip_opts torch = {.align = 64};
	struct {
		const char *what;
		const dw_zip_opts *o;
		bool z64end, central64;
	} cases[] = {
		{"plain", NULL, false, false},
		{"deflate", &deflate, false, false},
		{"numpy zip64 local extras", &np64, false, false},
		{"zip64 end record", &deflate, true, false},
		{"zip64 central extras", NULL, false, true},
		{"torch alignment", &torch, false, false},
	};
	(void)state;

	fill_big();
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		dw_zip_opts o = cases[i].o ? *cases[i].o : (dw_zip_opts){0};
		dw_zip *z = dw_zip_new();
		tb_file *f;
		tb_zip *zip;
		tb_err err;
		char path[64];

		o.zip64_central = cases[i].central64;
		assert_int_equal(dw_zip_add(z, "dir/a.txt", text_a, sizeof text_a, &o), 0);
		assert_int_equal(dw_zip_add(z, "dir/big.bin", big, sizeof big, &o), 0);
		assert_int_equal(dw_zip_add(z, "empty", "", 0, &o), 0);
		snprintf(path, sizeof path, "case%zu.zip", i);
		if (open_zip(z, cases[i].z64end, tu_path(dir, path), &f, &zip, &err) < 0)
			fail_msg("%s: %s", cases[i].what, err.msg);
		assert_int_equal(tb_zip_count(zip), 3);
		assert_string_equal(tb_zip_entry_at(zip, 0)->name, "dir/a.txt");
		assert_int_equal(tb_zip_entry_at(zip, 1)->method, o.deflate ? TB_ZIP_DEFLATE : TB_ZIP_STORED);
		if (o.deflate)
			assert_true(tb_zip_entry_at(zip, 1)->csize < sizeof big / 4);
		if (o.align)
			assert_int_equal(tb_zip_entry_at(zip, 1)->data_off % 64, 0);
		expect_member(zip, "dir/a.txt", text_a, sizeof text_a);
		expect_member(zip, "dir/big.bin", big, sizeof big);
		expect_member(zip, "empty", "", 0);
		assert_null(tb_zip_find(zip, "dir/"));
		tb_zip_free(zip);
		tb_file_free(f);
		dw_zip_free(z);
	}
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Offset of central entry k (from the end record). */
static size_t central(const unsigned char *b, size_t n, int k)
{
	size_t at = get32(b + n - 22 + 16);

	while (k-- > 0)
		at += 46 + (size_t)(b[at + 28] | b[at + 29] << 8) + (size_t)(b[at + 30] | b[at + 31] << 8) +
		      (size_t)(b[at + 32] | b[at + 33] << 8);
	return at;
}

typedef void (*patch_fn)(unsigned char *b, size_t *n);

static void p_local_name(unsigned char *b, size_t *n) { (void)n; b[30] = 'X'; }
static void p_method(unsigned char *b, size_t *n) { put16(b + central(b, *n, 0) + 10, 12); }
static void p_local_method(unsigned char *b, size_t *n) { (void)n; put16(b + 8, 8); }
static void p_encrypted(unsigned char *b, size_t *n) { put16(b + central(b, *n, 0) + 8, 1); }
static void p_no_eocd(unsigned char *b, size_t *n) { b[*n - 22] = 'Q'; }
static void p_truncated(unsigned char *b, size_t *n) { (void)b; *n -= 30; }
static void p_disk(unsigned char *b, size_t *n) { put16(b + *n - 22 + 4, 1); }
static void p_cd_off(unsigned char *b, size_t *n) { put32(b + *n - 22 + 16, 0x7fffffff); }
static void p_count(unsigned char *b, size_t *n) { put16(b + *n - 22 + 8, 60000); put16(b + *n - 22 + 10, 60000); }
static void p_lho(unsigned char *b, size_t *n) { put32(b + central(b, *n, 1) + 42, 0x10000000); }
static void p_local_sig(unsigned char *b, size_t *n) { (void)n; b[0] = 'Q'; }
static void p_local_size(unsigned char *b, size_t *n) { (void)n; put32(b + 18, 3); put32(b + 22, 3); }
static void p_usize(unsigned char *b, size_t *n)
{
	put32(b + central(b, *n, 0) + 24, 5);
	put32(b + 22, 5);
}
static void p_dup(unsigned char *b, size_t *n)
{
	/* Rename the second member to the first one's name, everywhere. */
	size_t c1 = central(b, *n, 1), l1 = get32(b + c1 + 42);
	memcpy(b + c1 + 46, "a", 1);
	memcpy(b + l1 + 30, "a", 1);
}
static void p_short_z64(unsigned char *b, size_t *n) { put32(b + central(b, *n, 0) + 42, 0xFFFFFFFFu); }
static void p_trailing(unsigned char *b, size_t *n) { memcpy(b + *n, "junk!", 5); *n += 5; }
static void p_prepend(unsigned char *b, size_t *n)
{
	memmove(b + 10, b, *n);
	memset(b, 'J', 10);
	*n += 10;
}

static void test_refused(void **state)
{
	const char *dir = tu_tmpdir();
	static const struct {
		patch_fn patch;
		const char *want;
	} cases[] = {
		{p_local_name, "local header names 'X'"},
		{p_method, "uses compression method 12"},
		{p_local_method, "disagree on the method"},
		{p_encrypted, "is encrypted"},
		{p_no_eocd, "no end-of-central-directory record"},
		{p_truncated, "no end-of-central-directory record"},
		{p_disk, "multi-disk archives are not supported"},
		{p_cd_off, "runs past its end record"},
		{p_count, "members cannot fit"},
		{p_lho, "local header offset 268435456 is outside the archive"},
		{p_local_sig, "no local header at offset 0"},
		{p_local_size, "disagree on its size"},
		{p_usize, "different compressed and uncompressed sizes"},
		{p_dup, "duplicate member 'a'"},
		{p_short_z64, "missing or short zip64 extra field"},
		{p_trailing, "the end-of-central-directory comment does not end the file"},
		{p_prepend, "central directory does not end where its end record starts"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		dw_zip *z = dw_zip_new();
		unsigned char *b;
		size_t n;
		tb_file *f;
		tb_zip *zip = (tb_zip *)1;
		tb_err err;
		char name[32];

		dw_zip_add(z, "a", "0123456789", 10, NULL);
		dw_zip_add(z, "b", "abcdefghij", 10, NULL);
		const unsigned char *p = dw_zip_bytes(z, false, &n);
		b = malloc(n + 64);
		memcpy(b, p, n);
		cases[i].patch(b, &n);
		snprintf(name, sizeof name, "bad%zu.zip", i);
		tu_write(tu_path(dir, name), b, n);
		assert_int_equal(tb_file_open(tu_path(dir, name), &f, &err), 0);
		if (tb_zip_open(f, &zip, &err) == 0)
			fail_msg("case %zu accepted, expected \"%s\"", i, cases[i].want);
		assert_null(zip);
		assert_string_equal(err.file, tu_path(dir, name));
		if (!strstr(err.msg, cases[i].want))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err.msg, cases[i].want);
		tb_file_free(f);
		free(b);
		dw_zip_free(z);
	}
}

/* Member names that could leave a directory are refused, whatever else. */
/* Member b's central entry points at a copy of its local record hidden
 * inside member a's data: the two would share bytes. */
static void test_overlap(void **state)
{
	const char *dir = tu_tmpdir();
	dw_zip *inner = dw_zip_new(), *z = dw_zip_new();
	const unsigned char *p;
	unsigned char *b;
	size_t n, rec;
	tb_file *f;
	tb_zip *zip;
	tb_err err;
	(void)state;

	dw_zip_add(inner, "b", "abcdefghij", 10, NULL);
	p = dw_zip_bytes(inner, false, &n);
	rec = 30 + 1 + 10;
	dw_zip_add(z, "a", p, rec, NULL);
	dw_zip_add(z, "b", "abcdefghij", 10, NULL);
	p = dw_zip_bytes(z, false, &n);
	b = malloc(n);
	memcpy(b, p, n);
	put32(b + central(b, n, 1) + 42, 31);
	tu_write(tu_path(dir, "overlap.zip"), b, n);
	assert_int_equal(tb_file_open(tu_path(dir, "overlap.zip"), &f, &err), 0);
	assert_int_equal(tb_zip_open(f, &zip, &err), -1);
	assert_string_equal(err.msg, "zip: members 'a' and 'b' overlap");
	tb_file_free(f);
	free(b);
	dw_zip_free(z);
	dw_zip_free(inner);
}

static void test_bad_names(void **state)
{
	const char *dir = tu_tmpdir();
	static const struct {
		const char *name, *want;
	} cases[] = {
		{"../evil.npy", "has a '.' or '..' path component"},
		{"a/../../evil.npy", "has a '.' or '..' path component"},
		{"/etc/passwd", "is an absolute path"},
		{"a\\..\\b.npy", "contains a backslash"},
		{"C:/x.npy", "starts with a drive letter"},
		{"a//b.npy", "has an empty path component"},
		{"./a.npy", "has a '.' or '..' path component"},
		{"a\nb.npy", "contains a control character"},
		{"\xff\xfe.npy", "is not valid UTF-8"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		dw_zip *z = dw_zip_new();
		tb_file *f;
		tb_zip *zip;
		tb_err err;
		char name[32];

		dw_zip_add(z, "fine.npy", "x", 1, NULL);
		dw_zip_add(z, cases[i].name, "x", 1, NULL);
		snprintf(name, sizeof name, "name%zu.zip", i);
		assert_int_equal(open_zip(z, false, tu_path(dir, name), &f, &zip, &err), -1);
		if (!strstr(err.msg, cases[i].want))
			fail_msg("'%s': \"%s\" does not say \"%s\"", cases[i].name, err.msg, cases[i].want);
		tb_file_free(f);
		dw_zip_free(z);
	}
}

/* Patch the declared uncompressed size of member 0 (zip64 extras in both
 * headers), then open. */
static int open_with_usize(const char *path, const void *data, size_t n, uint64_t usize, tb_file **f, tb_zip **zip,
			   tb_err *err)
{
	const dw_zip_opts o = {.deflate = true, .zip64_local = true, .zip64_central = true};
	dw_zip *z = dw_zip_new();
	const unsigned char *p;
	unsigned char *b;
	size_t len, c;
	int rc;

	dw_zip_add(z, "m", data, n, &o);
	p = dw_zip_bytes(z, false, &len);
	b = malloc(len);
	memcpy(b, p, len);
	for (int k = 0; k < 8; k++)
		b[30 + 1 + 4 + k] = (unsigned char)(usize >> (8 * k)); /* local zip64 extra: usize first */
	c = central(b, len, 0);
	for (int k = 0; k < 8; k++)
		b[c + 46 + 1 + 4 + k] = (unsigned char)(usize >> (8 * k));
	tu_write(path, b, len);
	free(b);
	dw_zip_free(z);
	assert_int_equal(tb_file_open(path, f, err), 0);
	rc = tb_zip_open(*f, zip, err);
	return rc;
}

static void expect_inflate_error(tb_zip *zip, const char *want)
{
	const unsigned char *data;
	unsigned char *owned;
	tb_err err;

	assert_int_equal(tb_zip_read(zip, tb_zip_entry_at(zip, 0), UINT64_MAX, &data, &owned, &err), -1);
	if (!strstr(err.msg, want))
		fail_msg("\"%s\" does not say \"%s\"", err.msg, want);
}

static void test_inflate_bounds(void **state)
{
	const char *dir = tu_tmpdir();
	unsigned char *noise = malloc(5u << 20);
	uint64_t x = 88172645463325252ull;
	tb_file *f;
	tb_zip *zip;
	tb_err err;
	(void)state;

	fill_big();
	/* Declares fewer bytes than the stream makes: inflation stops there. */
	assert_int_equal(open_with_usize(tu_path(dir, "less.zip"), big, sizeof big, 1000, &f, &zip, &err), 0);
	expect_inflate_error(zip, "inflates to more than its declared 1000 bytes");
	tb_zip_free(zip);
	tb_file_free(f);
	/* Declares more than the stream makes. */
	assert_int_equal(open_with_usize(tu_path(dir, "more.zip"), big, sizeof big, sizeof big + 10, &f, &zip, &err), 0);
	expect_inflate_error(zip, "fewer than the 100010 declared");
	tb_zip_free(zip);
	tb_file_free(f);
	/* More than deflate could make of the compressed bytes: refused unread. */
	assert_int_equal(open_with_usize(tu_path(dir, "ratio.zip"), big, sizeof big, 1ull << 40, &f, &zip, &err), -1);
	assert_non_null(strstr(err.msg, "more than deflate can make of"));
	tb_file_free(f);
	/* Plausible ratio but over the global cap. */
	for (size_t i = 0; i < (5u << 20); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		noise[i] = (unsigned char)x;
	}
	assert_int_equal(open_with_usize(tu_path(dir, "cap.zip"), noise, 5u << 20, 5ull << 30, &f, &zip, &err), -1);
	assert_non_null(strstr(err.msg, "would inflate to more than the 4294967296-byte cap"));
	tb_file_free(f);
	free(noise);
}

static void test_crc(void **state)
{
	const char *dir = tu_tmpdir();
	const dw_zip_opts o = {.deflate = true};
	dw_zip *z = dw_zip_new();
	const unsigned char *p;
	unsigned char *b;
	size_t n, c;
	tb_file *f;
	tb_zip *zip;
	tb_err err;
	(void)state;

	fill_big();
	dw_zip_add(z, "m", big, sizeof big, &o);
	p = dw_zip_bytes(z, false, &n);
	b = malloc(n);
	memcpy(b, p, n);
	c = central(b, n, 0);
	b[c + 16] ^= 1;
	b[14] ^= 1;
	tu_write(tu_path(dir, "crc.zip"), b, n);
	assert_int_equal(tb_file_open(tu_path(dir, "crc.zip"), &f, &err), 0);
	assert_int_equal(tb_zip_open(f, &zip, &err), 0);
	expect_inflate_error(zip, "fails its CRC check");
	tb_zip_free(zip);
	tb_file_free(f);
	free(b);
	dw_zip_free(z);
}

/* Elements [at, at+n) of a u32 tensor whose element i is i, read and checked. */
static void expect_counting(const tb_tensor *t, uint64_t at, uint64_t n, float *buf)
{
	tb_tensor_read_f32(t, at, n, buf);
	for (uint64_t i = 0; i < n; i++)
		if (buf[i] != (float)(at + i))
			fail_msg("element %llu reads %g", (unsigned long long)(at + i), (double)buf[i]);
}

/* A deflated member several windows long, read the ways readers do: in
 * order, past the window in one call, back a little, back to the start
 * (the stream restarts), the end, and through a strided view that loads
 * it whole while the windowed reader still holds the blob. */
static void test_window_reads(void **state)
{
	const char *dir = tu_tmpdir();
	const dw_zip_opts o = {.deflate = true};
	const uint64_t n = 6u << 20; /* 24 MB of u32: more than the 16 MB window */
	uint32_t *v = malloc(n * sizeof *v);
	float *buf = malloc((5u << 20) * sizeof *buf);
	dw_zip *z = dw_zip_new();
	tb_blob *blob = tb_blob_new();
	int64_t whole[1] = {(int64_t)n};
	tb_tensor t = {.name = (char *)"counting", .dtype = TB_DT_U32};
	tb_tensor view = {.name = (char *)"view", .dtype = TB_DT_U32, .ndim = 2, .shape = {64, 64}, .stride = {1, 64}};
	tb_file *f;
	tb_zip *zip;
	tb_err err;
	(void)state;

	for (uint64_t i = 0; i < n; i++)
		v[i] = (uint32_t)i;
	dw_zip_add(z, "counting", v, n * sizeof *v, &o);
	assert_int_equal(open_zip(z, false, tu_path(dir, "window.zip"), &f, &zip, &err), 0);
	assert_int_equal(tb_zip_blob(zip, tb_zip_entry_at(zip, 0), blob, &err), 0);
	assert_int_equal(tb_tensor_set_shape(&t, 1, whole, "window.zip", &err), 0);
	t.blob = view.blob = blob;
	assert_int_equal(tb_tensor_check_bounds(&t, "window.zip", &err), 0);
	assert_int_equal(tb_tensor_check_bounds(&view, "window.zip", &err), 0);
	assert_true(tb_tensor_streamed(&t));
	assert_false(tb_tensor_streamed(&view));

	assert_int_equal(tb_tensor_acquire(&t, &err), 0);
	assert_null(tb_tensor_data(&t));
	expect_counting(&t, 0, 1000, buf);
	expect_counting(&t, 1000, 5u << 20, buf);    /* 20 MB in one read: past the window */
	expect_counting(&t, (5u << 20) - 5, 10, buf); /* a step back */
	expect_counting(&t, 3, 4097, buf);            /* back to the start: restarts */
	expect_counting(&t, n - 7, 7, buf);           /* the end */
	expect_counting(&t, (1u << 20) + 1, 3, buf);  /* behind the window again */
	assert_int_equal(tb_tensor_acquire(&view, &err), 0);
	tb_tensor_read_f32(&view, 0, 4096, buf);
	for (uint64_t i = 0; i < 4096; i++)
		assert_true(buf[i] == (float)((i % 64) * 64 + i / 64));
	tb_tensor_release(&view);
	expect_counting(&t, n - 4096, 4096, buf);
	tb_tensor_release(&t);
	assert_null(blob->data);

	/* Acquired again, the window starts over. */
	assert_int_equal(tb_tensor_acquire(&t, &err), 0);
	expect_counting(&t, 12345, 100, buf);
	tb_tensor_release(&t);
	tb_blob_free(blob);
	tb_zip_free(zip);
	tb_file_free(f);
	dw_zip_free(z);
	free(buf);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stored_and_deflated),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_inflate_bounds),
		cmocka_unit_test(test_crc),
		cmocka_unit_test(test_window_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
