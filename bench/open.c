/*
 * tbbench-open: what the TUI waits for before its first frame:
 * tb_session_open (both trees indexed, names paired; bench/run.sh times the
 * whole process around it), and proof that no tensor data was read on the
 * way: the page faults taken and the resident pages of the trees' mappings,
 * which stay at the headers (a few pages per file) however big the tensors
 * are.
 *
 *   tbbench-open REF CAND
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "model/session.h"

static double since_boot(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Resident kB of the mappings of files under either tree (smaps). */
static long tree_rss_kb(const char *a, const char *b)
{
	char line[8192], real_a[4096], real_b[4096];
	FILE *f = fopen("/proc/self/smaps", "r");
	bool in_tree = false;
	long kb = 0, v;

	if (!f || !realpath(a, real_a) || !realpath(b, real_b)) {
		if (f)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *path = strchr(line, '/');
		if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ') && path)
			in_tree = !strncmp(path, real_a, strlen(real_a)) || !strncmp(path, real_b, strlen(real_b));
		else if (in_tree && sscanf(line, "Rss: %ld kB", &v) == 1)
			kb += v;
	}
	fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	double t0 = since_boot(), t1;
	struct rusage r0, r1;
	tb_session s;
	tb_err err;

	if (argc != 3) {
		fprintf(stderr, "usage: tbbench-open REF CAND\n");
		return 2;
	}
	getrusage(RUSAGE_SELF, &r0);
	if (tb_session_open(&s, argv[1], argv[2], NULL, NULL, &err) < 0) {
		fprintf(stderr, "tbbench-open: %s: %s\n", err.file, err.msg);
		return 2;
	}
	t1 = since_boot();
	getrusage(RUSAGE_SELF, &r1);
	printf("open: %.1f ms in tb_session_open, %zu + %zu tensors, %ld page faults, %ld kB of the trees resident\n",
	       1e3 * (t1 - t0), s.ref->n_tensors, s.cand->n_tensors,
	       r1.ru_minflt - r0.ru_minflt + r1.ru_majflt - r0.ru_majflt, tree_rss_kb(argv[1], argv[2]));
	tb_session_done(&s);
	return 0;
}
