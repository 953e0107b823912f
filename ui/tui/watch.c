#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tui/watch.h"

/* Trees watched at most (ref and cand). */
#define MAX_ROOTS 4
/* Directories watched at most: a dump tree has few. */
#define MAX_DIRS 4096
/* Files tracked as open for writing at once; more are not waited for. */
#define MAX_WRITING 64
/* Writes do not trigger a reload by themselves, they only postpone it
 * (IN_MODIFY); closing, renaming and deleting do. */
#define TREE_EVENTS (IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_MODIFY | \
		     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

typedef struct watch_root {
	char path[PATH_MAX]; /* as given, without trailing slashes */
	char base[NAME_MAX + 1]; /* its name in the parent directory, "" when it has none (".") */
} watch_root;

typedef struct watch_dir {
	int wd;
	int root;
	bool parent; /* the directory holding the tree's own entry, not part of the tree */
	char *path;  /* owned */
} watch_dir;

typedef struct writing_file {
	int wd;
	char name[NAME_MAX + 1];
} writing_file;

struct ui_watch {
	int fd;
	double settle;          /* seconds of quiet before a change is ready */
	watch_root roots[MAX_ROOTS];
	int n_roots;
	watch_dir *dirs;
	int n_dirs, cap_dirs;
	writing_file writing[MAX_WRITING];
	int n_writing;
	bool changed;           /* something changed since the last ready */
	double last;            /* when the last event came */
	char writing_path[PATH_MAX + NAME_MAX + 2];
};

static void add_dir(ui_watch *w, const char *path, int root, bool parent, uint32_t extra)
{
	int wd;

	if (w->n_dirs >= MAX_DIRS)
		return;
	wd = inotify_add_watch(w->fd, path, TREE_EVENTS | IN_ONLYDIR | extra);
	if (wd < 0)
		return;
	for (int i = 0; i < w->n_dirs; i++)
		if (w->dirs[i].wd == wd && w->dirs[i].root == root && w->dirs[i].parent == parent)
			return;
	if (w->n_dirs == w->cap_dirs) {
		int cap = w->cap_dirs ? w->cap_dirs * 2 : 16;
		watch_dir *grown = realloc(w->dirs, (size_t)cap * sizeof *grown);
		if (!grown)
			return;
		w->dirs = grown;
		w->cap_dirs = cap;
	}
	w->dirs[w->n_dirs].path = strdup(path);
	if (!w->dirs[w->n_dirs].path)
		return;
	w->dirs[w->n_dirs].wd = wd;
	w->dirs[w->n_dirs].root = root;
	w->dirs[w->n_dirs].parent = parent;
	w->n_dirs++;
}

/* Watch a directory of a tree and everything below it. */
static void add_tree(ui_watch *w, const char *dir, int root, int depth)
{
	DIR *d;
	struct dirent *e;

	if (depth > 64)
		return;
	add_dir(w, dir, root, false, 0);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub)
			continue;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			add_tree(w, sub, root, depth + 1);
	}
	closedir(d);
}

/* The tree's directory, when it is one. */
static void add_root_tree(ui_watch *w, int root)
{
	struct stat st;

	if (stat(w->roots[root].path, &st) == 0 && S_ISDIR(st.st_mode))
		add_tree(w, w->roots[root].path, root, 0);
}

static void add_root(ui_watch *w, const char *path)
{
	watch_root *r = &w->roots[w->n_roots];
	char parent[PATH_MAX];
	size_t n = strlen(path);
	const char *slash;

	while (n > 1 && path[n - 1] == '/')
		n--;
	snprintf(r->path, sizeof r->path, "%.*s", (int)n, path);
	slash = strrchr(r->path, '/');
	snprintf(r->base, sizeof r->base, "%s", slash ? slash + 1 : r->path);
	if (!strcmp(r->base, ".") || !strcmp(r->base, ".."))
		r->base[0] = '\0';
	if (slash)
		snprintf(parent, sizeof parent, "%.*s", slash == r->path ? 1 : (int)(slash - r->path), r->path);
	else
		snprintf(parent, sizeof parent, ".");
	w->n_roots++;
	if (r->base[0])
		add_dir(w, parent, w->n_roots - 1, true, 0);
	add_root_tree(w, w->n_roots - 1);
}

ui_watch *ui_watch_new(const char *const *paths, int n, double settle, char *msg, size_t size)
{
	ui_watch *w = calloc(1, sizeof *w);

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
	w->settle = settle;
	for (int i = 0; i < n && i < MAX_ROOTS; i++)
		add_root(w, paths[i]);
	return w;
}

static void writing_add(ui_watch *w, int wd, const char *name)
{
	for (int i = 0; i < w->n_writing; i++)
		if (w->writing[i].wd == wd && !strcmp(w->writing[i].name, name))
			return;
	if (w->n_writing == MAX_WRITING)
		return;
	w->writing[w->n_writing].wd = wd;
	snprintf(w->writing[w->n_writing].name, sizeof w->writing[0].name, "%s", name);
	w->n_writing++;
}

static void writing_remove(ui_watch *w, int wd, const char *name)
{
	for (int i = 0; i < w->n_writing; i++) {
		if (w->writing[i].wd == wd && !strcmp(w->writing[i].name, name)) {
			w->writing[i] = w->writing[--w->n_writing];
			return;
		}
	}
}

static void forget_wd(ui_watch *w, int wd)
{
	for (int i = 0; i < w->n_dirs;) {
		if (w->dirs[i].wd == wd) {
			free(w->dirs[i].path);
			w->dirs[i] = w->dirs[--w->n_dirs];
		} else {
			i++;
		}
	}
	for (int i = 0; i < w->n_writing;) {
		if (w->writing[i].wd == wd)
			w->writing[i] = w->writing[--w->n_writing];
		else
			i++;
	}
}

/* One event on a watched directory: does it concern a tree, and what
 * follows (new directories to watch, files being written)? */
static void handle(ui_watch *w, const struct inotify_event *ev, double now)
{
	const char *name = ev->len ? ev->name : "";
	bool concerned = false;
	int n = w->n_dirs;

	for (int i = 0; i < n; i++) {
		watch_dir *d = &w->dirs[i];
		if (d->wd != ev->wd)
			continue;
		if (d->parent) {
			if (!name[0] || strcmp(name, w->roots[d->root].base))
				continue;
			/* The tree itself was created or replaced: watch its new inode. */
			if (ev->mask & (IN_CREATE | IN_MOVED_TO))
				add_root_tree(w, d->root);
		} else {
			/* Hidden files are no part of a tree (the walk skips them). */
			if (name[0] == '.')
				continue;
			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR)) {
				char sub[PATH_MAX];
				if (snprintf(sub, sizeof sub, "%s/%s", d->path, name) < (int)sizeof sub)
					add_tree(w, sub, d->root, 1);
			}
		}
		concerned = true;
		if ((ev->mask & IN_MODIFY) && !(ev->mask & IN_ISDIR))
			writing_add(w, ev->wd, name);
		if (ev->mask & (IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM))
			writing_remove(w, ev->wd, name);
	}
	if (concerned) {
		w->changed = true;
		w->last = now;
	}
}

ui_watch_state ui_watch_poll(ui_watch *w, double now)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(w->fd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			if (ev->mask & IN_Q_OVERFLOW) {
				/* Events were lost: assume a change, and that nothing is still open. */
				w->changed = true;
				w->last = now;
				w->n_writing = 0;
			} else if (ev->mask & IN_IGNORED) {
				forget_wd(w, ev->wd);
			} else {
				handle(w, ev, now);
			}
			p += sizeof *ev + ev->len;
		}
	}
	if (!w->changed)
		return UI_WATCH_QUIET;
	if (w->n_writing > 0)
		return UI_WATCH_WRITING;
	if (now - w->last < w->settle)
		return UI_WATCH_SETTLING;
	w->changed = false;
	return UI_WATCH_READY;
}

const char *ui_watch_writing(ui_watch *w)
{
	const char *dir = NULL;

	w->writing_path[0] = '\0';
	if (!w->n_writing)
		return w->writing_path;
	for (int i = 0; i < w->n_dirs && !dir; i++)
		if (w->dirs[i].wd == w->writing[0].wd)
			dir = w->dirs[i].path;
	if (dir)
		snprintf(w->writing_path, sizeof w->writing_path, "%s/%s", dir, w->writing[0].name);
	else
		snprintf(w->writing_path, sizeof w->writing_path, "%s", w->writing[0].name);
	return w->writing_path;
}

void ui_watch_free(ui_watch *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n_dirs; i++)
		free(w->dirs[i].path);
	free(w->dirs);
	close(w->fd);
	free(w);
}
