#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/writefile.h"

int tb_atomic_open(tb_atomic *a, const char *path, const char *what, unsigned flags, tb_err *err)
{
	int fd, e;

	memset(a, 0, sizeof *a);
	a->what = what;
	a->flags = flags;
	a->path = strdup(path);
	a->tmp = malloc(strlen(path) + sizeof ".tmp.XXXXXX");
	if (!a->path || !a->tmp) {
		tb_atomic_abort(a);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory writing %s", what);
	}
	sprintf(a->tmp, "%s.tmp.XXXXXX", path);
	/* mkstemp makes the file private; the others are as any new file */
	mode_t mask = umask(0);
	umask(mask);
	fd = mkstemp(a->tmp);
	if (fd >= 0 && (fchmod(fd, flags & TB_WRITE_PRIVATE ? 0600 : 0666 & ~mask) < 0 || !(a->f = fdopen(fd, "w")))) {
		e = errno;
		close(fd);
		unlink(a->tmp);
		errno = e;
	}
	if (!a->f) {
		e = errno;
		free(a->tmp);
		a->tmp = NULL;
		tb_atomic_abort(a);
		return tb_err_setc(err, TB_ERR_IO, path, "cannot write %s: %s", what, strerror(e));
	}
	return 0;
}

int tb_atomic_commit(tb_atomic *a, bool bad, tb_err *err)
{
	int e = 0;

	if (bad) {
		tb_atomic_abort(a);
		return -1;
	}
	if (fflush(a->f) != 0 || ((a->flags & TB_WRITE_SYNC) && fsync(fileno(a->f)) != 0))
		e = errno;
	if (fclose(a->f) != 0 && !e)
		e = errno;
	a->f = NULL;
	if (!e && rename(a->tmp, a->path) != 0)
		e = errno;
	if (e) {
		tb_err_setc(err, TB_ERR_IO, a->path, "cannot write %s: %s", a->what, strerror(e));
		tb_atomic_abort(a);
		return -1;
	}
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
	return 0;
}

void tb_atomic_abort(tb_atomic *a)
{
	if (a->f)
		fclose(a->f);
	if (a->tmp)
		unlink(a->tmp);
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
}

int tb_write_file(const char *path, const char *what, unsigned flags, int (*fill)(FILE *f, const void *ctx),
		  const void *ctx, tb_err *err)
{
	tb_atomic a;
	int bad;

	if (tb_atomic_open(&a, path, what, flags, err) < 0)
		return -1;
	bad = fill(a.f, ctx) < 0 || ferror(a.f);
	if (bad)
		tb_err_setc(err, TB_ERR_IO, path, "cannot write %s: %s", what, strerror(errno ? errno : EIO));
	return tb_atomic_commit(&a, bad, err);
}
