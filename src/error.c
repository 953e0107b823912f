#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

/* Messages quote names taken from hostile files; keep them on one line. */
static void one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

int tb_err_set(tb_err *err, const char *file, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	snprintf(err->file, sizeof err->file, "%s", file ? file : "");
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	one_line(err->file);
	one_line(err->msg);
	return -1;
}

void tb_err_prefix(tb_err *err, const char *fmt, ...)
{
	char head[512], old[sizeof err->msg];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof head, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
	one_line(err->msg);
}

void tb_err_clear(tb_err *err)
{
	if (err)
		err->file[0] = err->msg[0] = '\0';
}

const char *tb_err_text(const tb_err *err, char *buf, size_t size)
{
	if (err->file[0])
		snprintf(buf, size, "%s: %s", err->file, err->msg);
	else
		snprintf(buf, size, "%s", err->msg);
	return buf;
}
