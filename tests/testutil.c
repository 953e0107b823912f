#include "config.h"

#include <ftw.h>
#include <math.h>
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

float *tu_ramp(size_t n, float scale)
{
	float *x = malloc((n ? n : 1) * sizeof *x);

	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = scale * sinf(0.7f * (float)i + 0.3f) + 0.01f * (float)(i % 5);
	return x;
}

void tu_put(const char *dir, const char *name, tb_dtype dt, int ndim, const int64_t *shape, const float *x)
{
	char rel[512];
	size_t n = 1, nbytes;
	void *buf;

	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	buf = dw_encode(x, n, dt, &nbytes);
	snprintf(rel, sizeof rel, "%s.npy", name);
	assert_int_equal(dw_write_npy(tu_path(dir, rel), 1, dw_npy_descr(dt), false, ndim, shape, buf, nbytes), 0);
	free(buf);
}

void tu_compare(tu_compared *c, const char *ref, const char *cand, const tb_compare_opts *o)
{
	tb_open_opts oo;
	tb_compare_opts def;
	tb_err err;
	char text[2200];

	tb_open_opts_init(&oo);
	oo.npy_void2 = TB_DT_BF16;
	if (!o) {
		tb_compare_opts_init(&def);
		o = &def;
	}
	if (tb_session_open(&c->s, ref, cand, &oo, NULL, &err) < 0)
		fail_msg("open: %s", tb_err_text(&err, text, sizeof text));
	if (tb_compare(c->s.pairing, o, &c->res, &err) < 0)
		fail_msg("compare: %s", tb_err_text(&err, text, sizeof text));
}

void tu_compared_done(tu_compared *c)
{
	tb_result_free(c->res);
	tb_session_done(&c->s);
}

const tb_cell_result *tu_cell(const tb_result *r, const char *name)
{
	tb_cell c;

	assert_int_equal(tb_cell_parse(name, &c), 0);
	for (size_t i = 0; i < r->n_cells; i++)
		if (tb_cell_eq(&r->cells[i].cell, &c))
			return &r->cells[i];
	fail_msg("no cell %s", name);
	return NULL;
}
