/*
 * session: the two dump trees of one comparison, the namer and their
 * pairing, opened together (what `check`, the TUI and reloads share).
 * Each tree's ranks and steps are resolved (layout.h) before pairing;
 * stitched steps must give the positions the other tree has.
 * tb_session_done releases all of it.
 */
#ifndef TB_SESSION_H
#define TB_SESSION_H

#include "base/error.h"
#include "model/layout.h"
#include "model/naming.h"
#include "model/pairing.h"
#include "formats/tree.h"

typedef struct tb_session {
	const char *ref_path, *cand_path; /* borrowed */
	tb_tree *ref, *cand;
	tb_namer *namer;
	tb_pairing *pairing;
} tb_session;

/* map_file may be NULL. */
int tb_session_open(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
		    const char *map_file, tb_err *err);
typedef struct tb_session_opts {
	const tb_open_opts *open; /* NULL: the defaults */
	const char *map_file;     /* NULL: the built-in conventions only */
	const char *map_text;     /* the map file's contents already read (standard input), or NULL */
	size_t map_len;
	tb_pairing_opts pairing;
	tb_layout_opts layout;    /* ranks and steps (zeroed: step 0 would be asked for; use tb_layout_opts_init) */
	bool no_builtin_names;    /* only the map file names tensors */
} tb_session_opts;

int tb_session_open_with(tb_session *s, const char *ref_path, const char *cand_path, const tb_session_opts *o,
			 tb_err *err);
void tb_session_done(tb_session *s);

#endif
