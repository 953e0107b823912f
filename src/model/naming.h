/*
 * naming: raw tensor name -> cell (layer, tap).
 *
 * The built-in conventions (tbisect-dumps(5) NAMING: HF module paths, GPT-2, Meta,
 * canonical names, MaxText golden records) are a table of patterns in
 * naming.c.  A user map file (JSON, POSIX extended regexes) is tried first.
 * Before matching, trailing ".output", ".out" and ":0" are dropped and '/'
 * reads as '.'; when the whole name does not map, the name is retried with
 * each dot-bounded piece of the prefix its tree shares (tb_common_prefix)
 * cut off.  Knows nothing of files.
 *
 * A tb_namer is created once and is read-only afterwards (safe to share).
 */
#ifndef TB_NAMING_H
#define TB_NAMING_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "model/taps.h"

typedef struct tb_namer tb_namer;

/* map_path may be NULL (built-in conventions only). */
int tb_namer_new(const char *map_path, tb_namer **out, tb_err *err);
/* The same for a map file already read (from standard input); name is
 * what errors call it. */
int tb_namer_new_text(const char *name, const char *text, size_t len, tb_namer **out, tb_err *err);
void tb_namer_free(tb_namer *namer);
/* Whether the built-in conventions name tensors (they do unless turned off
 * right after tb_namer_new, to test a map on its own). */
void tb_namer_use_builtins(tb_namer *namer, bool on);

/* Map a raw name.  shared: the prefix every name of its tree shares (may
 * be NULL or "").  rule, when not NULL, receives which rule matched
 * ("model.layers.{N}.self_attn", "map rule 2"). */
bool tb_namer_map(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, char *rule,
		  size_t rule_size);

/* As tb_namer_map; *user_rule: the index of the map file's rule that
 * matched, -1 for a built-in convention (or no match). */
bool tb_namer_map_rule(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, int *user_rule);
/* As tb_namer_map_rule, for a tensor whose file says what it computes:
 * role (tb_tensor.role, a canonical name) is what the built-in
 * conventions map, "" maps nowhere (a graph internal), and the map file's
 * rules still see the raw name first; a NULL role is the raw name's
 * lookup.  user_rule and rule may be NULL. */
bool tb_namer_map_role(const tb_namer *namer, const char *raw, const char *role, const char *shared, tb_cell *cell,
		       int *user_rule, char *rule, size_t rule_size);

/* The map file's rules: how many, each one's "match" as written, the file. */
size_t tb_namer_n_rules(const tb_namer *namer);
const char *tb_namer_rule_pattern(const tb_namer *namer, size_t i);
const char *tb_namer_path(const tb_namer *namer);

/* M of a hidden_states[M] / hidden_states.M name, or -1. */
int tb_hidden_states_index(const char *raw);

/* Is this raw name the model's input token ids ("tokens", "input_ids",
 * "token_ids", "prompt_tokens", possibly under a prefix)?  They are no cell: the sanity
 * checks read them. */
bool tb_name_is_token_ids(const char *raw);

/* Is this raw name something dumpers record beside the cells, which is
 * no cell and counts in no coverage: what the model was fed (token ids,
 * positions, masks, rotary tables), a module's recorded inputs, a decoder
 * layer's (hidden, residual) pair, a graph's internals (an ONNX op's
 * output inside a module, "Reshape_3_output_0"; TensorRT's unnamed
 * layers)? */
bool tb_name_is_aux(const char *raw);

/* Is this the final norm's residual sum (vLLM, SGLang: model.norm's
 * output item 1) or input (HF's model debugger), i.e. the last layer's
 * block output?  Pairing gives it
 * the block cell of its tree's last layer. */
bool tb_name_is_last_block(const char *raw);

/* The tower a raw name belongs to ("vision", "audio": a multimodal
 * model's encoders, the projector into the text decoder being the vision
 * tower's), or NULL for the text decoder's. */
const char *tb_name_tower(const char *raw);

/* Is name one of the towers tb_name_tower gives? */
bool tb_tower_known(const char *name);
/* The towers tb_name_tower gives, each once, in the table's order (at
 * most max into names); returns how many. */
size_t tb_tower_names(const char **names, size_t max);

/* A tensor's cell in the grid of a tower: the map file's rules on the raw
 * name, else the tower's conventions (tb_tower_conventions), then the
 * others, on the name with the tower's prefix cut.  False for a tensor of
 * another tower or of the text decoder. */
bool tb_namer_map_tower(const tb_namer *namer, const char *raw, const char *tower, tb_cell *cell, int *user_rule);

/* MaxText's DeepSeek decoder layers: 1 when raw is under dense_layers_K,
 * 2 under moe_layers_K (numbered from 0 again after the dense ones), 0
 * otherwise; *k: K.  The conventions read both as layers_K; pairing adds
 * the number of dense layers to an MoE layer's. */
int tb_name_deepseek_layer(const char *raw, long *k);

/* The axis of a scan-stacked name ({S}) that holds its layers: 0 (MaxText's
 * scanned layers), or 1 for a router replay's [tokens, layers, k]. */
int tb_name_layer_axis(const char *raw);

/* Does this raw name hold the last position only, its position axis
 * dropped (modular's debug-model dumper: last_logits, [vocab])?  Pairing
 * compares it with the other side's last position. */
bool tb_name_is_last_position(const char *raw);

/* The longest prefix ending in '.' shared by all names ("" when none). */
void tb_common_prefix(const char *const *names, size_t n, char *buf, size_t size);

/* The built-in patterns, for `tbisect ls --conventions` and the man page. */
typedef struct tb_convention {
	const char *pattern; /* {N}: layer number; {M}: layer number + 1 (hidden_states[M]
			      * is layer M-1's output); {T}: a canonical tap; {*}: any
			      * rest of the name (a file stem's model name) */
	const char *tap;     /* tap it gives, or NULL for the {T} capture */
} tb_convention;
extern const tb_convention tb_conventions[];
extern const size_t tb_n_conventions;
/* A tower's own rows, on the name with the tower's prefix cut. */
extern const tb_convention *const tb_tower_conventions;
extern const size_t tb_n_tower_conventions;

#endif
