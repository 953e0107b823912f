#include "config.h"

#include <string.h>

#include "model/session.h"

int tb_session_open(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
		    const char *map_file, tb_err *err)
{
	return tb_session_open_map(s, ref_path, cand_path, opts, map_file, NULL, 0, err);
}

int tb_session_open_map(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
			const char *map_file, const char *map_text, size_t map_len, tb_err *err)
{
	int named;

	memset(s, 0, sizeof *s);
	s->ref_path = ref_path;
	s->cand_path = cand_path;
	named = map_text ? tb_namer_new_text(map_file, map_text, map_len, &s->namer, err)
			 : tb_namer_new(map_file, &s->namer, err);
	if (named < 0 || tb_tree_open(ref_path, opts, &s->ref, err) < 0 ||
	    tb_tree_open(cand_path, opts, &s->cand, err) < 0 ||
	    tb_pairing_build(s->ref, s->cand, s->namer, &s->pairing, err) < 0) {
		tb_session_free(s);
		return -1;
	}
	return 0;
}

void tb_session_free(tb_session *s)
{
	tb_pairing_free(s->pairing);
	tb_tree_free(s->ref);
	tb_tree_free(s->cand);
	tb_namer_free(s->namer);
	memset(s, 0, sizeof *s);
}
