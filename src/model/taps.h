/*
 * taps: the one table of canonical taps (CONTRACT §4) and cells.
 *
 * A cell is (layer, tap): layer -1 for model-level taps (embed, final_norm,
 * logits).  The tap table gives each tap its scope, its place in forward
 * order, a human label and, for sub-taps such as attn.q or mlp.gate, the tap
 * they refine.  Naming, pairing, the reports, the heatmap columns and the
 * man page all read this table; nothing else lists taps.  Pure data and
 * pure functions.
 */
#ifndef TB_TAPS_H
#define TB_TAPS_H

#include <stdbool.h>
#include <stddef.h>

#define TB_TAP_LEN 64

/* The layer of a name that holds every layer, layer axis first (pairing
 * cuts it into one cell per layer); never the layer of a paired cell. */
#define TB_LAYER_STACKED (-2)

typedef struct tb_cell {
	int layer;            /* -1 for model-level taps */
	char tap[TB_TAP_LEN]; /* canonical tap name */
} tb_cell;

typedef enum tb_scope {
	TB_SCOPE_PRE,   /* before the first layer: embed */
	TB_SCOPE_LAYER, /* inside every layer */
	TB_SCOPE_POST,  /* after the last layer: final_norm, logits */
} tb_scope;

typedef struct tb_tap_info {
	const char *name;
	tb_scope scope;
	int rank;           /* order inside its scope */
	const char *parent; /* for sub-taps: "attn" or "mlp"; else NULL */
	const char *label;  /* what the tensor is, for people */
	bool group_output;  /* the sub-tap's output is its parent's (attn.o, mlp.down) */
} tb_tap_info;

/* The canonical taps and known sub-taps, in forward order. */
extern const tb_tap_info tb_taps[];
extern const size_t tb_n_taps;

/* Table entry for a tap, or NULL for a free-form sub-tap (attn.X, mlp.X)
 * or an unknown name. */
const tb_tap_info *tb_tap_lookup(const char *tap);
/* Canonical tap, known sub-tap, or attn.X / mlp.X with X in [a-z0-9_]. */
bool tb_tap_valid(const char *tap);
/* Model-level taps have no layer. */
bool tb_tap_is_model_level(const char *tap);
/* "attn" for "attn.q", NULL for top-level taps. */
const char *tb_tap_parent(const char *tap);
/* The last op of its group, whose output is the group's (attn.o, mlp.down). */
bool tb_tap_is_group_output(const char *tap);

/* The forward graph: which cells feed a tap (CONTRACT §2 wiring, issue
 * "where the error is born").  layer_delta is relative to the cell's layer;
 * TB_FEED_PREV_BLOCK means the previous layer's block, or embed for layer 0;
 * TB_FEED_LAST_BLOCK the last layer's block (for final_norm). */
enum { TB_FEED_SAME = 0, TB_FEED_PREV_BLOCK = 1, TB_FEED_LAST_BLOCK = 2, TB_FEED_MODEL = 3 };
typedef struct tb_feed {
	const char *tap;
	int how; /* TB_FEED_* */
} tb_feed;
#define TB_MAX_FEEDS 3
/* The feeders of a tap (attn.X and mlp.X use their group's row); returns
 * how many (0 for embed). */
int tb_tap_feeders(const char *tap, tb_feed *out);
/* Resolve a feeder of cell c to a concrete cell; false when it has none
 * (previous block of layer 0 is embed; last block needs n_layers). */
bool tb_feed_cell(const tb_feed *f, const tb_cell *c, int n_layers, tb_cell *out);

/* Forward order: embed, L0 ..., L1 ..., final_norm, logits. */
int tb_cell_cmp(const tb_cell *a, const tb_cell *b);
/* Room for any cell's name: "L", a layer number, ".", a tap. */
#define TB_CELL_NAME_MAX (TB_TAP_LEN + 16)

/* "L3.attn", "embed" */
void tb_cell_name(const tb_cell *c, char *buf, size_t size);
/* Parse "L3.attn", "3.attn", "layers.3.attn", "embed"; 0 or -1. */
int tb_cell_parse(const char *s, tb_cell *out);
bool tb_cell_eq(const tb_cell *a, const tb_cell *b);

#endif
