/*
 * diagnose: from a finished comparison to ranked causes.  Runs the origin
 * analysis and the dump sanity checks, measures the features of the target
 * cell (the first divergence unless one is chosen) and evaluates the rule
 * table.  A tb_diagnosis owns everything it holds; tb_diagnosis_done frees it.
 */
#ifndef TB_DIAGNOSE_H
#define TB_DIAGNOSE_H

#include "diagnose/cause.h"
#include "compare/compare.h"
#include "diagnose/features.h"
#include "diagnose/origin.h"
#include "diagnose/replay.h"
#include "diagnose/rules.h"
#include "diagnose/sanity.h"
#include "model/session.h"

#define TB_MAX_CAUSES 5
#define TB_TARGET_FIRST_DIVERGENCE (-2)

typedef struct tb_diag_opts {
	const tb_ruleset *rules;
	int heads, kv_heads;  /* 0: unknown */
	double origin_factor; /* 0: TB_ORIGIN_FACTOR */
	int threads;          /* 1: all on the caller's thread; 0: one per CPU */
} tb_diag_opts;

typedef struct tb_diagnosis {
	tb_origin origin;
	tb_sanity sanity;
	long asked;                   /* cell the diagnosis was asked for (the first divergence), -1: none */
	long target;                  /* cell the causes are for: asked, or the attention or MLP whose output it is */
	long measured;                /* cell the causes' numbers were measured at (tb_features_measured) */
	double features[TB_F_COUNT];
	tb_causes causes;             /* empty when the verdict is match; a confirmed one first */
	tb_replay replay;             /* the first divergence's op replayed, where it could be */
} tb_diagnosis;

/* "measured at L0.attn, the attention that L0.attn.q is part of and that
 * diverges as a whole" when d's numbers are another cell's than the one
 * it was asked for; "" otherwise. */
void tb_diagnosis_measured_text(const tb_diagnosis *d, const tb_result *r, char *buf, size_t size);

/* target: a cell index, or TB_TARGET_FIRST_DIVERGENCE. */
int tb_diagnose(const tb_session *s, const tb_result *r, const tb_diag_opts *o, long target, tb_diagnosis *d,
		tb_err *err);
/* Causes for another cell (the interactive view's selected cell), reusing
 * the origin and sanity findings of d; d is not changed.  The caller owns
 * *out (tb_causes_done). */
int tb_diagnose_cell(const tb_session *s, const tb_result *r, const tb_diag_opts *o, const tb_diagnosis *d,
		     long cell, tb_causes *out, tb_err *err);
void tb_diagnosis_done(tb_diagnosis *d);

#endif
