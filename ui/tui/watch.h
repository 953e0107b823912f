/*
 * watch: notice when the dump trees change on disk (inotify), for --watch,
 * and say when a change has gone quiet enough to be read.  Each tree given
 * is watched: a directory recursively (new subdirectories too), a single
 * file through its parent directory; the tree's own entry in its parent is
 * watched as well, so replacing a whole tree (rm, mv) counts.  A change is
 * ready once no file is left open for writing and nothing has happened for
 * the settle delay.  Nothing is read or written; the TUI polls and reloads.
 * A ui_watch owns its inotify descriptor; ui_watch_free releases it.
 */
#ifndef TB_UI_WATCH_H
#define TB_UI_WATCH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ui_watch ui_watch;

typedef enum ui_watch_state {
	UI_WATCH_QUIET,    /* nothing changed since the last ready */
	UI_WATCH_SETTLING, /* changed; waiting for the settle delay to pass */
	UI_WATCH_WRITING,  /* changed; a file is still open for writing */
	UI_WATCH_READY,    /* changed and quiet: reload now (reported once) */
} ui_watch_state;

/* Watch n trees; NULL with a message when inotify is not available. */
ui_watch *ui_watch_new(const char *const *paths, int n, double settle, char *msg, size_t size);
/* Drain pending events (never blocks) and say where the trees stand at
 * monotonic time now. */
ui_watch_state ui_watch_poll(ui_watch *w, double now);
/* The file being written, while the state is UI_WATCH_WRITING, else "". */
const char *ui_watch_writing(ui_watch *w);
void ui_watch_free(ui_watch *w);

#endif
