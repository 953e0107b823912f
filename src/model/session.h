/*
 * session: the two dump trees of one comparison, the namer and their
 * pairing, opened together (what `check`, the TUI and reloads share).
 * tb_session_free releases all of it.
 */
#ifndef TB_SESSION_H
#define TB_SESSION_H

#include "base/error.h"
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
/* The same with the map file's contents already read (map_text, or NULL
 * to read map_file). */
int tb_session_open_map(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
			const char *map_file, const char *map_text, size_t map_len, tb_err *err);
void tb_session_free(tb_session *s);

#endif
