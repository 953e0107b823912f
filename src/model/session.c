#include "config.h"

#include <string.h>

#include "model/session.h"

int tb_session_open(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
		    const char *map_file, tb_err *err)
{
	tb_session_opts o = {.open = opts, .map_file = map_file};

	return tb_session_open_with(s, ref_path, cand_path, &o, err);
}

int tb_session_open_with(tb_session *s, const char *ref_path, const char *cand_path, const tb_session_opts *o,
			 tb_err *err)
{
	int named;

	memset(s, 0, sizeof *s);
	s->ref_path = ref_path;
	s->cand_path = cand_path;
	named = o->map_text ? tb_namer_new_text(o->map_file, o->map_text, o->map_len, &s->namer, err)
			    : tb_namer_new(o->map_file, &s->namer, err);
	if (named == 0 && o->no_builtin_names)
		tb_namer_use_builtins(s->namer, false);
	if (named < 0 || tb_tree_open(ref_path, o->open, &s->ref, err) < 0 ||
	    tb_tree_open(cand_path, o->open, &s->cand, err) < 0 ||
	    tb_pairing_build(s->ref, s->cand, s->namer, &o->pairing, &s->pairing, err) < 0) {
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
