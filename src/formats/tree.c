#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/blaspool.h"
#include "formats/builder.h"
#include "formats/reader.h"
#include "formats/tree.h"
#include "tensor/view.h"

#define MAX_DEPTH 64
#define MAX_FILES 1000000

void tb_open_opts_init(tb_open_opts *opts)
{
	opts->npy_void2 = -1;
	opts->npy_void1 = -1;
	opts->record = 0;
	opts->side = 0;
	opts->vocab = 0;
}

typedef struct found {
	char *path; /* as reachable from the given root */
	char *rel;  /* relative to the root, '/'-separated */
} found;

typedef struct walk {
	const char *root_real;
	tb_ptrvec found;         /* found * */
	dev_t anc_dev[MAX_DEPTH + 1];
	ino_t anc_ino[MAX_DEPTH + 1];
	int depth;
	tb_builder *b;
} walk;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool inside_root(const char *root, const char *real)
{
	size_t n = strlen(root);

	if (!strcmp(root, "/"))
		return true;
	return !strncmp(real, root, n) && (real[n] == '\0' || real[n] == '/');
}

static int walk_dir(walk *w, const char *dir, const char *rel, tb_err *err);

/* What a file that is not regular is, for the note that skips it. */
static const char *special_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	return "not a file or directory";
}

static int walk_entry(walk *w, const char *dir, const char *rel, const char *name, tb_err *err)
{
	char path[PATH_MAX], relpath[PATH_MAX], real[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
	    (size_t)snprintf(relpath, sizeof relpath, "%s%s%s", rel, *rel ? "/" : "", name) >= sizeof relpath)
		return tb_err_setc(err, TB_ERR_LIMIT, dir, "path too long under this directory");
	if (lstat(path, &st) < 0)
		return tb_err_setc(err, TB_ERR_IO, path, "cannot stat: %s", strerror(errno));
	if (S_ISLNK(st.st_mode)) {
		if (!realpath(path, real))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "broken symbolic link");
		if (!inside_root(w->root_real, real))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "symbolic link leaves the tree (points to %s)", real);
		if (stat(path, &st) < 0)
			return tb_err_setc(err, TB_ERR_IO, path, "cannot stat: %s", strerror(errno));
	}
	if (S_ISDIR(st.st_mode)) {
		for (int i = 0; i <= w->depth; i++)
			if (w->anc_dev[i] == st.st_dev && w->anc_ino[i] == st.st_ino)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "symbolic link loop (directory contains itself)");
		if (w->depth >= MAX_DEPTH)
			return tb_err_setc(err, TB_ERR_LIMIT, path, "directory nesting deeper than %d", MAX_DEPTH);
		w->depth++;
		w->anc_dev[w->depth] = st.st_dev;
		w->anc_ino[w->depth] = st.st_ino;
		int rc = walk_dir(w, path, relpath, err);
		w->depth--;
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		/* Never opened: a FIFO would block, a device could be anything. */
		tb_builder_note(w->b, "skipped %s: not a regular file (%s)", path, special_kind(st.st_mode));
		return 0;
	}
	if (w->found.n >= MAX_FILES)
		return tb_err_setc(err, TB_ERR_LIMIT, dir, "more than %d files in the tree", MAX_FILES);
	found *fo = calloc(1, sizeof *fo);
	if (fo) {
		fo->path = strdup(path);
		fo->rel = strdup(relpath);
	}
	if (!fo || !fo->path || !fo->rel || tb_ptrvec_push(&w->found, fo) < 0) {
		if (fo) {
			free(fo->path);
			free(fo->rel);
		}
		free(fo);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	}
	return 0;
}

static int walk_dir(walk *w, const char *dir, const char *rel, tb_err *err)
{
	tb_ptrvec names = {0};
	struct dirent *de;
	DIR *d;
	int rc = 0;

	d = opendir(dir);
	if (!d)
		return tb_err_setc(err, TB_ERR_IO, dir, "cannot read directory: %s", strerror(errno));
	while ((de = readdir(d))) {
		char *s;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		s = strdup(de->d_name);
		if (!s || tb_ptrvec_push(&names, s) < 0) {
			free(s);
			rc = tb_err_setc(err, TB_ERR_NOMEM, dir, "out of memory");
			break;
		}
	}
	closedir(d);
	if (names.n)
		qsort(names.v, names.n, sizeof *names.v, cmp_str);
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i];
		if (name[0] == '.') {
			tb_builder_note(w->b, "skipped %s/%s: hidden", dir, name);
			continue;
		}
		rc = walk_entry(w, dir, rel, name, err);
	}
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	return rc;
}

/* "a/b/c.npy" -> stem "a.b.c", prefix "a.b." */
static void derive_names(const char *rel, char *stem, char *prefix, size_t size)
{
	const char *base = strrchr(rel, '/'), *dot;
	size_t n;

	base = base ? base + 1 : rel;
	n = (size_t)(base - rel);
	snprintf(prefix, size, "%.*s", (int)n, rel);
	dot = strrchr(base, '.');
	snprintf(stem, size, "%.*s", (int)(dot && dot != base ? (size_t)(dot - rel) : strlen(rel)), rel);
	for (char *s = prefix; *s; s++)
		if (*s == '/')
			*s = '.';
	for (char *s = stem; *s; s++)
		if (*s == '/')
			*s = '.';
}

static const tb_format *pick_format(const tb_file *f, const char *name)
{
	size_t n = f->size < TB_SNIFF_BYTES ? (size_t)f->size : TB_SNIFF_BYTES;

	for (int i = 0; tb_formats[i]; i++)
		if (tb_formats[i]->sniff(f->data ? f->data : (const unsigned char *)"", n))
			return tb_formats[i];
	for (int i = 0; tb_formats[i]; i++)
		for (int k = 0; tb_formats[i]->suffixes[k]; k++)
			if (tb_has_suffix(name, tb_formats[i]->suffixes[k]))
				return tb_formats[i];
	/* Only text is searched whole: a binary file (a GGUF, a checkpoint)
	 * beside the dumps is never read through. */
	if (!f->data || memchr(f->data, '\0', n))
		return NULL;
	for (int i = 0; tb_formats[i]; i++)
		if (tb_formats[i]->sniff_deep && tb_formats[i]->sniff_deep(f->data, (size_t)f->size))
			return tb_formats[i];
	return NULL;
}

/* Does a reader claim files of this name by their suffix? */
static bool reader_suffix(const char *name)
{
	for (int i = 0; tb_formats[i]; i++)
		for (int k = 0; tb_formats[i]->suffixes[k]; k++)
			if (tb_has_suffix(name, tb_formats[i]->suffixes[k]))
				return true;
	return false;
}

/* Is the file one a reader reads beside its own?  A manifest the user put
 * there on purpose is no surprise to note on every run. */
static bool is_companion(const char *rel)
{
	const char *base = strrchr(rel, '/');

	base = base ? base + 1 : rel;
	for (int i = 0; tb_formats[i]; i++)
		for (int k = 0; tb_formats[i]->companions && tb_formats[i]->companions[k]; k++)
			if (!strcmp(base, tb_formats[i]->companions[k]))
				return true;
	return false;
}

/* llama.cpp's model files: GGUF, and before it (2023) a little-endian
 * uint32 magic, so 'ggjt' is "tjgg" on disk (ggml's GGML_FILE_MAGIC and
 * llama.cpp's LLAMA_FILE_MAGIC_GGMF, _GGJT, _GGLA of that time). */
static const struct {
	char disk[5];
	const char *why;
} model_magics[] = {
	{"GGUF", "a GGUF file (llama.cpp), which tbisect does not read"},
	{"lmgg", "a pre-GGUF GGML model file (magic 'ggml'), not a dump"},
	{"fmgg", "a pre-GGUF GGML model file (magic 'ggmf'), not a dump"},
	{"tjgg", "a pre-GGUF GGML model file (magic 'ggjt'), not a dump"},
	{"algg", "a pre-GGUF GGML adapter file (magic 'ggla'), not a dump"},
};

/* A model file of a format we know of but do not read, whatever its name
 * (they are often .bin, which raw logits claim): why, or NULL. */
static const char *model_file(const tb_file *f)
{
	for (size_t i = 0; f->size >= 4 && i < sizeof model_magics / sizeof *model_magics; i++)
		if (!memcmp(f->data, model_magics[i].disk, 4))
			return model_magics[i].why;
	return NULL;
}

/* Run a reader's index step, then unmap what it touched.  Header reads can
 * map whole large folios of the page cache (megabytes per file with
 * transparent huge pages), which would otherwise stay resident for every
 * file of the tree; the page cache keeps them, so nothing is read twice. */
static int index_with(tb_builder *b, const tb_format *fmt, const tb_file *f, const char *stem, const char *prefix,
		      tb_err *err)
{
	tb_tree_priv *p = b->priv;
	size_t first = p->files.n - 1; /* f, then the shards it opens */
	int rc = fmt->index(b, f, stem, prefix, err);

	for (size_t i = first; i < p->files.n; i++) {
		const tb_file *g = p->files.v[i];
		tb_file_drop(g, 0, g->size);
	}
	return rc;
}

/* Index one file, or skip it with a note when no reader wants it. */
static int index_file(tb_builder *b, const char *path, const char *rel, tb_err *err)
{
	char stem[PATH_MAX], prefix[PATH_MAX];
	const tb_format *fmt = NULL;
	const tb_file *f;
	bool known_suffix = reader_suffix(rel);

	f = tb_tree_priv_add_file(b->priv, path, err);
	if (!f) {
		/* A file we would not have read anyway (a README we lack rights to)
		 * must not fail the tree. */
		if (!known_suffix) {
			tb_builder_note(b, "skipped %s: %s", path, err->msg);
			tb_err_clear(err);
			return 0;
		}
		return -1;
	}
	/* A pointer for a file we would read (or a .bin: pytorch_model.bin is a
	 * torch.save file) means the tree is incomplete; one for an image or a
	 * GGUF beside the tensors does not. */
	if (tb_is_lfs_pointer(f)) {
		if (known_suffix || tb_has_suffix(rel, ".bin"))
			return tb_lfs_error(path, err);
		tb_builder_note(b, "skipped %s: a Git LFS pointer", path);
		return 0;
	}
	const char *model = model_file(f);
	if (model) {
		tb_builder_note(b, "skipped %s: %s", path, model);
		return 0;
	}
	fmt = pick_format(f, rel);
	if (!fmt) {
		if (!is_companion(rel))
			tb_builder_note(b, "skipped %s: not a tensor file", path);
		return 0;
	}
	derive_names(rel, stem, prefix, sizeof stem);
	if (index_with(b, fmt, f, stem, prefix, err) < 0) {
		/* A label array or a pickled config beside the dumps is no
		 * broken dump; given alone, it is still refused (open_file). */
		if (err->code != TB_ERR_NO_TENSOR)
			return -1;
		tb_builder_note(b, "skipped %s: %s", path, err->msg);
		tb_err_clear(err);
	}
	return 0;
}

static int cmp_tensor(const void *a, const void *b)
{
	const tb_tensor *x = *(tb_tensor *const *)a, *y = *(tb_tensor *const *)b;

	return strcmp(x->name, y->name);
}

static int open_dir(tb_builder *b, const char *path, tb_err *err)
{
	walk w = {0};
	char real[PATH_MAX];
	struct stat st;
	int rc;

	if (!realpath(path, real) || stat(real, &st) < 0)
		return tb_err_setc(err, TB_ERR_IO, path, "cannot open: %s", strerror(errno));
	w.root_real = real;
	w.anc_dev[0] = st.st_dev;
	w.anc_ino[0] = st.st_ino;
	w.b = b;
	rc = walk_dir(&w, path, "", err);
	/* Index files first: they claim their shards, which are then skipped. */
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		for (size_t i = 0; i < w.found.n && rc == 0; i++) {
			found *fo = w.found.v[i];
			bool is_index = tb_has_suffix(fo->rel, ".index.json");
			if (is_index != (pass == 0))
				continue;
			if (pass == 1 && realpath(fo->path, real) && tb_strset_has(&b->priv->claimed_set, real))
				continue;
			rc = index_file(b, fo->path, fo->rel, err);
		}
	}
	for (size_t i = 0; i < w.found.n; i++) {
		found *fo = w.found.v[i];
		free(fo->path);
		free(fo->rel);
		free(fo);
	}
	free(w.found.v);
	return rc;
}

static int open_file(tb_builder *b, const char *path, tb_err *err)
{
	const char *base = strrchr(path, '/');
	const tb_format *fmt;
	const tb_file *f;
	char stem[PATH_MAX], prefix[PATH_MAX];

	base = base ? base + 1 : path;
	f = tb_tree_priv_add_file(b->priv, path, err);
	if (!f)
		return -1;
	if (tb_is_lfs_pointer(f))
		return tb_lfs_error(path, err);
	if (model_file(f))
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "%s", model_file(f));
	fmt = pick_format(f, base);
	if (!fmt)
		return tb_err_setc(err, TB_ERR_FORMAT, path,
				  "not a recognised tensor file (npy, npz, safetensors, torch.save, MaxText golden, Polygraphy JSON, llama.cpp text dump)");
	derive_names(base, stem, prefix, sizeof stem);
	return index_with(b, fmt, f, stem, "", err);
}

/* "no tensors found", with what was skipped: the error is all a user sees
 * of a directory holding only a GGUF, the notes go with the tree. */
void tb_tree_note(tb_tree *tree, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tb_tree_priv_note(tree->priv, fmt, ap);
	tree->notes = (char **)tree->priv->notes.v;
	tree->n_notes = tree->priv->notes.n;
	va_end(ap);
}

static int no_tensors(const tb_tree *tree, const char *path, tb_err *err)
{
	const tb_ptrvec *notes = &tree->priv->notes;

	if (!notes->n)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "no tensors found");
	if (notes->n == 1)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "no tensors found; %s", (const char *)notes->v[0]);
	return tb_err_setc(err, TB_ERR_FORMAT, path, "no tensors found; %s (and %zu more notes)",
			  (const char *)notes->v[0], notes->n - 1);
}

int tb_tree_open(const char *path, const tb_open_opts *opts, tb_tree **out, tb_err *err)
{
	tb_open_opts defaults;
	tb_builder b;
	struct stat st;
	tb_tree *tree;
	int rc;

	/* Opening drops each file's header pages (index_with): with BLAS's
	 * idle threads spinning on the other cores, every drop would stop
	 * them to flush their TLBs. */
	tb_blas_pool_stop();
	*out = NULL;
	if (!opts) {
		tb_open_opts_init(&defaults);
		opts = &defaults;
	}
	if (stat(path, &st) < 0)
		return tb_err_setc(err, TB_ERR_IO, path, "cannot open: %s", strerror(errno));
	tree = calloc(1, sizeof *tree);
	if (tree) {
		tree->priv = calloc(1, sizeof *tree->priv);
		tree->path = strdup(path);
	}
	if (!tree || !tree->priv || !tree->path) {
		tb_tree_free(tree);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	}
	tree->priv->tie = NAN;
	b.priv = tree->priv;
	b.opts = opts;
	if (S_ISDIR(st.st_mode))
		rc = open_dir(&b, path, err);
	else if (S_ISREG(st.st_mode))
		rc = open_file(&b, path, err);
	else
		rc = tb_err_setc(err, TB_ERR_FORMAT, path, "not a directory or regular file");
	if (rc == 0 && tree->priv->tensors.n == 0)
		rc = no_tensors(tree, path, err);
	if (rc < 0) {
		tb_tree_free(tree);
		return -1;
	}
	tree->tensors = (tb_tensor **)tree->priv->tensors.v;
	tree->n_tensors = tree->priv->tensors.n;
	qsort(tree->tensors, tree->n_tensors, sizeof *tree->tensors, cmp_tensor);
	tree->notes = (char **)tree->priv->notes.v;
	tree->n_notes = tree->priv->notes.n;
	tree->tokens = tree->priv->tokens;
	tree->n_tokens = tree->priv->n_tokens;
	tree->priv->tokens = NULL;
	tree->tie = tree->priv->tie;
	*out = tree;
	return 0;
}

void tb_tree_free(tb_tree *tree)
{
	tb_tree_priv *p;

	if (!tree)
		return;
	p = tree->priv;
	if (p) {
		for (size_t i = 0; i < p->tensors.n; i++) {
			tb_tensor *t = p->tensors.v[i];
			free(t->name);
			free(t);
		}
		for (size_t i = 0; i < p->blobs.n; i++)
			tb_blob_free(p->blobs.v[i]);
		for (size_t i = 0; i < p->files.n; i++)
			tb_file_free(p->files.v[i]);
		for (size_t i = 0; i < p->notes.n; i++)
			free(p->notes.v[i]);
		for (size_t i = 0; i < p->claimed.n; i++)
			free(p->claimed.v[i]);
		for (size_t i = 0; i < p->kept.n; i++)
			free(p->kept.v[i]);
		free(p->kept.v);
		for (size_t i = p->made.n; i-- > 0;)
			tb_view_free(p->made.v[i]);
		free(p->made.v);
		free(p->listed);
		free(p->tensors.v);
		free(p->blobs.v);
		free(p->files.v);
		free(p->notes.v);
		free(p->claimed.v);
		free(p->names.slot);
		free(p->claimed_set.slot);
		free(p->tokens);
		free(p);
	}
	free(tree->tokens);
	free(tree->path);
	free(tree);
}

int tb_tree_set_tensors(tb_tree *tree, tb_tensor **list, size_t n, tb_tensor **made, size_t n_made, tb_err *err)
{
	tb_tree_priv *p = tree->priv;

	for (size_t i = 0; i < n_made; i++) {
		if (tb_ptrvec_push(&p->made, made[i]) < 0) {
			for (size_t k = i; k < n_made; k++)
				tb_view_free(made[k]);
			free(list);
			return tb_err_setc(err, TB_ERR_NOMEM, tree->path, "out of memory");
		}
	}
	qsort(list, n, sizeof *list, cmp_tensor);
	free(p->listed);
	p->listed = list;
	tree->tensors = list;
	tree->n_tensors = n;
	return 0;
}

tb_tensor *tb_tree_find(const tb_tree *tree, const char *name)
{
	size_t lo = 0, hi = tree->n_tensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(tree->tensors[mid]->name, name);
		if (c == 0)
			return tree->tensors[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
