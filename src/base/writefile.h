/*
 * writefile: write a file whole or not at all: the content goes to a
 * temporary beside it, renamed over it once complete, so a reader (or a
 * `check --map` run) never sees half a file, and a failed write leaves
 * the old one.
 */
#ifndef TB_WRITEFILE_H
#define TB_WRITEFILE_H

#include <stdio.h>

#include "base/error.h"

/* fill writes the content; what names the content in the error. */
int tb_write_file(const char *path, const char *what, int (*fill)(FILE *f, const void *ctx), const void *ctx,
		  tb_err *err);

#endif
