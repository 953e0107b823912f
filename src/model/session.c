#include "config.h"

#include <string.h>

#include "model/session.h"

int tb_session_open(tb_session *s, const char *ref_path, const char *cand_path, const tb_open_opts *opts,
		    const char *map_file, tb_err *err)
{
	tb_session_opts o = {.open = opts, .map_file = map_file};

	tb_layout_opts_init(&o.layout);
	return tb_session_open_with(s, ref_path, cand_path, &o, err);
}

/* Stitched steps must add up to the other tree's positions: compared at
 * the first cell both trees hold with a positions axis. */
static int check_positions(const tb_session *s, tb_err *err)
{
	bool stitched[2] = {s->ref->layout.n_steps > 0 && s->ref->layout.step < 0,
			    s->cand->layout.n_steps > 0 && s->cand->layout.step < 0};

	if (!stitched[0] && !stitched[1])
		return 0;
	for (size_t i = 0; i < s->pairing->n_pairs; i++) {
		const tb_pair *p = &s->pairing->pairs[i];
		int64_t r[TB_MAX_DIMS], c[TB_MAX_DIMS];
		int nr, nc;
		if (!p->ref || !p->cand)
			continue;
		nr = tb_tensor_squeezed(p->ref, r);
		nc = tb_tensor_squeezed(p->cand, c);
		if (nr < 2 || nc < 2)
			continue;
		if (r[nr - 2] == c[nc - 2])
			return 0;
		const tb_tree *st = stitched[1] ? s->cand : s->ref;
		return tb_err_setc(err, TB_ERR_FORMAT, st->path,
				  "its steps %d..%d stitch to %lld positions at '%s', but the %s has %lld: a step missing, repeated or out of order",
				  st->layout.first_step, st->layout.first_step + st->layout.n_steps - 1,
				  (long long)(stitched[1] ? c[nc - 2] : r[nr - 2]), stitched[1] ? p->cand->name : p->ref->name,
				  stitched[1] ? "reference" : "candidate", (long long)(stitched[1] ? r[nr - 2] : c[nc - 2]));
	}
	return 0;
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
	tb_layout_opts lo[2] = {o->layout, o->layout};
	tb_open_opts open[2];
	for (int k = 0; k < 2; k++) {
		lo[k].heads = o->pairing.heads;
		lo[k].kv_heads = o->pairing.kv_heads;
		if (o->open)
			open[k] = *o->open;
		else
			tb_open_opts_init(&open[k]);
		/* A file holding both runs (Polygraphy's runners) gives each side its own. */
		open[k].side = k;
	}
	if (named < 0 || tb_tree_open(ref_path, &open[0], &s->ref, err) < 0 ||
	    tb_tree_open(cand_path, &open[1], &s->cand, err) < 0) {
		tb_session_done(s);
		return -1;
	}
	/* Against a tree of one forward pass (a reference prefill over the whole
	 * sequence), the steps of the other are stitched unless told. */
	bool steps[2] = {tb_layout_has_steps(s->ref), tb_layout_has_steps(s->cand)};
	tb_layout_qk_widths(s->cand, s->namer, &lo[0].q_width, &lo[0].kv_width);
	tb_layout_qk_widths(s->ref, s->namer, &lo[1].q_width, &lo[1].kv_width);
	if (o->layout.step < 0 && steps[0] != steps[1])
		lo[steps[0] ? 0 : 1].all_steps = true;
	if (tb_layout_apply(s->ref, s->namer, &lo[0], err) < 0 || tb_layout_apply(s->cand, s->namer, &lo[1], err) < 0 ||
	    tb_pairing_build(s->ref, s->cand, s->namer, &o->pairing, &s->pairing, err) < 0 || check_positions(s, err) < 0) {
		tb_session_done(s);
		return -1;
	}
	return 0;
}

void tb_session_done(tb_session *s)
{
	tb_pairing_free(s->pairing);
	tb_tree_free(s->ref);
	tb_tree_free(s->cand);
	tb_namer_free(s->namer);
	memset(s, 0, sizeof *s);
}
