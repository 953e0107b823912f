#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/taps.h"

const tb_tap_info tb_taps[] = {
#define TB_TAP_INFO(id, name, scope, rank, parent, label, group_output)                                            \
	[TB_TAP_##id - 1] = {TB_TAP_##id, name, scope, rank, TB_TAP_##parent, label, group_output},
	TB_TAP_TABLE(TB_TAP_INFO)
#undef TB_TAP_INFO
};
const size_t tb_n_taps = sizeof tb_taps / sizeof tb_taps[0];

/* Ranks of the free-form sub-taps: attn.X among attention's listed ones,
 * mlp.X after the MLP's (the MoE sub-taps, the experts and the shared
 * expert come first: tbisect(1) DESCRIPTION). */
#define FREE_ATTN_RANK 250
#define FREE_MLP_RANK 598

int tb_tap_parts(tb_tap_id id, tb_tap_id *parts)
{
	static const struct {
		tb_tap_id fused, parts[TB_MAX_PARTS];
	} fused[] = {
		{TB_TAP_ATTN_QKV, {TB_TAP_ATTN_Q, TB_TAP_ATTN_K, TB_TAP_ATTN_V}},
		{TB_TAP_MLP_GATE_UP, {TB_TAP_MLP_GATE, TB_TAP_MLP_UP}},
	};

	for (size_t i = 0; i < sizeof fused / sizeof *fused; i++) {
		if (fused[i].fused != id)
			continue;
		int n = 0;
		while (n < TB_MAX_PARTS && fused[i].parts[n])
			parts[n] = fused[i].parts[n], n++;
		return n;
	}
	return 0;
}

void tb_tap_part_tag(tb_tap_id part, char *buf, size_t size)
{
	const char *name = tb_taps[part - 1].name;

	snprintf(buf, size, "[%s]", name + strcspn(name, ".") + 1);
}

const tb_tap_info *tb_tap_info_of(tb_tap_id id)
{
	return id > TB_TAP_NONE && id < TB_TAP_OTHER ? &tb_taps[id - 1] : NULL;
}

const tb_tap_info *tb_tap_lookup(const char *tap)
{
	for (size_t i = 0; i < tb_n_taps; i++)
		if (!strcmp(tb_taps[i].name, tap))
			return &tb_taps[i];
	return NULL;
}

/* TB_TAP_ATTN or TB_TAP_MLP when tap is attn.X / mlp.X with a well-formed X. */
static tb_tap_id free_subtap_parent(const char *tap)
{
	const char *dot = strchr(tap, '.'), *s;

	if (!dot || dot[1] == '\0')
		return TB_TAP_NONE;
	for (s = dot + 1; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return TB_TAP_NONE;
	if (dot - tap == 4 && !strncmp(tap, "attn", 4))
		return TB_TAP_ATTN;
	if (dot - tap == 3 && !strncmp(tap, "mlp", 3))
		return TB_TAP_MLP;
	return TB_TAP_NONE;
}

tb_tap_id tb_tap_id_of(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);

	if (ti)
		return ti->id;
	return strlen(tap) < TB_TAP_LEN && free_subtap_parent(tap) ? TB_TAP_OTHER : TB_TAP_NONE;
}

bool tb_tap_valid(const char *tap)
{
	return tb_tap_id_of(tap) != TB_TAP_NONE;
}

bool tb_tap_is_model_level(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);

	return ti && ti->scope != TB_SCOPE_LAYER;
}

const char *tb_tap_parent(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);
	tb_tap_id parent = ti ? ti->parent : free_subtap_parent(tap);

	return parent ? tb_taps[parent - 1].name : NULL;
}

void tb_cell_make(tb_cell *c, int layer, const char *tap)
{
	c->layer = layer;
	snprintf(c->tap, sizeof c->tap, "%s", tap);
	c->id = tb_tap_id_of(tap);
}

void tb_cell_make_id(tb_cell *c, int layer, tb_tap_id id)
{
	c->layer = layer;
	snprintf(c->tap, sizeof c->tap, "%s", tb_taps[id - 1].name);
	c->id = id;
}

tb_tap_id tb_cell_parent(const tb_cell *c)
{
	const tb_tap_info *ti = tb_tap_info_of(c->id);

	if (ti)
		return ti->parent;
	return c->id == TB_TAP_OTHER ? free_subtap_parent(c->tap) : TB_TAP_NONE;
}

/* A cell whose id was never set (a positional initialiser) is read by its
 * name, so every cell sorts as its tap says. */
static void tap_key(const tb_cell *c, tb_scope *scope, int *rank)
{
	tb_tap_id id = c->id != TB_TAP_NONE ? c->id : tb_tap_id_of(c->tap);
	const tb_tap_info *ti = tb_tap_info_of(id);
	tb_tap_id parent;

	if (ti) {
		*scope = ti->scope;
		*rank = ti->rank;
		return;
	}
	parent = id == TB_TAP_OTHER ? free_subtap_parent(c->tap) : TB_TAP_NONE;
	*scope = TB_SCOPE_LAYER;
	*rank = parent ? (parent == TB_TAP_ATTN ? FREE_ATTN_RANK : FREE_MLP_RANK) : 999;
}

int tb_cell_cmp(const tb_cell *a, const tb_cell *b)
{
	tb_scope sa, sb;
	int ra, rb;

	tap_key(a, &sa, &ra);
	tap_key(b, &sb, &rb);
	if (sa != sb)
		return sa < sb ? -1 : 1;
	if (sa == TB_SCOPE_LAYER && a->layer != b->layer)
		return a->layer < b->layer ? -1 : 1;
	if (ra != rb)
		return ra < rb ? -1 : 1;
	return strcmp(a->tap, b->tap);
}

bool tb_cell_eq(const tb_cell *a, const tb_cell *b)
{
	if (a->layer != b->layer)
		return false;
	if (tb_tap_info_of(a->id) && tb_tap_info_of(b->id))
		return a->id == b->id;
	return !strcmp(a->tap, b->tap);
}

void tb_cell_name(const tb_cell *c, char *buf, size_t size)
{
	if (c->layer < 0)
		snprintf(buf, size, "%s", c->tap);
	else
		snprintf(buf, size, "L%d.%s", c->layer, c->tap);
}

int tb_cell_parse(const char *s, tb_cell *out)
{
	const char *p = s;
	char *end;
	long layer;

	if (tb_tap_valid(s) && tb_tap_is_model_level(s)) {
		tb_cell_make(out, -1, s);
		return 0;
	}
	if (!strncmp(p, "layers.", 7))
		p += 7;
	else if (*p == 'L' || *p == 'l')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	layer = strtol(p, &end, 10);
	if (layer > 1000000 || *end != '.' || !tb_tap_valid(end + 1) || tb_tap_is_model_level(end + 1))
		return -1;
	tb_cell_make(out, (int)layer, end + 1);
	return 0;
}

/* Who feeds whom, by tap; a sub-tap is fed as its group is.  mlp_norm
 * reads the residual after attention, which is not a canonical tap: the
 * previous block and attn stand for it. */
static const struct {
	tb_tap_id tap;
	tb_feed from[TB_MAX_FEEDS];
} wiring[] = {
	{TB_TAP_ATTN_NORM, {{TB_TAP_BLOCK, TB_FEED_PREV_BLOCK}}},
	{TB_TAP_ATTN, {{TB_TAP_ATTN_NORM, TB_FEED_SAME}}},
	{TB_TAP_MLP_NORM, {{TB_TAP_BLOCK, TB_FEED_PREV_BLOCK}, {TB_TAP_ATTN, TB_FEED_SAME}}},
	{TB_TAP_MLP, {{TB_TAP_MLP_NORM, TB_FEED_SAME}}},
	{TB_TAP_BLOCK, {{TB_TAP_BLOCK, TB_FEED_PREV_BLOCK}, {TB_TAP_ATTN, TB_FEED_SAME}, {TB_TAP_MLP, TB_FEED_SAME}}},
	{TB_TAP_FINAL_NORM, {{TB_TAP_BLOCK, TB_FEED_LAST_BLOCK}}},
	{TB_TAP_LOGITS, {{TB_TAP_FINAL_NORM, TB_FEED_MODEL}}},
};

int tb_cell_feeders(const tb_cell *c, tb_feed *out)
{
	tb_tap_id parent = tb_cell_parent(c), tap = parent ? parent : c->id;
	int n = 0;

	for (size_t i = 0; i < sizeof wiring / sizeof *wiring; i++) {
		if (wiring[i].tap != tap)
			continue;
		for (n = 0; n < TB_MAX_FEEDS && wiring[i].from[n].tap; n++)
			out[n] = wiring[i].from[n];
		break;
	}
	return n;
}

bool tb_feed_cell(const tb_feed *f, const tb_cell *c, int n_layers, tb_cell *out)
{
	switch (f->how) {
	case TB_FEED_SAME:
		tb_cell_make_id(out, c->layer, f->tap);
		return true;
	case TB_FEED_PREV_BLOCK:
		if (c->layer <= 0)
			tb_cell_make_id(out, -1, TB_TAP_EMBED);
		else
			tb_cell_make_id(out, c->layer - 1, f->tap);
		return true;
	case TB_FEED_LAST_BLOCK:
		if (n_layers <= 0)
			return false;
		tb_cell_make_id(out, n_layers - 1, f->tap);
		return true;
	default:
		tb_cell_make_id(out, -1, f->tap);
		return true;
	}
}
