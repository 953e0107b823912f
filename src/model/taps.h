/*
 * taps: the one table of canonical taps (tbisect(1) DESCRIPTION) and cells.
 *
 * A cell is (layer, tap): layer -1 for model-level taps (embed, final_norm,
 * logits).  The tap table gives each tap its id, its scope, its place in
 * forward order, a human label and, for sub-taps such as attn.q or mlp.gate,
 * the tap they refine; code compares taps by id, not by name.  Naming,
 * pairing, the reports, the heatmap columns and the man page all read this
 * table; nothing else lists taps.  Pure data and pure functions.
 */
#ifndef TB_TAPS_H
#define TB_TAPS_H

#include <stdbool.h>
#include <stddef.h>

#define TB_TAP_LEN 64

/* The layer of a name that holds every layer, layer axis first (pairing
 * cuts it into one cell per layer); never the layer of a paired cell. */
#define TB_LAYER_STACKED (-2)

typedef enum tb_scope {
	TB_SCOPE_PRE,   /* before the first layer: embed */
	TB_SCOPE_LAYER, /* inside every layer */
	TB_SCOPE_POST,  /* after the last layer: final_norm, logits */
} tb_scope;

/* The canonical taps and known sub-taps, in forward order:
 * X(ID, name, scope, rank in its scope, parent ID or NONE, label for
 * people, group output: the sub-tap's output is its parent's).  Sub-taps
 * not listed here sort by name: attn.X between the listed ones of
 * attention (rank 250), mlp.X after the listed ones of the MLP (598). */
#define TB_TAP_TABLE(X)                                                                                            \
	X(EMBED, "embed", TB_SCOPE_PRE, 0, NONE, "token embedding output (post-embed)", false)                      \
	X(ATTN_NORM, "attn_norm", TB_SCOPE_LAYER, 100, NONE, "attention input norm (input_layernorm)", false)      \
	X(ATTN_QKV, "attn.qkv", TB_SCOPE_LAYER, 199, ATTN, "fused query, key and value projection (qkv_proj)", false) \
	X(ATTN_Q, "attn.q", TB_SCOPE_LAYER, 200, ATTN, "query projection", false)                                  \
	X(ATTN_K, "attn.k", TB_SCOPE_LAYER, 201, ATTN, "key projection", false)                                    \
	X(ATTN_V, "attn.v", TB_SCOPE_LAYER, 202, ATTN, "value projection", false)                                  \
	X(ATTN_Q_ROPE, "attn.q_rope", TB_SCOPE_LAYER, 203, ATTN, "query after RoPE", false)                         \
	X(ATTN_K_ROPE, "attn.k_rope", TB_SCOPE_LAYER, 204, ATTN, "key after RoPE", false)                           \
	X(ATTN_CORE, "attn.core", TB_SCOPE_LAYER, 280, ATTN, "attention before the output projection (o_proj's input)", \
	  false)                                                                                                   \
	X(ATTN_O, "attn.o", TB_SCOPE_LAYER, 290, ATTN, "attention output projection", true)                        \
	X(ATTN_RESID, "attn.resid", TB_SCOPE_LAYER, 295, ATTN, "residual stream after attention (the MLP's input)", \
	  false)                                                                                                   \
	X(ATTN, "attn", TB_SCOPE_LAYER, 300, NONE, "attention output (post-attn)", false)                          \
	X(MLP_NORM, "mlp_norm", TB_SCOPE_LAYER, 400, NONE, "MLP input norm (post_attention_layernorm)", false)     \
	X(MLP_ROUTER, "mlp.router", TB_SCOPE_LAYER, 480, MLP, "MoE router scores before the score function", false)  \
	X(MLP_ROUTER_PROBS, "mlp.router_probs", TB_SCOPE_LAYER, 481, MLP, "MoE router scores after the score function", \
	  false)                                                                                                   \
	X(MLP_TOPK_IDS, "mlp.topk_ids", TB_SCOPE_LAYER, 482, MLP, "MoE selected experts (ids)", false)             \
	X(MLP_TOPK_WEIGHTS, "mlp.topk_weights", TB_SCOPE_LAYER, 483, MLP, "MoE combine weights of the selected experts", \
	  false)                                                                                                   \
	X(MLP_GATE_UP, "mlp.gate_up", TB_SCOPE_LAYER, 499, MLP, "fused gate and up projection (gate_up_proj)", false) \
	X(MLP_GATE, "mlp.gate", TB_SCOPE_LAYER, 500, MLP, "MLP gate projection", false)                            \
	X(MLP_UP, "mlp.up", TB_SCOPE_LAYER, 501, MLP, "MLP up projection", false)                                  \
	X(MLP_ACT, "mlp.act", TB_SCOPE_LAYER, 502, MLP, "MLP activation, gated (down_proj's input)", false)         \
	X(MLP_DOWN, "mlp.down", TB_SCOPE_LAYER, 590, MLP, "MLP down projection", true)                             \
	X(MLP_EXPERTS, "mlp.experts", TB_SCOPE_LAYER, 592, MLP, "MoE routed experts' weighted sum", false)        \
	X(MLP_SHARED, "mlp.shared", TB_SCOPE_LAYER, 594, MLP, "MoE shared experts' output, after their gate", false) \
	X(MLP, "mlp", TB_SCOPE_LAYER, 600, NONE, "MLP output (post-mlp)", false)                                   \
	X(BLOCK, "block", TB_SCOPE_LAYER, 700, NONE, "decoder layer output (post-block)", false)                   \
	X(FINAL_NORM, "final_norm", TB_SCOPE_POST, 0, NONE, "final norm output", false)                            \
	X(LOGITS, "logits", TB_SCOPE_POST, 1, NONE, "lm_head output (logits)", false)

/* A tap's identity: TB_TAP_NONE (zero) for no tap or an invalid name, one
 * id per table entry, TB_TAP_OTHER for a free-form attn.X / mlp.X whose
 * name tells it apart from the others. */
typedef enum tb_tap_id {
	TB_TAP_NONE,
#define TB_TAP_ENUM(id, name, scope, rank, parent, label, group_output) TB_TAP_##id,
	TB_TAP_TABLE(TB_TAP_ENUM)
#undef TB_TAP_ENUM
	TB_TAP_OTHER,
} tb_tap_id;

/* Build cells with tb_cell_make (or tb_cell_parse, the namer, tb_feed_cell)
 * so that id matches tap; {-1, ""} is "no cell" (id TB_TAP_NONE). */
typedef struct tb_cell {
	int layer;            /* -1 for model-level taps */
	char tap[TB_TAP_LEN]; /* canonical tap name */
	tb_tap_id id;         /* the tap's id, from tap */
} tb_cell;

typedef struct tb_tap_info {
	tb_tap_id id;
	const char *name;
	tb_scope scope;
	int rank;           /* order inside its scope */
	tb_tap_id parent;   /* for sub-taps: TB_TAP_ATTN or TB_TAP_MLP; else TB_TAP_NONE */
	const char *label;  /* what the tensor is, for people */
	bool group_output;  /* the sub-tap's output is its parent's (attn.o, mlp.down) */
} tb_tap_info;

/* The table entries, in forward order: tb_taps[i].id == i + 1. */
extern const tb_tap_info tb_taps[];
extern const size_t tb_n_taps;

/* The projections a fused tap joins side by side on its last axis, in
 * that order (attn.qkv: attn.q, attn.k, attn.v; mlp.gate_up: mlp.gate,
 * mlp.up) into parts[TB_MAX_PARTS]; how many, 0 for a tap that is none. */
#define TB_MAX_PARTS 3
int tb_tap_parts(tb_tap_id id, tb_tap_id *parts);
/* "[q]" for attn.q: what a part's view of a fused tensor adds to its name. */
void tb_tap_part_tag(tb_tap_id part, char *buf, size_t size);

/* Table entry for a tap, or NULL for a free-form sub-tap (attn.X, mlp.X)
 * or an unknown name. */
const tb_tap_info *tb_tap_lookup(const char *tap);
/* Table entry of an id, or NULL for TB_TAP_NONE and TB_TAP_OTHER. */
const tb_tap_info *tb_tap_info_of(tb_tap_id id);
/* The id of a tap name: TB_TAP_NONE when not tb_tap_valid. */
tb_tap_id tb_tap_id_of(const char *tap);
/* Canonical tap, known sub-tap, or attn.X / mlp.X with X in [a-z0-9_]. */
bool tb_tap_valid(const char *tap);
/* Model-level taps have no layer. */
bool tb_tap_is_model_level(const char *tap);
/* "attn" for "attn.q", NULL for top-level taps. */
const char *tb_tap_parent(const char *tap);

/* The forward graph: which cells feed a tap (doc/diagnosis.md,
 * "Where the error is born").  layer_delta is relative to the cell's layer;
 * TB_FEED_PREV_BLOCK means the previous layer's block, or embed for layer 0;
 * TB_FEED_LAST_BLOCK the last layer's block (for final_norm). */
enum { TB_FEED_SAME = 0, TB_FEED_PREV_BLOCK = 1, TB_FEED_LAST_BLOCK = 2, TB_FEED_MODEL = 3 };
typedef struct tb_feed {
	tb_tap_id tap;
	int how; /* TB_FEED_* */
} tb_feed;
#define TB_MAX_FEEDS 3
/* The feeders of a cell's tap (attn.X and mlp.X are fed as their group
 * is); returns how many (0 for embed). */
int tb_cell_feeders(const tb_cell *c, tb_feed *out);
/* Resolve a feeder of cell c to a concrete cell; false when it has none
 * (previous block of layer 0 is embed; last block needs n_layers). */
bool tb_feed_cell(const tb_feed *f, const tb_cell *c, int n_layers, tb_cell *out);

/* Cell (layer, tap) with the tap's id; a tap too long for a cell is cut
 * and gets TB_TAP_NONE, as tb_tap_valid refuses it. */
void tb_cell_make(tb_cell *c, int layer, const char *tap);
/* Cell (layer, id) for a table id. */
void tb_cell_make_id(tb_cell *c, int layer, tb_tap_id id);
/* The group a cell's tap refines: TB_TAP_ATTN for attn.q and attn.X,
 * TB_TAP_MLP for mlp.X, TB_TAP_NONE for a top-level tap. */
tb_tap_id tb_cell_parent(const tb_cell *c);
/* Forward order: embed, L0 ..., L1 ..., final_norm, logits. */
int tb_cell_cmp(const tb_cell *a, const tb_cell *b);
/* Longest cell name with its NUL: "L", an int, ".", a tap. */
#define TB_CELL_NAME_MAX (1 + 11 + 1 + TB_TAP_LEN)
/* "L3.attn", "embed" */
void tb_cell_name(const tb_cell *c, char *buf, size_t size);
/* Parse "L3.attn", "3.attn", "layers.3.attn", "embed"; 0 or -1. */
int tb_cell_parse(const char *s, tb_cell *out);
/* Same layer and tap: by id for table taps, by name for attn.X / mlp.X. */
bool tb_cell_eq(const tb_cell *a, const tb_cell *b);

#endif
