/*
 * reload: the runs of the interactive view, all through src/run: the
 * first load, reloads (r, :reload, or --watch once the changed files have
 * gone quiet) and comparisons at a new tolerance (:tol).  A reload opens
 * both trees again and compares them in the background while the last
 * good view stays; when it succeeds its result takes the place of the
 * shown one with the cursor, fold and filter carried over, the cells whose
 * status changed are flagged, and the pass is recorded (src/run/history)
 * with its movement for the banner.  A reload that fails leaves the last
 * good view and says why.  Every function returns UI_* flags for the loop.
 */
#ifndef TB_UI_RELOAD_H
#define TB_UI_RELOAD_H

#include <stdbool.h>

#include "tui/view.h"

/* Start comparing the trees of v->run (opened) at v->tol: a pass. */
unsigned reload_first(view *v);
/* Open both trees again and compare them in the background; without a
 * good view yet, the new trees replace the shown ones at once. */
unsigned reload_start(view *v);
/* Open both trees again at the step delta away from the shown one (a
 * dump of several forward steps), and compare them as reload_start does;
 * says why not when there is no such step or the steps are stitched. */
unsigned reload_step(view *v, int delta);
/* Open both trees again with the grid of tower (NULL: the text
 * decoder's), or with next the grid after the shown one (text, then each
 * tower both trees hold, then text again), and compare them as
 * reload_start does.  A tower's grid records no pass. */
unsigned reload_tower(view *v, const char *tower, bool next);
/* Open both trees again with heads attention heads (:heads), for the
 * pairing, the per-head views and the rules, and compare them as
 * reload_start does. */
unsigned reload_heads(view *v, int heads);
/* Compare the shown trees again at v->tol; records no pass. */
unsigned reload_recompare(view *v);
/* Forget the pair's passes (:history clear): the file goes, and the next
 * load or reload with new inputs is pass 1.  The banner goes with them. */
unsigned reload_history_clear(view *v);
/* Poll the comparison, the background reload and --watch. */
unsigned reload_poll(view *v);
/* Whether a comparison or a reload is under way. */
bool reload_busy(const view *v);
/* Whether --watch has seen a change that is not reloaded yet (the files
 * are still being written, or not quiet for the settle delay). */
bool reload_watch_pending(const view *v);
/* Stop everything and free what the view's runs hold. */
void reload_done(view *v);

#endif
