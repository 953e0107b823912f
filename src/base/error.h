/*
 * error: the error value every library call fills in on failure.
 *
 * A tb_err holds the file an error concerns (may be empty) and a one-line
 * message.  Library functions return -1 (or NULL) and set *err; they never
 * print.  The front end prints "tbisect: FILE: MESSAGE" and picks the exit
 * code.  A tb_err is a plain value: no heap, nothing to free.
 */
#ifndef TB_ERROR_H
#define TB_ERROR_H

#include <stddef.h>

typedef struct tb_err {
	char file[1024]; /* path the error concerns, "" when none */
	char msg[1024];  /* what is wrong, no trailing newline */
} tb_err;

/* Set file and message; always returns -1 so callers can `return tb_err_set(...)`. */
int tb_err_set(tb_err *err, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the existing message with more context ("in shard X: ..."). */
void tb_err_prefix(tb_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void tb_err_clear(tb_err *err);

/* Room for tb_err_text's "FILE: MESSAGE". */
#define TB_ERR_TEXT_MAX (sizeof ((tb_err *)0)->file + sizeof ((tb_err *)0)->msg + 2)

/* "FILE: MESSAGE" (or just MESSAGE) into buf; returns buf. */
const char *tb_err_text(const tb_err *err, char *buf, size_t size);

#endif
