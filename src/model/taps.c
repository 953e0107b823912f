#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/taps.h"

/* Sub-taps not listed here sort between the listed ones (rank 50) by name. */
const tb_tap_info tb_taps[] = {
	{"embed", TB_SCOPE_PRE, 0, NULL, "token embedding output (post-embed)", false},
	{"attn_norm", TB_SCOPE_LAYER, 100, NULL, "attention input norm (input_layernorm)", false},
	{"attn.q", TB_SCOPE_LAYER, 200, "attn", "query projection", false},
	{"attn.k", TB_SCOPE_LAYER, 201, "attn", "key projection", false},
	{"attn.v", TB_SCOPE_LAYER, 202, "attn", "value projection", false},
	{"attn.q_rope", TB_SCOPE_LAYER, 203, "attn", "query after RoPE", false},
	{"attn.k_rope", TB_SCOPE_LAYER, 204, "attn", "key after RoPE", false},
	{"attn.core", TB_SCOPE_LAYER, 280, "attn", "attention before the output projection (o_proj's input)", false},
	{"attn.o", TB_SCOPE_LAYER, 290, "attn", "attention output projection", true},
	{"attn.resid", TB_SCOPE_LAYER, 295, "attn", "residual stream after attention (the MLP block's input)", false},
	{"attn", TB_SCOPE_LAYER, 300, NULL, "attention output (post-attn)", false},
	{"mlp_norm", TB_SCOPE_LAYER, 400, NULL, "MLP input norm (post_attention_layernorm)", false},
	{"mlp.gate", TB_SCOPE_LAYER, 500, "mlp", "MLP gate projection", false},
	{"mlp.up", TB_SCOPE_LAYER, 501, "mlp", "MLP up projection", false},
	{"mlp.act", TB_SCOPE_LAYER, 502, "mlp", "MLP activation, gated (down_proj's input)", false},
	{"mlp.down", TB_SCOPE_LAYER, 590, "mlp", "MLP down projection", true},
	{"mlp", TB_SCOPE_LAYER, 600, NULL, "MLP output (post-mlp)", false},
	{"block", TB_SCOPE_LAYER, 700, NULL, "decoder layer output (post-block)", false},
	{"final_norm", TB_SCOPE_POST, 0, NULL, "final norm output", false},
	{"logits", TB_SCOPE_POST, 1, NULL, "lm_head output (logits)", false},
};
const size_t tb_n_taps = sizeof tb_taps / sizeof tb_taps[0];

#define FREE_SUBTAP_OFFSET 50 /* rank of attn.X / mlp.X after their parent group base */

const tb_tap_info *tb_tap_lookup(const char *tap)
{
	for (size_t i = 0; i < tb_n_taps; i++)
		if (!strcmp(tb_taps[i].name, tap))
			return &tb_taps[i];
	return NULL;
}

/* "attn" or "mlp" when tap is attn.X / mlp.X with a well-formed X. */
static const char *free_subtap_parent(const char *tap)
{
	const char *dot = strchr(tap, '.'), *s;

	if (!dot || dot[1] == '\0')
		return NULL;
	for (s = dot + 1; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return NULL;
	if (dot - tap == 4 && !strncmp(tap, "attn", 4))
		return "attn";
	if (dot - tap == 3 && !strncmp(tap, "mlp", 3))
		return "mlp";
	return NULL;
}

bool tb_tap_valid(const char *tap)
{
	return strlen(tap) < TB_TAP_LEN && (tb_tap_lookup(tap) || free_subtap_parent(tap));
}

bool tb_tap_is_model_level(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);

	return ti && ti->scope != TB_SCOPE_LAYER;
}

const char *tb_tap_parent(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);

	return ti ? ti->parent : free_subtap_parent(tap);
}

bool tb_tap_is_group_output(const char *tap)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);

	return ti && ti->group_output;
}

static void tap_key(const char *tap, tb_scope *scope, int *rank)
{
	const tb_tap_info *ti = tb_tap_lookup(tap);
	const char *parent;

	if (ti) {
		*scope = ti->scope;
		*rank = ti->rank;
		return;
	}
	parent = free_subtap_parent(tap);
	*scope = TB_SCOPE_LAYER;
	*rank = parent ? (!strcmp(parent, "attn") ? 200 : 500) + FREE_SUBTAP_OFFSET : 999;
}

int tb_cell_cmp(const tb_cell *a, const tb_cell *b)
{
	tb_scope sa, sb;
	int ra, rb;

	tap_key(a->tap, &sa, &ra);
	tap_key(b->tap, &sb, &rb);
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
	return a->layer == b->layer && !strcmp(a->tap, b->tap);
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
		out->layer = -1;
		snprintf(out->tap, sizeof out->tap, "%s", s);
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
	out->layer = (int)layer;
	snprintf(out->tap, sizeof out->tap, "%s", end + 1);
	return 0;
}

/* Who feeds whom.  mlp_norm reads the residual after attention, which is
 * not a canonical tap: the previous block and attn stand for it. */
static const struct {
	const char *tap;
	tb_feed from[TB_MAX_FEEDS];
} wiring[] = {
	{"attn_norm", {{"block", TB_FEED_PREV_BLOCK}}},
	{"attn", {{"attn_norm", TB_FEED_SAME}}},
	{"attn.", {{"attn_norm", TB_FEED_SAME}}},
	{"mlp_norm", {{"block", TB_FEED_PREV_BLOCK}, {"attn", TB_FEED_SAME}}},
	{"mlp", {{"mlp_norm", TB_FEED_SAME}}},
	{"mlp.", {{"mlp_norm", TB_FEED_SAME}}},
	{"block", {{"block", TB_FEED_PREV_BLOCK}, {"attn", TB_FEED_SAME}, {"mlp", TB_FEED_SAME}}},
	{"final_norm", {{"block", TB_FEED_LAST_BLOCK}}},
	{"logits", {{"final_norm", TB_FEED_MODEL}}},
};

int tb_tap_feeders(const char *tap, tb_feed *out)
{
	const char *parent = tb_tap_parent(tap);
	char group[8];
	int n = 0;

	if (parent) {
		snprintf(group, sizeof group, "%s.", parent);
		tap = group;
	}
	for (size_t i = 0; i < sizeof wiring / sizeof *wiring; i++) {
		if (strcmp(wiring[i].tap, tap) != 0)
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
		out->layer = c->layer;
		break;
	case TB_FEED_PREV_BLOCK:
		if (c->layer <= 0) {
			out->layer = -1;
			snprintf(out->tap, sizeof out->tap, "embed");
			return true;
		}
		out->layer = c->layer - 1;
		break;
	case TB_FEED_LAST_BLOCK:
		if (n_layers <= 0)
			return false;
		out->layer = n_layers - 1;
		break;
	default:
		out->layer = -1;
		break;
	}
	snprintf(out->tap, sizeof out->tap, "%s", f->tap);
	return true;
}
