/*
 * commands: one function per mode of the command line.  Each returns the
 * process exit code (tbisect(1) EXIT STATUS) and prints its own errors as
 * "tbisect: FILE: what is wrong".
 */
#ifndef TB_COMMANDS_H
#define TB_COMMANDS_H

#include "base/error.h"
#include "base/writefile.h"
#include "cli/options.h"
#include "run/run.h"

int tb_cmd_check(const tb_options *o);
int tb_cmd_ls(const tb_options *o);
int tb_cmd_suggest(const tb_options *o);
int tb_cmd_calibrate(const tb_options *o);
int tb_cmd_sketch(const tb_options *o);
int tb_cmd_tui(const tb_options *o);
int tb_cmd_mcp(const tb_options *o);
/* The key and command tables, one tab-separated row each, for the man page. */
int tb_cmd_keys(void);
/* The shell completion written from the option table: format "bash" or "tsv". */
int tb_cmd_completion(const char *format);

/* Print err as one line on stderr; returns TB_EXIT_BAD_INPUT. */
int tb_die(const tb_err *err);
/* Print err as a warning line on stderr. */
void tb_warn(const tb_err *err);
/* The comparison the options describe. */
void tb_run_opts_from(const tb_options *o, tb_run_opts *ro);

#endif
