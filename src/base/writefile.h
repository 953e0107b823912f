/*
 * writefile: write a file whole or not at all.  The content goes to a
 * temporary of a unique name beside it (two runs writing the same file do
 * not share one), renamed over it once complete, so a reader (or a
 * `check --map` run) never sees half a file, and a failed write leaves the
 * old one.  Every file tbisect writes goes through here.
 */
#ifndef TB_WRITEFILE_H
#define TB_WRITEFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"

enum {
	TB_WRITE_PRIVATE = 1 << 0, /* mode 0600 instead of 0666 less the umask */
	TB_WRITE_SYNC = 1 << 1,    /* on disk before the rename (a file that is the only copy) */
};

/* A file being written: write to f, then tb_atomic_commit or
 * tb_atomic_abort, which free it. */
typedef struct tb_atomic {
	FILE *f;
	char *path, *tmp;
	unsigned flags;
	const char *what; /* what the file holds, for the errors: "the history" */
} tb_atomic;

/* Open the temporary; 0, or -1 with err (TB_ERR_IO, TB_ERR_NOMEM). */
int tb_atomic_open(tb_atomic *a, const char *path, const char *what, unsigned flags, tb_err *err);
/* Close and rename over the path; on failure the path is untouched.  bad:
 * the writer failed, abort instead (err already set by it).  0 or -1. */
int tb_atomic_commit(tb_atomic *a, bool bad, tb_err *err);
/* Drop the temporary (a no-op on a committed or zeroed one). */
void tb_atomic_abort(tb_atomic *a);

/* The whole content at once: fill writes it and returns -1 on failure.
 * what names the content in the error. */
int tb_write_file(const char *path, const char *what, unsigned flags, int (*fill)(FILE *f, const void *ctx),
		  const void *ctx, tb_err *err);

#endif
