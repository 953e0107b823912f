/*
 * test_writefile: a file is written whole or not at all, through a
 * temporary of its own (two writers of one file never share one), with
 * the mode asked for, and a failure is an I/O error that leaves the old
 * file and no temporary.
 */
#include "config.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "base/writefile.h"

static int fill_text(FILE *f, const void *text)
{
	return fputs(text, f) < 0 ? -1 : 0;
}

static int fill_fails(FILE *f, const void *text)
{
	fputs(text, f);
	return -1;
}

static void slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Entries of dir other than . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void test_whole_or_nothing(void **state)
{
	char dir[4096], path[4200], other[4300], buf[64];
	struct stat st;
	tb_err err;
	mode_t mask = umask(022);
	(void)state;

	snprintf(dir, sizeof dir, "%s/w", tu_tmpdir());
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof path, "%s/map.txt", dir);
	tb_err_clear(&err);
	assert_int_equal(tb_write_file(path, "the map", 0, fill_text, "one\n", &err), 0);
	slurp(path, buf, sizeof buf);
	assert_string_equal(buf, "one\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	/* any umask: the kernel applies it, as to any new file */
	umask(027);
	assert_int_equal(tb_write_file(path, "the map", 0, fill_text, "one\n", &err), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal(umask(022), 027);

	/* another writer's temporary under the plain name does not collide */
	snprintf(other, sizeof other, "%s.tmp", path);
	assert_int_equal(mkdir(other, 0700), 0);
	assert_int_equal(tb_write_file(path, "the map", TB_WRITE_PRIVATE | TB_WRITE_SYNC, fill_text, "two\n", &err), 0);
	slurp(path, buf, sizeof buf);
	assert_string_equal(buf, "two\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(rmdir(other), 0);

	/* a failed fill keeps the old content and leaves nothing behind */
	assert_int_equal(tb_write_file(path, "the map", 0, fill_fails, "three\n", &err), -1);
	assert_int_equal(err.code, TB_ERR_IO);
	assert_non_null(strstr(err.msg, "cannot write the map"));
	slurp(path, buf, sizeof buf);
	assert_string_equal(buf, "two\n");
	assert_int_equal(entries(dir), 1);

	/* a directory that cannot hold the temporary: an I/O error naming the file */
	snprintf(path, sizeof path, "%s/none/map.txt", dir);
	assert_int_equal(tb_write_file(path, "the map", 0, fill_text, "four\n", &err), -1);
	assert_int_equal(err.code, TB_ERR_IO);
	assert_string_equal(err.file, path);
	umask(mask);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_or_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
