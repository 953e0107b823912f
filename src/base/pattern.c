#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/pattern.h"

/* The POSIX spelling of each Perl class, for the message. */
static const char *posix_for(char c)
{
	switch (c) {
	case 'd': return "[0-9]";
	case 'D': return "[^0-9]";
	case 'w': return "[A-Za-z0-9_]";
	case 'W': return "[^A-Za-z0-9_]";
	case 's': return "[[:space:]]";
	case 'S': return "[^[:space:]]";
	default: return NULL;
	}
}

int tb_pattern_compile(regex_t *re, const char *pattern, int cflags, char *why, size_t size)
{
	int ec;

	for (const char *p = pattern; *p; p++) {
		if (*p != '\\' || !p[1])
			continue;
		if (p[1] >= '1' && p[1] <= '9') {
			snprintf(why, size, "uses a back-reference (\\%c), which is refused", p[1]);
			return TB_PATTERN_REFUSED;
		}
		if (posix_for(p[1])) {
			snprintf(why, size, "uses \\%c, a Perl class POSIX regular expressions lack: write %s", p[1],
				 posix_for(p[1]));
			return TB_PATTERN_REFUSED;
		}
		p++;
	}
	ec = regcomp(re, pattern, REG_EXTENDED | cflags);
	if (ec != 0) {
		regerror(ec, re, why, size);
		return TB_PATTERN_INVALID;
	}
	return 0;
}
