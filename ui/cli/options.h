/*
 * options: the command line of every mode (tbisect(1) OPTIONS), parsed into one
 * struct.  One table of commands and one of options are the only place the
 * command line is written down: getopt's array, the usage text, the mode
 * checks and the shell completion (ui/cli/completion.c) all come from them.
 * Parsing never exits: it returns -1 with a message for the caller to print
 * as a usage error (exit 2).
 */
#ifndef TB_OPTIONS_H
#define TB_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "compare/compare.h"
#include "formats/tree.h"
#include "model/layout.h"

/* --shard may be given this many times. */
#define TB_MAX_SHARD_RULES 32

typedef enum tb_mode { TB_MODE_TUI, TB_MODE_CHECK, TB_MODE_LS, TB_MODE_SUGGEST, TB_MODE_CALIBRATE, TB_MODE_SKETCH,
	       TB_MODE_MCP,
	       TB_MODE_HELP,
	       TB_MODE_VERSION, TB_MODE_KEYS, TB_MODE_COMPLETION } tb_mode;

/* A set of modes, for the modes an option belongs to. */
#define TB_IN(mode) (1u << (mode))
#define TB_IN_ANY (TB_IN(TB_MODE_TUI) | TB_IN(TB_MODE_CHECK) | TB_IN(TB_MODE_LS) | TB_IN(TB_MODE_SUGGEST) | \
		   TB_IN(TB_MODE_CALIBRATE) | TB_IN(TB_MODE_SKETCH) | TB_IN(TB_MODE_MCP))

/* What an option's argument is: how it is completed. */
typedef enum tb_arg_kind {
	TB_ARG_NONE,   /* a flag, no argument */
	TB_ARG_NUMBER, /* nothing to offer */
	TB_ARG_FILE,
	TB_ARG_DTYPE,  /* a floating-point dtype name of .dtype_bytes bytes */
	TB_ARG_FORMAT, /* one of the formats tb_cmd_completion writes */
} tb_arg_kind;

typedef struct tb_option_info {
	const char *name;     /* the long name, without "--" */
	const char *metavar;  /* the argument in the usage text; NULL with TB_ARG_NONE */
	tb_arg_kind arg;
	unsigned modes;       /* TB_IN() of the modes that accept it */
	tb_mode action;       /* TB_MODE_TUI: an ordinary option; else it selects this mode and ends the parse */
	size_t dtype_bytes;   /* TB_ARG_DTYPE: the element size the dtype must have */
	const char *help;
} tb_option_info;

typedef struct tb_command_info {
	const char *word;      /* what follows "tbisect"; NULL for the default mode */
	const char *label;     /* how help text and mode checks name the mode */
	tb_mode mode;
	const char *args;      /* the operands, as the usage text shows them */
	int n_paths;           /* how many operands it takes */
	const char *bad_paths; /* the usage error when there are not n_paths */
	const char *help;
} tb_command_info;

/* The commands, the default mode (the interactive view) first. */
extern const tb_command_info tb_commands[];
extern const size_t tb_n_commands;
/* The options, in the order the usage text lists them. */
extern const tb_option_info tb_option_infos[];
extern const size_t tb_n_option_infos;

typedef struct tb_options {
	tb_mode mode;
	const char *paths[2]; /* REF CAND (ls: TREE in paths[0]) */
	int n_paths;
	const char *action_arg; /* the argument of the option that chose the mode (--completion SHELL) */
	tb_tolerance tol;
	const char *map_file;
	const char *rules_file;
	const char *tol_file;
	double origin_factor;
	double flip_margin;
	bool features;        /* (check) print the target's feature values */
	bool allow_partial;   /* go on when coverage is poor */
	bool no_builtin_names; /* only the --map file names tensors */
	int heads, kv_heads;  /* 0: infer */
	const char *tower;    /* --tower NAME: a tower's grid, or NULL for the text decoder's */
	bool json, markdown;
	const char *html_file; /* (check) --html FILE, or NULL */
	const char *output;    /* (calibrate, sketch) -o FILE */
	uint64_t seed;         /* (sketch) --seed N */
	int rank, ranks;       /* (sketch) --rank K/N; ranks 0: the whole tree */
	char **merge_paths;    /* (sketch merge) the parts, n_merge of them */
	int n_merge;
	double factor;         /* (calibrate) --factor F over the observed noise */
	bool html_timestamp;
	int argc;             /* the command line as given, for reports that quote it */
	char **argv;
	bool history, no_history, watch, no_mouse;
	bool history_reset;   /* (check) forget the pair's passes first */
	bool skill;           /* (mcp) print the porting skill */
	int threads;
	tb_open_opts open;
	tb_layout_opts layout;  /* --step, --steps, --shard (shards points into shards[]) */
	tb_shard_rule shards[TB_MAX_SHARD_RULES];
} tb_options;

int tb_options_parse(int argc, char **argv, tb_options *o, char *msg, size_t msg_size);
void tb_usage(FILE *out);
/* The labels of the commands whose modes are in set, joined: as prose for
 * a usage error ("the interactive view", "'check' and 'ls'"), else as a
 * list ("check, ls"). */
void tb_modes_join(unsigned set, bool prose, char *buf, size_t size);

#endif
