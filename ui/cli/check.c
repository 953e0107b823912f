#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "compare/compare.h"
#include "diagnose/diagnose.h"
#include "run/history.h"
#include "run/report.h"
#include "model/session.h"
#include "compare/tolfile.h"

int tb_die(const tb_err *err)
{
	char buf[TB_ERR_TEXT_MAX];

	fprintf(stderr, "tbisect: %s\n", tb_err_text(err, buf, sizeof buf));
	return TB_EXIT_BAD_INPUT;
}

int tb_cmd_check(const tb_options *o)
{
	tb_compare_opts co;
	tb_diag_opts dopt = {0};
	tb_diagnosis diag;
	tb_tolfile *tf = NULL;
	tb_ruleset *rules = NULL;
	tb_session s;
	tb_result *res = NULL;
	tb_report rep = {0};
	tb_history hist = {0};
	tb_err err;
	int rc = TB_EXIT_BAD_INPUT;
	bool diag_done = false;

	/* Bad rule or tolerance files fail before any dump is read. */
	rules = tb_ruleset_new();
	if (!rules) {
		tb_err_set(&err, NULL, "out of memory");
		return tb_die(&err);
	}
	if (tb_ruleset_add_standard(rules, o->rules_file, &err) < 0 ||
	    (o->tol_file && tb_tolfile_load(o->tol_file, &o->tol, &tf, &err) < 0)) {
		tb_ruleset_free(rules);
		return tb_die(&err);
	}
	if (tb_session_open(&s, o->paths[0], o->paths[1], &o->open, o->map_file, &err) < 0) {
		rc = tb_die(&err);
		goto out_rules;
	}
	tb_compare_opts_init(&co);
	co.tol = o->tol;
	co.threads = o->threads;
	if (tf) {
		co.tol_for = tb_tolfile_for_cell;
		co.tol_ud = tf;
	}
	if (tb_compare(s.pairing, &co, &res, &err) < 0) {
		rc = tb_die(&err);
		goto out;
	}
	dopt.rules = rules;
	dopt.heads = o->heads;
	dopt.kv_heads = o->kv_heads;
	dopt.origin_factor = o->origin_factor;
	if (tb_diagnose(&s, res, &dopt, TB_TARGET_FIRST_DIVERGENCE, &diag, &err) < 0) {
		rc = tb_die(&err);
		goto out;
	}
	diag_done = true;
	if (!o->no_history) {
		tb_history_open(&s, &hist);
		if (hist.warning[0])
			fprintf(stderr, "tbisect: warning: %s\n", hist.warning);
		if (tb_history_record(&hist, &s, res, &diag, &err) < 0) {
			char buf[TB_ERR_TEXT_MAX];
			fprintf(stderr, "tbisect: warning: %s\n", tb_err_text(&err, buf, sizeof buf));
		}
		rep.history = &hist;
		rep.show_history = o->history;
	}
	rep.ref_path = o->paths[0];
	rep.cand_path = o->paths[1];
	rep.pairing = s.pairing;
	rep.result = res;
	rep.diag = &diag;
	rep.show_features = o->features;
	if (o->json) {
		char *text = tb_report_json(&rep);
		if (!text) {
			tb_err_set(&err, NULL, "out of memory writing the report");
			rc = tb_die(&err);
			goto out;
		}
		puts(text);
		free(text);
	} else {
		tb_report_text(stdout, &rep);
	}
	rc = res->verdict == TB_ST_DIVERGED ? TB_EXIT_DIVERGED : TB_EXIT_OK;
	if (fflush(stdout) != 0) {
		tb_err_set(&err, NULL, "cannot write the report to standard output");
		rc = tb_die(&err);
	}
out:
	tb_history_free(&hist);
	if (diag_done)
		tb_diagnosis_done(&diag);
	tb_result_free(res);
	tb_session_free(&s);
out_rules:
	tb_ruleset_free(rules);
	tb_tolfile_free(tf);
	return rc;
}
