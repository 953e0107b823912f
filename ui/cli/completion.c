/*
 * Shell completion, written from the command and option tables of
 * ui/cli/options.c so that it offers what the parser accepts: a command at
 * position 1, the options of the mode being typed, and for an option's
 * argument files, dtype names or formats.  The build installs the bash
 * script; tsv prints the same tables for other shells and for the tests.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "tensor/dtype.h"

typedef struct completion_format {
	const char *name;
	void (*write)(FILE *out);
} completion_format;

static void write_bash(FILE *out);
static void write_tsv(FILE *out);

/* What --completion writes. */
static const completion_format formats[] = {
	{"bash", write_bash},
	{"tsv", write_tsv},
};
static const size_t n_formats = sizeof formats / sizeof formats[0];

/* Append word to the space-separated list in buf. */
static void add_word(char *buf, size_t size, const char *word)
{
	size_t len = strlen(buf);

	/* A word that does not fit is left out whole, not cut. */
	if ((size_t)snprintf(buf + len, size - len, "%s%s", len ? " " : "", word) >= size - len)
		buf[len] = '\0';
}

/* The words an option's argument completes from ("" when it takes none or
 * any text): the dtypes of its size, or the formats of --completion. */
static void value_words(const tb_option_info *opt, char *buf, size_t size)
{
	buf[0] = '\0';
	if (opt->arg == TB_ARG_DTYPE) {
		/* Raw void data stands for the floats numpy has no dtype for; the
		 * integer types of that size are accepted but never meant. */
		for (int dt = 0; dt < TB_DT_COUNT; dt++)
			if (tb_dtype_size((tb_dtype)dt) == opt->dtype_bytes && tb_dtype_is_float((tb_dtype)dt))
				add_word(buf, size, tb_dtype_name((tb_dtype)dt));
	} else if (opt->arg == TB_ARG_FORMAT) {
		for (size_t i = 0; i < n_formats; i++)
			add_word(buf, size, formats[i].name);
	}
}

/* The "--a | --b" pattern of the options whose argument is of kind arg. */
static void bash_pattern(tb_arg_kind arg, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < tb_n_option_infos && len < size; i++) {
		if (tb_option_infos[i].arg != arg)
			continue;
		int w = snprintf(buf + len, size - len, "%s--%s", len ? " | " : "", tb_option_infos[i].name);
		len += w > 0 ? (size_t)w : 0;
	}
}

/* The case arm of one command: the options its mode accepts. */
static void bash_mode_arm(FILE *out, const tb_command_info *c, const char *pattern)
{
	char words[2048] = "", opt[64];

	for (size_t i = 0; i < tb_n_option_infos; i++) {
		if (tb_option_infos[i].modes & TB_IN(c->mode)) {
			snprintf(opt, sizeof opt, "--%s", tb_option_infos[i].name);
			add_word(words, sizeof words, opt);
		}
	}
	fprintf(out, "\t\t%s) words='%s' ;;\n", pattern, words);
}

static void write_bash(FILE *out)
{
	char pattern[1024], words[512], commands[256] = "", command_pattern[256] = "";

	for (size_t i = 1; i < tb_n_commands; i++) {
		add_word(commands, sizeof commands, tb_commands[i].word);
		snprintf(pattern, sizeof pattern, "%s%s", i > 1 ? "| " : "", tb_commands[i].word);
		add_word(command_pattern, sizeof command_pattern, pattern);
	}
	fputs("# bash completion for tbisect(1), written by 'tbisect --completion bash'\n"
	      "# from the program's command and option tables.\n"
	      "_tbisect()\n"
	      "{\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev= mode= words= i\n"
	      "\tif [ \"$COMP_CWORD\" -gt 0 ]; then\n"
	      "\t\tprev=${COMP_WORDS[COMP_CWORD - 1]}\n"
	      "\tfi\n"
	      "\t# bash splits --option=value at '=' (COMP_WORDBREAKS): complete the value.\n"
	      "\tif [ \"$cur\" = = ]; then\n"
	      "\t\tcur=\n"
	      "\telif [ \"$prev\" = = ] && [ \"$COMP_CWORD\" -gt 1 ]; then\n"
	      "\t\tprev=${COMP_WORDS[COMP_CWORD - 2]}\n"
	      "\tfi\n"
	      "\tcase $prev in\n",
	      out);
	bash_pattern(TB_ARG_FILE, pattern, sizeof pattern);
	fprintf(out,
		"\t%s)\n"
		"\t\tcompopt -o filenames 2>/dev/null || true\n"
		"\t\tmapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
		"\t\treturn\n"
		"\t\t;;\n",
		pattern);
	bash_pattern(TB_ARG_NUMBER, pattern, sizeof pattern);
	fprintf(out,
		"\t%s)\n"
		"\t\tCOMPREPLY=()\n"
		"\t\treturn\n"
		"\t\t;;\n",
		pattern);
	for (size_t i = 0; i < tb_n_option_infos; i++) {
		value_words(&tb_option_infos[i], words, sizeof words);
		if (words[0])
			fprintf(out, "\t--%s) words='%s' ;;\n", tb_option_infos[i].name, words);
	}
	fputs("\tesac\n"
	      "\tif [ -n \"$words\" ]; then\n"
	      "\t\tmapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
	      "\t\treturn\n"
	      "\tfi\n"
	      "\t# The parser takes a command only as the first word.\n"
	      "\tif [ \"$COMP_CWORD\" -gt 1 ]; then\n"
	      "\t\tcase ${COMP_WORDS[1]} in\n",
	      out);
	fprintf(out, "\t\t%s) mode=${COMP_WORDS[1]} ;;\n", command_pattern);
	fputs("\t\tesac\n"
	      "\tfi\n"
	      "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "\t\tif [ \"${COMP_WORDS[i]}\" = -- ]; then\n"
	      "\t\t\tbreak\n"
	      "\t\tfi\n"
	      "\tdone\n"
	      "\tif [ \"$i\" -eq \"$COMP_CWORD\" ] && [ \"${cur#-}\" != \"$cur\" ]; then\n"
	      "\t\tcase $mode in\n",
	      out);
	for (size_t i = 1; i < tb_n_commands; i++)
		bash_mode_arm(out, &tb_commands[i], tb_commands[i].word);
	bash_mode_arm(out, &tb_commands[0], "*");
	fprintf(out,
		"\t\tesac\n"
		"\t\tmapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
		"\t\treturn\n"
		"\tfi\n"
		"\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n"
		"\t\twords='%s'\n"
		"\tfi\n"
		"\t# Dump trees are directories or files.\n"
		"\tcompopt -o filenames 2>/dev/null || true\n"
		"\tmapfile -t COMPREPLY < <(compgen -W \"$words\" -f -- \"$cur\")\n"
		"}\n"
		"complete -F _tbisect tbisect\n",
		commands);
}

static void write_tsv(FILE *out)
{
	char modes[160];

	for (size_t i = 0; i < tb_n_commands; i++) {
		const tb_command_info *c = &tb_commands[i];
		if (c->word)
			fprintf(out, "command\t%s\t%s\t%s\t%s\n", c->word, c->args, c->label, c->help);
	}
	for (size_t i = 0; i < tb_n_option_infos; i++) {
		const tb_option_info *opt = &tb_option_infos[i];
		tb_modes_join(opt->modes, false, modes, sizeof modes);
		fprintf(out, "option\t--%s\t%s\t%s\t%s\n", opt->name, opt->metavar ? opt->metavar : "", modes,
			opt->help);
	}
}

int tb_cmd_completion(const char *name)
{
	char names[128] = "";

	for (size_t i = 0; i < n_formats; i++) {
		if (!strcmp(name, formats[i].name)) {
			formats[i].write(stdout);
			return fflush(stdout) == 0 ? TB_EXIT_OK : TB_EXIT_BAD_INPUT;
		}
		add_word(names, sizeof names, formats[i].name);
	}
	fprintf(stderr, "tbisect: --completion: '%s' is not one of: %s\n", name, names);
	return TB_EXIT_BAD_INPUT;
}
