#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/writefile.h"
#include "run/history.h"
#include "tensor/digest.h"
#include "base/jsonutil.h"

#define HISTORY_MAX_BYTES (16u * 1024 * 1024)
#define FNV_OFFSET 1469598103934665603ull
/* Passes' digests of values as tensor/digest.h takes them; format 1 hashed
 * each tensor's bytes in one sequential pass after the comparison. */
#define DIGEST_FORMAT 2

static const char *const move_names[] = {
	[TB_MOVE_FIRST] = "first",     [TB_MOVE_LATER] = "later",     [TB_MOVE_EARLIER] = "earlier",
	[TB_MOVE_STUCK] = "stuck",     [TB_MOVE_UNCHANGED] = "unchanged", [TB_MOVE_MATCHED] = "matched",
	[TB_MOVE_BROKE] = "broke",
};

const char *tb_move_name(tb_move m)
{
	return (unsigned)m < sizeof move_names / sizeof *move_names ? move_names[m] : "?";
}

bool tb_move_is_bad(tb_move m)
{
	return m == TB_MOVE_EARLIER || m == TB_MOVE_STUCK || m == TB_MOVE_BROKE;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* A tensor's values digest known from the comparison (the rows it read). */
typedef struct known_digest {
	const tb_tensor *t;
	uint64_t digest;
} known_digest;

static int by_tensor(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const known_digest *)a)->t, y = (uintptr_t)((const known_digest *)b)->t;

	return (x > y) - (x < y);
}

/* The digests the comparison r added up for side's tensors, sorted by
 * tensor; NULL with *n 0 when none (or out of memory: they are read). */
static known_digest *known_digests(const tb_result *r, int side, size_t *n)
{
	known_digest *k = r && r->n_cells ? malloc(r->n_cells * sizeof *k) : NULL;

	*n = 0;
	for (size_t i = 0; k && i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		if (c->digested[side])
			k[(*n)++] = (known_digest){side ? c->cand : c->ref, c->digest[side]};
	}
	if (*n)
		qsort(k, *n, sizeof *k, by_tensor);
	return k;
}

/* Fold one tree into h: per tensor its name, dtype, shape and values
 * (their digest from known where the comparison added it up, else read).
 * Where the bytes live (which file, its mtime) is left out, so a dump
 * rewritten with the same values is the same dump. */
static int tree_fold(const tb_tree *tree, const known_digest *known, size_t n_known, uint64_t *h, tb_err *err)
{
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		int64_t head[2] = {(int64_t)t->dtype, t->ndim};
		known_digest key = {t, 0};
		const known_digest *k = n_known ? bsearch(&key, known, n_known, sizeof *known, by_tensor) : NULL;
		uint64_t values;

		if (k)
			values = k->digest;
		else if (tb_tensor_digest(t, &values, err) < 0)
			return -1;
		*h = fnv(*h, t->name, strlen(t->name) + 1);
		*h = fnv(*h, head, sizeof head);
		*h = fnv(*h, t->shape, (size_t)t->ndim * sizeof *t->shape);
		*h = fnv(*h, &values, sizeof values);
	}
	return 0;
}

static void hex(uint64_t h, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* The digest of side's tree, with the values digests r added up. */
static int tree_digest_with(const tb_tree *tree, const tb_result *r, int side, char out[17], tb_err *err)
{
	size_t n_known;
	known_digest *known = known_digests(r, side, &n_known);
	uint64_t h = FNV_OFFSET;
	int rc = tree_fold(tree, known, n_known, &h, err);

	free(known);
	if (rc == 0)
		hex(h, out);
	return rc;
}

int tb_tree_digest(const tb_tree *tree, char out[17], tb_err *err)
{
	return tree_digest_with(tree, NULL, 0, out, err);
}

/* Field by field: the struct's padding holds no value. */
static uint64_t tol_fold(uint64_t h, const tb_tolerance *t)
{
	double v[5] = {t->atol, t->rtol, t->diverge, t->max_kl, t->absolute};

	return fnv(h, v, sizeof v);
}

/* Everything a pass's outcome depends on: both trees' values (their
 * digests), how their tensors pair into cells (the map) and the tolerance
 * every cell was judged by (command line and --tol file). */
static void input_digest(const char *ref_digest, const char *cand_digest, const tb_result *r, char out[17])
{
	uint64_t h = FNV_OFFSET;

	h = fnv(h, ref_digest, strlen(ref_digest) + 1);
	h = fnv(h, cand_digest, strlen(cand_digest) + 1);
	h = tol_fold(h, &r->tol);
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		char cell[TB_CELL_NAME_MAX];
		tb_cell_name(&c->cell, cell, sizeof cell);
		h = fnv(h, cell, strlen(cell) + 1);
		h = fnv(h, c->ref ? c->ref->name : "", c->ref ? strlen(c->ref->name) + 1 : 1);
		h = fnv(h, c->cand ? c->cand->name : "", c->cand ? strlen(c->cand->name) + 1 : 1);
		h = tol_fold(h, &c->tol);
	}
	hex(h, out);
}

/* Files changed this recently may change again within the same timestamp
 * tick (the kernel's file clock is coarse) and keep their key. */
#define STAT_SETTLED_SEC 2

/* Where a tree's bytes lie and when they last changed: per file its path,
 * device, inode, size, mtime and ctime.  ctime moves on every write and
 * rename and no tool sets it back, so an equal key means the files are
 * those the last pass read.  "" (never equal) when a file cannot be
 * stat'ed or changed in the last STAT_SETTLED_SEC seconds. */
static void tree_stat_key(const tb_tree *tree, char out[17])
{
	uint64_t h = FNV_OFFSET;
	const char *last = NULL;
	struct timespec now;

	if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
		out[0] = '\0';
		return;
	}

	for (size_t i = 0; i < tree->n_tensors; i++) {
		const char *path = tree->tensors[i]->path;
		struct stat st;
		int64_t meta[7];

		if (last && !strcmp(path, last))
			continue;
		last = path;
		if (stat(path, &st) != 0 || st.st_ctim.tv_sec >= now.tv_sec - STAT_SETTLED_SEC ||
		    st.st_mtim.tv_sec >= now.tv_sec - STAT_SETTLED_SEC) {
			out[0] = '\0';
			return;
		}
		meta[0] = (int64_t)st.st_dev;
		meta[1] = (int64_t)st.st_ino;
		meta[2] = (int64_t)st.st_size;
		meta[3] = (int64_t)st.st_mtim.tv_sec;
		meta[4] = (int64_t)st.st_mtim.tv_nsec;
		meta[5] = (int64_t)st.st_ctim.tv_sec;
		meta[6] = (int64_t)st.st_ctim.tv_nsec;
		h = fnv(h, path, strlen(path) + 1);
		h = fnv(h, meta, sizeof meta);
	}
	hex(h, out);
}

/* May side's tree take the last pass's digest without reading its files:
 * its stat key (key) is that of prev, and prev has a digest? */
static bool digest_stands(const char *key, const tb_pass *prev, int side)
{
	return prev && key[0] && !strcmp(key, side ? prev->cand_stat : prev->ref_stat) &&
	       (side ? prev->cand_digest : prev->ref_digest)[0];
}

/* The digest of side's tree whose stat key is key: the last pass's when its
 * files are unchanged (reading every byte again costs as much as the
 * comparison), else folded from the values digests r added up and the
 * tensors it did not read. */
static int tree_digest_since(const tb_session *s, const tb_result *r, int side, const char *key, const tb_pass *prev,
			     char out[17], tb_err *err)
{
	if (digest_stands(key, prev, side)) {
		snprintf(out, 17, "%s", side ? prev->cand_digest : prev->ref_digest);
		return 0;
	}
	return tree_digest_with(side ? s->cand : s->ref, r, side, out, err);
}

/* Would dir (which may not exist yet) lie inside the tree at root?  Judged
 * by its nearest existing ancestor, before anything is created. */
static bool inside(const char *dir, const char *root)
{
	char probe[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	size_t n;

	if (!realpath(root, b))
		return false;
	snprintf(probe, sizeof probe, "%s", dir);
	while (!realpath(probe, a)) {
		char *slash = strrchr(probe, '/');
		if (!slash || slash == probe)
			return false;
		*slash = '\0';
	}
	n = strlen(b);
	return !strncmp(a, b, n) && (a[n] == '/' || a[n] == '\0');
}

static int mkdirs(const char *path)
{
	char buf[4096];

	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static void get_str(const cJSON *o, const char *k, char *out, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	snprintf(out, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static double get_num(const cJSON *o, const char *k, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int parse_pass(const cJSON *o, tb_pass *p)
{
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(o, "counts"), *tol = cJSON_GetObjectItemCaseSensitive(o, "tolerance");
	char move[32];

	if (!cJSON_IsObject(o) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "pass")))
		return -1;
	memset(p, 0, sizeof *p);
	p->number = (int)get_num(o, "pass", 0);
	p->when = (time_t)get_num(o, "time", 0);
	/* Digests of another format say nothing of this one's: the pass
	 * keeps its stat keys, which still tell an unchanged tree. */
	if (get_num(o, "digest_format", 1) == DIGEST_FORMAT) {
		get_str(o, "cand_digest", p->cand_digest, sizeof p->cand_digest);
		get_str(o, "input_digest", p->input_digest, sizeof p->input_digest);
		get_str(o, "ref_digest", p->ref_digest, sizeof p->ref_digest);
	}
	get_str(o, "ref_stat", p->ref_stat, sizeof p->ref_stat);
	get_str(o, "cand_stat", p->cand_stat, sizeof p->cand_stat);
	get_str(o, "first_divergence", p->first_div, sizeof p->first_div);
	p->first_div_index = (long)get_num(o, "first_divergence_index", -1);
	get_str(o, "top_cause", p->top_cause, sizeof p->top_cause);
	get_str(o, "verdict", p->verdict, sizeof p->verdict);
	get_str(o, "note", p->note, sizeof p->note);
	get_str(o, "movement", move, sizeof move);
	for (int m = 0; m < (int)(sizeof move_names / sizeof *move_names); m++)
		if (!strcmp(move, move_names[m]))
			p->move = (tb_move)m;
	p->delta = (long)get_num(o, "delta", 0);
	for (int s = TB_ST_MATCH; s < TB_ST_COUNT; s++)
		p->count[s] = (size_t)get_num(counts, tb_status_name((tb_status)s), 0);
	tb_tolerance_default(&p->tol);
	p->tol.atol = get_num(tol, "atol", p->tol.atol);
	p->tol.rtol = get_num(tol, "rtol", p->tol.rtol);
	p->tol.diverge = get_num(tol, "diverge", p->tol.diverge);
	p->tol.max_kl = get_num(tol, "max_kl", p->tol.max_kl);
	return p->number > 0 ? 0 : -1;
}

cJSON *tb_pass_json(const tb_pass *p)
{
	cJSON *o = cJSON_CreateObject(), *counts, *tol;

	cJSON_AddNumberToObject(o, "pass", p->number);
	cJSON_AddNumberToObject(o, "time", (double)p->when);
	cJSON_AddNumberToObject(o, "digest_format", DIGEST_FORMAT);
	cJSON_AddStringToObject(o, "cand_digest", p->cand_digest);
	cJSON_AddStringToObject(o, "input_digest", p->input_digest);
	cJSON_AddStringToObject(o, "ref_digest", p->ref_digest);
	cJSON_AddStringToObject(o, "ref_stat", p->ref_stat);
	cJSON_AddStringToObject(o, "cand_stat", p->cand_stat);
	cJSON_AddStringToObject(o, "first_divergence", p->first_div);
	cJSON_AddNumberToObject(o, "first_divergence_index", (double)p->first_div_index);
	cJSON_AddStringToObject(o, "top_cause", p->top_cause);
	cJSON_AddStringToObject(o, "verdict", p->verdict);
	cJSON_AddStringToObject(o, "movement", tb_move_name(p->move));
	cJSON_AddNumberToObject(o, "delta", (double)p->delta);
	cJSON_AddStringToObject(o, "note", p->note);
	counts = cJSON_AddObjectToObject(o, "counts");
	for (int s = TB_ST_MATCH; s < TB_ST_COUNT; s++)
		cJSON_AddNumberToObject(counts, tb_status_name((tb_status)s), (double)p->count[s]);
	tol = cJSON_AddObjectToObject(o, "tolerance");
	cJSON_AddNumberToObject(tol, "atol", p->tol.atol);
	cJSON_AddNumberToObject(tol, "rtol", p->tol.rtol);
	cJSON_AddNumberToObject(tol, "diverge", p->tol.diverge);
	cJSON_AddNumberToObject(tol, "max_kl", p->tol.max_kl);
	return o;
}

/* Set a corrupt history file aside and start afresh. */
static void set_aside(tb_history *h, const char *why)
{
	char aside[sizeof h->path + 32]; /* the path, ".corrupt-" and a time */

	snprintf(aside, sizeof aside, "%s.corrupt-%lld", h->path, (long long)time(NULL));
	if (rename(h->path, aside) == 0)
		snprintf(h->warning, sizeof h->warning, "history file %s is corrupt (%s); set aside as %s", h->path, why,
			 aside);
	else
		snprintf(h->warning, sizeof h->warning, "history file %s is corrupt (%s) and could not be set aside",
			 h->path, why);
	tb_history_done(h);
}

/* Read h's passes.  A corrupt file is set aside unless only peeked at
 * (then h is left empty, for the recording to set it aside). */
static void load(tb_history *h, bool peek)
{
	const cJSON *passes, *it;
	cJSON *root;
	tb_err err;

	if (access(h->path, F_OK) != 0)
		return;
	root = tb_json_load(h->path, HISTORY_MAX_BYTES, "history file", &err);
	passes = root ? cJSON_GetObjectItemCaseSensitive(root, "passes") : NULL;
	if (!cJSON_IsArray(passes)) {
		cJSON_Delete(root);
		if (!peek)
			set_aside(h, root ? "no \"passes\" list" : err.msg);
		return;
	}
	h->passes = calloc((size_t)cJSON_GetArraySize(passes) + 1, sizeof *h->passes);
	cJSON_ArrayForEach(it, passes) {
		if (!h->passes || parse_pass(it, &h->passes[h->n]) < 0) {
			cJSON_Delete(root);
			if (peek)
				tb_history_done(h);
			else
				set_aside(h, "a pass is malformed");
			return;
		}
		h->n++;
	}
	cJSON_Delete(root);
}

static void open_history(const tb_session *s, tb_history *h, bool peek)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char dir[3900], ref[PATH_MAX], cand[PATH_MAX];
	uint64_t key = FNV_OFFSET;

	memset(h, 0, sizeof *h);
	if (xdg && *xdg)
		snprintf(dir, sizeof dir, "%s/tbisect", xdg);
	else if (home && *home)
		snprintf(dir, sizeof dir, "%s/.local/state/tbisect", home);
	else {
		snprintf(h->warning, sizeof h->warning, "history not kept: neither XDG_STATE_HOME nor HOME is set");
		return;
	}
	if (inside(dir, s->ref_path) || inside(dir, s->cand_path)) {
		snprintf(h->warning, sizeof h->warning, "history not kept: the state directory %s is inside a dump tree",
			 dir);
		return;
	}
	if (mkdirs(dir) < 0) {
		snprintf(h->warning, sizeof h->warning, "history not kept: cannot create %s: %s", dir, strerror(errno));
		return;
	}
	/* found before the comparison, which then adds up no digests for it */
	if (access(dir, W_OK | X_OK) != 0) {
		snprintf(h->warning, sizeof h->warning, "history not kept: cannot write in %s: %s", dir, strerror(errno));
		return;
	}
	if (!realpath(s->ref_path, ref) || !realpath(s->cand_path, cand)) {
		snprintf(h->warning, sizeof h->warning, "history not kept: cannot resolve the dump paths");
		return;
	}
	key = fnv(key, ref, strlen(ref) + 1);
	key = fnv(key, cand, strlen(cand) + 1);
	snprintf(h->path, sizeof h->path, "%s/pair-%016llx.json", dir, (unsigned long long)key);
	load(h, peek);
}

void tb_history_open(const tb_session *s, tb_history *h)
{
	open_history(s, h, false);
}

void tb_history_stale(const tb_session *s, bool in_memory, bool stale[2])
{
	tb_history h;
	char key[17];

	open_history(s, &h, true);
	for (int side = 0; side < 2; side++) {
		if (!h.path[0]) {
			stale[side] = in_memory;
			continue;
		}
		tree_stat_key(side ? s->cand : s->ref, key);
		stale[side] = !digest_stands(key, h.n ? &h.passes[h.n - 1] : NULL, side);
	}
	tb_history_done(&h);
}

static void describe(tb_pass *p, const tb_pass *prev)
{
	const char *fd = p->first_div[0] ? p->first_div : "none";

	switch (p->move) {
	case TB_MOVE_FIRST:
		snprintf(p->note, sizeof p->note, "pass %d: first divergence %s", p->number, fd);
		break;
	case TB_MOVE_LATER:
		snprintf(p->note, sizeof p->note, "pass %d: first divergence %s -> %s (later by %ld cell%s)", p->number,
			 prev->first_div, fd, p->delta, p->delta == 1 ? "" : "s");
		break;
	case TB_MOVE_EARLIER:
		snprintf(p->note, sizeof p->note,
			 "pass %d: first divergence %s -> %s (EARLIER by %ld cell%s): the last change made it worse; revert it and re-read the reference forward",
			 p->number, prev->first_div, fd, -p->delta, p->delta == -1 ? "" : "s");
		break;
	case TB_MOVE_STUCK:
		snprintf(p->note, sizeof p->note,
			 "pass %d: first divergence still %s although the candidate changed: the fix did not reach this op, or the dump is stale (re-dump; restart the server, stale compiled graphs hide fixes); revert and re-read the reference forward",
			 p->number, fd);
		break;
	case TB_MOVE_UNCHANGED:
		snprintf(p->note, sizeof p->note,
			 "pass %d: candidate unchanged since pass %d (the reference, the map or the tolerance changed); first divergence %s",
			 p->number, prev->number, fd);
		break;
	case TB_MOVE_MATCHED:
		snprintf(p->note, sizeof p->note, "pass %d: first divergence %s -> none: nothing diverges (verdict %s)",
			 p->number, prev->first_div[0] ? prev->first_div : "none", p->verdict);
		break;
	case TB_MOVE_BROKE:
		snprintf(p->note, sizeof p->note,
			 "pass %d: nothing diverged in pass %d, now the first divergence is %s: the last change broke it; revert it",
			 p->number, prev->number, fd);
		break;
	}
}

static int fill_text(FILE *f, const void *text)
{
	return fputs(text, f) < 0 ? -1 : 0;
}

/* The history is the only record of the passes: on disk before it
 * replaces the old one. */
static int save(const tb_history *h, const tb_session *s, tb_err *err)
{
	char *text;
	cJSON *root = cJSON_CreateObject(), *arr;
	int rc;

	cJSON_AddStringToObject(root, "tool", "tbisect");
	cJSON_AddStringToObject(root, "ref", s->ref_path);
	cJSON_AddStringToObject(root, "cand", s->cand_path);
	arr = cJSON_AddArrayToObject(root, "passes");
	for (size_t i = 0; i < h->n; i++)
		cJSON_AddItemToArray(arr, tb_pass_json(&h->passes[i]));
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return tb_err_setc(err, TB_ERR_NOMEM, h->path, "out of memory writing the history");
	rc = tb_write_file(h->path, "the history", TB_WRITE_PRIVATE | TB_WRITE_SYNC, fill_text, text, err);
	free(text);
	return rc;
}

int tb_history_record(tb_history *h, const tb_session *s, const tb_result *r, const tb_diagnosis *d, tb_err *err)
{
	const tb_pass *prev = h->n ? &h->passes[h->n - 1] : NULL;
	tb_pass p = {0}, *grown;

	if (!h->path[0] && !h->in_memory)
		return 0;
	tree_stat_key(s->ref, p.ref_stat);
	tree_stat_key(s->cand, p.cand_stat);
	if (tree_digest_since(s, r, 0, p.ref_stat, prev, p.ref_digest, err) < 0 ||
	    tree_digest_since(s, r, 1, p.cand_stat, prev, p.cand_digest, err) < 0)
		return -1;
	input_digest(p.ref_digest, p.cand_digest, r, p.input_digest);
	/* The same inputs give the same outcome: a re-run, a reload of bytes
	 * rewritten as they were, is no step of the port.  Files touched but
	 * not changed get their new keys, so the next run need not read them. */
	if (prev && !strcmp(prev->input_digest, p.input_digest)) {
		tb_pass *last = &h->passes[h->n - 1];
		if (!strcmp(last->ref_stat, p.ref_stat) && !strcmp(last->cand_stat, p.cand_stat))
			return 0;
		memcpy(last->ref_stat, p.ref_stat, sizeof p.ref_stat);
		memcpy(last->cand_stat, p.cand_stat, sizeof p.cand_stat);
		return h->path[0] && save(h, s, err) < 0 ? -1 : 0;
	}
	p.number = prev ? prev->number + 1 : 1;
	p.when = time(NULL);
	p.first_div_index = r->first_div;
	if (r->first_div >= 0)
		tb_cell_name(&r->cells[r->first_div].cell, p.first_div, sizeof p.first_div);
	if (d && d->causes.n)
		snprintf(p.top_cause, sizeof p.top_cause, "%s", d->causes.v[0].id);
	snprintf(p.verdict, sizeof p.verdict, "%s", tb_status_name(r->verdict));
	memcpy(p.count, r->count, sizeof p.count);
	p.tol = r->tol;
	if (!prev) {
		p.move = TB_MOVE_FIRST;
	} else if (prev->cand_digest[0] ? !strcmp(prev->cand_digest, p.cand_digest)
					 : p.cand_stat[0] && !strcmp(prev->cand_stat, p.cand_stat)) {
		/* Only the reference or the settings changed: a first divergence
		 * that moved says nothing of the port's last change. */
		p.move = TB_MOVE_UNCHANGED;
	} else {
		bool was_div = prev->first_div[0] != '\0', is_div = r->first_div >= 0;
		if (!is_div) {
			p.move = TB_MOVE_MATCHED;
		} else if (!was_div) {
			p.move = TB_MOVE_BROKE;
		} else {
			tb_cell pc;
			long then = prev->first_div_index;
			/* Measure in this run's cells: dumps may gain or lose taps between passes. */
			if (tb_cell_parse(prev->first_div, &pc) == 0 && tb_result_find(r, &pc) >= 0)
				then = tb_result_find(r, &pc);
			p.delta = r->first_div - then;
			if (p.delta > 0)
				p.move = TB_MOVE_LATER;
			else if (p.delta < 0)
				p.move = TB_MOVE_EARLIER;
			else
				p.move = TB_MOVE_STUCK;
		}
	}
	describe(&p, prev);
	if (h->n >= TB_HISTORY_MAX) {
		memmove(h->passes, h->passes + 1, (h->n - 1) * sizeof *h->passes);
		h->n--;
	}
	grown = realloc(h->passes, (h->n + 1) * sizeof *h->passes);
	if (!grown)
		return tb_err_setc(err, TB_ERR_NOMEM, h->path, "out of memory");
	h->passes = grown;
	h->passes[h->n++] = p;
	if (h->path[0] && save(h, s, err) < 0)
		return -1;
	return 1;
}

int tb_history_reset(tb_history *h, const tb_session *s, tb_err *err)
{
	if (!h->in_memory) {
		tb_history_done(h);
		tb_history_open(s, h);
	}
	free(h->passes);
	h->passes = NULL;
	h->n = 0;
	if (h->path[0] && unlink(h->path) < 0 && errno != ENOENT)
		return tb_err_setc(err, TB_ERR_IO, h->path, "cannot clear the history: %s", strerror(errno));
	return 0;
}

void tb_history_init_memory(tb_history *h)
{
	memset(h, 0, sizeof *h);
	h->in_memory = true;
}

void tb_history_done(tb_history *h)
{
	free(h->passes);
	h->passes = NULL;
	h->n = 0;
}
