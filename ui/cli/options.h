/*
 * options: the command line of every mode (CONTRACT §1), parsed into one
 * struct.  Parsing never exits: it returns -1 with a message for the caller
 * to print as a usage error (exit 2).
 */
#ifndef TB_OPTIONS_H
#define TB_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "compare/compare.h"
#include "formats/tree.h"

typedef enum tb_mode { TB_MODE_TUI, TB_MODE_CHECK, TB_MODE_LS, TB_MODE_SUGGEST, TB_MODE_HELP, TB_MODE_VERSION,
	       TB_MODE_KEYS } tb_mode;

typedef struct tb_options {
	tb_mode mode;
	const char *paths[2]; /* REF CAND (ls: TREE in paths[0]) */
	int n_paths;
	tb_tolerance tol;
	const char *map_file;
	const char *rules_file;
	const char *tol_file;
	double origin_factor;
	bool features;        /* (check) print the target's feature values */
	bool allow_partial;   /* go on when coverage is poor */
	bool no_builtin_names; /* only the --map file names tensors */
	int heads, kv_heads;  /* 0: infer */
	bool json;
	bool history, no_history, watch;
	int threads;
	tb_open_opts open;
} tb_options;

int tb_options_parse(int argc, char **argv, tb_options *o, char *msg, size_t msg_size);
void tb_usage(FILE *out);

#endif
