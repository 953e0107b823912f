/*
 * pairs: the pairs open_pair opened, by id ("p1", "p2", ...), for the
 * server's lifetime.  Each holds its own run configuration (map, --tol
 * file, tolerance) and its last comparison, made by src/run as `check`
 * makes it, with check --json's report tree built once per comparison.
 * Before a pair is used its trees' files are stat'ed: when any changed
 * (written, added, removed) the pair is opened and compared again, so an
 * agent that re-dumps a tree sees the new numbers on its next call.
 * Nothing is ever written to a tree.
 */
#include "config.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mcp/pairs.h"
#include "run/report.h"

struct mcp_pair {
	char id[16];
	char *ref, *cand, *map, *tol_file; /* as open_pair gave them */
	tb_tolerance tol;
	int heads, kv_heads, step;
	tb_run_config cfg;
	tb_run run;
	cJSON *report;          /* check --json's report of run */
	char stamp[2][17];      /* the trees' files when run was compared */
	int loads;
};

static const mcp_defaults *defaults;
static mcp_pair **pairs;
static size_t n_pairs;

void mcp_pairs_init(const mcp_defaults *d)
{
	defaults = d;
}

static void pair_free(mcp_pair *p)
{
	cJSON_Delete(p->report);
	tb_run_done(&p->run);
	tb_run_config_done(&p->cfg);
	free(p->ref);
	free(p->cand);
	free(p->map);
	free(p->tol_file);
	free(p);
}

const tb_tolerance *mcp_pairs_tolerance(void)
{
	return &defaults->run.tol;
}

void mcp_pairs_free(void)
{
	for (size_t i = 0; i < n_pairs; i++)
		pair_free(pairs[i]);
	free(pairs);
	pairs = NULL;
	n_pairs = 0;
}

/* FNV-1a over each file's path and its stat fields: nftw takes no
 * context, so the sum is kept here while one walk runs. */
static uint64_t walk_hash;

static void mix(const void *data, size_t n)
{
	const unsigned char *b = data;

	for (size_t i = 0; i < n; i++)
		walk_hash = (walk_hash ^ b[i]) * 0x100000001b3ULL;
}

static int walk_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int64_t meta[7] = {(int64_t)st->st_dev, (int64_t)st->st_ino, (int64_t)st->st_size,
			   (int64_t)st->st_mtim.tv_sec, (int64_t)st->st_mtim.tv_nsec, (int64_t)st->st_ctim.tv_sec,
			   (int64_t)st->st_ctim.tv_nsec};

	(void)ftw;
	mix(path, strlen(path) + 1);
	mix(&flag, sizeof flag);
	if (flag == FTW_F)
		mix(meta, sizeof meta);
	return 0;
}

/* Where a tree's files stand: "" when it cannot be walked (gone). */
static void tree_stamp(const char *path, char out[17])
{
	walk_hash = 0xcbf29ce484222325ULL;
	if (nftw(path, walk_one, 16, FTW_PHYS) != 0) {
		out[0] = '\0';
		return;
	}
	snprintf(out, 17, "%016llx", (unsigned long long)walk_hash);
}

static int build_report(mcp_pair *p, tb_err *err)
{
	tb_run *r = &p->run;
	tb_report rep;

	tb_report_from_run(&rep, r, &p->cfg);
	cJSON_Delete(p->report);
	p->report = tb_report_json_tree(&rep);
	return p->report ? 0 : tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory writing the report");
}

/* Open both trees and compare them, reporting progress to call; the
 * pair's last comparison stays when this one fails. */
static int compare(mcp_pair *p, mcp_call *call, tb_err *err)
{
	tb_run fresh = {0};
	char stamp[2][17];

	tree_stamp(p->ref, stamp[0]);
	tree_stamp(p->cand, stamp[1]);
	if (tb_run_open(&fresh, &p->cfg, err) < 0)
		return -1;
	if (tb_run_start(&fresh, &p->cfg.opts.tol, err) < 0)
		goto fail;
	while (!tb_run_finished(&fresh)) {
		size_t done, total;
		uint64_t bytes, bytes_total;
		tb_job_progress(fresh.job, &done, &total, &bytes, &bytes_total);
		if (call->poll && !call->poll(call, done, total, "comparing the trees")) {
			tb_err_setc(err, TB_ERR_FORMAT, NULL, "cancelled by the client while comparing %s and %s", p->ref, p->cand);
			goto fail;
		}
	}
	if (tb_run_finish(&fresh, err) < 0)
		goto fail;
	tb_run_move(&p->run, &fresh);
	memcpy(p->stamp, stamp, sizeof stamp);
	p->loads++;
	return build_report(p, err);
fail:
	tb_run_done(&fresh);
	return -1;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool same_spec(const mcp_pair *p, const mcp_pair_spec *s)
{
	return same_str(p->ref, s->ref) && same_str(p->cand, s->cand) && same_str(p->map, s->map) &&
	       same_str(p->tol_file, s->tol_file) && !memcmp(&p->tol, &s->tol, sizeof p->tol) &&
	       p->heads == s->heads && p->kv_heads == s->kv_heads && p->step == s->step;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Compare again when the files changed since the last comparison. */
static int refresh(mcp_pair *p, mcp_call *call, tb_err *err)
{
	char now[2][17];

	tree_stamp(p->ref, now[0]);
	tree_stamp(p->cand, now[1]);
	for (int side = 0; side < 2; side++)
		if (!now[side][0])
			return tb_err_setc(err, TB_ERR_IO, side ? p->cand : p->ref, "cannot read the tree any more (moved or removed?)");
	if (p->run.res && !strcmp(now[0], p->stamp[0]) && !strcmp(now[1], p->stamp[1]))
		return 0;
	return compare(p, call, err);
}

mcp_pair *mcp_pair_open(const mcp_pair_spec *spec, mcp_call *call, tb_err *err)
{
	tb_run_opts ro = defaults->run;
	mcp_pair *p, **grown;

	for (size_t i = 0; i < n_pairs; i++)
		if (same_spec(pairs[i], spec))
			return refresh(pairs[i], call, err) < 0 ? NULL : pairs[i];
	/* Standard input carries the protocol: a map or tolerance file cannot come from it. */
	if ((spec->map && !strcmp(spec->map, "-")) || (spec->tol_file && !strcmp(spec->tol_file, "-"))) {
		tb_err_setc(err, TB_ERR_FORMAT, NULL, "a map or tolerance file must be a file here: standard input carries the protocol");
		return NULL;
	}
	p = calloc(1, sizeof *p);
	grown = realloc(pairs, (n_pairs + 1) * sizeof *pairs);
	if (!p || !grown) {
		free(p);
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	pairs = grown;
	p->ref = dup_or_null(spec->ref);
	p->cand = dup_or_null(spec->cand);
	p->map = dup_or_null(spec->map);
	p->tol_file = dup_or_null(spec->tol_file);
	p->tol = spec->tol;
	p->heads = spec->heads;
	p->kv_heads = spec->kv_heads;
	p->step = spec->step;
	ro.ref_path = p->ref;
	ro.cand_path = p->cand;
	if (p->map)
		ro.map_file = p->map;
	if (p->tol_file)
		ro.tol_file = p->tol_file;
	ro.tol = p->tol;
	if (p->heads)
		ro.heads = p->heads;
	if (p->kv_heads)
		ro.kv_heads = p->kv_heads;
	if (p->step >= 0)
		ro.layout.step = p->step;
	/* An agent fixes a poor pairing with suggest_map: the pair opens
	 * whatever paired, and its answers say how much that is. */
	ro.allow_partial = true;
	ro.allow_empty = true;
	ro.record = TB_RECORD_DISK;
	if (tb_run_config_load(&p->cfg, &ro, err) < 0 || compare(p, call, err) < 0) {
		pair_free(p);
		return NULL;
	}
	snprintf(p->id, sizeof p->id, "p%zu", n_pairs + 1);
	pairs[n_pairs++] = p;
	return p;
}

mcp_pair *mcp_pair_get(const char *id, mcp_call *call, tb_err *err)
{
	for (size_t i = 0; i < n_pairs; i++)
		if (!strcmp(pairs[i]->id, id))
			return refresh(pairs[i], call, err) < 0 ? NULL : pairs[i];
	tb_err_setc(err, TB_ERR_FORMAT, NULL, "no pair '%s' is open (open_pair gives the id)", id);
	return NULL;
}

const char *mcp_pair_id(const mcp_pair *p)
{
	return p->id;
}

size_t mcp_pair_count(void)
{
	return n_pairs;
}

mcp_pair *mcp_pair_at(size_t i)
{
	return i < n_pairs ? pairs[i] : NULL;
}

tb_run *mcp_pair_run(mcp_pair *p)
{
	return &p->run;
}

const cJSON *mcp_pair_report(const mcp_pair *p)
{
	return p->report;
}

int mcp_pair_loads(const mcp_pair *p)
{
	return p->loads;
}

const char *mcp_pair_stamp(const mcp_pair *p, int side)
{
	return p->stamp[side ? 1 : 0];
}

int mcp_pair_record(mcp_pair *p, bool reset, tb_history *h, tb_err *err)
{
	if (reset && tb_history_reset(h, &p->run.sess, err) < 0)
		return -1;
	return tb_run_record(&p->run, h, err);
}

void mcp_pair_history(mcp_pair *p, tb_history *h)
{
	tb_history_open(&p->run.sess, h);
}

long mcp_pair_cell(mcp_pair *p, const char *name)
{
	const tb_result *res = p->run.res;
	tb_cell want;

	if (!res || tb_cell_parse(name, &want) < 0)
		return -1;
	for (size_t i = 0; i < res->n_cells; i++)
		if (tb_cell_eq(&res->cells[i].cell, &want))
			return (long)i;
	return -1;
}
