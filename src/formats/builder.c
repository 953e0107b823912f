#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/builder.h"

int tb_ptrvec_push(tb_ptrvec *pv, void *p)
{
	if (pv->n == pv->cap) {
		size_t cap = pv->cap ? pv->cap * 2 : 16;
		void **v = realloc(pv->v, cap * sizeof *v);
		if (!v)
			return -1;
		pv->v = v;
		pv->cap = cap;
	}
	pv->v[pv->n++] = p;
	return 0;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

int tb_strset_add(tb_strset *set, const char *s)
{
	if ((set->n + 1) * 2 > set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 64;
		const char **slot = calloc(cap, sizeof *slot);
		if (!slot)
			return -1;
		for (size_t i = 0; i < set->cap; i++) {
			if (!set->slot[i])
				continue;
			size_t j = hash_str(set->slot[i]) & (cap - 1);
			while (slot[j])
				j = (j + 1) & (cap - 1);
			slot[j] = set->slot[i];
		}
		free(set->slot);
		set->slot = slot;
		set->cap = cap;
	}
	size_t j = hash_str(s) & (set->cap - 1);
	while (set->slot[j]) {
		if (!strcmp(set->slot[j], s))
			return 0;
		j = (j + 1) & (set->cap - 1);
	}
	set->slot[j] = s;
	set->n++;
	return 1;
}

bool tb_strset_has(const tb_strset *set, const char *s)
{
	if (!set->cap)
		return false;
	for (size_t j = hash_str(s) & (set->cap - 1); set->slot[j]; j = (j + 1) & (set->cap - 1))
		if (!strcmp(set->slot[j], s))
			return true;
	return false;
}

bool tb_has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), m = strlen(suffix);

	if (m > n)
		return false;
	for (size_t i = 0; i < m; i++) {
		char a = name[n - m + i], b = suffix[i];
		if (a >= 'A' && a <= 'Z')
			a = (char)(a - 'A' + 'a');
		if (a != b)
			return false;
	}
	return true;
}

tb_tensor *tb_builder_add(tb_builder *b, const char *path, const char *prefix, const char *name, tb_err *err)
{
	tb_tree_priv *p = b->priv;
	size_t lp = strlen(prefix), ln = strlen(name);
	tb_tensor *t;
	int rc;

	if (p->tensors.n >= TB_MAX_TENSORS) {
		tb_err_setc(err, TB_ERR_LIMIT, path, "more than %d tensors", TB_MAX_TENSORS);
		return NULL;
	}
	if (lp + ln > TB_MAX_NAME) {
		tb_err_setc(err, TB_ERR_LIMIT, path, "tensor name longer than %d bytes", TB_MAX_NAME);
		return NULL;
	}
	t = calloc(1, sizeof *t);
	if (t)
		t->name = malloc(lp + ln + 1);
	if (!t || !t->name || tb_ptrvec_push(&p->tensors, t) < 0) {
		if (t)
			free(t->name);
		free(t);
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		return NULL;
	}
	memcpy(t->name, prefix, lp);
	memcpy(t->name + lp, name, ln + 1);
	t->path = path;
	rc = tb_strset_add(&p->names, t->name);
	if (rc <= 0) {
		tb_err_setc(err, rc < 0 ? TB_ERR_NOMEM : TB_ERR_FORMAT, path,
			    rc < 0 ? "out of memory" : "duplicate tensor name '%s'", t->name);
		return NULL;
	}
	return t;
}

tb_tensor *tb_builder_last(tb_builder *b)
{
	const tb_tree_priv *p = b->priv;

	return p->tensors.n ? p->tensors.v[p->tensors.n - 1] : NULL;
}

bool tb_builder_has(const tb_builder *b, const char *name)
{
	return tb_strset_has(&b->priv->names, name);
}

tb_blob *tb_builder_blob(tb_builder *b, tb_err *err)
{
	tb_blob *blob = tb_blob_new();

	if (!blob || tb_ptrvec_push(&b->priv->blobs, blob) < 0) {
		tb_blob_free(blob);
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	return blob;
}

const tb_file *tb_tree_priv_add_file(tb_tree_priv *p, const char *path, tb_err *err)
{
	tb_file *f;

	if (tb_file_open(path, &f, err) < 0)
		return NULL;
	if (tb_ptrvec_push(&p->files, f) < 0) {
		tb_file_free(f);
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		return NULL;
	}
	return f;
}

bool tb_is_lfs_pointer(const tb_file *f)
{
	static const char sig[] = "version https://git-lfs.github.com/spec/v1";

	return f->size >= sizeof sig - 1 && !memcmp(f->data, sig, sizeof sig - 1);
}

int tb_lfs_error(const char *path, tb_err *err)
{
	return tb_err_setc(err, TB_ERR_FORMAT, path, "is a Git LFS pointer, not the data (run git lfs pull)");
}

const tb_file *tb_builder_open(tb_builder *b, const char *path, tb_err *err)
{
	tb_tree_priv *p = b->priv;
	char real[PATH_MAX], *copy;

	if (!realpath(path, real)) {
		tb_err_setc(err, TB_ERR_IO, path, "cannot open: %s", strerror(errno));
		return NULL;
	}
	copy = strdup(real);
	if (!copy || tb_ptrvec_push(&p->claimed, copy) < 0 || tb_strset_add(&p->claimed_set, copy) < 0) {
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		return NULL;
	}
	/* A shard behind an index is as much the data as a file of the walk. */
	const tb_file *f = tb_tree_priv_add_file(p, path, err);
	if (f && tb_is_lfs_pointer(f)) {
		tb_lfs_error(path, err);
		return NULL;
	}
	return f;
}

const tb_open_opts *tb_builder_opts(const tb_builder *b)
{
	return b->opts;
}

bool tb_tree_priv_note(tb_tree_priv *p, const char *fmt, va_list ap)
{
	char buf[2048], *s;

	vsnprintf(buf, sizeof buf, fmt, ap);
	s = strdup(buf);
	if (s && tb_ptrvec_push(&p->notes, s) < 0) {
		free(s);
		s = NULL;
	}
	return s != NULL;
}

void tb_builder_note(tb_builder *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tb_tree_priv_note(b->priv, fmt, ap);
	va_end(ap);
}

void *tb_builder_alloc(tb_builder *b, size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (p && tb_ptrvec_push(&b->priv->kept, p) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

const char *tb_builder_keep(tb_builder *b, const char *s, size_t n)
{
	char *copy = n < SIZE_MAX ? tb_builder_alloc(b, n + 1) : NULL;

	if (copy)
		memcpy(copy, s, n);
	return copy;
}

void tb_builder_set_tokens(tb_builder *b, int64_t *tokens, size_t n)
{
	free(b->priv->tokens);
	b->priv->tokens = tokens;
	b->priv->n_tokens = n;
}

void tb_builder_set_tie(tb_builder *b, double tie)
{
	b->priv->tie = tie;
}

/* A file found by the walk. */
