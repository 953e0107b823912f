#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

enum {
	OPT_ATOL = 256,
	OPT_RTOL,
	OPT_DIVERGE,
	OPT_MAX_KL,
	OPT_MAP,
	OPT_RULES,
	OPT_HEADS,
	OPT_KV_HEADS,
	OPT_JSON,
	OPT_HISTORY,
	OPT_NO_HISTORY,
	OPT_WATCH,
	OPT_THREADS,
	OPT_NPY_VOID2,
	OPT_NPY_VOID1,
	OPT_RECORD,
	OPT_TOL,
	OPT_ORIGIN_FACTOR,
	OPT_FEATURES,
	OPT_HELP,
	OPT_VERSION,
	OPT_KEYS,
	OPT_ALLOW_PARTIAL,
	OPT_NO_BUILTIN_NAMES,
};

static const struct option long_opts[] = {
	{"atol", required_argument, NULL, OPT_ATOL},
	{"rtol", required_argument, NULL, OPT_RTOL},
	{"diverge", required_argument, NULL, OPT_DIVERGE},
	{"max-kl", required_argument, NULL, OPT_MAX_KL},
	{"map", required_argument, NULL, OPT_MAP},
	{"rules", required_argument, NULL, OPT_RULES},
	{"heads", required_argument, NULL, OPT_HEADS},
	{"kv-heads", required_argument, NULL, OPT_KV_HEADS},
	{"json", no_argument, NULL, OPT_JSON},
	{"history", no_argument, NULL, OPT_HISTORY},
	{"no-history", no_argument, NULL, OPT_NO_HISTORY},
	{"watch", no_argument, NULL, OPT_WATCH},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"npy-void2", required_argument, NULL, OPT_NPY_VOID2},
	{"npy-void1", required_argument, NULL, OPT_NPY_VOID1},
	{"record", required_argument, NULL, OPT_RECORD},
	{"tol", required_argument, NULL, OPT_TOL},
	{"origin-factor", required_argument, NULL, OPT_ORIGIN_FACTOR},
	{"features", no_argument, NULL, OPT_FEATURES},
	{"help", no_argument, NULL, OPT_HELP},
	{"version", no_argument, NULL, OPT_VERSION},
	{"keys", no_argument, NULL, OPT_KEYS},
	{"allow-partial", no_argument, NULL, OPT_ALLOW_PARTIAL},
	{"no-builtin-names", no_argument, NULL, OPT_NO_BUILTIN_NAMES},
	{NULL, 0, NULL, 0},
};

void tb_usage(FILE *out)
{
	fputs("usage: tbisect [OPTIONS] REF CAND          interactive view (needs a terminal)\n"
	      "       tbisect check [OPTIONS] REF CAND    batch report (text, or --json)\n"
	      "       tbisect ls [OPTIONS] TREE           list tensors and their canonical cells\n"
	      "       tbisect suggest-map [OPTIONS] REF CAND   print a --map file for the names that do not pair\n"
	      "       tbisect --version | --help | --keys\n"
	      "\n"
	      "REF and CAND are dump trees: a directory (walked recursively) or one file:\n"
	      ".npy, .npz, .safetensors, *.safetensors.index.json, torch.save (.pt/.pth/.bin),\n"
	      "MaxText golden logits (.jsonl, or a pickle under that name).\n"
	      "\n"
	      "options:\n"
	      "  --atol A          absolute tolerance of allclose (default 1e-4)\n"
	      "  --rtol R          relative tolerance of allclose (default 1e-4)\n"
	      "  --diverge D       rel_l2 above D marks a cell diverged (default 1e-2)\n"
	      "  --max-kl K        logits diverge when mean KL(ref||cand) exceeds K (default 0.015)\n"
	      "  --map FILE        JSON naming map, tried before the built-in conventions\n"
	      "  --allow-partial   go on when under half the tensors pair (no cause is named then)\n"
	      "  --no-builtin-names  name tensors by the --map file only (to test a map)\n"
	      "  --rules FILE      extra diagnosis rules (JSON, see tbisect-rules(5))\n"
	      "  --tol FILE        per-tensor tolerances (JSON list of {match, atol, rtol, diverge, mode})\n"
	      "  --origin-factor F a cell whose error exceeds F times its inputs' is where error is born (10)\n"
	      "  --features        (check) also print the measured features the rules test\n"
	      "  --history         (check) print how the first divergence moved over the passes\n"
	      "  --no-history      do not record this run in the pass history\n"
	      "  --heads N         attention heads (per-head views and rules)\n"
	      "  --kv-heads N      key/value heads\n"
	      "  --json            (check) write the JSON report\n"
	      "  --npy-void2 DT    read raw 2-byte void npy data (|V2, <V2) as DT (bf16, f16)\n"
	      "  --npy-void1 DT    read raw 1-byte void npy data as DT (f8_e4m3fn, f8_e5m2)\n"
	      "  --record K        which prompt of a multi-prompt golden file (default 0)\n"
	      "  --threads N       worker threads (default: one per CPU)\n"
	      "  --watch           (interactive view) reload when either tree changes, once quiet\n"
	      "  --keys            print the interactive view's keys and commands (tab-separated)\n"
	      "\n"
	      "exit status: 0 nothing diverged, 1 a cell diverged, 2 usage error or bad input\n",
	      out);
}

static int num_arg(const char *name, const char *s, double *out, char *msg, size_t size)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v) || v < 0) {
		snprintf(msg, size, "--%s: '%s' is not a non-negative number", name, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int int_arg(const char *name, const char *s, int lo, int hi, int *out, char *msg, size_t size)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi) {
		snprintf(msg, size, "--%s: '%s' is not an integer in %d..%d", name, s, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int dtype_arg(const char *name, const char *s, size_t size_needed, int *out, char *msg, size_t size)
{
	tb_dtype dt;

	if (tb_dtype_parse(s, &dt) < 0 || tb_dtype_size(dt) != size_needed) {
		snprintf(msg, size, "--%s: '%s' is not a %zu-byte dtype", name, s, size_needed);
		return -1;
	}
	*out = (int)dt;
	return 0;
}

int tb_options_parse(int argc, char **argv, tb_options *o, char *msg, size_t size)
{
	int c, first = 1;

	memset(o, 0, sizeof *o);
	tb_tolerance_default(&o->tol);
	tb_open_opts_init(&o->open);
	o->origin_factor = 10;
	o->mode = TB_MODE_TUI;
	if (argc > 1 && !strcmp(argv[1], "check")) {
		o->mode = TB_MODE_CHECK;
		first = 2;
	} else if (argc > 1 && !strcmp(argv[1], "ls")) {
		o->mode = TB_MODE_LS;
		first = 2;
	} else if (argc > 1 && !strcmp(argv[1], "suggest-map")) {
		o->mode = TB_MODE_SUGGEST;
		first = 2;
	}
	optind = first;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case OPT_ATOL: rc = num_arg("atol", optarg, &o->tol.atol, msg, size); break;
		case OPT_RTOL: rc = num_arg("rtol", optarg, &o->tol.rtol, msg, size); break;
		case OPT_DIVERGE: rc = num_arg("diverge", optarg, &o->tol.diverge, msg, size); break;
		case OPT_MAX_KL: rc = num_arg("max-kl", optarg, &o->tol.max_kl, msg, size); break;
		case OPT_MAP: o->map_file = optarg; break;
		case OPT_RULES: o->rules_file = optarg; break;
		case OPT_TOL: o->tol_file = optarg; break;
		case OPT_ORIGIN_FACTOR:
			rc = num_arg("origin-factor", optarg, &o->origin_factor, msg, size);
			if (rc == 0 && o->origin_factor <= 1) {
				snprintf(msg, size, "--origin-factor: must be above 1");
				rc = -1;
			}
			break;
		case OPT_FEATURES: o->features = true; break;
		case OPT_ALLOW_PARTIAL: o->allow_partial = true; break;
		case OPT_NO_BUILTIN_NAMES: o->no_builtin_names = true; break;
		case OPT_HEADS: rc = int_arg("heads", optarg, 1, 65536, &o->heads, msg, size); break;
		case OPT_KV_HEADS: rc = int_arg("kv-heads", optarg, 1, 65536, &o->kv_heads, msg, size); break;
		case OPT_JSON: o->json = true; break;
		case OPT_HISTORY: o->history = true; break;
		case OPT_NO_HISTORY: o->no_history = true; break;
		case OPT_WATCH: o->watch = true; break;
		case OPT_THREADS: rc = int_arg("threads", optarg, 1, 64, &o->threads, msg, size); break;
		case OPT_NPY_VOID2: rc = dtype_arg("npy-void2", optarg, 2, &o->open.npy_void2, msg, size); break;
		case OPT_NPY_VOID1: rc = dtype_arg("npy-void1", optarg, 1, &o->open.npy_void1, msg, size); break;
		case OPT_RECORD: rc = int_arg("record", optarg, 0, 1000000, &o->open.record, msg, size); break;
		case 'h':
		case OPT_HELP: o->mode = TB_MODE_HELP; return 0;
		case OPT_VERSION: o->mode = TB_MODE_VERSION; return 0;
		case OPT_KEYS: o->mode = TB_MODE_KEYS; return 0;
		case ':':
			snprintf(msg, size, "option '%s' needs an argument", argv[optind - 1]);
			return -1;
		default:
			snprintf(msg, size, "unknown option '%s'", argv[optind - 1]);
			return -1;
		}
		if (rc < 0)
			return -1;
	}
	for (int i = optind; i < argc; i++) {
		if (o->n_paths == 2) {
			snprintf(msg, size, "too many arguments ('%s')", argv[i]);
			return -1;
		}
		o->paths[o->n_paths++] = argv[i];
	}
	if (o->mode == TB_MODE_LS && o->n_paths != 1) {
		snprintf(msg, size, "ls takes one TREE");
		return -1;
	}
	if (o->mode != TB_MODE_LS && o->n_paths != 2) {
		snprintf(msg, size, "expected REF and CAND");
		return -1;
	}
	if (o->json && o->mode != TB_MODE_CHECK && o->mode != TB_MODE_LS) {
		snprintf(msg, size, "--json belongs to 'check' and 'ls'");
		return -1;
	}
	if (o->features && o->mode != TB_MODE_CHECK) {
		snprintf(msg, size, "--features belongs to 'check'");
		return -1;
	}
	if (o->history && o->no_history) {
		snprintf(msg, size, "--history and --no-history exclude each other");
		return -1;
	}
	if (o->watch && o->mode != TB_MODE_TUI) {
		snprintf(msg, size, "--watch belongs to the interactive view");
		return -1;
	}
	return 0;
}
