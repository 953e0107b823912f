/*
 * tbbench-replay: the cost of replaying the first divergence's op (issue
 * 17: under a second for 2048 positions of 32 heads of 128 on two cores).
 * Opens and compares the pair as `tbisect check` does, then times
 * tb_replay_first_divergence alone, the best of REPS runs.  Prints the
 * cell, the time and the replay's note; exit 0 when it confirmed a cause.
 *
 *   tbbench-replay REF CAND [REPS]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "compare/compare.h"
#include "diagnose/replay.h"
#include "model/session.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	int reps = argc > 3 ? atoi(argv[3]) : 3;
	double best = -1;
	tb_compare_opts o;
	tb_result *r;
	tb_replay rp;
	tb_session s;
	tb_err err;

	if (argc < 3 || reps < 1) {
		fprintf(stderr, "usage: tbbench-replay REF CAND [REPS]\n");
		return 2;
	}
	tb_compare_opts_init(&o);
	if (tb_session_open(&s, argv[1], argv[2], NULL, NULL, &err) < 0 || tb_compare(s.pairing, &o, &r, &err) < 0) {
		fprintf(stderr, "tbbench-replay: %s: %s\n", err.file, err.msg);
		return 2;
	}
	for (int i = 0; i < reps; i++) {
		double t0 = now();
		if (tb_replay_first_divergence(&s, r, 0, 0, &rp, &err) < 0) {
			fprintf(stderr, "tbbench-replay: %s: %s\n", err.file, err.msg);
			return 2;
		}
		if (best < 0 || now() - t0 < best)
			best = now() - t0;
	}
	printf("%.3f %s %s\n", best, r->first_div >= 0 ? r->cells[r->first_div].cell.tap : "-", rp.note);
	tb_result_free(r);
	tb_session_done(&s);
	return rp.cause ? 0 : 1;
}
