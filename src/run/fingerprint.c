#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpus.h"
#include "diagnose/features.h"
#include "diagnose/sanity.h"
#include "formats/tbsk.h"
#include "model/layout.h"
#include "model/naming.h"
#include "run/fingerprint.h"
#include "tensor/sketch.h"

/* The tree's tie score (tb_tree.tie) on its values: its final_norm, embed
 * and logits, found by their cells. */
static double tree_tie(const tb_listing *l, const int64_t *tok, size_t n_tok)
{
	static const tb_tap_id taps[3] = {TB_TAP_FINAL_NORM, TB_TAP_EMBED, TB_TAP_LOGITS};
	tb_tensor *t[3] = {NULL, NULL, NULL};

	for (size_t i = 0; i < l->tree->n_tensors; i++) {
		tb_cell c;
		const tb_tensor *x = l->tree->tensors[i];
		if (!tb_namer_map_role(l->namer, x->name, x->role, l->names.shared, &c, NULL, NULL, 0))
			continue;
		for (int k = 0; k < 3; k++)
			if (c.id == taps[k] && !t[k])
				t[k] = l->tree->tensors[i];
	}
	return tok && t[0] && t[1] && t[2] ? tb_features_tie(t[0], t[1], t[2], tok, n_tok) : NAN;
}

/* The job of sketching one tensor of the tree: whole, or as rank `rank`
 * of `ranks`' share of the tensor its cell's ranks join into (joined:
 * that tensor, as the sketch names it).  1, and no job, for one of a
 * rank's partial sums, which its sketch leaves out (the norms of the
 * ranks' shares do not add up). */
static int job_of(const tb_layout_opts *layout, tb_tensor *t, const tb_cell *cell, bool mapped, int rank, int ranks,
		  uint64_t seed, tb_sketch_job *job, tb_tensor *joined, tb_err *err)
{
	tb_rank_join j = {-1, 1, {0}, false};

	*joined = *t;
	if (ranks > 1 && mapped && tb_layout_rank_join(layout, cell, t, &j, err) < 0)
		return -1;
	if (j.partial)
		return 1;
	if (j.axis >= 0) {
		int64_t shape[TB_MAX_DIMS];
		memcpy(shape, t->shape, sizeof shape);
		if (__builtin_mul_overflow(shape[j.axis], (int64_t)ranks, &shape[j.axis]) ||
		    tb_tensor_set_shape(joined, t->ndim, shape, t->path, err) < 0)
			return tb_err_setc(err, TB_ERR_LIMIT, t->path, "'%s': the joined shape overflows", t->name);
	}
	*job = (tb_sketch_job){.t = t, .axis = j.axis, .n_parts = j.n_parts, .rank = rank, .ranks = ranks};
	memcpy(job->width, j.width, sizeof job->width);
	tb_sketch_params_for(joined, seed, &job->p);
	return 0;
}

/* What the sketches are written with, in the tree's order. */
typedef struct writing {
	tb_tbsk_writer *w;
	const tb_sketch_job *jobs;
	const tb_tensor *joined;              /* per job: the tensor as the sketch names it */
	const char (*cell)[TB_CELL_NAME_MAX]; /* per job: its cell's name, "" unmapped */
	tb_fingerprint_stats *stats;
} writing;

static int write_one(void *ctx, size_t job, tb_sketch *s, tb_err *err)
{
	writing *wr = ctx;
	const tb_tensor *t = wr->jobs[job].t;
	int rc = tb_tbsk_add(wr->w, &wr->joined[job], wr->cell[job], s, err);

	tb_sketch_done(s);
	wr->stats->tree_bytes += t->numel * tb_dtype_size(t->dtype);
	wr->stats->tensors++;
	return rc;
}

int tb_run_sketch(const tb_run_config *cfg, const char *path, int rank, int ranks, const char *out, uint64_t seed,
		  tb_fingerprint_stats *stats, tb_err *err)
{
	tb_run_config own = *cfg; /* the tree is one rank's alone */
	tb_layout_opts lo;
	tb_listing l;
	tb_tbsk_writer w;
	tb_tbsk_tree whole;
	tb_sketch_job *jobs = NULL;
	tb_tensor *joined = NULL;
	char(*cells)[TB_CELL_NAME_MAX] = NULL;
	size_t n_tok = 0, n_jobs = 0;
	int64_t *tok;
	int rc = 0;

	memset(stats, 0, sizeof *stats);
	own.opts.layout.rank = ranks > 1 ? rank : -1;
	if (tb_run_list(&own, path, &l, err) < 0)
		return -1;
	/* how fused qkv shards split: the head counts, else the proportion of
	 * the rank's own attn.core to the rest of its qkv */
	lo = own.opts.layout;
	lo.heads = cfg->opts.heads;
	lo.kv_heads = cfg->opts.kv_heads;
	tb_layout_qk_widths(l.tree, l.namer, &lo.q_width, &lo.kv_width);
	if (l.tree->n_tensors > UINT32_MAX) {
		tb_listing_done(&l);
		return tb_err_setc(err, TB_ERR_LIMIT, path, "too many tensors for a sketch");
	}
	/* every tensor's job first (a tensor that cannot be sketched fails
	 * before the file is begun), then the jobs on the threads, written
	 * in order */
	jobs = malloc((l.tree->n_tensors ? l.tree->n_tensors : 1) * sizeof *jobs);
	joined = malloc((l.tree->n_tensors ? l.tree->n_tensors : 1) * sizeof *joined);
	cells = calloc(l.tree->n_tensors ? l.tree->n_tensors : 1, sizeof *cells);
	if (!jobs || !joined || !cells)
		rc = tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; i < l.tree->n_tensors && rc == 0; i++) {
		tb_tensor *t = l.tree->tensors[i];
		tb_cell cell;
		bool mapped;

		cells[n_jobs][0] = '\0';
		if (t->sketch) {
			rc = tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s' is already a sketch", t->name);
			break;
		}
		if (t->partial) {
			rc = tb_err_setc(err, TB_ERR_UNSUPPORTED, t->path,
					 "'%s' holds only some of its values (a partial dump): no sketch of it", t->name);
			break;
		}
		if ((mapped = tb_namer_map_role(l.namer, t->name, t->role, l.names.shared, &cell, NULL, NULL, 0)))
			tb_cell_name(&cell, cells[n_jobs], sizeof cells[n_jobs]);
		rc = job_of(&lo, t, &cell, mapped, rank, ranks, seed, &jobs[n_jobs], &joined[n_jobs], err);
		if (rc == 1) {
			if (stats->partial++ == 0)
				snprintf(stats->first_partial, sizeof stats->first_partial, "%s", t->name);
			rc = 0;
		} else if (rc == 0) {
			n_jobs++;
		}
	}
	/* what needs the tree's values as a whole: its token ids and, from
	 * the tree joined (a rank holds a share of the logits), the tie */
	if (rc == 0) {
		tok = tb_tree_token_ids(l.tree, &n_tok);
		whole = (tb_tbsk_tree){ranks > 1 ? NAN : tree_tie(&l, tok, n_tok), tok, tok ? n_tok : 0};
		rc = tb_tbsk_begin(&w, out, seed, (uint32_t)n_jobs, &whole, err);
		free(tok);
		if (rc == 0) {
			writing wr = {&w, jobs, joined, (const char(*)[TB_CELL_NAME_MAX])cells, stats};
			rc = tb_sketch_jobs(jobs, n_jobs, tb_threads_for(cfg->opts.threads),
					    write_one, &wr, err);
			if (rc == 0)
				rc = tb_tbsk_end(&w, &stats->sketch_bytes, err);
			else
				tb_tbsk_abort(&w);
		}
	}
	free(jobs);
	free(joined);
	free(cells);
	tb_listing_done(&l);
	return rc;
}

/* The parts' tensors of one name, and what they add up to. */
static int merge_one(tb_tree *const *trees, int n, const tb_tensor *first, tb_sketch *sum, tb_err *err)
{
	const tb_sketch *f = first->sketch;
	bool *seen = calloc(f->ranks, sizeof *seen);
	char why[128];
	int have = 0;

	if (!seen)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (tb_sketch_alloc(sum, &f->p) < 0) {
		free(seen);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (int k = 0; k < n; k++)
		for (size_t i = 0; i < trees[k]->n_tensors; i++) {
			const tb_tensor *t = trees[k]->tensors[i];
			const tb_sketch *s = t->sketch;
			if (strcmp(t->name, first->name))
				continue;
			if (s->ranks != f->ranks || !tb_sketch_params_match(&f->p, &s->p, why, sizeof why)) {
				tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s': %s", t->name,
					    s->ranks != f->ranks ? "another number of ranks than in the other parts" : why);
				goto fail;
			}
			if (f->ranks == 1) {
				/* a whole tensor on every rank: the ranks must agree,
				 * but for what a module was fed, which is no cell
				 * (the joined tree keeps the first rank's) */
				if (tb_name_is_aux(t->name)) {
					if (have++ == 0)
						tb_sketch_add(sum, s);
					continue;
				}
				if (memcmp(s->hash, f->hash, f->n_blocks * sizeof *f->hash)) {
					tb_err_setc(err, TB_ERR_USAGE, t->path,
						    "'%s' differs from %s's: its ranks disagree (partial sums of a row-parallel "
						    "layer? --shard TAP=partial leaves them out of the ranks' sketches; sketch "
						    "them from a tree of their ranks joined)",
						    t->name, first->path);
					goto fail;
				}
				if (have++ == 0)
					tb_sketch_add(sum, s);
				continue;
			}
			if (seen[s->rank]) {
				tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s': rank %u twice", t->name, s->rank);
				goto fail;
			}
			seen[s->rank] = true;
			tb_sketch_add(sum, s);
			have++;
		}
	for (unsigned r = 0; f->ranks > 1 && r < f->ranks; r++)
		if (!seen[r]) {
			tb_err_setc(err, TB_ERR_USAGE, first->path, "'%s': no part holds rank %u of %u", first->name, r,
				    f->ranks);
			goto fail;
		}
	sum->finite = sum->p.numel - sum->nan - sum->inf;
	free(seen);
	return 0;
fail:
	free(seen);
	tb_sketch_done(sum);
	return -1;
}

/* Every name the parts hold, once, as its first tensor: the first part's
 * in order, then what later parts add (a sketch of the partial sums,
 * made from a tree of their ranks joined, beside the ranks' sketches). */
static tb_tensor **merged_names(tb_tree *const *trees, int n, size_t *count)
{
	size_t cap = 0;
	tb_tensor **names;

	for (int k = 0; k < n; k++)
		cap += trees[k]->n_tensors;
	names = malloc((cap ? cap : 1) * sizeof *names);
	*count = 0;
	for (int k = 0; names && k < n; k++)
		for (size_t i = 0; i < trees[k]->n_tensors; i++) {
			tb_tensor *t = trees[k]->tensors[i];
			size_t j = 0;
			while (j < *count && strcmp(names[j]->name, t->name))
				j++;
			if (j == *count)
				names[(*count)++] = t;
		}
	return names;
}

int tb_run_sketch_merge(const tb_run_config *cfg, const char *const *parts, int n, const char *out,
			tb_fingerprint_stats *stats, tb_err *err)
{
	tb_tree **trees = calloc((size_t)n, sizeof *trees);
	tb_listing l = {0};
	tb_tbsk_writer w;
	tb_tbsk_tree whole = {NAN, NULL, 0};
	tb_tensor **names = NULL;
	size_t n_names = 0;
	int rc = 0, opened = 1;

	memset(stats, 0, sizeof *stats);
	if (!trees)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	/* the first part opened as a tree, with its naming, for the cells */
	if (tb_run_list(cfg, parts[0], &l, err) < 0) {
		free(trees);
		return -1;
	}
	trees[0] = l.tree;
	for (size_t i = 0; i < trees[0]->n_tensors && rc == 0; i++)
		if (!trees[0]->tensors[i]->sketch)
			rc = tb_err_setc(err, TB_ERR_USAGE, parts[0], "not a sketch: merge takes the ranks' .tbsk files");
	for (; opened < n && rc == 0; opened++) {
		rc = tb_tree_open(parts[opened], &cfg->opts.open, &trees[opened], err);
		for (size_t i = 0; rc == 0 && i < trees[opened]->n_tensors; i++)
			if (!trees[opened]->tensors[i]->sketch)
				rc = tb_err_setc(err, TB_ERR_USAGE, parts[opened], "not a sketch: merge takes the ranks' .tbsk files");
		if (rc < 0 && !trees[opened])
			break;
	}
	if (rc == 0 && !(names = merged_names(trees, n, &n_names)))
		rc = tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	for (int k = 0; rc == 0 && k < n; k++) {
		if (!whole.tokens && trees[k]->tokens)
			whole = (tb_tbsk_tree){whole.tie, trees[k]->tokens, trees[k]->n_tokens};
		if (isnan(whole.tie))
			whole.tie = trees[k]->tie;
	}
	if (rc == 0 && tb_tbsk_begin(&w, out, n_names ? names[0]->sketch->p.seed : 0, (uint32_t)n_names, &whole, err) < 0)
		rc = -1;
	else if (rc == 0) {
		for (size_t i = 0; i < n_names && rc == 0; i++) {
			tb_tensor *t = names[i];
			tb_sketch sum;
			tb_cell cell;
			char name[TB_CELL_NAME_MAX] = "";
			if ((rc = merge_one(trees, n, t, &sum, err)) < 0)
				break;
			if (tb_namer_map_role(l.namer, t->name, t->role, l.names.shared, &cell, NULL, NULL, 0))
				tb_cell_name(&cell, name, sizeof name);
			rc = tb_tbsk_add(&w, t, name, &sum, err);
			stats->tree_bytes += t->numel * tb_dtype_size(t->dtype);
			stats->tensors++;
			tb_sketch_done(&sum);
		}
		if (rc == 0)
			rc = tb_tbsk_end(&w, &stats->sketch_bytes, err);
		else
			tb_tbsk_abort(&w);
	}
	for (int k = 1; k < opened; k++)
		tb_tree_free(trees[k]);
	tb_listing_done(&l);
	free(names);
	free(trees);
	return rc;
}
