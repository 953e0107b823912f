/*
 * tbbench-time: runs a command and appends "WALL_SECONDS MAX_RSS_KB STATUS"
 * to a file: wall-clock time from fork to exit, the child's peak resident
 * set (getrusage of the waited child), and its exit status.  The child's
 * output goes where ours goes.  Used by bench/run.sh instead of GNU time.
 *
 *   tbbench-time OUT_FILE COMMAND [ARG...]
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct rusage ru;
	int status;
	pid_t pid;
	FILE *out;

	if (argc < 3) {
		fprintf(stderr, "usage: tbbench-time OUT_FILE COMMAND [ARG...]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "tbbench-time: fork: %s\n", strerror(errno));
		return 2;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "tbbench-time: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		fprintf(stderr, "tbbench-time: wait: %s\n", strerror(errno));
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	out = fopen(argv[1], "a");
	if (!out) {
		fprintf(stderr, "tbbench-time: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	fprintf(out, "%.4f %ld %d\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
		ru.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return fclose(out) == 0 ? 0 : 2;
}
