#include "config.h"

#include <stdio.h>
#include <string.h>

#include "demobugs.h"
#include "model/taps.h"

const demo_bug_info demo_bugs[DEMO_N_BUGS] = {
#define DEMO_BUG_INFO(id, name, cause, layer, tap, sub, replay, shows, what) {name, cause, layer, tap, sub, replay, shows, what},
	DEMO_BUG_LIST(DEMO_BUG_INFO)
#undef DEMO_BUG_INFO
};

int demo_bugs_parse(const char *list, demo_bugset *out, char *msg, size_t size)
{
	const char *p = list;

	*out = 0;
	if (!strcmp(list, "none"))
		return 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		int found = -1;
		for (int i = 0; i < DEMO_N_BUGS; i++)
			if (strlen(demo_bugs[i].name) == len && !strncmp(demo_bugs[i].name, p, len))
				found = i;
		if (found < 0) {
			snprintf(msg, size, "unknown bug '%.*s' (mkdemo --list shows them)", (int)len, p);
			return -1;
		}
		*out |= (demo_bugset)1 << found;
		p += len;
		if (*p == ',' && *++p == '\0') {
			snprintf(msg, size, "bug list '%s' ends with a comma", list);
			return -1;
		}
	}
	if (!*out) {
		snprintf(msg, size, "empty bug list");
		return -1;
	}
	return 0;
}

void demo_bugs_format(demo_bugset set, char *buf, size_t size)
{
	size_t len = 0;

	snprintf(buf, size, "none");
	for (int i = 0; i < DEMO_N_BUGS; i++) {
		if (!((set >> i) & 1u))
			continue;
		len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s", len ? "," : "", demo_bugs[i].name);
	}
}

int demo_prefill(int seq, int prefill)
{
	return prefill > 0 ? prefill : seq / 2;
}

static bool visible(const demo_bug_info *b, const demo_expect_ctx *ctx)
{
	switch (b->shows) {
	case DEMO_SHOWS_PAST_WINDOW: return ctx->seq > ctx->window;
	case DEMO_SHOWS_PAST_100: return ctx->seq > 100;
	case DEMO_SHOWS_DENSE: return !ctx->moe;
	case DEMO_SHOWS_MOE: return ctx->moe;
	case DEMO_SHOWS_PAST_PREFILL: return ctx->seq > demo_prefill(ctx->seq, ctx->prefill);
	case DEMO_SHOWS_PAST_ORIG: return ctx->seq > DEMO_ROPE_ORIG;
	case DEMO_SHOWS_ALWAYS: break;
	}
	return true;
}

void demo_expect(demo_bugset set, const demo_expect_ctx *ctx, char *buf, size_t size)
{
	tb_cell first = {.layer = 0}, c;
	bool any = false, close = false;

	for (int i = 0; i < DEMO_N_BUGS; i++) {
		const demo_bug_info *b = &demo_bugs[i];
		if (!((set >> i) & 1u) || !visible(b, ctx))
			continue;
		if (!strcmp(b->tap, "close")) {
			close = true;
			continue;
		}
		const char *tap = ctx->replay && b->replay_tap ? b->replay_tap
				  : (ctx->sub || ctx->replay) && b->sub_tap ? b->sub_tap
									: b->tap;
		tb_cell_make(&c, b->layer == DEMO_MID ? ctx->layers / 2 : b->layer == DEMO_GLOBAL ? ctx->layer_types : b->layer,
			     tap);
		if (!any || tb_cell_cmp(&c, &first) < 0)
			first = c;
		any = true;
	}
	if (any)
		tb_cell_name(&first, buf, size);
	else
		snprintf(buf, size, "%s", close ? "close" : "match");
}
