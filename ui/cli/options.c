#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/options.h"
#include "compare/routing.h"
#include "formats/reader.h"
#include "run/calibrate.h"
#include "run/fingerprint.h"
#include "tensor/dtype.h"

/* Indexes into tb_option_infos, in the usage text's order. */
enum {
	OPT_ATOL,
	OPT_RTOL,
	OPT_DIVERGE,
	OPT_MAX_KL,
	OPT_MAP,
	OPT_NO_BUILTIN_NAMES,
	OPT_ALLOW_PARTIAL,
	OPT_RULES,
	OPT_TOL,
	OPT_ORIGIN_FACTOR,
	OPT_FLIP_MARGIN,
	OPT_FEATURES,
	OPT_HISTORY,
	OPT_HISTORY_RESET,
	OPT_NO_HISTORY,
	OPT_HEADS,
	OPT_KV_HEADS,
	OPT_TOWER,
	OPT_JSON,
	OPT_MARKDOWN,
	OPT_HTML,
	OPT_HTML_TIMESTAMP,
	OPT_NPY_VOID2,
	OPT_NPY_VOID1,
	OPT_RECORD,
	OPT_VOCAB,
	OPT_STEP,
	OPT_STEPS,
	OPT_SHARD,
	OPT_THREADS,
	OPT_OUTPUT,
	OPT_FACTOR,
	OPT_SEED,
	OPT_RANK,
	OPT_WATCH,
	OPT_NO_MOUSE,
	OPT_SKILL,
	OPT_VERSION,
	OPT_HELP,
	OPT_KEYS,
	OPT_COMPLETION,
	OPT_COUNT
};

/* getopt returns OPT_BASE + index for a long option: above every short one. */
enum { OPT_BASE = 256 };

const tb_command_info tb_commands[] = {
	{.label = "interactive view", .mode = TB_MODE_TUI, .args = "REF CAND", .n_paths = 2,
	 .bad_paths = "expected REF and CAND", .help = "interactive view (needs a terminal)"},
	{.word = "check", .label = "check", .mode = TB_MODE_CHECK, .args = "REF CAND", .n_paths = 2,
	 .bad_paths = "expected REF and CAND", .help = "batch report (text, or --json)"},
	{.word = "ls", .label = "ls", .mode = TB_MODE_LS, .args = "TREE", .n_paths = 1,
	 .bad_paths = "ls takes one TREE", .help = "list tensors and their canonical cells"},
	{.word = "suggest-map", .label = "suggest-map", .mode = TB_MODE_SUGGEST, .args = "REF CAND", .n_paths = 2,
	 .bad_paths = "expected REF and CAND", .help = "print a --map file for the names that do not pair"},
	{.word = "calibrate", .label = "calibrate", .mode = TB_MODE_CALIBRATE, .args = "REF REF2 -o FILE", .n_paths = 2,
	 .bad_paths = "expected REF and REF2 (two runs of the reference)",
	 .help = "write per-cell tolerances (--tol) from the noise between two runs of the reference"},
	{.word = "sketch", .label = "sketch", .mode = TB_MODE_SKETCH, .args = "TREE -o FILE.tbsk (or: merge PART.tbsk... -o FILE.tbsk)",
	 .n_paths = 1,
	 .bad_paths = "sketch takes one TREE",
	 .help = "write a fingerprint of TREE, which any mode takes in place of the tree"},
	{.word = "mcp", .label = "mcp", .mode = TB_MODE_MCP, .args = "", .n_paths = 0,
	 .bad_paths = "mcp takes no TREE (open_pair names the trees)",
	 .help = "serve the Model Context Protocol on stdio, for coding agents (--skill: how)"},
};
const size_t tb_n_commands = sizeof tb_commands / sizeof tb_commands[0];

const tb_option_info tb_option_infos[OPT_COUNT] = {
	[OPT_ATOL] = {.name = "atol", .metavar = "A", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		      .help = "absolute tolerance of allclose (default 1e-4)"},
	[OPT_RTOL] = {.name = "rtol", .metavar = "R", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		      .help = "relative tolerance of allclose (default 1e-4)"},
	[OPT_DIVERGE] = {.name = "diverge", .metavar = "D", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			 .help = "rel_l2 above D marks a cell diverged (default 1e-2)"},
	[OPT_MAX_KL] = {.name = "max-kl", .metavar = "K", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			.help = "logits diverge when mean KL(ref||cand) exceeds K (default 0.015)"},
	[OPT_MAP] = {.name = "map", .metavar = "FILE", .arg = TB_ARG_FILE, .modes = TB_IN_ANY,
		     .help = "JSON naming map, tried before the built-in conventions ('-': standard input)"},
	[OPT_NO_BUILTIN_NAMES] = {.name = "no-builtin-names", .modes = TB_IN_ANY,
				  .help = "name tensors by the --map file only (to test a map)"},
	[OPT_ALLOW_PARTIAL] = {.name = "allow-partial", .modes = TB_IN(TB_MODE_TUI) | TB_IN(TB_MODE_CHECK),
			       .help = "go on when under half the tensors pair (no cause is named then)"},
	[OPT_RULES] = {.name = "rules", .metavar = "FILE", .arg = TB_ARG_FILE, .modes = TB_IN_ANY,
		       .help = "extra diagnosis rules (JSON, see tbisect-rules(5))"},
	[OPT_TOL] = {.name = "tol", .metavar = "FILE", .arg = TB_ARG_FILE, .modes = TB_IN_ANY,
		     .help = "per-tensor tolerances (JSON list of {match, atol, rtol, diverge, mode})"},
	[OPT_ORIGIN_FACTOR] = {.name = "origin-factor", .metavar = "F", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			       .help = "a cell whose error exceeds F times its inputs' is where error is born (10)"},
	[OPT_FLIP_MARGIN] = {.name = "flip-margin", .metavar = "F", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			     .help = "MoE: experts chosen apart where the reference's scores tie within F (1e-3) are a flip"},
	[OPT_FEATURES] = {.name = "features", .modes = TB_IN(TB_MODE_CHECK),
			  .help = "also print the measured features the rules test"},
	[OPT_HISTORY] = {.name = "history", .modes = TB_IN(TB_MODE_CHECK),
			 .help = "print how the first divergence moved over the passes"},
	[OPT_HISTORY_RESET] = {.name = "history-reset", .modes = TB_IN(TB_MODE_CHECK),
			       .help = "forget the pair's recorded passes before this run"},
	[OPT_NO_HISTORY] = {.name = "no-history", .modes = TB_IN_ANY,
			    .help = "do not record this run in the pass history"},
	[OPT_HEADS] = {.name = "heads", .metavar = "N", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		       .help = "attention heads (per-head views and rules)"},
	[OPT_KV_HEADS] = {.name = "kv-heads", .metavar = "N", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			  .help = "key/value heads"},
	[OPT_TOWER] = {.name = "tower", .metavar = "NAME", .arg = TB_ARG_NUMBER,
		       .modes = TB_IN(TB_MODE_TUI) | TB_IN(TB_MODE_CHECK),
		       .help = "compare a multimodal model's vision or audio tower, not its text decoder"},
	[OPT_JSON] = {.name = "json", .modes = TB_IN(TB_MODE_CHECK) | TB_IN(TB_MODE_LS),
		      .help = "write JSON instead of text"},
	[OPT_MARKDOWN] = {.name = "markdown", .modes = TB_IN(TB_MODE_CHECK),
			  .help = "print a Markdown summary (CI step summaries, pull requests) instead of the text report"},
	[OPT_HTML] = {.name = "html", .metavar = "FILE", .arg = TB_ARG_FILE, .modes = TB_IN(TB_MODE_CHECK),
		      .help = "also write the self-contained HTML report to FILE"},
	[OPT_HTML_TIMESTAMP] = {.name = "html-timestamp", .modes = TB_IN(TB_MODE_CHECK),
				.help = "put the time of the run in the HTML report (else equal inputs give equal bytes)"},
	[OPT_NPY_VOID2] = {.name = "npy-void2", .metavar = "DT", .arg = TB_ARG_DTYPE, .modes = TB_IN_ANY,
			   .dtype_bytes = 2, .help = "read raw 2-byte void npy data (|V2, <V2) as DT (bf16, f16)"},
	[OPT_NPY_VOID1] = {.name = "npy-void1", .metavar = "DT", .arg = TB_ARG_DTYPE, .modes = TB_IN_ANY,
			   .dtype_bytes = 1, .help = "read raw 1-byte void npy data as DT (f8_e4m3fn, f8_e5m2)"},
	[OPT_RECORD] = {.name = "record", .metavar = "K", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			.help = "which prompt of a golden file, iteration of a Polygraphy runner (default 0)"},
	[OPT_VOCAB] = {.name = "vocab", .metavar = "N", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		       .help = "read .bin files as raw float32 logits, rows of N values (llama.cpp's model-conversion)"},
	[OPT_STEP] = {.name = "step", .metavar = "K", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		      .help = "compare forward pass K of a multi-step dump (default: the first)"},
	[OPT_STEPS] = {.name = "steps", .metavar = "all", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		       .help = "all: stitch the decode steps along the positions (against one prefill)"},
	[OPT_SHARD] = {.name = "shard", .metavar = "TAP=SPEC", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
		       .help = "how a tap's tensor-parallel ranks join: 's h[tp]' split on h, partial, replicated"},
	[OPT_THREADS] = {.name = "threads", .metavar = "N", .arg = TB_ARG_NUMBER, .modes = TB_IN_ANY,
			 .help = "worker threads (default: one per CPU)"},
	[OPT_OUTPUT] = {.name = "output", .metavar = "FILE", .arg = TB_ARG_FILE,
			.modes = TB_IN(TB_MODE_CALIBRATE) | TB_IN(TB_MODE_SKETCH),
			.help = "(-o) where calibrate writes the tolerance file, sketch the fingerprint"},
	[OPT_SEED] = {.name = "seed", .metavar = "N", .arg = TB_ARG_NUMBER, .modes = TB_IN(TB_MODE_SKETCH),
		      .help = "the sketch's seed (default 1): sketches compare only with the same seed"},
	[OPT_RANK] = {.name = "rank", .metavar = "K/N", .arg = TB_ARG_NUMBER, .modes = TB_IN(TB_MODE_SKETCH),
		      .help = "the tree is rank K of N tensor-parallel ranks: sketch its share ('sketch merge' joins them)"},
	[OPT_FACTOR] = {.name = "factor", .metavar = "F", .arg = TB_ARG_NUMBER, .modes = TB_IN(TB_MODE_CALIBRATE),
			.help = "calibrate's safety factor over the observed noise (default 4)"},
	[OPT_WATCH] = {.name = "watch", .modes = TB_IN(TB_MODE_TUI),
		       .help = "reload when either tree changes, once quiet"},
	[OPT_NO_MOUSE] = {.name = "no-mouse", .modes = TB_IN(TB_MODE_TUI),
			  .help = "leave the mouse to the terminal (its own selection); :set mouse turns it on"},
	[OPT_SKILL] = {.name = "skill", .modes = TB_IN(TB_MODE_MCP),
		       .help = "print the porting skill for coding agents (the tools, step by step)"},
	[OPT_VERSION] = {.name = "version", .modes = TB_IN_ANY, .action = TB_MODE_VERSION,
			 .help = "print the version"},
	[OPT_HELP] = {.name = "help", .modes = TB_IN_ANY, .action = TB_MODE_HELP, .help = "print this text"},
	[OPT_KEYS] = {.name = "keys", .modes = TB_IN_ANY, .action = TB_MODE_KEYS,
		      .help = "print the interactive view's keys and commands (tab-separated)"},
	[OPT_COMPLETION] = {.name = "completion", .metavar = "SHELL", .arg = TB_ARG_FORMAT, .modes = TB_IN_ANY,
			    .action = TB_MODE_COMPLETION,
			    .help = "print the completion script for SHELL (bash), or its tables (tsv)"},
};
const size_t tb_n_option_infos = OPT_COUNT;

void tb_modes_join(unsigned set, bool prose, char *buf, size_t size)
{
	size_t n = 0, k = 0, len = 0;

	for (size_t i = 0; i < tb_n_commands; i++)
		n += (set & TB_IN(tb_commands[i].mode)) != 0;
	buf[0] = '\0';
	for (size_t i = 0; i < tb_n_commands && len < size; i++) {
		const tb_command_info *c = &tb_commands[i];
		if (!(set & TB_IN(c->mode)))
			continue;
		const char *sep = k == 0 ? "" : prose && k == n - 1 ? " and " : ", ";
		const char *the = prose && !c->word ? "the " : "";
		const char *quote = prose && c->word ? "'" : "";
		int w = snprintf(buf + len, size - len, "%s%s%s%s%s", sep, the, quote, c->label, quote);
		len += w > 0 ? (size_t)w : 0;
		k++;
	}
}

/* "(check, ls) " before the help of an option of some modes only. */
static void option_modes(const tb_option_info *opt, char *buf, size_t size)
{
	char list[128];

	if (opt->modes == TB_IN_ANY) {
		snprintf(buf, size, "%s", "");
		return;
	}
	tb_modes_join(opt->modes, false, list, sizeof list);
	snprintf(buf, size, "(%s) ", list);
}

void tb_usage(FILE *out)
{
	char syn[96], modes[160];

	for (size_t i = 0; i < tb_n_commands; i++) {
		const tb_command_info *c = &tb_commands[i];
		snprintf(syn, sizeof syn, "tbisect %s%s[OPTIONS] %s", c->word ? c->word : "", c->word ? " " : "",
			 c->args);
		fprintf(out, "%s%-35s %s\n", i ? "       " : "usage: ", syn, c->help);
	}
	fputs("       tbisect", out);
	for (size_t i = 0, k = 0; i < tb_n_option_infos; i++) {
		const tb_option_info *opt = &tb_option_infos[i];
		if (opt->action == TB_MODE_TUI)
			continue;
		fprintf(out, "%s--%s%s%s", k++ ? " | " : " ", opt->name, opt->metavar ? " " : "",
			opt->metavar ? opt->metavar : "");
	}
	fputs("\n"
	      "\n"
	      "REF and CAND are dump trees: a directory (walked recursively) or one file.\n"
	      "The formats read (tbisect-dumps(5) FORMATS):\n",
	      out);
	for (int i = 0; tb_formats[i]; i++)
		fprintf(out, "  %s\n", tb_formats[i]->label);
	fputs("\n"
	      "options:\n",
	      out);
	for (size_t i = 0; i < tb_n_option_infos; i++) {
		const tb_option_info *opt = &tb_option_infos[i];
		snprintf(syn, sizeof syn, "--%s%s%s", opt->name, opt->metavar ? " " : "",
			 opt->metavar ? opt->metavar : "");
		option_modes(opt, modes, sizeof modes);
		fprintf(out, "  %-17s %s%s\n", syn, modes, opt->help);
	}
	fputs("\n"
	      "exit status: 0 nothing diverged, 1 a cell diverged, 2 usage error or bad input\n",
	      out);
}

static int num_arg(const tb_option_info *opt, const char *s, double *out, char *msg, size_t size)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v) || v < 0) {
		snprintf(msg, size, "--%s: '%s' is not a non-negative number", opt->name, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int int_arg(const tb_option_info *opt, const char *s, int lo, int hi, int *out, char *msg, size_t size)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi) {
		snprintf(msg, size, "--%s: '%s' is not an integer in %d..%d", opt->name, s, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int dtype_arg(const tb_option_info *opt, const char *s, int *out, char *msg, size_t size)
{
	tb_dtype dt;

	if (tb_dtype_parse(s, &dt) < 0 || tb_dtype_size(dt) != opt->dtype_bytes) {
		snprintf(msg, size, "--%s: '%s' is not a %zu-byte dtype", opt->name, s, opt->dtype_bytes);
		return -1;
	}
	*out = (int)dt;
	return 0;
}

/* Store one ordinary option (not one that selects a mode). */
static int set_option(tb_options *o, int id, const char *arg, char *msg, size_t size)
{
	const tb_option_info *opt = &tb_option_infos[id];

	switch (id) {
	case OPT_ATOL: return num_arg(opt, arg, &o->tol.atol, msg, size);
	case OPT_RTOL: return num_arg(opt, arg, &o->tol.rtol, msg, size);
	case OPT_DIVERGE: return num_arg(opt, arg, &o->tol.diverge, msg, size);
	case OPT_MAX_KL: return num_arg(opt, arg, &o->tol.max_kl, msg, size);
	case OPT_MAP: o->map_file = arg; break;
	case OPT_RULES: o->rules_file = arg; break;
	case OPT_TOL: o->tol_file = arg; break;
	case OPT_ORIGIN_FACTOR:
		if (num_arg(opt, arg, &o->origin_factor, msg, size) < 0)
			return -1;
		if (o->origin_factor <= 1) {
			snprintf(msg, size, "--origin-factor: must be above 1");
			return -1;
		}
		break;
	case OPT_FLIP_MARGIN:
		if (num_arg(opt, arg, &o->flip_margin, msg, size) < 0)
			return -1;
		if (!(o->flip_margin > 0 && o->flip_margin < 1)) {
			snprintf(msg, size, "--flip-margin: must be between 0 and 1");
			return -1;
		}
		break;
	case OPT_NO_BUILTIN_NAMES: o->no_builtin_names = true; break;
	case OPT_ALLOW_PARTIAL: o->allow_partial = true; break;
	case OPT_FEATURES: o->features = true; break;
	case OPT_HISTORY: o->history = true; break;
	case OPT_HISTORY_RESET: o->history_reset = true; break;
	case OPT_NO_HISTORY: o->no_history = true; break;
	case OPT_NO_MOUSE: o->no_mouse = true; break;
	case OPT_HEADS: return int_arg(opt, arg, 1, 65536, &o->heads, msg, size);
	case OPT_KV_HEADS: return int_arg(opt, arg, 1, 65536, &o->kv_heads, msg, size);
	case OPT_TOWER:
		if (!tb_tower_known(arg)) {
			const char *names[8];
			size_t n = tb_tower_names(names, 8), len;
			len = (size_t)snprintf(msg, size, "--tower: '%s' is not a tower (", arg);
			for (size_t i = 0; i < n && len < size; i++)
				len += (size_t)snprintf(msg + len, size - len, "%s%s", i ? ", " : "", names[i]);
			if (len < size)
				snprintf(msg + len, size - len, ")");
			return -1;
		}
		o->tower = arg;
		break;
	case OPT_JSON: o->json = true; break;
	case OPT_MARKDOWN: o->markdown = true; break;
	case OPT_HTML: o->html_file = arg; break;
	case OPT_HTML_TIMESTAMP: o->html_timestamp = true; break;
	case OPT_NPY_VOID2: return dtype_arg(opt, arg, &o->open.npy_void2, msg, size);
	case OPT_NPY_VOID1: return dtype_arg(opt, arg, &o->open.npy_void1, msg, size);
	case OPT_RECORD: return int_arg(opt, arg, 0, 1000000, &o->open.record, msg, size);
	case OPT_VOCAB: {
		int vocab;
		if (int_arg(opt, arg, 1, INT_MAX, &vocab, msg, size) < 0)
			return -1;
		o->open.vocab = vocab;
		break;
	}
	case OPT_STEP: return int_arg(opt, arg, 0, 999999, &o->layout.step, msg, size);
	case OPT_STEPS:
		if (strcmp(arg, "all")) {
			snprintf(msg, size, "--steps: '%s' is not 'all' (use --step K for one step)", arg);
			return -1;
		}
		o->layout.all_steps = true;
		break;
	case OPT_SHARD: {
		tb_err err = {0};
		if (o->layout.n_shards >= TB_MAX_SHARD_RULES) {
			snprintf(msg, size, "--shard: more than %d rules", TB_MAX_SHARD_RULES);
			return -1;
		}
		if (tb_shard_parse(arg, &o->shards[o->layout.n_shards], &err) < 0) {
			tb_err_text(&err, msg, size);
			return -1;
		}
		o->layout.n_shards++;
		break;
	}
	case OPT_THREADS: return int_arg(opt, arg, 1, 64, &o->threads, msg, size);
	case OPT_OUTPUT: o->output = arg; break;
	case OPT_FACTOR:
		if (num_arg(opt, arg, &o->factor, msg, size) < 0)
			return -1;
		if (o->factor < 1) {
			snprintf(msg, size, "--factor: must be 1 or more");
			return -1;
		}
		break;
	case OPT_SEED: {
		int seed;
		if (int_arg(opt, arg, 0, INT32_MAX, &seed, msg, size) < 0)
			return -1;
		o->seed = (uint64_t)seed;
		break;
	}
	case OPT_RANK: {
		char *end;
		long k = strtol(arg, &end, 10), n = *end == '/' ? strtol(end + 1, &end, 10) : 0;
		if (*end || k < 0 || n < 2 || k >= n || n > UINT16_MAX) {
			snprintf(msg, size, "--rank: '%s' is not K/N with 0 <= K < N, N of 2 or more", arg);
			return -1;
		}
		o->rank = (int)k;
		o->ranks = (int)n;
		break;
	}
	case OPT_WATCH: o->watch = true; break;
	case OPT_SKILL: o->skill = true; break;
	}
	return 0;
}

/* Edits (insert, delete, substitute, swap two neighbours) from a to b,
 * counted up to cap + 1: enough to tell a typo from another word. */
static size_t edit_distance(const char *a, const char *b, size_t cap)
{
	enum { MAXW = 32 };
	size_t la = strlen(a), lb = strlen(b), d[MAXW + 1][MAXW + 1];

	if (la > MAXW || lb > MAXW)
		return cap + 1;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* The command word close to w (a typo of it), or NULL.  Close: one edit
 * for short words, two from five letters on, so "ref" or "cand" never
 * reads as a command. */
static const char *command_like(const char *w)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (size_t i = 1; i < tb_n_commands; i++) {
		size_t len = strlen(tb_commands[i].word), cap = len >= 5 ? 2 : 1;
		size_t d = edit_distance(w, tb_commands[i].word, cap);
		if (d <= cap && d < best_d && d < strlen(w)) {
			best = tb_commands[i].word;
			best_d = d;
		}
	}
	return best;
}

/* Does the option word w ("--name", "--name=V", "--na" for short) take the
 * next word as its argument? */
static bool takes_next(const char *w)
{
	size_t len;
	int hit = -1;

	if (w[1] != '-') /* -o FILE, -oFILE, -h */
		return w[strlen(w) - 1] == 'o';
	w += 2;
	if (strchr(w, '='))
		return false;
	len = strlen(w);
	for (size_t i = 0; i < tb_n_option_infos; i++) {
		if (strncmp(tb_option_infos[i].name, w, len))
			continue;
		if (!tb_option_infos[i].name[len]) /* exact: wins over longer names */
			return tb_option_infos[i].arg != TB_ARG_NONE;
		hit = hit == -1 ? (int)i : -2;
	}
	return hit >= 0 && tb_option_infos[hit].arg != TB_ARG_NONE;
}

/* Where the command word is: the first word that is no option nor an
 * option's argument, so "tbisect --json check a b" is check's; 0 when that
 * word is no command (the interactive view's REF). */
static int command_at(int argc, char **argv, const tb_command_info **cmd)
{
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];
		if (!strcmp(w, "--"))
			return 0;
		if (w[0] == '-' && w[1]) {
			i += takes_next(w);
			continue;
		}
		for (size_t k = 1; k < tb_n_commands; k++) {
			if (!strcmp(w, tb_commands[k].word)) {
				*cmd = &tb_commands[k];
				return i;
			}
		}
		return 0;
	}
	return 0;
}

int tb_options_parse(int argc, char **argv, tb_options *o, char *msg, size_t size)
{
	struct option long_opts[OPT_COUNT + 1];
	bool given[OPT_COUNT] = {false};
	const tb_command_info *cmd = &tb_commands[0];
	int c;

	memset(o, 0, sizeof *o);
	tb_tolerance_default(&o->tol);
	tb_open_opts_init(&o->open);
	tb_layout_opts_init(&o->layout);
	o->layout.shards = o->shards;
	o->origin_factor = 10;
	o->flip_margin = TB_FLIP_MARGIN;
	o->factor = TB_CALIBRATE_FACTOR;
	o->seed = TB_SKETCH_SEED;
	/* Options may come before the command: move it first, where the rest
	 * of the parse expects it. */
	int at = command_at(argc, argv, &cmd);
	if (at > 1) {
		char *word = argv[at];
		memmove(argv + 2, argv + 1, (size_t)(at - 1) * sizeof *argv);
		argv[1] = word;
	}
	/* A first word that is no tree but nearly a command is a typo of the
	 * command, not a path to complain about. */
	if (!cmd->word && argc > 1 && argv[1][0] != '-' && access(argv[1], F_OK) != 0) {
		const char *like = command_like(argv[1]);
		if (like) {
			snprintf(msg, size, "unknown command '%s' (did you mean %s?)", argv[1], like);
			return -1;
		}
	}
	o->mode = cmd->mode;
	o->argc = argc;
	o->argv = argv;
	for (int i = 0; i < OPT_COUNT; i++)
		long_opts[i] = (struct option){tb_option_infos[i].name,
					       tb_option_infos[i].arg == TB_ARG_NONE ? no_argument : required_argument,
					       NULL, OPT_BASE + i};
	long_opts[OPT_COUNT] = (struct option){NULL, 0, NULL, 0};
	optind = cmd->word ? 2 : 1;
	opterr = 0;
	/* -h is as common a spelling as --help; -o FILE as --output FILE. */
	while ((c = getopt_long(argc, argv, ":ho:", long_opts, NULL)) != -1) {
		if (c == 'h')
			c = OPT_BASE + OPT_HELP;
		if (c == 'o')
			c = OPT_BASE + OPT_OUTPUT;
		if (c == ':') {
			snprintf(msg, size, "option '%s' needs an argument", argv[optind - 1]);
			return -1;
		}
		if (c < OPT_BASE || c >= OPT_BASE + OPT_COUNT) {
			snprintf(msg, size, "unknown option '%s'", argv[optind - 1]);
			return -1;
		}
		int id = c - OPT_BASE;
		if (tb_option_infos[id].action != TB_MODE_TUI) {
			o->mode = tb_option_infos[id].action;
			o->action_arg = optarg;
			return 0;
		}
		given[id] = true;
		if (set_option(o, id, optarg, msg, size) < 0)
			return -1;
	}
	if (o->mode == TB_MODE_SKETCH && optind < argc && !strcmp(argv[optind], "merge")) {
		o->merge_paths = argv + optind + 1;
		o->n_merge = argc - optind - 1;
		if (o->n_merge < 2 || !o->output || given[OPT_RANK] || given[OPT_SEED]) {
			snprintf(msg, size, "%s", o->n_merge < 2 ? "sketch merge takes two or more PART.tbsk files"
						  : !o->output ? "sketch merge needs -o FILE.tbsk"
							       : "sketch merge takes the parts' rank and seed");
			return -1;
		}
		return 0;
	}
	for (int i = optind; i < argc; i++) {
		if (o->n_paths == 2) {
			snprintf(msg, size, "too many arguments ('%s')", argv[i]);
			return -1;
		}
		o->paths[o->n_paths++] = argv[i];
	}
	if (o->n_paths != cmd->n_paths) {
		snprintf(msg, size, "%s", cmd->bad_paths);
		return -1;
	}
	for (int id = 0; id < OPT_COUNT; id++) {
		if (given[id] && !(tb_option_infos[id].modes & TB_IN(o->mode))) {
			char modes[160];
			tb_modes_join(tb_option_infos[id].modes, true, modes, sizeof modes);
			snprintf(msg, size, "--%s belongs to %s", tb_option_infos[id].name, modes);
			return -1;
		}
	}
	if (o->html_timestamp && !o->html_file) {
		snprintf(msg, size, "--html-timestamp needs --html FILE");
		return -1;
	}
	if (o->json && o->markdown) {
		snprintf(msg, size, "--json and --markdown exclude each other (both write the report on standard output)");
		return -1;
	}
	if (o->mode == TB_MODE_CALIBRATE && !o->output) {
		snprintf(msg, size, "calibrate needs -o FILE (where to write the tolerances)");
		return -1;
	}
	if (o->mode == TB_MODE_SKETCH && !o->output) {
		snprintf(msg, size, "sketch needs -o FILE.tbsk (where to write the fingerprint)");
		return -1;
	}
	if (given[OPT_STEP] && given[OPT_STEPS]) {
		snprintf(msg, size, "--step K and --steps all exclude each other");
		return -1;
	}
	if (o->history && o->no_history) {
		snprintf(msg, size, "--history and --no-history exclude each other");
		return -1;
	}
	return 0;
}
