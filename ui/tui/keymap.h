/*
 * keymap: every action of the interactive view, in one X-macro list (name
 * and help text), and the key bindings as a second small table.  The enum,
 * the help screen and the man page's key list all come from these two
 * tables; screens interpret an action, they never look at raw keys.
 */
#ifndef TB_KEYMAP_H
#define TB_KEYMAP_H

#include <stddef.h>

/* X(ID, "name", "what it does") */
#define TB_ACTIONS(X)                                                                         \
	X(UP, "up", "move up a row; detail, help: scroll up")                                 \
	X(DOWN, "down", "move down a row; detail, help: scroll down")                         \
	X(LEFT, "left", "move left a column; detail: previous position")                      \
	X(RIGHT, "right", "move right a column; detail: next position")                       \
	X(PAGE_LEFT, "page-left", "left one page of columns; detail: of positions in the strip") \
	X(PAGE_RIGHT, "page-right", "right one page of columns; detail: of positions in the strip") \
	X(GOTO_POS, "go-to-position", "detail: select a position by number (opens the prompt at :pos)") \
	X(PAGE_UP, "page-up", "up one page")                                                  \
	X(PAGE_DOWN, "page-down", "down one page")                                            \
	X(TOP, "top", "first row (embed); detail: top")                                       \
	X(BOTTOM, "bottom", "last row (logits); detail: bottom")                              \
	X(FIRST_DIV, "first-divergence", "jump to the first divergence; detail: first bad position") \
	X(NEXT_DIV, "next-diverged", "next diverged cell in forward order; after a / search: next match; detail: next bad position") \
	X(PREV_DIV, "prev-diverged", "previous diverged cell; after a / search: previous match; detail: previous bad position") \
	X(METRIC, "cycle-metric", "cycle the metric: rel_l2, cosine, max_abs, norm_ratio, allclose_frac, added") \
	X(FOLD, "fold", "fold or unfold the sub-tap columns (attn.q, mlp.gate, ...)")         \
	X(OPEN, "open", "open the selected cell: statistics, positions, heads, worst elements") \
	X(CAUSES, "causes", "show the causes pane (ranked causes, why, where to look)")       \
	X(REPLAY, "replay", "detail: replay the cell's op from the dumped inputs under each hypothesis") \
	X(UNPAIRED, "unpaired", "list the tensors that did not pair, both trees side by side, and why") \
	X(SUGGEST, "suggest-map", "suggest map rules for the names that did not pair (y applies them)") \
	X(CONFIRM, "confirm", "apply what the screen proposes (the suggested map)")             \
	X(HISTORY, "history", "show the passes: each first divergence and how it moved")   \
	X(RELOAD, "reload", "compare both trees again: a new pass (--watch: on change)")  \
	X(PREV_STEP, "prev-step", "compare the forward step before (a dump of prefill and decode steps)") \
	X(NEXT_STEP, "next-step", "compare the next forward step (a dump of prefill and decode steps)") \
	X(TOWER, "tower", "show the next grid: the text decoder's, then each tower both trees hold (vision, audio)") \
	X(HELP, "help", "show this help")                                                     \
	X(PROMPT, "prompt", "open the command prompt (Tab completes, Up/Down history)")      \
	X(SEARCH, "search", "search cell and tensor names; empty: next match")                \
	X(REDRAW, "redraw", "redraw the screen")                                              \
	X(SUSPEND, "suspend", "suspend to the shell (fg resumes, the screen restored)")         \
	X(BACK, "back", "back to the previous screen; heatmap: end the / search")                                        \
	X(QUIT, "quit", "quit; in a sub-screen: back")                                        \
	X(INTERRUPT, "interrupt", "quit from any screen; in the prompt: cancel the line") \
	X(CLICK, "select", "select the cell or position under the mouse; the wheel scrolls")

typedef enum tb_action {
	TB_ACT_NONE,
#define X(id, name, help) TB_ACT_##id,
	TB_ACTIONS(X)
#undef X
	TB_ACT_COUNT
} tb_action;

typedef struct tb_action_info {
	const char *name;
	const char *help;
} tb_action_info;

/* Indexed by tb_action (entry 0 is TB_ACT_NONE). */
extern const tb_action_info tb_action_infos[TB_ACT_COUNT];

typedef struct tb_binding {
	int key;          /* a curses key code or a character */
	tb_action action;
} tb_binding;

extern const tb_binding tb_bindings[];
extern const size_t tb_n_bindings;

/* The action bound to key, or TB_ACT_NONE. */
tb_action tb_key_action(int key);
/* "Up", "PgDn", "Enter", "Ctrl-C", "j", "click" */
const char *tb_key_label(int key, char *buf, size_t size);
/* The key a label names (tb_key_label's inverse), or -1. */
int tb_key_parse(const char *name);
/* All keys of an action, in the table's order, joined by spaces ("k Up"). */
void tb_action_keys(tb_action a, char *buf, size_t size);

#endif
