#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "compare.h"
#include "report.h"
#include "session.h"

int tb_die(const tb_err *err)
{
	char buf[2200];

	fprintf(stderr, "tbisect: %s\n", tb_err_text(err, buf, sizeof buf));
	return TB_EXIT_BAD_INPUT;
}

int tb_cmd_check(const tb_options *o)
{
	tb_compare_opts co;
	tb_session s;
	tb_result *res;
	tb_report rep;
	tb_err err;
	int rc;

	if (tb_session_open(&s, o->paths[0], o->paths[1], &o->open, o->map_file, &err) < 0)
		return tb_die(&err);
	tb_compare_opts_init(&co);
	co.tol = o->tol;
	co.threads = o->threads;
	if (tb_compare(s.pairing, &co, &res, &err) < 0) {
		tb_session_free(&s);
		return tb_die(&err);
	}
	rep.ref_path = o->paths[0];
	rep.cand_path = o->paths[1];
	rep.pairing = s.pairing;
	rep.result = res;
	rep.causes = NULL;
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
	tb_result_free(res);
	tb_session_free(&s);
	return rc;
}
