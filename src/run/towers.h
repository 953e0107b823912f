/*
 * towers: the towers of a multimodal model (vision, audio: tb_name_tower)
 * compared beside its text decoder.  `check` compares the text grid and
 * reports each tower both trees hold with its own verdict, cell counts
 * and first divergence; `--tower NAME` shows one tower's whole grid.
 */
#ifndef TB_TOWERS_H
#define TB_TOWERS_H

#include <stddef.h>

#include <stdbool.h>

#include "compare/compare.h"
#include "model/taps.h"

struct tb_run_config;
struct tb_run;

#define TB_MAX_TOWERS 4

typedef struct tb_tower_summary {
	const char *name;       /* "vision", "audio" (static) */
	bool failed;            /* it could not be compared: error says why */
	char error[256];
	tb_status verdict;
	size_t cells, count[TB_ST_COUNT];
	char first[TB_CELL_NAME_MAX]; /* its first divergence, "" when none */
} tb_tower_summary;

/* Compare each tower both of text's trees hold (text: a finished run of
 * the text grid, cfg its configuration), with cfg's options and the
 * tower's grid, recording no pass.  Returns how many went into out (at
 * most max); a tower that fails to compare is summarised as failed. */
size_t tb_towers_compare(const struct tb_run_config *cfg, const struct tb_run *text, tb_tower_summary *out,
			 size_t max);

/* "vision: 11 cells (11 match): match", or "...: diverged at L1.attn". */
void tb_tower_text(const tb_tower_summary *s, char *buf, size_t size);

#endif
