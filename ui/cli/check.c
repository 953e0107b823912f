#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "run/html.h"
#include "run/markdown.h"
#include "run/report.h"
#include "run/run.h"

int tb_die(const tb_err *err)
{
	char buf[TB_ERR_TEXT_MAX];

	fprintf(stderr, "tbisect: %s\n", tb_err_text(err, buf, sizeof buf));
	return TB_EXIT_BAD_INPUT;
}

void tb_warn(const tb_err *err)
{
	char buf[TB_ERR_TEXT_MAX];

	fprintf(stderr, "tbisect: warning: %s\n", tb_err_text(err, buf, sizeof buf));
}

void tb_run_opts_from(const tb_options *o, tb_run_opts *ro)
{
	tb_run_opts_init(ro);
	ro->ref_path = o->paths[0];
	ro->cand_path = o->paths[1];
	ro->open = o->open;
	ro->map_file = o->map_file;
	ro->rules_file = o->rules_file;
	ro->tol_file = o->tol_file;
	ro->tol = o->tol;
	ro->threads = o->threads;
	ro->heads = o->heads;
	ro->kv_heads = o->kv_heads;
	ro->tower = o->tower;
	ro->origin_factor = o->origin_factor;
	ro->flip_margin = o->flip_margin;
	ro->allow_partial = o->allow_partial;
	ro->no_builtin_names = o->no_builtin_names;
	ro->layout = o->layout;
}

/* Notes shown per tree; `tbisect ls` lists them all. */
#define MAX_NOTES 20

/* What a tree skipped (special files, npz members of no tensor type, ...),
 * so nothing is left out silently. */
static void print_notes(const tb_tree *tree)
{
	for (size_t i = 0; i < tree->n_notes && i < MAX_NOTES; i++)
		fprintf(stderr, "tbisect: note: %s\n", tree->notes[i]);
	if (tree->n_notes > MAX_NOTES)
		fprintf(stderr, "tbisect: note: %zu more notes; tbisect ls %s lists them\n", tree->n_notes - MAX_NOTES,
			tree->path);
}

static int write_report(const tb_options *o, const tb_report *rep, tb_err *err)
{
	if (o->json) {
		char *text = tb_report_json(rep);
		if (!text)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory writing the report");
		puts(text);
		free(text);
	} else if (o->markdown) {
		tb_report_markdown(stdout, rep);
	} else {
		tb_report_text(stdout, rep);
	}
	if (fflush(stdout) != 0)
		return tb_err_setc(err, TB_ERR_IO, NULL, "cannot write the report to standard output");
	return 0;
}

/* The command line as a shell would take it back: words of safe
 * characters as they are, others in single quotes.  Returns out. */
static char *quoted_command(const tb_options *o, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < o->argc && n < size; i++) {
		const char *a = i == 0 ? "tbisect" : o->argv[i];
		bool plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == strlen(a);
		n += (size_t)snprintf(out + n, size - n, "%s%s", i ? " " : "", plain ? "" : "'");
		for (const char *p = a; *p && n < size; p++)
			n += (size_t)snprintf(out + n, size - n, *p == '\'' ? "'\\''" : "%c", *p);
		if (!plain && n < size)
			n += (size_t)snprintf(out + n, size - n, "'");
	}
	return out;
}

typedef struct html_job {
	const tb_report *rep;
	const tb_html_opts *ho;
} html_job;

static int fill_html(FILE *f, const void *ctx)
{
	const html_job *j = ctx;

	return tb_report_html(f, j->rep, j->ho);
}

static int write_html(const tb_options *o, const tb_report *rep, tb_err *err)
{
	char command[4096], stamp[64];
	tb_html_opts ho = {.command = quoted_command(o, command, sizeof command), .heads = o->heads,
			   .kv_heads = o->kv_heads};
	html_job job = {rep, &ho};

	if (o->html_timestamp) {
		time_t now = time(NULL);
		struct tm tm;
		strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
		ho.timestamp = stamp;
	}
	return tb_write_file(o->html_file, "the HTML report", 0, fill_html, &job, err);
}

int tb_cmd_check(const tb_options *o)
{
	tb_run_opts ro;
	tb_run_config cfg;
	tb_run run = {0};
	tb_report rep;
	tb_history hist = {0};
	tb_tower_summary towers[TB_MAX_TOWERS];
	tb_err err;
	int rc;

	tb_run_opts_from(o, &ro);
	/* a tower's grid is no pass of the pair's history */
	ro.record = o->no_history || o->tower ? TB_RECORD_NONE : TB_RECORD_DISK;
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (tb_run_exec(&run, &cfg, &err) < 0) {
		rc = tb_die(&err);
		goto out;
	}
	print_notes(run.sess.ref);
	print_notes(run.sess.cand);
	tb_report_from_run(&rep, &run, &cfg);
	if (o->history_reset && tb_history_reset(&hist, &run.sess, &err) < 0) {
		rc = tb_die(&err);
		goto out;
	}
	if (!o->no_history) {
		int recorded = tb_run_record(&run, &hist, &err);
		if (hist.warning[0])
			fprintf(stderr, "tbisect: warning: %s\n", hist.warning);
		if (recorded < 0)
			tb_warn(&err);
		rep.history = &hist;
		rep.show_history = o->history;
		rep.history_unchanged = recorded == 0 && hist.path[0];
	}
	rep.show_features = o->features;
	rep.tower = o->tower;
	if (!o->tower)
		rep.n_towers = tb_towers_compare(&cfg, &run, towers, TB_MAX_TOWERS);
	rep.towers = towers;
	if ((o->html_file && write_html(o, &rep, &err) < 0) || write_report(o, &rep, &err) < 0)
		rc = tb_die(&err);
	else
		rc = tb_run_exit_code(&run);
out:
	tb_history_done(&hist);
	tb_run_done(&run);
	tb_run_config_done(&cfg);
	return rc;
}
