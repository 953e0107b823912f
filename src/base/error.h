/*
 * error: the error value every library call fills in on failure.
 *
 * A tb_err holds what kind of failure it is (a status code), the file it
 * concerns (may be empty) and a one-line message.  Library functions return
 * -1 (or NULL) and set *err; they never print.  The front end prints
 * "tbisect: FILE: MESSAGE" and picks the exit code; the code lets a caller
 * tell running out of memory or failing to read from bad content.  A
 * tb_err is a plain value: no heap, nothing to free.
 */
#ifndef TB_ERROR_H
#define TB_ERROR_H

#include <stddef.h>

/* X(ID, message): the kinds of failure the library reports, each with a
 * line for people; the tb_err's own message says what exactly. */
#define TB_STATUS_CODES(X)                                                  \
	X(NONE, "no error")                                                 \
	X(NOMEM, "out of memory")                                           \
	X(IO, "cannot read or write a file")                                \
	X(FORMAT, "not a valid input file")                                 \
	X(UNSUPPORTED, "valid input that tbisect does not support")         \
	X(NO_TENSOR, "a valid file that holds no tensor")                   \
	X(LIMIT, "over a limit")                                            \
	X(USAGE, "invalid argument")                                        \
	X(SYSTEM, "the system refused a resource")                          \
	X(CANCELLED, "cancelled")

typedef enum tb_status_code {
#define TB_STATUS_ENUM(id, message) TB_ERR_##id,
	TB_STATUS_CODES(TB_STATUS_ENUM)
#undef TB_STATUS_ENUM
} tb_status_code;

/* The code's line for people ("out of memory"). */
const char *tb_status_message(tb_status_code code);

#define TB_ERR_FILE_MAX 1024
#define TB_ERR_MSG_MAX 1024
/* tb_err_text's "FILE: MESSAGE" with its NUL */
#define TB_ERR_TEXT_MAX (TB_ERR_FILE_MAX - 1 + 2 + TB_ERR_MSG_MAX)

typedef struct tb_err {
	char file[TB_ERR_FILE_MAX]; /* path the error concerns, "" when none */
	char msg[TB_ERR_MSG_MAX];   /* what is wrong, no trailing newline */
	tb_status_code code;        /* TB_ERR_NONE when cleared */
} tb_err;

/* Set code, file and message; always returns -1 so callers can
 * `return tb_err_setc(...)`.  The code is always given: a bad file is
 * TB_ERR_FORMAT, a failed read or write TB_ERR_IO, a bad argument
 * TB_ERR_USAGE (the codes above). */
int tb_err_setc(tb_err *err, tb_status_code code, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix the existing message with more context ("in shard X: ..."); the
 * code stays. */
void tb_err_prefix(tb_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void tb_err_clear(tb_err *err);

/* "FILE: MESSAGE" (or just MESSAGE) into buf; returns buf. */
const char *tb_err_text(const tb_err *err, char *buf, size_t size);

#endif
