#include "config.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "testutil.h"

static char *dirs[64];
static int n_dirs;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	for (int i = 0; i < n_dirs; i++) {
		nftw(dirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(dirs[i]);
	}
}

const char *tu_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];

	snprintf(tmpl, sizeof tmpl, "%s/tbtest.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl) || n_dirs == 64) {
		perror("mkdtemp");
		abort();
	}
	if (n_dirs == 0)
		atexit(cleanup);
	dirs[n_dirs] = strdup(tmpl);
	return dirs[n_dirs++];
}

const char *tu_path(const char *dir, const char *rel)
{
	static char bufs[8][4096];
	static int k;
	char *b = bufs[k++ % 8];

	snprintf(b, 4096, "%s/%s", dir, rel);
	return b;
}

void tu_write(const char *path, const void *data, size_t n)
{
	FILE *f;

	if (dw_mkdirs_for(path) < 0 || !(f = fopen(path, "wb")) || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
		perror(path);
		abort();
	}
}

void tu_write_str(const char *path, const char *text)
{
	tu_write(path, text, strlen(text));
}

tb_tree *tu_open(const char *path, const tb_open_opts *opts)
{
	tb_tree *tree;
	tb_err err;
	char text[TB_ERR_TEXT_MAX];

	if (tb_tree_open(path, opts, &tree, &err) < 0)
		fail_msg("tb_tree_open(%s) failed: %s", path, tb_err_text(&err, text, sizeof text));
	return tree;
}

tb_tensor *tu_tensor(const tb_tree *tree, const char *name)
{
	tb_tensor *t = tb_tree_find(tree, name);

	if (!t) {
		for (size_t i = 0; i < tree->n_tensors; i++)
			print_message("# have '%s'\n", tree->tensors[i]->name);
		fail_msg("no tensor '%s' in %s", name, tree->path);
	}
	return t;
}

void tu_expect_refused(const char *path, const tb_open_opts *opts, const char *file, const char *want)
{
	tb_tree *tree = NULL;
	tb_err err;

	tb_err_clear(&err);
	if (tb_tree_open(path, opts, &tree, &err) == 0) {
		tb_tree_free(tree);
		fail_msg("%s: accepted, expected an error containing \"%s\"", path, want);
	}
	assert_null(tree);
	assert_string_equal(err.file, file ? file : path);
	if (!strstr(err.msg, want))
		fail_msg("%s: error \"%s\" does not contain \"%s\"", path, err.msg, want);
}

void tu_expect_values(tb_tensor *t, const float *want, size_t n)
{
	float *got = calloc(n ? n : 1, sizeof *got);
	tb_err err;
	char text[TB_ERR_TEXT_MAX];

	assert_non_null(got);
	assert_int_equal(t->numel, n);
	if (tb_tensor_acquire(t, &err) < 0)
		fail_msg("acquire %s: %s", t->name, tb_err_text(&err, text, sizeof text));
	tb_tensor_read_f32(t, 0, n, got);
	tb_tensor_release(t);
	for (size_t i = 0; i < n; i++) {
		bool same = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i] && !signbit(got[i]) == !signbit(want[i]);
		if (!same)
			fail_msg("%s: element %zu is %a, expected %a", t->name, i, (double)got[i], (double)want[i]);
	}
	free(got);
}
