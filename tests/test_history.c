/*
 * The pass history (src/run/history.c) of a port whose candidate is
 * re-dumped here between passes, with XDG_STATE_HOME in a temp dir: each
 * movement (first, later, earlier, stuck, unchanged, matched, broke) and
 * its note, no pass for a run whose inputs are the last pass's (even with
 * the bytes rewritten), the digests, a reset, the file read back pass for
 * pass, the bound on its size, a corrupt file set aside with a warning, a
 * state directory inside a dump tree refused, and the write made
 * atomically (temp file, rename).
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "run/history.h"
#include "samples/dumpwrite.h"
#include "testutil.h"

#define N 64

static const char *const layer_taps[] = {"attn_norm", "attn", "mlp_norm", "mlp", "block"};

typedef struct pair_dirs {
	char ref[4096], cand[4096], state[4096];
} pair_dirs;

/* Write every cell of a two-layer tree into dir; the cell named diverged
 * (NULL: none) scaled by 1 + e. */
static void dump(const char *dir, const char *diverged, double e)
{
	int64_t sh[2] = {4, 16};
	char cell[64], file[64];
	float *x = tu_ramp(N, 1), y[N];

	for (int k = -1; k < 10; k++) {
		if (k < 0) {
			snprintf(cell, sizeof cell, "embed");
			snprintf(file, sizeof file, "embed");
		} else {
			snprintf(cell, sizeof cell, "L%d.%s", k / 5, layer_taps[k % 5]);
			snprintf(file, sizeof file, "layers.%d.%s", k / 5, layer_taps[k % 5]);
		}
		for (int i = 0; i < N; i++)
			y[i] = diverged && !strcmp(cell, diverged) ? (float)(x[i] * (1 + e)) : x[i];
		tu_put(dir, file, TB_DT_F32, 2, sh, y);
	}
	free(x);
}

/* A reference, a candidate matching it, and a state directory of their own. */
static void port_init(pair_dirs *p)
{
	const char *dir = tu_tmpdir();

	snprintf(p->ref, sizeof p->ref, "%s/ref", dir);
	snprintf(p->cand, sizeof p->cand, "%s/cand", dir);
	snprintf(p->state, sizeof p->state, "%s/state", dir);
	dump(p->ref, NULL, 0);
	dump(p->cand, NULL, 0);
	assert_int_equal(setenv("XDG_STATE_HOME", p->state, 1), 0);
}

/* A port whose candidate diverges at L0.mlp. */
static void port_diverged(pair_dirs *p)
{
	port_init(p);
	dump(p->cand, "L0.mlp", 0.5);
}

/* One check of the port, as `tbisect check` runs it: open the history,
 * record the pass (with this top cause, or none); recorded says whether
 * the record must add a pass (1) or find the inputs unchanged (0).
 * Returns the last pass. */
static tb_pass check_recording(const pair_dirs *p, const char *top_cause, int recorded)
{
	tb_cause cause = {.id = (char *)top_cause};
	tb_diagnosis d = {.causes = {.v = &cause, .n = top_cause != NULL}};
	tu_compared f;
	tb_history h;
	tb_pass pass;
	tb_err err;
	size_t n;

	tu_compare(&f, p->ref, p->cand, NULL);
	tb_history_open(&f.s, &h);
	assert_string_equal(h.warning, "");
	n = h.n;
	assert_int_equal(tb_history_record(&h, &f.s, f.res, &d, &err), recorded);
	assert_int_equal(h.n, n + (size_t)recorded);
	pass = h.passes[h.n - 1];
	tb_history_done(&h);
	tu_compared_done(&f);
	return pass;
}

static tb_pass check(const pair_dirs *p, const char *top_cause)
{
	return check_recording(p, top_cause, 1);
}

/* The history of the port as it is on disk. */
static void history_of(const pair_dirs *p, tb_history *h)
{
	tu_compared f;

	tu_compare(&f, p->ref, p->cand, NULL);
	tb_history_open(&f.s, h);
	tu_compared_done(&f);
}

static void expect_pass(const tb_pass *got, int number, tb_move move, long delta, const char *first_div,
			const char *note)
{
	assert_int_equal(got->number, number);
	assert_string_equal(tb_move_name(got->move), tb_move_name(move));
	assert_int_equal(got->delta, delta);
	assert_string_equal(got->first_div, first_div);
	assert_string_equal(got->note, note);
}

/* A port with two passes recorded: L0.mlp diverged, then L1.mlp. */
static void port_two_passes(pair_dirs *port)
{
	port_diverged(port);
	check(port, NULL);
	dump(port->cand, "L1.mlp", 0.5);
	check(port, NULL);
}

static void test_movements(void **state)
{
	tb_pass p[8];
	pair_dirs port;
	time_t t0 = time(NULL);
	(void)state;

	port_init(&port);
	dump(port.cand, "L1.mlp", 0.5);
	p[0] = check(&port, "mlp-activation");
	expect_pass(&p[0], 1, TB_MOVE_FIRST, 0, "L1.mlp", "pass 1: first divergence L1.mlp");
	assert_string_equal(p[0].top_cause, "mlp-activation");
	assert_string_equal(p[0].verdict, "diverged");
	assert_int_equal(p[0].first_div_index, 9);
	assert_int_equal(p[0].count[TB_ST_DIVERGED], 1);
	assert_int_equal(p[0].count[TB_ST_MATCH], 10);
	assert_true(p[0].when >= t0 && p[0].when <= time(NULL));

	dump(port.cand, "L1.block", 0.5);
	p[1] = check(&port, NULL);
	expect_pass(&p[1], 2, TB_MOVE_LATER, 1, "L1.block", "pass 2: first divergence L1.mlp -> L1.block (later by 1 cell)");
	assert_string_equal(p[1].top_cause, "");

	dump(port.cand, "L0.attn", 0.5);
	p[2] = check(&port, NULL);
	expect_pass(&p[2], 3, TB_MOVE_EARLIER, -8, "L0.attn",
		    "pass 3: first divergence L1.block -> L0.attn (EARLIER by 8 cells): the last change made it worse; "
		    "revert it and re-read the reference forward");

	dump(port.cand, "L0.attn", 0.7);
	p[3] = check(&port, NULL);
	expect_pass(&p[3], 4, TB_MOVE_STUCK, 0, "L0.attn",
		    "pass 4: first divergence still L0.attn although the candidate changed: the fix did not reach this "
		    "op, or the dump is stale (re-dump; restart the server, stale compiled graphs hide fixes); revert "
		    "and re-read the reference forward");

	/* The same inputs again, the candidate's bytes rewritten as they were: no pass. */
	check_recording(&port, NULL, 0);
	dump(port.cand, "L0.attn", 0.7);
	check_recording(&port, NULL, 0);

	/* The reference gains a tensor, the candidate stays: a pass, no movement of the port. */
	{
		int64_t sh[1] = {4};
		float x[4] = {1, 2, 3, 4};
		tu_put(port.ref, "extra_notes", TB_DT_F32, 1, sh, x);
	}
	p[4] = check(&port, NULL);
	expect_pass(&p[4], 5, TB_MOVE_UNCHANGED, 0, "L0.attn",
		    "pass 5: candidate unchanged since pass 4 (the reference, the map or the tolerance changed); first "
		    "divergence L0.attn");
	assert_string_equal(p[4].cand_digest, p[3].cand_digest);
	assert_string_not_equal(p[4].ref_digest, p[3].ref_digest);
	/* Files written this very moment get no key: they could change again
	 * within the file clock's tick and keep it. */
	assert_string_equal(p[4].cand_stat, "");
	assert_string_equal(p[4].ref_stat, "");
	assert_string_not_equal(p[4].input_digest, p[3].input_digest);
	assert_string_not_equal(p[3].cand_digest, p[2].cand_digest);

	dump(port.cand, NULL, 0);
	p[5] = check(&port, NULL);
	expect_pass(&p[5], 6, TB_MOVE_MATCHED, 0, "",
		    "pass 6: first divergence L0.attn -> none: nothing diverges (verdict match)");
	assert_int_equal(p[5].first_div_index, -1);

	p[6] = check_recording(&port, NULL, 0);
	assert_int_equal(p[6].number, 6);
	tu_put(port.ref, "extra_notes", TB_DT_F32, 1, (const int64_t[]){2}, (const float[]){5, 6});
	p[6] = check(&port, NULL);
	expect_pass(&p[6], 7, TB_MOVE_UNCHANGED, 0, "",
		    "pass 7: candidate unchanged since pass 6 (the reference, the map or the tolerance changed); first "
		    "divergence none");

	dump(port.cand, "L0.mlp", 0.5);
	p[7] = check(&port, NULL);
	expect_pass(&p[7], 8, TB_MOVE_BROKE, 0, "L0.mlp",
		    "pass 8: nothing diverged in pass 7, now the first divergence is L0.mlp: the last change broke it; "
		    "revert it");

	/* Read back, every pass as recorded. */
	tb_history h;
	history_of(&port, &h);
	assert_string_equal(h.warning, "");
	assert_int_equal(h.n, 8);
	for (int i = 0; i < 8; i++) {
		expect_pass(&h.passes[i], p[i].number, p[i].move, p[i].delta, p[i].first_div, p[i].note);
		assert_int_equal(h.passes[i].first_div_index, p[i].first_div_index);
		assert_string_equal(h.passes[i].cand_digest, p[i].cand_digest);
		assert_string_equal(h.passes[i].input_digest, p[i].input_digest);
		assert_string_equal(h.passes[i].ref_digest, p[i].ref_digest);
		assert_string_equal(h.passes[i].ref_stat, p[i].ref_stat);
		assert_string_equal(h.passes[i].cand_stat, p[i].cand_stat);
		assert_string_equal(h.passes[i].top_cause, p[i].top_cause);
		assert_string_equal(h.passes[i].verdict, p[i].verdict);
		assert_memory_equal(h.passes[i].count, p[i].count, sizeof p[i].count);
		assert_true(h.passes[i].when == p[i].when);
		assert_near(h.passes[i].tol.diverge, p[i].tol.diverge, 0);
	}
	tb_history_done(&h);
}

static void test_bad_moves(void **state)
{
	static const tb_move bad[] = {TB_MOVE_EARLIER, TB_MOVE_STUCK, TB_MOVE_BROKE};
	static const tb_move good[] = {TB_MOVE_FIRST, TB_MOVE_LATER, TB_MOVE_UNCHANGED, TB_MOVE_MATCHED};
	(void)state;

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_true(tb_move_is_bad(bad[i]));
	for (size_t i = 0; i < sizeof good / sizeof *good; i++)
		assert_false(tb_move_is_bad(good[i]));
	assert_string_equal(tb_move_name(TB_MOVE_STUCK), "stuck");
	assert_string_equal(tb_move_name((tb_move)99), "?");
}

/* One file per pair; the oldest passes go past TB_HISTORY_MAX, numbering goes on. */
static void test_bounded(void **state)
{
	tu_compared f;
	tb_history h;
	tb_err err;
	pair_dirs port;
	(void)state;

	tu_compared g;
	tb_compare_opts loose;

	port_diverged(&port);
	tu_compare(&f, port.ref, port.cand, NULL);
	/* Passes alternate between two tolerances, so that each has new inputs. */
	tb_compare_opts_init(&loose);
	loose.tol.atol = 1e-3;
	tu_compare(&g, port.ref, port.cand, &loose);
	tb_history_open(&f.s, &h);
	for (int i = 0; i < TB_HISTORY_MAX + 5; i++)
		assert_int_equal(tb_history_record(&h, &f.s, (i % 2 ? g : f).res, NULL, &err), 1);
	assert_int_equal(h.n, TB_HISTORY_MAX);
	tb_history_done(&h);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, TB_HISTORY_MAX);
	assert_int_equal(h.passes[0].number, 6);
	assert_int_equal(h.passes[h.n - 1].number, TB_HISTORY_MAX + 5);
	tb_history_done(&h);
	tu_compared_done(&g);
	tu_compared_done(&f);
}

/* In memory: movements as on disk, nothing written. */
static void test_in_memory(void **state)
{
	tu_compared f;
	tb_history h;
	tb_err err;
	pair_dirs port;
	struct stat st;
	(void)state;

	port_diverged(&port);
	tu_compare(&f, port.ref, port.cand, NULL);
	tb_history_init_memory(&h);
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 1);
	/* A reload of the same dump is no pass, in memory too. */
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 0);
	assert_int_equal(h.n, 1);
	dump(port.cand, "L0.attn", 0.5);
	tu_compared_done(&f);
	tu_compare(&f, port.ref, port.cand, NULL);
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 1);
	assert_int_equal(h.n, 2);
	assert_int_equal(h.passes[1].move, TB_MOVE_EARLIER);
	assert_string_equal(h.path, "");
	/* A reset empties it; the next pass is pass 1 again. */
	assert_int_equal(tb_history_reset(&h, &f.s, &err), 0);
	assert_int_equal(h.n, 0);
	assert_true(h.in_memory);
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 1);
	assert_int_equal(h.passes[0].number, 1);
	assert_int_equal(h.passes[0].move, TB_MOVE_FIRST);
	assert_int_equal(stat(port.state, &st), -1);
	tb_history_done(&h);
	tu_compared_done(&f);
}

/* A reset forgets the pair's passes on disk, only that pair's; the next
 * check is pass 1. */
static void test_reset(void **state)
{
	char other[4200];
	tu_compared f;
	tb_history h;
	tb_err err;
	pair_dirs port;
	tb_pass p;
	(void)state;

	port_two_passes(&port);
	snprintf(other, sizeof other, "%s2", port.cand);
	dump(other, NULL, 0);
	tu_compare(&f, port.ref, other, NULL);
	tb_history_open(&f.s, &h);
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 1);
	tb_history_done(&h);
	tu_compared_done(&f);

	tu_compare(&f, port.ref, port.cand, NULL);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 2);
	assert_int_equal(tb_history_reset(&h, &f.s, &err), 0);
	assert_int_equal(h.n, 0);
	assert_int_equal(access(h.path, F_OK), -1);
	/* Twice is fine: nothing to remove. */
	assert_int_equal(tb_history_reset(&h, &f.s, &err), 0);
	tb_history_done(&h);
	tu_compared_done(&f);
	p = check(&port, NULL);
	expect_pass(&p, 1, TB_MOVE_FIRST, 0, "L1.mlp", "pass 1: first divergence L1.mlp");
	/* The other pair kept its pass. */
	tu_compare(&f, port.ref, other, NULL);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 1);
	tb_history_done(&h);
	tu_compared_done(&f);
}

static void expect_set_aside(const pair_dirs *port, const char *content, const char *why)
{
	char aside[8192], want[TB_HISTORY_WARNING_MAX], *text; /* want quotes the path twice, and why */
	tb_history h;
	size_t n;
	FILE *fp;
	tb_pass p;

	history_of(port, &h);
	tb_history_done(&h);
	tu_write_str(h.path, content);
	history_of(port, &h);
	assert_int_equal(h.n, 0);
	snprintf(want, sizeof want, "history file %s is corrupt (%s); set aside as %s.corrupt-", h.path, why, h.path);
	if (strncmp(h.warning, want, strlen(want)))
		fail_msg("warning \"%s\", expected it to start \"%s\"", h.warning, want);
	snprintf(aside, sizeof aside, "%s", strstr(h.warning, "set aside as ") + strlen("set aside as "));
	assert_int_equal(access(h.path, F_OK), -1);
	fp = fopen(aside, "r");
	assert_non_null(fp);
	text = calloc(1, 4096);
	n = fread(text, 1, 4095, fp);
	fclose(fp);
	assert_int_equal(n, strlen(content));
	assert_string_equal(text, content);
	free(text);
	assert_int_equal(remove(aside), 0);
	tb_history_done(&h);
	p = check(port, NULL);
	assert_int_equal(p.number, 1);
	assert_int_equal(p.move, TB_MOVE_FIRST);
}

static void test_corrupt_set_aside(void **state)
{
	pair_dirs port;
	(void)state;

	port_two_passes(&port);
	expect_set_aside(&port, "{\"passes\": [{\"pass\": ", "history file is not valid JSON (near byte 21)");
	expect_set_aside(&port, "{\"passes\": [{\"pass\": \"x\"}]}", "a pass is malformed");
	expect_set_aside(&port, "{\"runs\": []}", "no \"passes\" list");
}

static void expect_refused(const pair_dirs *port, const char *state_home)
{
	char want[8192], made[4200];
	tu_compared f;
	tb_history h;
	tb_err err;
	struct stat st;

	assert_int_equal(setenv("XDG_STATE_HOME", state_home, 1), 0);
	tu_compare(&f, port->ref, port->cand, NULL);
	tb_history_open(&f.s, &h);
	snprintf(want, sizeof want, "history not kept: the state directory %s/tbisect is inside a dump tree", state_home);
	assert_string_equal(h.warning, want);
	assert_string_equal(h.path, "");
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 0);
	assert_int_equal(h.n, 0);
	snprintf(made, sizeof made, "%s", state_home);
	assert_int_equal(stat(made, &st), -1);
	tb_history_done(&h);
	tu_compared_done(&f);
}

static void test_state_dir_inside_a_tree(void **state)
{
	char dir[4200];
	pair_dirs port;
	(void)state;

	port_init(&port);
	snprintf(dir, sizeof dir, "%s/.state", port.cand);
	expect_refused(&port, dir);
	snprintf(dir, sizeof dir, "%s/sub/state", port.ref);
	expect_refused(&port, dir);
}

static void test_no_state_home(void **state)
{
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char want[8192];
	bool stale[2];
	tu_compared f;
	tb_history h;
	pair_dirs port;
	(void)state;

	port_init(&port);
	tu_compare(&f, port.ref, port.cand, NULL);
	unsetenv("XDG_STATE_HOME");
	unsetenv("HOME");
	tb_history_open(&f.s, &h);
	assert_string_equal(h.warning, "history not kept: neither XDG_STATE_HOME nor HOME is set");
	assert_string_equal(h.path, "");
	tb_history_done(&h);
	/* No digests for a history that cannot be kept, unless the pass goes
	 * to memory instead. */
	tb_history_stale(&f.s, false, stale);
	assert_false(stale[0] || stale[1]);
	tb_history_stale(&f.s, true, stale);
	assert_true(stale[0] && stale[1]);
	/* HOME alone: the XDG default under it. */
	assert_int_equal(setenv("HOME", port.state, 1), 0);
	tb_history_open(&f.s, &h);
	snprintf(want, sizeof want, "%s/.local/state/tbisect/pair-", port.state);
	assert_string_equal(h.warning, "");
	assert_int_equal(strncmp(h.path, want, strlen(want)), 0);
	tb_history_done(&h);
	/* kept, with no pass yet: both trees need their digests */
	tb_history_stale(&f.s, false, stale);
	assert_true(stale[0] && stale[1]);
	/* A state directory that cannot be written in is found before the
	 * comparison (the file permissions do not bind root). */
	snprintf(want, sizeof want, "%s/.local/state/tbisect", port.state);
	assert_int_equal(chmod(want, 0555), 0);
	if (geteuid() != 0) {
		tb_history_open(&f.s, &h);
		assert_int_equal(strncmp(h.warning, "history not kept: cannot write in ", 34), 0);
		assert_string_equal(h.path, "");
		tb_history_done(&h);
		tb_history_stale(&f.s, false, stale);
		assert_false(stale[0] || stale[1]);
	}
	assert_int_equal(chmod(want, 0755), 0);
	if (home)
		setenv("HOME", home, 1);
	else
		unsetenv("HOME");
	free(home);
	tu_compared_done(&f);
}

/* Files in the state directory whose name holds ".tmp.". */
static int temp_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

/* The file is replaced whole by a rename: a hard link to the old one keeps
 * the old passes, no temp file stays, and a write that fails leaves the
 * old file as it was. */
static void test_atomic_write(void **state)
{
	char old[4200], dir[4200], tmp[4200];
	tb_compare_opts loose;
	tu_compared f, g;
	tb_history h;
	tb_err err;
	pair_dirs port;
	(void)state;

	port_diverged(&port);
	check(&port, NULL);
	tu_compare(&f, port.ref, port.cand, NULL);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 1);
	snprintf(old, sizeof old, "%s.old", h.path);
	assert_int_equal(link(h.path, old), 0);
	/* New inputs, so that the record writes: the candidate at a looser tolerance. */
	tb_compare_opts_init(&loose);
	loose.tol.atol = 1e-3;
	tu_compare(&g, port.ref, port.cand, &loose);
	assert_int_equal(tb_history_record(&h, &f.s, g.res, NULL, &err), 1);
	snprintf(dir, sizeof dir, "%s/tbisect", port.state);
	assert_int_equal(temp_files(dir), 0);
	tb_history_done(&h);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 2);
	snprintf(tmp, sizeof tmp, "%s", h.path);
	tb_history_done(&h);
	/* The old name still holds the one pass it had. */
	assert_int_equal(rename(old, tmp), 0);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 1);
	/* A file that cannot be replaced (a directory took its name): the
	 * write fails with the I/O code, no temporary is left, and the file
	 * put back holds what it held. */
	snprintf(tmp, sizeof tmp, "%s.aside", h.path);
	assert_int_equal(rename(h.path, tmp), 0);
	assert_int_equal(mkdir(h.path, 0700), 0);
	assert_int_equal(tb_history_record(&h, &f.s, g.res, NULL, &err), -1);
	if (!strstr(err.msg, "cannot write the history"))
		fail_msg("error: %s", err.msg);
	assert_int_equal(err.code, TB_ERR_IO);
	assert_int_equal(temp_files(dir), 0);
	assert_int_equal(rmdir(h.path), 0);
	assert_int_equal(rename(tmp, h.path), 0);
	tb_history_done(&h);
	tb_history_open(&f.s, &h);
	assert_int_equal(h.n, 1);
	tb_history_done(&h);
	tu_compared_done(&g);
	tu_compared_done(&f);
}

/* One file per (ref, cand) pair, by their real paths. */
static void test_file_per_pair(void **state)
{
	char other[4200], via[8400];
	tu_compared f;
	tb_history a, b;
	pair_dirs port;
	(void)state;

	port_init(&port);
	snprintf(other, sizeof other, "%s2", port.cand);
	dump(other, NULL, 0);
	tu_compare(&f, port.ref, port.cand, NULL);
	tb_history_open(&f.s, &a);
	tu_compared_done(&f);
	tu_compare(&f, port.ref, other, NULL);
	tb_history_open(&f.s, &b);
	tu_compared_done(&f);
	assert_string_not_equal(a.path, b.path);
	tb_history_done(&b);
	snprintf(via, sizeof via, "%s/../cand", port.ref);
	tu_compare(&f, port.ref, via, NULL);
	tb_history_open(&f.s, &b);
	tu_compared_done(&f);
	assert_string_equal(a.path, b.path);
	tb_history_done(&a);
	tb_history_done(&b);
}

/* Set path's mtime to t seconds (and no nanoseconds). */
static void set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};

	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void digest_of(const char *dir, char out[17])
{
	tb_tree *t = tu_open(dir, NULL);
	tb_err err;

	assert_int_equal(tb_tree_digest(t, out, &err), 0);
	tb_tree_free(t);
}

/* The digest follows the values, names, dtypes and shapes, not the files:
 * the same bytes written again (a new mtime) or under another file of the
 * same tensor name give the same digest. */
static void test_digest(void **state)
{
	const char *dir = tu_tmpdir();
	const char *f = tu_path(dir, "layers.0.attn.npy");
	int64_t sh[1] = {4}, sh2[2] = {2, 2};
	float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 9};
	char d0[17], d1[17];
	(void)state;

	tu_put(dir, "layers.0.attn", TB_DT_F32, 1, sh, a);
	set_mtime(f, 1700000000);
	digest_of(dir, d0);
	digest_of(dir, d1);
	assert_string_equal(d0, d1);
	tu_put(dir, "layers.0.attn", TB_DT_F32, 1, sh, a);
	set_mtime(f, 1700000001);
	digest_of(dir, d1);
	assert_string_equal(d0, d1);
	tu_put(dir, "layers.0.attn", TB_DT_F32, 1, sh, b);
	set_mtime(f, 1700000000);
	digest_of(dir, d1);
	assert_string_not_equal(d0, d1);
	tu_put(dir, "layers.0.attn", TB_DT_F32, 2, sh2, a);
	digest_of(dir, d1);
	assert_string_not_equal(d0, d1);
	tu_put(dir, "layers.0.attn", TB_DT_F16, 1, sh, a);
	digest_of(dir, d1);
	assert_string_not_equal(d0, d1);
	tu_put(dir, "layers.0.attn", TB_DT_F32, 1, sh, a);
	digest_of(dir, d1);
	assert_string_equal(d0, d1);
}

/* One tree of the digest test: every way the comparison reads a tensor.
 * cand differs from ref in L0.attn and the logits; ref alone has an
 * extra tensor (never compared). */
static void digest_tree(const char *dir, bool cand)
{
	int64_t rows[2] = {5, 16}, wide[2] = {4, 20}, odd[2] = {3, 7}, f16[2] = {6, 12}, f64[2] = {4, 6};
	int64_t flat[1] = {70001}, logits[2] = {3, 52};
	float *x = tu_ramp(70001, 1);
	size_t n;
	void *raw;

	tu_put(dir, "embed", TB_DT_F32, 2, rows, x);
	tu_put(dir, "layers.0.attn", TB_DT_BF16, 2, wide, cand ? x + 1 : x); /* rows of 40 bytes */
	tu_put(dir, "layers.0.mlp", TB_DT_BF16, 2, odd, x);                  /* rows of 14: read apart */
	tu_put(dir, "layers.0.block", TB_DT_F16, 2, f16, x);
	tu_put(dir, "layers.1.attn", TB_DT_F64, 2, f64, x);                  /* decoded, digested in place */
	tu_put(dir, "layers.1.mlp", TB_DT_F32, 1, flat, x);                  /* flat: slices of its values */
	tu_put(dir, "lm_head", cand ? TB_DT_BF16 : TB_DT_F32, 2, logits, cand ? x + 2 : x);
	/* Fortran order and big-endian bytes have no bytes in place: their
	 * float32 values are digested */
	raw = dw_encode(cand ? x + 3 : x, 24, TB_DT_F32, &n);
	assert_int_equal(dw_write_npy(tu_path(dir, "layers.1.block.npy"), 1, "<f4", true, 2, f64, raw, n), 0);
	assert_int_equal(dw_write_npy(tu_path(dir, "layers.1.attn_norm.npy"), 1, ">f4", false, 2, f64, raw, n), 0);
	if (!cand)
		tu_put(dir, "layers.1.extra", TB_DT_F32, 2, f64, x);
	free(raw);
	free(x);
}

/* The digests the comparison adds up from the rows it reads, on two
 * threads in small units, are those read apart (tb_tree_digest): bytes in
 * place row by row, decoded blocks, logit rows, flat slices; tensors whose
 * rows do not start at whole pairs of words, and those it never reads,
 * are read for the record. */
static void test_digest_from_compare(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096], want[17];
	tb_compare_opts o;
	tu_compared f;
	tb_history h;
	tb_err err;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	digest_tree(ref, false);
	digest_tree(cand, true);
	assert_int_equal(setenv("XDG_STATE_HOME", tu_path(dir, "state"), 1), 0);
	tb_compare_opts_init(&o);
	o.threads = 2;
	o.unit_elems = 40;
	o.digest[0] = o.digest[1] = true;
	tu_compare(&f, ref, cand, &o);
	for (int side = 0; side < 2; side++) {
		assert_true(tu_cell(f.res, "embed")->digested[side]);
		assert_true(tu_cell(f.res, "L0.attn")->digested[side]);
		assert_false(tu_cell(f.res, "L0.mlp")->digested[side]);
		assert_true(tu_cell(f.res, "L1.mlp")->digested[side]);
		assert_true(tu_cell(f.res, "L1.attn")->digested[side]);
		assert_true(tu_cell(f.res, "L1.block")->digested[side]);
		assert_true(tu_cell(f.res, "logits")->digested[side]);
	}
	assert_int_not_equal(tu_cell(f.res, "L0.attn")->digest[0], tu_cell(f.res, "L0.attn")->digest[1]);
	assert_int_equal(tu_cell(f.res, "embed")->digest[0], tu_cell(f.res, "embed")->digest[1]);
	tb_history_open(&f.s, &h);
	assert_int_equal(tb_history_record(&h, &f.s, f.res, NULL, &err), 1);
	assert_int_equal(tb_tree_digest(f.s.ref, want, &err), 0);
	assert_string_equal(h.passes[0].ref_digest, want);
	assert_int_equal(tb_tree_digest(f.s.cand, want, &err), 0);
	assert_string_equal(h.passes[0].cand_digest, want);
	tb_history_done(&h);
	tu_compared_done(&f);
}

static void test_pass_json(void **state)
{
	tb_pass p = {.number = 3, .when = 1700000000, .first_div = "L2.mlp", .first_div_index = 14,
		     .top_cause = "rope-style", .verdict = "diverged", .move = TB_MOVE_LATER, .delta = 7,
		     .cand_digest = "0123456789abcdef", .input_digest = "fedcba9876543210", .note = "pass 3: ..."};
	cJSON *o;
	(void)state;

	tb_tolerance_default(&p.tol);
	p.count[TB_ST_DIVERGED] = 4;
	o = tb_pass_json(&p);
	assert_int_equal(cJSON_GetObjectItem(o, "pass")->valueint, 3);
	assert_string_equal(cJSON_GetObjectItem(o, "movement")->valuestring, "later");
	assert_int_equal(cJSON_GetObjectItem(o, "delta")->valueint, 7);
	assert_string_equal(cJSON_GetObjectItem(o, "first_divergence")->valuestring, "L2.mlp");
	assert_string_equal(cJSON_GetObjectItem(o, "top_cause")->valuestring, "rope-style");
	assert_string_equal(cJSON_GetObjectItem(o, "cand_digest")->valuestring, "0123456789abcdef");
	assert_string_equal(cJSON_GetObjectItem(o, "input_digest")->valuestring, "fedcba9876543210");
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "counts"), "diverged")->valueint, 4);
	assert_near(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "tolerance"), "diverge")->valuedouble, p.tol.diverge, 0);
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_movements),
		cmocka_unit_test(test_bad_moves),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_in_memory),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_corrupt_set_aside),
		cmocka_unit_test(test_state_dir_inside_a_tree),
		cmocka_unit_test(test_no_state_home),
		cmocka_unit_test(test_atomic_write),
		cmocka_unit_test(test_file_per_pair),
		cmocka_unit_test(test_digest),
		cmocka_unit_test(test_digest_from_compare),
		cmocka_unit_test(test_pass_json),
	};
	return cmocka_run_group_tests_name("history", tests, NULL, NULL);
}
