/*
 * watch: notice when a dump tree changes on disk (inotify), for --watch.
 * A directory tree is watched recursively; the tree's own entry in its
 * parent directory is watched too, so replacing the whole tree (rm, mv)
 * counts.  Nothing is read or written; the TUI polls and reloads.
 */
#ifndef TB_UI_WATCH_H
#define TB_UI_WATCH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ui_watch ui_watch;

/* NULL with a message when inotify is not available. */
ui_watch *ui_watch_new(const char *path, char *msg, size_t size);
/* Drain pending events; true when any concerned the tree. Never blocks. */
bool ui_watch_changed(ui_watch *w);
void ui_watch_free(ui_watch *w);

#endif
