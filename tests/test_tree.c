/*
 * test_tree: the directory walk (order, raw names, what is skipped, what is
 * refused) and the strided-view arithmetic of tensor.c on hand-built
 * tensors, which no reader here produces but torch files will.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "tensor/tensor.h"
#include "testutil.h"
#include "formats/tree.h"

/* A 1-D f32 .npy of n elements base, base+1, ... */
static void npy_at(const char *path, size_t n, float base)
{
	float x[16];
	const int64_t shape[1] = {(int64_t)n};

	for (size_t i = 0; i < n; i++)
		x[i] = base + (float)i;
	assert_int_equal(dw_write_npy(path, 1, "<f4", false, 1, shape, x, n * sizeof *x), 0);
}

/* A safetensors file of two-element f32 tensors named names[0..n). */
static void st_at(const char *path, const char *const *names, size_t n, float value)
{
	dw_tensor ts[8];
	float x[8][2];

	for (size_t i = 0; i < n; i++) {
		x[i][0] = value;
		x[i][1] = value + 1;
		ts[i] = (dw_tensor){names[i], TB_DT_F32, 1, {2}, x[i], sizeof x[i]};
	}
	assert_int_equal(dw_write_safetensors(path, ts, n, NULL), 0);
}

static tb_tree *open_tree(const char *path)
{
	tb_tree *tree;
	tb_err err;
	char text[TB_ERR_TEXT_MAX];

	if (tb_tree_open(path, NULL, &tree, &err) < 0)
		fail_msg("tb_tree_open(%s) failed: %s", path, tb_err_text(&err, text, sizeof text));
	return tree;
}

static void expect_names(const tb_tree *tree, const char *const *names, size_t n)
{
	if (tree->n_tensors != n)
		fail_msg("%zu tensors, expected %zu (first: %s)", tree->n_tensors, n,
			 tree->n_tensors ? tree->tensors[0]->name : "-");
	for (size_t i = 0; i < n; i++)
		if (strcmp(tree->tensors[i]->name, names[i]) != 0)
			fail_msg("tensor %zu is '%s', expected '%s'", i, tree->tensors[i]->name, names[i]);
}

static float first_value(tb_tensor *t)
{
	float v = NAN;

	assert_int_equal(tb_tensor_acquire(t, NULL), 0);
	tb_tensor_read_f32(t, 0, 1, &v);
	tb_tensor_release(t);
	return v;
}

static bool has_note(const tb_tree *tree, const char *a, const char *b)
{
	for (size_t i = 0; i < tree->n_notes; i++)
		if (strstr(tree->notes[i], a) && strstr(tree->notes[i], b))
			return true;
	return false;
}

static void test_sorted_nested(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const want[] = {"a", "b", "layers.0.attn", "layers.0.mlp", "layers.10.attn",
					   "layers.2.attn.q"};
	tb_tree *tree;
	(void)state;

	npy_at(tu_path(dir, "b.npy"), 2, 2);
	npy_at(tu_path(dir, "layers/2/attn/q.npy"), 2, 6);
	npy_at(tu_path(dir, "layers/10/attn.npy"), 2, 5);
	npy_at(tu_path(dir, "a.npy"), 2, 1);
	npy_at(tu_path(dir, "layers/0/mlp.npy"), 2, 4);
	npy_at(tu_path(dir, "layers/0/attn.npy"), 2, 3);
	tree = open_tree(dir);
	expect_names(tree, want, 6);
	/* Each name is bound to its own file. */
	assert_string_equal(tree->tensors[2]->path, tu_path(dir, "layers/0/attn.npy"));
	assert_true(first_value(tree->tensors[2]) == 3);
	assert_true(first_value(tree->tensors[4]) == 5);
	assert_true(first_value(tree->tensors[5]) == 6);
	assert_int_equal(tree->n_notes, 0);
	assert_string_equal(tree->path, dir);
	tb_tree_free(tree);
}

static void test_container_prefix(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const k[1] = {"k"}, *const k2[1] = {"k2"}, *const norm[2] = {"model.norm", "lm_head"};
	static const char *const want[] = {"a.b.lm_head", "a.b.model.norm", "k2", "sub.k", "x.y"};
	tb_tree *tree;
	(void)state;

	st_at(tu_path(dir, "sub/x.safetensors"), k, 1, 1);
	st_at(tu_path(dir, "top.safetensors"), k2, 1, 2);
	st_at(tu_path(dir, "a/b/c.safetensors"), norm, 2, 3);
	/* Only the last extension is dropped from a file's stem. */
	npy_at(tu_path(dir, "x.y.npy"), 1, 4);
	tree = open_tree(dir);
	expect_names(tree, want, 5);
	assert_string_equal(tb_tree_find(tree, "sub.k")->path, tu_path(dir, "sub/x.safetensors"));
	assert_true(first_value(tb_tree_find(tree, "sub.k")) == 1);
	assert_true(first_value(tb_tree_find(tree, "a.b.model.norm")) == 3);
	tb_tree_free(tree);
}

static void test_single_file(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const keys[2] = {"model.norm", "lm_head"};
	static const char *const want[2] = {"lm_head", "model.norm"};
	tb_tree *tree;
	(void)state;

	npy_at(tu_path(dir, "deep/layers.3.attn.npy"), 3, 7);
	tree = open_tree(tu_path(dir, "deep/layers.3.attn.npy"));
	assert_int_equal(tree->n_tensors, 1);
	/* The name is the file's, not its directory's. */
	assert_string_equal(tree->tensors[0]->name, "layers.3.attn");
	assert_true(first_value(tree->tensors[0]) == 7);
	tb_tree_free(tree);

	/* A container file given directly: its keys, no prefix. */
	st_at(tu_path(dir, "deep/m.safetensors"), keys, 2, 0);
	tree = open_tree(tu_path(dir, "deep/m.safetensors"));
	expect_names(tree, want, 2);
	tb_tree_free(tree);

	/* Content decides, not the name. */
	npy_at(tu_path(dir, "renamed.bin"), 1, 9);
	tree = open_tree(tu_path(dir, "renamed.bin"));
	assert_string_equal(tree->tensors[0]->name, "renamed");
	tb_tree_free(tree);

	tu_write_str(tu_path(dir, "README.md"), "# not a tensor\n");
	tu_expect_refused(tu_path(dir, "README.md"), NULL, tu_path(dir, "README.md"), "not a recognised tensor file");
	tu_expect_refused(tu_path(dir, "nothing-here"), NULL, tu_path(dir, "nothing-here"), "cannot open");
}

static void test_skipped_files(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const want[2] = {"keep", "sub.keep"};
	tb_tree *tree;
	(void)state;

	npy_at(tu_path(dir, "keep.npy"), 1, 1);
	npy_at(tu_path(dir, "sub/keep.npy"), 1, 2);
	npy_at(tu_path(dir, ".hidden.npy"), 1, 3);
	npy_at(tu_path(dir, ".git/objects/x.npy"), 1, 4);
	tu_write_str(tu_path(dir, "README.md"), "notes\n");
	tu_write_str(tu_path(dir, "sub/run.log"), "step 1\n");
	tu_write(tu_path(dir, "empty"), "", 0);
	tree = open_tree(dir);
	expect_names(tree, want, 2);
	assert_int_equal(tree->n_notes, 5);
	assert_true(has_note(tree, ".hidden.npy", "hidden"));
	assert_true(has_note(tree, ".git", "hidden"));
	assert_true(has_note(tree, "README.md", "not a tensor file"));
	assert_true(has_note(tree, "sub/run.log", "not a tensor file"));
	assert_true(has_note(tree, "empty", "not a tensor file"));
	tb_tree_free(tree);

	/* A file with a tensor suffix is not skipped: its reader says what is wrong. */
	tu_write_str(tu_path(dir, "sub/broken.npy"), "not numpy at all");
	tu_expect_refused(dir, NULL, tu_path(dir, "sub/broken.npy"), "not an npy file (bad magic)");
}

static void test_fifo(void **state)
{
	const char *dir = tu_tmpdir();
	tb_tree *tree;
	(void)state;

	npy_at(tu_path(dir, "a.npy"), 1, 1);
	assert_int_equal(mkfifo(tu_path(dir, "pipe.npy"), 0600), 0);
	/* Nobody writes the FIFO: opening it for reading would block forever. */
	alarm(20);
	tree = open_tree(dir);
	alarm(0);
	assert_int_equal(tree->n_tensors, 1);
	assert_true(has_note(tree, "pipe.npy", "not a regular file (a FIFO)"));
	tb_tree_free(tree);

	alarm(20);
	tu_expect_refused(tu_path(dir, "pipe.npy"), NULL, tu_path(dir, "pipe.npy"), "not a directory or regular file");
	alarm(0);
}

/* A socket is skipped with a note too, saying what it is. */
static void test_socket(void **state)
{
	const char *dir = tu_tmpdir();
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	tb_tree *tree;
	int fd;
	(void)state;

	npy_at(tu_path(dir, "a.npy"), 1, 1);
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s", tu_path(dir, "sock.npy")) >= sizeof sa.sun_path)
		skip(); /* $TMPDIR too deep for a socket path */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (const struct sockaddr *)&sa, sizeof sa), 0);
	tree = open_tree(dir);
	assert_int_equal(tree->n_tensors, 1);
	assert_true(has_note(tree, "sock.npy", "not a regular file (a socket)"));
	tb_tree_free(tree);
	close(fd);
}

/* Git LFS pointers in place of the data: an error naming the file when the
 * tree would read it, a note otherwise. */
static void test_lfs_pointer(void **state)
{
	static const char ptr[] = "version https://git-lfs.github.com/spec/v1\n"
				  "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
				  "size 12345\n";
	static const char *const names[] = {"x.npy", "x.safetensors", "x.pt", "x.npz", "pytorch_model.bin"};
	const char *dir = tu_tmpdir();
	char sub[64], tree_dir[4200], file[sizeof tree_dir + 32];
	tb_tree *tree;
	(void)state;

	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(sub, sizeof sub, "t%zu", i);
		snprintf(tree_dir, sizeof tree_dir, "%s", tu_path(dir, sub));
		snprintf(file, sizeof file, "%s/%s", tree_dir, names[i]);
		tu_write_str(file, ptr);
		tu_expect_refused(file, NULL, NULL, "is a Git LFS pointer, not the data (run git lfs pull)");
		tu_expect_refused(tree_dir, NULL, file, "is a Git LFS pointer, not the data (run git lfs pull)");
	}
	/* a pointer for a file tbisect would not read anyway */
	npy_at(tu_path(dir, "mixed/a.npy"), 1, 1);
	tu_write_str(tu_path(dir, "mixed/logo.png"), ptr);
	tree = open_tree(tu_path(dir, "mixed"));
	assert_int_equal(tree->n_tensors, 1);
	assert_true(has_note(tree, "logo.png", "a Git LFS pointer"));
	tb_tree_free(tree);
}

static void test_symlink_inside(void **state)
{
	const char *root = tu_tmpdir(), *dir = tu_path(root, "tree");
	static const char *const want[] = {"alias", "real", "sub.x", "view.x"};
	char dirbuf[4096], link[4096];
	tb_tree *tree;
	(void)state;

	snprintf(dirbuf, sizeof dirbuf, "%s", dir);
	dir = dirbuf;
	npy_at(tu_path(dir, "real.npy"), 2, 5);
	npy_at(tu_path(dir, "sub/x.npy"), 1, 8);
	assert_int_equal(symlink("real.npy", tu_path(dir, "alias.npy")), 0);
	assert_int_equal(symlink("sub", tu_path(dir, "view")), 0);
	tree = open_tree(dir);
	expect_names(tree, want, 4);
	assert_true(first_value(tb_tree_find(tree, "alias")) == 5);
	assert_true(first_value(tb_tree_find(tree, "view.x")) == 8);
	tb_tree_free(tree);

	/* The tree reached through a symlink: links inside still count as inside. */
	snprintf(link, sizeof link, "%s/via", root);
	assert_int_equal(symlink("tree", link), 0);
	tree = open_tree(link);
	expect_names(tree, want, 4);
	tb_tree_free(tree);
}

static void test_symlink_outside(void **state)
{
	const char *root = tu_tmpdir();
	char dir[4096], link[sizeof dir + 16], target[4096];
	(void)state;

	/* "tree2" shares a name prefix with "tree": a string-prefix check would pass it. */
	snprintf(dir, sizeof dir, "%s/tree", root);
	snprintf(target, sizeof target, "%s/tree2/x.npy", root);
	npy_at(tu_path(dir, "a.npy"), 1, 1);
	npy_at(target, 1, 2);
	snprintf(link, sizeof link, "%s/out.npy", dir);
	assert_int_equal(symlink("../tree2/x.npy", link), 0);
	tu_expect_refused(dir, NULL, link, "symbolic link leaves the tree");
	tu_expect_refused(dir, NULL, link, "tree2/x.npy");

	assert_int_equal(unlink(link), 0);
	snprintf(link, sizeof link, "%s/up", dir);
	assert_int_equal(symlink("..", link), 0);
	tu_expect_refused(dir, NULL, link, "symbolic link leaves the tree");

	assert_int_equal(unlink(link), 0);
	snprintf(link, sizeof link, "%s/abs.npy", dir);
	assert_int_equal(symlink(target, link), 0);
	tu_expect_refused(dir, NULL, link, "symbolic link leaves the tree");
}

static void test_symlink_loop_broken(void **state)
{
	const char *loop = tu_tmpdir(), *self = tu_tmpdir(), *deep = tu_tmpdir(), *broken = tu_tmpdir();
	char link[4096];
	(void)state;

	npy_at(tu_path(loop, "a.npy"), 1, 1);
	snprintf(link, sizeof link, "%s/again", loop);
	assert_int_equal(symlink(".", link), 0);
	tu_expect_refused(loop, NULL, link, "symbolic link loop");

	/* A link back up from a subdirectory. */
	npy_at(tu_path(deep, "sub/a.npy"), 1, 1);
	snprintf(link, sizeof link, "%s/sub/parent", deep);
	assert_int_equal(symlink("..", link), 0);
	tu_expect_refused(deep, NULL, link, "symbolic link loop");

	npy_at(tu_path(self, "a.npy"), 1, 1);
	snprintf(link, sizeof link, "%s/me.npy", self);
	assert_int_equal(symlink("me.npy", link), 0);
	tu_expect_refused(self, NULL, link, "symbolic link");

	npy_at(tu_path(broken, "a.npy"), 1, 1);
	snprintf(link, sizeof link, "%s/gone.npy", broken);
	assert_int_equal(symlink("nowhere.npy", link), 0);
	tu_expect_refused(broken, NULL, link, "broken symbolic link");
}

static void test_empty(void **state)
{
	const char *empty = tu_tmpdir(), *junk = tu_tmpdir(), *nested = tu_tmpdir();
	(void)state;

	tu_expect_refused(empty, NULL, empty, "no tensors found");
	tu_write_str(tu_path(junk, "README"), "nothing\n");
	tu_expect_refused(junk, NULL, junk, "no tensors found");
	assert_int_equal(mkdir(tu_path(nested, "a"), 0700), 0);
	assert_int_equal(mkdir(tu_path(nested, "a/b"), 0700), 0);
	tu_expect_refused(nested, NULL, nested, "no tensors found");
}

/* A directory of unsupported files says what it skipped in the one error
 * line: the notes never reach the user when the tree fails. */
static void test_only_unsupported(void **state)
{
	const char *gguf = tu_tmpdir(), *two = tu_tmpdir();
	char want[4200];
	(void)state;

	tu_write_str(tu_path(gguf, "model.gguf"), "GGUF\3\0\0\0 and the rest");
	snprintf(want, sizeof want, "no tensors found; skipped %s: a GGUF file (llama.cpp), which tbisect does not read",
		 tu_path(gguf, "model.gguf"));
	tu_expect_refused(gguf, NULL, gguf, want);
	tu_expect_refused(tu_path(gguf, "model.gguf"), NULL, NULL, "a GGUF file (llama.cpp), which tbisect does not read");
	tu_write_str(tu_path(two, "a.onnx"), "onnx");
	tu_write_str(tu_path(two, "b.txt"), "text");
	snprintf(want, sizeof want, "no tensors found; skipped %s: not a tensor file (and 1 more notes)", tu_path(two, "a.onnx"));
	tu_expect_refused(two, NULL, two, want);
}

static void test_duplicates(void **state)
{
	const char *two = tu_tmpdir(), *mixed = tu_tmpdir(), *nested = tu_tmpdir();
	static const char *const w[1] = {"w"}, *const sub_w[1] = {"sub.w"};
	(void)state;

	st_at(tu_path(two, "a.safetensors"), w, 1, 1);
	st_at(tu_path(two, "b.safetensors"), w, 1, 2);
	tu_expect_refused(two, NULL, tu_path(two, "b.safetensors"), "duplicate tensor name 'w'");

	npy_at(tu_path(mixed, "w.npy"), 1, 1);
	st_at(tu_path(mixed, "m.safetensors"), w, 1, 2);
	tu_expect_refused(mixed, NULL, tu_path(mixed, "w.npy"), "duplicate tensor name 'w'");

	/* "sub/w.npy" and key "sub.w" at the top collide after naming. */
	npy_at(tu_path(nested, "sub/w.npy"), 1, 1);
	st_at(tu_path(nested, "top.safetensors"), sub_w, 1, 2);
	tu_expect_refused(nested, NULL, tu_path(nested, "top.safetensors"), "duplicate tensor name 'sub.w'");
}

static void test_find(void **state)
{
	const char *dir = tu_tmpdir();
	static const char *const names[] = {"a", "m", "m.x", "z"};
	tb_tree *tree;
	(void)state;

	for (size_t i = 0; i < 4; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "%s.npy", names[i]);
		npy_at(tu_path(dir, rel), 1, (float)i);
	}
	tree = open_tree(dir);
	expect_names(tree, names, 4);
	for (size_t i = 0; i < 4; i++) {
		tb_tensor *t = tb_tree_find(tree, names[i]);
		assert_non_null(t);
		assert_ptr_equal(t, tree->tensors[i]);
		assert_true(first_value(t) == (float)i);
	}
	assert_null(tb_tree_find(tree, ""));
	assert_null(tb_tree_find(tree, "0"));
	assert_null(tb_tree_find(tree, "b"));
	assert_null(tb_tree_find(tree, "m."));
	assert_null(tb_tree_find(tree, "zz"));
	assert_null(tb_tree_find(tree, "A"));
	tb_tree_free(tree);
}

/* A tensor over owned f32 storage; the caller sets shape and strides. */
typedef struct view {
	tb_tensor t;
	char name[16];
} view;

static void view_init(view *v, tb_dtype dt, const void *data, size_t nbytes, int ndim, const int64_t *shape,
		      const int64_t *stride, uint64_t offset)
{
	unsigned char *copy = malloc(nbytes ? nbytes : 1);

	assert_non_null(copy);
	memcpy(copy, data, nbytes);
	memset(v, 0, sizeof *v);
	snprintf(v->name, sizeof v->name, "view");
	v->t.name = v->name;
	v->t.path = "mem";
	v->t.dtype = dt;
	v->t.ndim = ndim;
	v->t.numel = 1;
	for (int i = 0; i < ndim; i++) {
		v->t.shape[i] = shape[i];
		v->t.stride[i] = stride[i];
		v->t.numel *= (uint64_t)shape[i];
	}
	v->t.offset = offset;
	v->t.blob = tb_blob_new();
	assert_non_null(v->t.blob);
	tb_blob_set_owned(v->t.blob, copy, nbytes);
}

static void view_read(view *v, uint64_t start, uint64_t n, float *out)
{
	assert_int_equal(tb_tensor_acquire(&v->t, NULL), 0);
	tb_tensor_read_f32(&v->t, start, n, out);
	tb_tensor_release(&v->t);
}

static void view_free(view *v)
{
	tb_blob_free(v->t.blob);
}

static void expect_floats(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("element %zu is %g, expected %g", i, (double)got[i], (double)want[i]);
}

static void test_view_expand(void **state)
{
	static const float row[3] = {1, 2, 3};
	static const float col[2] = {5, 7};
	const int64_t s43[2] = {4, 3}, st_row[2] = {0, 1}, s23[2] = {2, 3}, st_col[2] = {1, 0};
	static const float want_row[12] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
	static const float want_col[6] = {5, 5, 5, 7, 7, 7};
	float out[12];
	tb_err err;
	view v;
	(void)state;

	/* torch's expand(): a 3-element storage seen as 4 x 3. */
	view_init(&v, TB_DT_F32, row, sizeof row, 2, s43, st_row, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	assert_false(v.t.contiguous);
	view_read(&v, 0, 12, out);
	expect_floats(out, want_row, 12);
	view_read(&v, 4, 5, out);
	expect_floats(out, want_row + 4, 5);
	view_free(&v);

	view_init(&v, TB_DT_F32, col, sizeof col, 2, s23, st_col, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	assert_false(v.t.contiguous);
	view_read(&v, 0, 6, out);
	expect_floats(out, want_col, 6);
	view_free(&v);
}

static void test_view_transposed(void **state)
{
	/* storage is a 2 x 3 row-major [[0,1,2],[10,11,12]]; the view is its transpose. */
	static const float store[6] = {0, 1, 2, 10, 11, 12};
	static const float want[6] = {0, 10, 1, 11, 2, 12};
	const int64_t shape[2] = {3, 2}, stride[2] = {1, 3};
	uint16_t half[6];
	float out[6];
	tb_err err;
	view v;
	(void)state;

	view_init(&v, TB_DT_F32, store, sizeof store, 2, shape, stride, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	assert_false(v.t.contiguous);
	assert_int_equal(tb_tensor_acquire(&v.t, NULL), 0);
	assert_null(tb_tensor_f32_direct(&v.t));
	tb_tensor_release(&v.t);
	view_read(&v, 0, 6, out);
	expect_floats(out, want, 6);
	view_read(&v, 3, 2, out);
	expect_floats(out, want + 3, 2);
	view_free(&v);

	/* Same view over 2-byte elements: strides count elements, not bytes. */
	for (int i = 0; i < 6; i++)
		half[i] = tb_f32_to_f16(store[i]);
	view_init(&v, TB_DT_F16, half, sizeof half, 2, shape, stride, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	view_read(&v, 0, 6, out);
	expect_floats(out, want, 6);
	view_free(&v);
}

static void test_view_offset(void **state)
{
	static const float store[5] = {-1, 4, 5, 6, 7};
	static const float want[4] = {4, 5, 6, 7};
	const int64_t shape[2] = {2, 2}, stride[2] = {2, 1};
	float out[4];
	tb_err err;
	view v;
	(void)state;

	/* A view starting one element into its storage, contiguous from there. */
	view_init(&v, TB_DT_F32, store, sizeof store, 2, shape, stride, sizeof(float));
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	assert_true(v.t.contiguous);
	view_read(&v, 0, 4, out);
	expect_floats(out, want, 4);
	view_free(&v);

	/* Two elements further it runs past the end. */
	view_init(&v, TB_DT_F32, store, sizeof store, 2, shape, stride, 2 * sizeof(float));
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), -1);
	assert_string_equal(err.file, "mem");
	assert_non_null(strstr(err.msg, "data extends past its storage (24 bytes needed, 20 present)"));
	view_free(&v);
}

static void test_view_bounds(void **state)
{
	static const float store[3] = {1, 2, 3};
	const int64_t s43[2] = {4, 3}, c43[2] = {3, 1}, neg[2] = {-1, 1}, huge_shape[2] = {9, 2},
		      huge[2] = {INT64_MAX / 2, 1}, s0[2] = {0, 3}, far[2] = {1000, 1};
	tb_err err;
	view v;
	(void)state;

	/* A contiguous 4 x 3 needs 12 elements; the storage has 3. */
	view_init(&v, TB_DT_F32, store, sizeof store, 2, s43, c43, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), -1);
	assert_non_null(strstr(err.msg, "data extends past its storage (48 bytes needed, 12 present)"));
	view_free(&v);

	view_init(&v, TB_DT_F32, store, sizeof store, 2, s43, neg, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), -1);
	assert_non_null(strstr(err.msg, "negative stride"));
	view_free(&v);

	view_init(&v, TB_DT_F32, store, sizeof store, 2, huge_shape, huge, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), -1);
	assert_non_null(strstr(err.msg, "view extent overflows"));
	view_free(&v);

	/* Empty views reach nothing, whatever their strides. */
	view_init(&v, TB_DT_F32, store, sizeof store, 2, s0, far, 0);
	assert_int_equal(v.t.numel, 0);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), 0);
	view_free(&v);
	view_init(&v, TB_DT_F32, store, sizeof store, 2, s0, far, 64);
	assert_int_equal(tb_tensor_check_bounds(&v.t, "mem", &err), -1);
	assert_non_null(strstr(err.msg, "data offset leaves the file"));
	view_free(&v);
}

/* The kind of failure opening path reports (the open must fail). */
static tb_status_code refusal_code(const char *path)
{
	tb_tree *tree = NULL;
	tb_err err;

	tb_err_clear(&err);
	assert_int_equal(err.code, TB_ERR_NONE);
	if (tb_tree_open(path, NULL, &tree, &err) == 0)
		fail_msg("%s: accepted", path);
	return err.code;
}

static void test_error_codes(void **state)
{
	const char *dir = tu_tmpdir();
	static const tb_status_code codes[] = {
#define CODE(id, message) TB_ERR_##id,
		TB_STATUS_CODES(CODE)
#undef CODE
	};
	const size_t n_codes = sizeof codes / sizeof *codes;
	const int64_t shape[1] = {1}, deep[TB_MAX_DIMS + 1] = {1};
	const float x[2] = {1, 0}; /* one complex64 element, or one float */
	tb_err err;
	(void)state;

	/* reading fails, the content is bad, the content is fine but not supported, a limit */
	assert_int_equal(refusal_code(tu_path(dir, "nothing-here")), TB_ERR_IO);
	tu_write_str(tu_path(dir, "bad/broken.npy"), "not numpy at all");
	assert_int_equal(refusal_code(tu_path(dir, "bad")), TB_ERR_FORMAT);
	assert_int_equal(dw_write_npy(tu_path(dir, "cplx/c.npy"), 1, "<c8", false, 1, shape, x, 8), 0);
	assert_int_equal(refusal_code(tu_path(dir, "cplx")), TB_ERR_UNSUPPORTED);
	assert_int_equal(dw_write_npy(tu_path(dir, "deep/d.npy"), 1, "<f4", false, TB_MAX_DIMS + 1, deep, x, 4), 0);
	assert_int_equal(refusal_code(tu_path(dir, "deep")), TB_ERR_LIMIT);

	/* context keeps the kind; every kind has its own line */
	tb_err_setc(&err, TB_ERR_NOMEM, "f", "out of memory");
	tb_err_prefix(&err, "in shard %d", 2);
	assert_int_equal(err.code, TB_ERR_NOMEM);
	assert_string_equal(err.msg, "in shard 2: out of memory");
	assert_int_equal(tb_err_setc(&err, TB_ERR_FORMAT, NULL, "bad %s", "thing"), -1);
	assert_int_equal(err.code, TB_ERR_FORMAT);
	/* a message cut to fit says so */
	tb_err_setc(&err, TB_ERR_FORMAT, NULL, "%0*d", (int)sizeof err.msg, 7);
	assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
	assert_string_equal(err.msg + sizeof err.msg - 4, "...");
	tb_err_setc(&err, TB_ERR_FORMAT, NULL, "%0*d", (int)sizeof err.msg - 1, 7);
	assert_int_equal(err.msg[sizeof err.msg - 2], '7');
	tb_err_prefix(&err, "in %s", "x");
	assert_string_equal(err.msg + sizeof err.msg - 4, "...");
	assert_int_equal(strncmp(err.msg, "in x: 000", 9), 0);
	assert_string_equal(tb_status_message(TB_ERR_NOMEM), "out of memory");
	assert_string_equal(tb_status_message(TB_ERR_CANCELLED), "cancelled");
	for (size_t a = 0; a < n_codes; a++)
		for (size_t b = a + 1; b < n_codes; b++)
			assert_string_not_equal(tb_status_message(codes[a]), tb_status_message(codes[b]));
	assert_string_equal(tb_status_message((tb_status_code)n_codes), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sorted_nested),
		cmocka_unit_test(test_container_prefix),
		cmocka_unit_test(test_single_file),
		cmocka_unit_test(test_skipped_files),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_socket),
		cmocka_unit_test(test_lfs_pointer),
		cmocka_unit_test(test_symlink_inside),
		cmocka_unit_test(test_symlink_outside),
		cmocka_unit_test(test_symlink_loop_broken),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_only_unsupported),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_error_codes),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_view_expand),
		cmocka_unit_test(test_view_transposed),
		cmocka_unit_test(test_view_offset),
		cmocka_unit_test(test_view_bounds),
	};
	return cmocka_run_group_tests_name("tree", tests, NULL, NULL);
}
