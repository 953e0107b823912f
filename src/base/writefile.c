#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/writefile.h"

int tb_write_file(const char *path, const char *what, int (*fill)(FILE *f, const void *ctx), const void *ctx,
		  tb_err *err)
{
	char tmp[4200];
	FILE *f;
	int bad;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return tb_err_set(err, path, "cannot write %s: %s", what, strerror(errno));
	bad = fill(f, ctx) < 0;
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
		int e = errno;
		remove(tmp);
		return tb_err_set(err, path, "cannot write %s: %s", what, strerror(e));
	}
	return 0;
}
