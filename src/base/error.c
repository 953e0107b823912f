#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

/* Length of the valid UTF-8 sequence at s that is not a control
 * character (C1 included), or 0. */
static size_t printable_utf8(const unsigned char *s)
{
	size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
	unsigned cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1Fu : len == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;

	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3Fu);
	}
	if (len == 0 || cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

/* Messages quote names taken from hostile files: keep them on one line,
 * with no control characters and no invalid UTF-8 for a terminal to act on. */
static void one_line(char *s)
{
	while (*s) {
		size_t n = printable_utf8((const unsigned char *)s);
		if (n == 0) {
			*s++ = '?';
			continue;
		}
		s += n;
	}
}

static const char *const status_messages[] = {
#define TB_STATUS_MESSAGE(id, message) [TB_ERR_##id] = message,
	TB_STATUS_CODES(TB_STATUS_MESSAGE)
#undef TB_STATUS_MESSAGE
};

const char *tb_status_message(tb_status_code code)
{
	return (size_t)code < sizeof status_messages / sizeof *status_messages ? status_messages[code] : "unknown error";
}

/* A message cut to fit its buffer ends in "..." so that nobody reads it as whole. */
static void mark_if_cut(char *msg, size_t size, int len)
{
	if (len >= 0 && (size_t)len >= size)
		memcpy(msg + size - 4, "...", 4);
}

static void set(tb_err *err, tb_status_code code, const char *file, const char *fmt, va_list ap)
{
	err->code = code;
	snprintf(err->file, sizeof err->file, "%s", file ? file : "");
	mark_if_cut(err->msg, sizeof err->msg, vsnprintf(err->msg, sizeof err->msg, fmt, ap));
	one_line(err->file);
	one_line(err->msg);
}

int tb_err_setc(tb_err *err, tb_status_code code, const char *file, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	set(err, code, file, fmt, ap);
	va_end(ap);
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
	mark_if_cut(err->msg, sizeof err->msg, snprintf(err->msg, sizeof err->msg, "%s: %s", head, old));
	one_line(err->msg);
}

void tb_err_clear(tb_err *err)
{
	if (err) {
		err->file[0] = err->msg[0] = '\0';
		err->code = TB_ERR_NONE;
	}
}

const char *tb_err_text(const tb_err *err, char *buf, size_t size)
{
	if (err->file[0])
		snprintf(buf, size, "%s: %s", err->file, err->msg);
	else
		snprintf(buf, size, "%s", err->msg);
	return buf;
}
