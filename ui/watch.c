#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch.h"

/* Directories watched at most: a dump tree has few. */
#define MAX_DIRS 4096
#define TREE_EVENTS (IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM)

struct ui_watch {
	int fd;
	int parent_wd;  /* the directory holding the tree's own entry */
	char base[256]; /* the tree's name in it */
	int n_dirs;
};

static void add_tree(ui_watch *w, const char *dir, int depth)
{
	DIR *d;
	struct dirent *e;

	if (w->n_dirs >= MAX_DIRS || depth > 64 || inotify_add_watch(w->fd, dir, TREE_EVENTS | IN_ONLYDIR) < 0)
		return;
	w->n_dirs++;
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char sub[4096];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			add_tree(w, sub, depth + 1);
	}
	closedir(d);
}

ui_watch *ui_watch_new(const char *path, char *msg, size_t size)
{
	ui_watch *w = calloc(1, sizeof *w);
	char parent[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!w) {
		snprintf(msg, size, "--watch: out of memory");
		return NULL;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		snprintf(msg, size, "--watch: inotify: %s", strerror(errno));
		free(w);
		return NULL;
	}
	if (slash)
		snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	else
		snprintf(parent, sizeof parent, ".");
	snprintf(w->base, sizeof w->base, "%s", slash ? slash + 1 : path);
	w->parent_wd = inotify_add_watch(w->fd, parent, TREE_EVENTS | IN_ONLYDIR);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		add_tree(w, path, 0);
	return w;
}

bool ui_watch_changed(ui_watch *w)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;
	ssize_t n;

	while ((n = read(w->fd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			if (ev->wd != w->parent_wd || (ev->len && !strcmp(ev->name, w->base)))
				changed = true;
			p += sizeof *ev + ev->len;
		}
	}
	return changed;
}

void ui_watch_free(ui_watch *w)
{
	if (!w)
		return;
	close(w->fd);
	free(w);
}
