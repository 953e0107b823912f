#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/pairing.h"
#include "model/qkorder.h"
#include "tensor/compose.h"
#include "tensor/view.h"

void tb_tree_names_init(tb_tree_names *tn, const tb_tree *tree)
{
	const char **names = malloc((tree->n_tensors ? tree->n_tensors : 1) * sizeof *names);

	tn->shared[0] = '\0';
	if (!names)
		return;
	for (size_t i = 0; i < tree->n_tensors; i++)
		names[i] = tree->tensors[i]->name;
	tb_common_prefix(names, tree->n_tensors, tn->shared, sizeof tn->shared);
	free(names);
}

bool tb_tree_holds_tower(const tb_tree *tree, const char *tower)
{
	for (size_t i = 0; i < tree->n_tensors; i++) {
		const char *tw = tb_name_tower(tree->tensors[i]->name);
		if (tw && !strcmp(tw, tower))
			return true;
	}
	return false;
}

/* One side's tensors with their cells. */
typedef struct mapped {
	tb_cell cell;
	tb_tensor *t;
	int user_rule; /* the map file's rule that mapped it, -1: built in */
	bool unsplit;  /* a fused projection that could not be split */
} mapped;

typedef struct side_vec {
	mapped *v;
	size_t n, cap;
} side_vec;

static mapped *side_add(side_vec *sd)
{
	if (sd->n == sd->cap) {
		size_t cap = sd->cap ? sd->cap * 2 : 64;
		mapped *v = realloc(sd->v, cap * sizeof *v);
		if (!v)
			return NULL;
		sd->v = v;
		sd->cap = cap;
	}
	memset(&sd->v[sd->n], 0, sizeof sd->v[sd->n]);
	return &sd->v[sd->n++];
}

static int cmp_mapped(const void *a, const void *b)
{
	const mapped *x = a, *y = b;
	int c = tb_cell_cmp(&x->cell, &y->cell);

	return c ? c : strcmp(x->t->name, y->t->name);
}

const char *tb_unpaired_reason(tb_unpaired_kind kind)
{
	static const char *const reasons[] = {
		[TB_UNP_UNMAPPED] = "no naming rule matched",
		[TB_UNP_DUPLICATE] = "another tensor of this tree maps to the same cell",
		[TB_UNP_ONE_SIDED] = "no tensor of the other tree maps to its cell",
		[TB_UNP_UNSPLIT] = "a fused projection the other tree has as separate ones: give --heads and --kv-heads to split it",
		[TB_UNP_TOWER] = "a vision or audio tower's (or its projector's): not a cell of the text decoder",
	};

	return reasons[kind];
}

static int add_unpaired(tb_pairing *p, int side, const tb_tensor *t, tb_unpaired_kind kind)
{
	tb_unpaired *u = realloc(p->unp[side], (p->n_unp[side] + 1) * sizeof *u);

	if (!u)
		return -1;
	p->unp[side] = u;
	u[p->n_unp[side]].tensor = t;
	u[p->n_unp[side]].kind = kind;
	u[p->n_unp[side]].reason = tb_unpaired_reason(kind);
	p->n_unp[side]++;
	return 0;
}

/* Keep a view for the pairing's lifetime. */
static int keep_view(tb_pairing *p, tb_tensor *v)
{
	tb_tensor **views = realloc(p->views, (p->n_views + 1) * sizeof *views);

	if (!views) {
		tb_view_free(v);
		return -1;
	}
	p->views = views;
	p->views[p->n_views++] = v;
	return 0;
}

/* Two tensors of one tree that the map file puts in one cell: its rules
 * are ambiguous, which no pairing can resolve. */
static int ambiguous(const tb_namer *namer, const tb_tree *tree, const mapped *a, const mapped *b, tb_err *err)
{
	char cell[TB_CELL_NAME_MAX];

	tb_cell_name(&a->cell, cell, sizeof cell);
	if (a->user_rule == b->user_rule)
		return tb_err_setc(err, TB_ERR_FORMAT, tb_namer_path(namer), "map rule %d maps both %s and %s of %s to %s", a->user_rule,
				  a->t->name, b->t->name, tree->path, cell);
	return tb_err_setc(err, TB_ERR_FORMAT, tb_namer_path(namer), "map rules %d and %d both claim %s (%s and %s of %s)",
			  a->user_rule < b->user_rule ? a->user_rule : b->user_rule,
			  a->user_rule < b->user_rule ? b->user_rule : a->user_rule, cell, a->t->name, b->t->name,
			  tree->path);
}

/* Hugging Face decoders append the final norm's output as the last of
 * their output_hidden_states: a tree's highest hidden_states[M] is
 * final_norm, not layer M-1's output. */
static void last_hidden_state(side_vec *sd)
{
	int best = 0;
	size_t at = sd->n;

	for (size_t i = 0; i < sd->n; i++) {
		int idx = sd->v[i].user_rule < 0 ? tb_hidden_states_index(sd->v[i].t->name) : -1;
		if (idx > best) {
			best = idx;
			at = i;
		}
	}
	if (at < sd->n) {
		tb_cell_make_id(&sd->v[at].cell, -1, TB_TAP_FINAL_NORM);
	}
}

/* A tree that records leaf modules only (transformers' model debugger) or
 * names a module by its last op's output (Polygraphy's ONNX outputs, where
 * that output is o_proj's or down_proj's own) holds no attn or mlp of its
 * own: the projection that ends the module is its output too.  Only for a
 * tree with no such cell at all, so a tree that dumped both keeps its own.
 * -1 when out of memory. */
static int module_from_projection(side_vec *sd)
{
	static const struct {
		tb_tap_id whole, proj;
	} ends[] = {{TB_TAP_ATTN, TB_TAP_ATTN_O}, {TB_TAP_MLP, TB_TAP_MLP_DOWN}};

	for (size_t k = 0; k < sizeof ends / sizeof *ends; k++) {
		bool whole = false, proj = false;
		size_t n = sd->n;
		for (size_t i = 0; i < n; i++) {
			whole = whole || sd->v[i].cell.id == ends[k].whole;
			proj = proj || sd->v[i].cell.id == ends[k].proj;
		}
		if (whole || !proj)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (sd->v[i].cell.id != ends[k].proj || sd->v[i].user_rule >= 0)
				continue;
			mapped m = sd->v[i], *e = side_add(sd);
			if (!e)
				return -1;
			*e = m;
			tb_cell_make_id(&e->cell, m.cell.layer, ends[k].whole);
		}
	}
	return 0;
}

/* Does a layer of this side hold experts: an MoE cell besides the router,
 * or a tensor of its experts (per-expert hooks: layers.N.mlp.experts.3)? */
static bool layer_has_experts(const side_vec *sd, const tb_tree *tree, int layer)
{
	char key[2][48];

	for (size_t i = 0; i < sd->n; i++) {
		tb_tap_id id = sd->v[i].cell.id;
		if (sd->v[i].cell.layer == layer &&
		    (id == TB_TAP_MLP_ROUTER_PROBS || id == TB_TAP_MLP_TOPK_IDS || id == TB_TAP_MLP_TOPK_WEIGHTS ||
		     id == TB_TAP_MLP_EXPERTS || id == TB_TAP_MLP_SHARED))
			return true;
	}
	snprintf(key[0], sizeof key[0], "layers.%d.mlp.experts", layer);
	snprintf(key[1], sizeof key[1], "layers.%d.mlp.shared_expert", layer);
	for (size_t i = 0; i < tree->n_tensors; i++)
		if (strstr(tree->tensors[i]->name, key[0]) || strstr(tree->tensors[i]->name, key[1]))
			return true;
	return false;
}

static const mapped *find_id(const side_vec *sd, int layer, tb_tap_id id)
{
	for (size_t i = 0; i < sd->n; i++)
		if (sd->v[i].cell.layer == layer && sd->v[i].cell.id == id)
			return &sd->v[i];
	return NULL;
}

static int64_t last_dim(const tb_tensor *t)
{
	return t->ndim ? t->shape[t->ndim - 1] : 0;
}

/* Hugging Face calls an MoE router the MLP's "gate", the word a dense MLP
 * uses for its gate projection: a layer's mlp.gate is its router only when
 * the layer holds experts, or, with neither an up nor a down projection
 * dumped, when it scores fewer values than the hidden width. */
static bool gate_is_router(const side_vec *sd, const tb_tree *tree, const mapped *m)
{
	const mapped *norm = find_id(sd, m->cell.layer, TB_TAP_MLP_NORM);
	size_t len = strlen(m->t->name);

	if (len < 9 || strcmp(m->t->name + len - 9, ".mlp.gate"))
		return true;
	if (layer_has_experts(sd, tree, m->cell.layer))
		return true;
	if (find_id(sd, m->cell.layer, TB_TAP_MLP_UP) || find_id(sd, m->cell.layer, TB_TAP_MLP_DOWN) || !norm)
		return false;
	return last_dim(m->t) < last_dim(norm->t);
}

/* Rows read to tell router probabilities from router logits. */
#define PROB_ROWS 8

/* Are t's first rows probabilities: finite, non-negative, each summing to
 * 1 up to its dtype's rounding (bf16 rounds each of them by up to 2^-8 of
 * itself: the sum by up to that)?  (transformers v5 routers return them
 * where 4.x returned logits.) */
static bool rows_are_probabilities(tb_tensor *t)
{
	int64_t e = last_dim(t);
	uint64_t rows = e > 0 ? t->numel / (uint64_t)e : 0, n;
	float *v;
	tb_err err;
	bool probs = true;
	double tol = 1e-3 + tb_dtype_rounding(t->dtype);

	if (e <= 1 || !rows || t->partial || t->sketch)
		return false;
	n = (rows < PROB_ROWS ? rows : PROB_ROWS) * (uint64_t)e;
	v = malloc(n * sizeof *v);
	if (!v || tb_tensor_acquire(t, &err) < 0) {
		free(v);
		return false;
	}
	tb_tensor_read_f32(t, 0, n, v);
	tb_tensor_release(t);
	for (uint64_t r = 0; r * (uint64_t)e < n && probs; r++) {
		double sum = 0;
		for (int64_t k = 0; k < e; k++) {
			float x = v[r * (uint64_t)e + (uint64_t)k];
			probs = probs && x >= 0 && x <= 1;
			sum += x;
		}
		probs = probs && sum > 1 - tol && sum < 1 + tol;
	}
	free(v);
	return probs;
}

/* The MoE cells of one side (tbisect-dumps(5), Mixture of experts): a
 * dense layer's "gate" back to mlp.gate; router probabilities apart from
 * router logits, so the two never pair; llama.cpp's last combine weights
 * (gathered, normalised, scaled) as mlp.topk_weights; and in a layer with
 * neither a shared expert nor an MLP output of its own (llama.cpp's
 * Qwen3-MoE graph adds ffn_moe_out to the residual), the experts' sum as
 * the MLP's output too.  -1 when out of memory. */
static int moe_cells(side_vec *sd, const tb_tree *tree)
{
	static const char *const weights[] = {"mlp.moe_w", "mlp.moe_w_norm", "mlp.moe_w_scaled"};
	size_t n = sd->n;

	for (size_t i = 0; i < n; i++) {
		mapped *m = &sd->v[i];
		if (m->user_rule >= 0 || m->cell.id != TB_TAP_MLP_ROUTER)
			continue;
		/* no gate projection's rows are probabilities */
		if (rows_are_probabilities(m->t))
			tb_cell_make_id(&m->cell, m->cell.layer, TB_TAP_MLP_ROUTER_PROBS);
		else if (!gate_is_router(sd, tree, m))
			tb_cell_make_id(&m->cell, m->cell.layer, TB_TAP_MLP_GATE);
	}
	for (size_t i = 0; i < n; i++) {
		mapped *m = &sd->v[i], *last = NULL;
		int stage = -1;
		if (m->cell.id != TB_TAP_OTHER || strncmp(m->cell.tap, "mlp.moe_w", 9) ||
		    find_id(sd, m->cell.layer, TB_TAP_MLP_TOPK_WEIGHTS))
			continue;
		for (size_t j = 0; j < n; j++)
			for (int k = 0; k < 3; k++)
				if (sd->v[j].cell.layer == m->cell.layer && !strcmp(sd->v[j].cell.tap, weights[k]) && k > stage) {
					stage = k;
					last = &sd->v[j];
				}
		if (last)
			tb_cell_make_id(&last->cell, last->cell.layer, TB_TAP_MLP_TOPK_WEIGHTS);
	}
	for (size_t i = 0; i < n; i++) {
		int layer = sd->v[i].cell.layer;
		if (sd->v[i].cell.id != TB_TAP_MLP_EXPERTS || sd->v[i].user_rule >= 0 || find_id(sd, layer, TB_TAP_MLP) ||
		    find_id(sd, layer, TB_TAP_MLP_SHARED))
			continue;
		mapped e = sd->v[i], *whole = side_add(sd);
		if (!whole)
			return -1;
		*whole = e;
		tb_cell_make_id(&whole->cell, layer, TB_TAP_MLP);
	}
	return 0;
}

/* Layer l of a tensor [T, L, k] (a router replay's), as [T, k]. */
static int layer_of_axis1(tb_tensor *t, int64_t l, tb_tensor **out, tb_err *err)
{
	int64_t tok = t->shape[0], layers = t->shape[1], k = t->numel / (uint64_t)(tok * layers), shape[2] = {tok, k};
	uint64_t *index = malloc((size_t)(tok * k > 0 ? tok * k : 1) * sizeof *index);
	char name[TB_CELL_NAME_MAX + 64];
	int rc;

	if (!index)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
	for (int64_t i = 0; i < tok; i++)
		for (int64_t j = 0; j < k; j++)
			index[i * k + j] = (uint64_t)((i * layers + l) * k + j);
	snprintf(name, sizeof name, "%s[:, %lld]", t->name, (long long)l);
	rc = tb_compose_gather_as(t, index, 2, shape, name, out, err);
	free(index);
	return rc;
}

/* A scan-stacked tensor [L, ...] (or a router replay's [T, L, k]) becomes
 * one view per layer. */
static int unstack(tb_pairing *p, side_vec *sd, const mapped *m, tb_err *err)
{
	int axis = tb_name_layer_axis(m->t->name);

	for (int64_t l = 0; l < m->t->shape[axis]; l++) {
		char suffix[32];
		tb_tensor *v;
		mapped *e;
		snprintf(suffix, sizeof suffix, "[%lld]", (long long)l);
		if ((axis ? layer_of_axis1(m->t, l, &v, err) : tb_view_index0(m->t, l, suffix, &v, err)) < 0 ||
		    keep_view(p, v) < 0)
			return -1;
		e = side_add(sd);
		if (!e)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		e->cell = m->cell;
		e->cell.layer = (int)l;
		e->t = v;
		e->user_rule = m->user_rule;
	}
	return 0;
}

/* A tensor of the last position only, its position axis dropped
 * ([vocab]): a partial dump of one position, which pairing reads at the
 * other side's last position (tb_partial_place). */
static int last_position(tb_pairing *p, mapped *m, tb_err *err)
{
	int64_t sq[TB_MAX_DIMS], shape[2];
	uint64_t *index;
	tb_tensor *g;
	int rc;

	if (m->t->partial || m->t->sketch || tb_tensor_squeezed(m->t, sq) != 1)
		return 0;
	shape[0] = 1;
	shape[1] = sq[0];
	index = malloc(m->t->numel ? m->t->numel * sizeof *index : 1);
	if (!index)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
	for (uint64_t k = 0; k < m->t->numel; k++)
		index[k] = k;
	rc = tb_compose_partial(m->t, index, index, m->t->numel, 2, shape, m->t->name, &g, err);
	free(index);
	if (rc < 0)
		return -1;
	if (keep_view(p, g) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
	m->t = g;
	return 0;
}

/* Map every tensor of a tree into sd; unmapped tensors go to unpaired.
 * hits counts the tensors each map rule took. */
static int map_side(tb_pairing *p, int si, const tb_tree *tree, const tb_namer *namer, const char *tower, side_vec *sd,
		    size_t *hits, tb_err *err)
{
	tb_tree_names tn;
	tb_tensor *last_block = NULL;
	long dense = 0, k; /* MaxText DeepSeek's dense layers, which its MoE layers' numbers follow */

	tb_tree_names_init(&tn, tree);
	for (size_t i = 0; i < tree->n_tensors; i++)
		if (tb_name_deepseek_layer(tree->tensors[i]->name, &k) == 1 && k >= dense)
			dense = k + 1;
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		mapped m = {.t = t};
		bool mapped_;
		if (tower) {
			/* a tower's grid holds its tensors only */
			const char *tw = tb_name_tower(t->name);
			mapped_ = tb_namer_map_tower(namer, t->name, tower, &m.cell, &m.user_rule);
			if (!mapped_ && (!tw || strcmp(tw, tower)))
				continue;
		} else {
			mapped_ = tb_namer_map_role(namer, t->name, t->role, tn.shared, &m.cell, &m.user_rule, NULL, 0);
		}
		/* a tower's layers are no text decoder's, whatever their names
		 * look like, unless the map file says otherwise */
		if (!tower && m.user_rule < 0 && tb_name_tower(t->name)) {
			if (add_unpaired(p, si, t, TB_UNP_TOWER) < 0)
				return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
			continue;
		}
		/* a recorded input caught by a free-form sub-tap (layers.N.mlp.inputs_0)
		 * is still an input */
		if (mapped_ && m.user_rule < 0 && m.cell.id == TB_TAP_OTHER && tb_name_is_aux(t->name))
			continue;
		if (!mapped_ && tb_name_is_last_block(t->name)) {
			last_block = t;
			continue;
		}
		if (!mapped_) {
			/* inputs are no cell (the sanity checks compare the token ids),
			 * nor are a graph's internals */
			if (tb_name_is_aux(t->name) || (t->role && !t->role[0]))
				continue;
			if (add_unpaired(p, si, t, TB_UNP_UNMAPPED) < 0)
				return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
			continue;
		}
		if (m.user_rule >= 0)
			hits[m.user_rule]++;
		if (m.user_rule < 0 && m.cell.layer >= 0 && tb_name_deepseek_layer(t->name, &k) == 2)
			m.cell.layer += (int)dense;
		if (m.user_rule < 0 && tb_name_is_last_position(t->name) && last_position(p, &m, err) < 0)
			return -1;
		if (m.cell.layer == TB_LAYER_STACKED) {
			if (t->ndim < 2 + tb_name_layer_axis(t->name)) {
				if (add_unpaired(p, si, t, TB_UNP_UNMAPPED) < 0)
					return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
			} else if (unstack(p, sd, &m, err) < 0) {
				return -1;
			}
			continue;
		}
		mapped *e = side_add(sd);
		if (!e)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		*e = m;
	}
	last_hidden_state(sd);
	if (moe_cells(sd, tree) < 0 || module_from_projection(sd) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
	if (last_block) {
		int top = -1;
		for (size_t i = 0; i < sd->n; i++)
			if (sd->v[i].cell.layer > top)
				top = sd->v[i].cell.layer;
		mapped *e = top >= 0 ? side_add(sd) : NULL;
		if (top >= 0 && !e)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		if (e) {
			*e = (mapped){.t = last_block, .user_rule = -1};
			tb_cell_make_id(&e->cell, top, TB_TAP_BLOCK);
		} else if (add_unpaired(p, si, last_block, TB_UNP_UNMAPPED) < 0) {
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		}
	}
	return 0;
}

static const mapped *find(const side_vec *sd, int layer, const char *tap)
{
	for (size_t i = 0; i < sd->n; i++)
		if (sd->v[i].cell.layer == layer && !strcmp(sd->v[i].cell.tap, tap))
			return &sd->v[i];
	return NULL;
}

/* Values per row of a tensor whose rows are those of a fused one of
 * `rows` rows (0 when they are not). */
static int64_t width_of(const tb_tensor *t, uint64_t rows)
{
	return rows && t->numel % rows == 0 ? (int64_t)(t->numel / rows) : 0;
}

/* The widths a fused projection splits into, in order: those of the
 * separate projections of the other tree, else from the head counts
 * (q, k, v: heads, kv_heads, kv_heads heads of one size).  0 when unknown. */
static int split_widths(const mapped *m, const side_vec *other, const char *const *parts, int n, const tb_pairing_opts *o,
			int64_t *w)
{
	const tb_tensor *t = m->t;
	int64_t total = t->shape[t->ndim - 1], sum = 0;
	uint64_t rows = total ? t->numel / (uint64_t)total : 0;

	for (int k = 0; k < n; k++) {
		const mapped *s = find(other, m->cell.layer, parts[k]);
		w[k] = s ? width_of(s->t, rows) : 0;
		sum += w[k];
	}
	if (sum == total && w[0] > 0)
		return 0;
	if (n == 3 && o && o->heads > 0) {
		int64_t hkv = o->kv_heads > 0 ? o->kv_heads : o->heads, units = o->heads + 2 * hkv;
		if (total % units == 0) {
			w[0] = o->heads * (total / units);
			w[1] = w[2] = hkv * (total / units);
			return 0;
		}
	}
	if (n == 2 && total % 2 == 0) {
		w[0] = w[1] = total / 2;
		return 0;
	}
	return -1;
}

/* A fused projection (attn.qkv, mlp.gate_up) where the other tree has the
 * separate ones becomes one view per part; one that cannot be split stays
 * whole, and unpaired says why. */
static int split_fused(tb_pairing *p, side_vec *sd, const side_vec *other, const tb_pairing_opts *o, tb_err *err)
{
	size_t n = sd->n;

	for (size_t i = 0; i < n; i++) {
		mapped m = sd->v[i];
		tb_tap_id ids[TB_MAX_PARTS];
		const char *parts[TB_MAX_PARTS];
		int np = tb_tap_parts(m.cell.id, ids);
		int64_t w[TB_MAX_PARTS] = {0}, at = 0;

		for (int k = 0; k < np; k++)
			parts[k] = tb_tap_info_of(ids[k])->name;
		if (!np || find(other, m.cell.layer, m.cell.tap) || !find(other, m.cell.layer, parts[0]))
			continue;
		if (split_widths(&m, other, parts, np, o, w) < 0) {
			sd->v[i].unsplit = true;
			continue;
		}
		for (int k = 0; k < np; k++) {
			char suffix[32];
			tb_tensor *v;
			mapped *e;
			tb_tap_part_tag(ids[k], suffix, sizeof suffix);
			if (tb_view_columns(m.t, at, w[k], suffix, &v, err) < 0 || keep_view(p, v) < 0)
				return -1;
			at += w[k];
			e = k == 0 ? &sd->v[i] : side_add(sd);
			if (!e)
				return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
			e->t = v;
			e->user_rule = m.user_rule;
			tb_cell_make(&e->cell, m.cell.layer, parts[k]);
		}
	}
	return 0;
}

/* Fused projections that could not be split leave the side, unpaired. */
static int unpaired_fused(tb_pairing *p, int si, side_vec *sd)
{
	size_t w = 0;

	for (size_t i = 0; i < sd->n; i++) {
		if (sd->v[i].unsplit) {
			if (add_unpaired(p, si, sd->v[i].t, TB_UNP_UNSPLIT) < 0)
				return -1;
			continue;
		}
		sd->v[w++] = sd->v[i];
	}
	sd->n = w;
	return 0;
}

/* Sort a side by cell; a second tensor for a cell goes to unpaired. */
static int settle(tb_pairing *p, int si, const tb_tree *tree, const tb_namer *namer, side_vec *sd, tb_err *err)
{
	size_t w = 0;

	if (sd->n > 1)
		qsort(sd->v, sd->n, sizeof *sd->v, cmp_mapped);
	for (size_t i = 0; i < sd->n; i++) {
		if (w > 0 && tb_cell_eq(&sd->v[w - 1].cell, &sd->v[i].cell)) {
			if (sd->v[w - 1].user_rule >= 0 && sd->v[i].user_rule >= 0)
				return ambiguous(namer, tree, &sd->v[w - 1], &sd->v[i], err);
			if (add_unpaired(p, si, sd->v[i].t, TB_UNP_DUPLICATE) < 0)
				return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
			continue;
		}
		sd->v[w++] = sd->v[i];
	}
	sd->n = w;
	return 0;
}

/* A cell dumped in part on one side (llama.cpp's text dumps print a few
 * values of each axis) and whole on the other, where the whole one can be
 * read at those elements (tb_partial_place): it is read at them only, so
 * both sides hold the same ones.  Other partial cells are left as they
 * are: compare sees their shapes differ unless both dumped the same
 * elements. */
static int gather_partial(tb_pairing *p, tb_pair *pr, tb_err *err)
{
	tb_tensor **whole, *g;
	const tb_partial *pa;

	if (!pr->ref || !pr->cand || !pr->ref->partial == !pr->cand->partial)
		return 0;
	whole = pr->ref->partial ? &pr->cand : &pr->ref;
	pa = pr->ref->partial ? pr->ref->partial : pr->cand->partial;
	const uint64_t *index = pa->index;
	uint64_t base, *at = NULL;
	int rc;
	if ((*whole)->sketch)
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, (*whole)->path,
				   "'%s' is a sketch, and the other side dumped only some of its values: a partial dump "
				   "compares with the tree itself",
				   (*whole)->name);
	if (!tb_partial_place(pa, *whole, &base))
		return 0;
	if (base) {
		/* the same elements, base further on (a later position) */
		at = malloc(pa->n ? pa->n * sizeof *at : 1);
		if (!at)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		for (uint64_t k = 0; k < pa->n; k++)
			at[k] = base + pa->index[k];
		index = at;
	}
	rc = tb_compose_gather(*whole, index, pa->n, (*whole)->name, &g, err);
	free(at);
	if (rc < 0)
		return -1;
	if (keep_view(p, g) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
	g->partial = pa;
	*whole = g;
	return 0;
}

/* The query and key cells whose one side is llama.cpp's (in GGUF's
 * channel order) and the other not. */
static bool qk_pair(const tb_pair *pr)
{
	tb_tap_id id = pr->cell.id;

	if (id != TB_TAP_ATTN_Q && id != TB_TAP_ATTN_K && id != TB_TAP_ATTN_Q_ROPE && id != TB_TAP_ATTN_K_ROPE)
		return false;
	if (!pr->ref || !pr->cand || !pr->ref->gguf_qk_head_dim == !pr->cand->gguf_qk_head_dim)
		return false;
	return pr->ref->gguf_qk_head_dim ? tb_qkorder_fits(pr->ref, pr->cand) : tb_qkorder_fits(pr->cand, pr->ref);
}

/* Does undoing the converter's permutation make the first query (or key)
 * agree better?  Yes unless it clearly does not (then p->qk_note says
 * so): a pre-RoPE projection decides best, as RoPE plays no part in it. */
static int qk_decide(tb_pairing *p, bool *undo, tb_err *err)
{
	const tb_pair *pick = NULL;
	double rel[2];

	*undo = true;
	for (size_t k = 0; k < p->n_pairs; k++) {
		const tb_pair *pr = &p->pairs[k];
		if (!qk_pair(pr))
			continue;
		if (!pick || ((pr->cell.id == TB_TAP_ATTN_Q || pr->cell.id == TB_TAP_ATTN_K) &&
			      pick->cell.id != TB_TAP_ATTN_Q && pick->cell.id != TB_TAP_ATTN_K))
			pick = pr;
	}
	if (!pick)
		return 0;
	for (int u = 0; u < 2; u++) {
		tb_tensor *g = pick->ref->gguf_qk_head_dim ? pick->ref : pick->cand;
		tb_tensor *o = g == pick->ref ? pick->cand : pick->ref, *v;
		if (tb_qkorder_view(g, o, u, &v, err) < 0)
			return -1;
		rel[u] = tb_qkorder_rel_l2(v, o);
		tb_compose_free(v);
	}
	if (rel[0] < rel[1] / 2) {
		char cell[TB_CELL_NAME_MAX];
		*undo = false;
		tb_cell_name(&pick->cell, cell, sizeof cell);
		snprintf(p->qk_note, sizeof p->qk_note,
			 "llama.cpp's queries and keys agree in their own channel order, not with convert_hf_to_gguf's "
			 "permutation undone (%s: rel_l2 %.2g as they are, %.2g undone): the converter did not permute "
			 "q and k, right for a model whose RoPE rotates halves in llama.cpp too (NeoX style, as Qwen2), "
			 "the classic conversion bug for a Llama-style one",
			 cell, rel[0], rel[1]);
	}
	return 0;
}

/* See each llama.cpp query and key through a view in the other side's order. */
static int qk_order(tb_pairing *p, tb_err *err)
{
	bool undo;

	if (qk_decide(p, &undo, err) < 0)
		return -1;
	for (size_t k = 0; k < p->n_pairs; k++) {
		tb_pair *pr = &p->pairs[k];
		tb_tensor **g, *v;
		if (!qk_pair(pr))
			continue;
		g = pr->ref->gguf_qk_head_dim ? &pr->ref : &pr->cand;
		if (tb_qkorder_view(*g, g == &pr->ref ? pr->cand : pr->ref, undo, &v, err) < 0)
			return -1;
		if (keep_view(p, v) < 0)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		*g = v;
	}
	return 0;
}

/* The map file's rules that took no tensor of either tree. */
/* Cells of heads dumped in two layouts ([S, heads, d] against [heads, S,
 * d] or [S, heads*d]): one side seen in the other's (tb_heads_view). */
static int head_layouts(tb_pairing *p, tb_err *err)
{
	static const tb_tap_id heads[] = {TB_TAP_ATTN_Q,      TB_TAP_ATTN_K,      TB_TAP_ATTN_V,
					  TB_TAP_ATTN_Q_ROPE, TB_TAP_ATTN_K_ROPE, TB_TAP_ATTN_CORE};

	for (size_t k = 0; k < p->n_pairs; k++) {
		tb_pair *pr = &p->pairs[k];
		tb_tensor *which, *v;
		size_t i = 0;
		while (i < sizeof heads / sizeof *heads && heads[i] != pr->cell.id)
			i++;
		if (i == sizeof heads / sizeof *heads || !pr->ref || !pr->cand)
			continue;
		if (tb_heads_view(pr->ref, pr->cand, &which, &v, err) < 0)
			return -1;
		if (!v)
			continue;
		if (keep_view(p, v) < 0)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		if (which == pr->cand)
			pr->cand = v;
		else
			pr->ref = v;
	}
	return 0;
}

static int note_unused(tb_pairing *p, const tb_namer *namer, const size_t *hits)
{
	size_t n = tb_namer_n_rules(namer);

	p->unused_rules = calloc(n ? n : 1, sizeof *p->unused_rules);
	if (!p->unused_rules)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!hits[i])
			p->unused_rules[p->n_unused_rules++] = i;
	return 0;
}

int tb_pairing_build(const tb_tree *ref, const tb_tree *cand, const tb_namer *namer, const tb_pairing_opts *o,
		     tb_pairing **out, tb_err *err)
{
	tb_pairing *p = calloc(1, sizeof *p);
	size_t *hits = calloc(tb_namer_n_rules(namer) + 1, sizeof *hits);
	side_vec sd[2] = {{0}};
	const tb_tree *trees[2] = {ref, cand};
	size_t i = 0, j = 0;

	*out = NULL;
	if (!p || !hits) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
		goto fail;
	}
	for (int s = 0; s < 2; s++)
		if (map_side(p, s, trees[s], namer, o ? o->tower : NULL, &sd[s], hits, err) < 0)
			goto fail;
	for (int s = 0; s < 2; s++)
		if (split_fused(p, &sd[s], &sd[1 - s], o, err) < 0)
			goto fail;
	for (int s = 0; s < 2; s++) {
		if (unpaired_fused(p, s, &sd[s]) < 0)
			goto oom;
		if (settle(p, s, trees[s], namer, &sd[s], err) < 0)
			goto fail;
	}
	p->pairs = calloc(sd[0].n + sd[1].n + 1, sizeof *p->pairs);
	if (!p->pairs || note_unused(p, namer, hits) < 0)
		goto oom;
	while (i < sd[0].n || j < sd[1].n) {
		const mapped *a = sd[0].v, *b = sd[1].v;
		tb_pair *pr = &p->pairs[p->n_pairs++];
		int c = i >= sd[0].n ? 1 : j >= sd[1].n ? -1 : tb_cell_cmp(&a[i].cell, &b[j].cell);
		if (c <= 0) {
			pr->cell = a[i].cell;
			pr->ref = a[i++].t;
		}
		if (c >= 0) {
			pr->cell = b[j].cell;
			pr->cand = b[j++].t;
		}
		if (!pr->ref && add_unpaired(p, 1, pr->cand, TB_UNP_ONE_SIDED) < 0)
			goto oom;
		if (!pr->cand && add_unpaired(p, 0, pr->ref, TB_UNP_ONE_SIDED) < 0)
			goto oom;
		if (pr->cell.layer + 1 > p->n_layers)
			p->n_layers = pr->cell.layer + 1;
	}
	if (qk_order(p, err) < 0 || head_layouts(p, err) < 0)
		goto fail;
	for (size_t k = 0; k < p->n_pairs; k++)
		if (gather_partial(p, &p->pairs[k], err) < 0)
			goto fail;
	free(sd[0].v);
	free(sd[1].v);
	free(hits);
	*out = p;
	return 0;
oom:
	tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory while pairing tensors");
fail:
	free(sd[0].v);
	free(sd[1].v);
	free(hits);
	tb_pairing_free(p);
	return -1;
}

void tb_pairing_free(tb_pairing *p)
{
	if (!p)
		return;
	free(p->pairs);
	free(p->unp[0]);
	free(p->unp[1]);
	free(p->unused_rules);
	for (size_t i = 0; i < p->n_views; i++)
		tb_view_free(p->views[i]);
	free(p->views);
	free(p);
}

long tb_pairing_find(const tb_pairing *p, const tb_cell *cell)
{
	for (size_t i = 0; i < p->n_pairs; i++)
		if (tb_cell_eq(&p->pairs[i].cell, cell))
			return (long)i;
	return -1;
}

size_t tb_pairing_complete(const tb_pairing *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_pairs; i++)
		n += p->pairs[i].ref && p->pairs[i].cand;
	return n;
}

/* A main cell (doc/report.md, "Cells and statuses"): a tap of the table that
 * refines no other. */
static bool main_cell(const tb_cell *cell)
{
	const tb_tap_info *ti = tb_tap_info_of(cell->id);

	return ti && ti->parent == TB_TAP_NONE;
}

void tb_pairing_coverage(const tb_pairing *p, tb_coverage *c)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_pair *pr = &p->pairs[i];
		bool layer = pr->cell.layer >= 0, main = main_cell(&pr->cell);
		c->paired += pr->ref && pr->cand;
		c->cells_paired += main && pr->ref && pr->cand;
		c->layer_paired += layer && pr->ref && pr->cand;
		for (int side = 0; side < 2; side++) {
			const tb_tensor *t = side ? pr->cand : pr->ref, *other = side ? pr->ref : pr->cand;
			c->layer_tensors[side] += layer && t;
			c->cells[side] += main && t;
			c->sub_one_sided[side] += !main && t && !other;
		}
	}
	for (int side = 0; side < 2; side++) {
		/* Every tensor is in a complete pair or unpaired, one-sided cells too. */
		c->tensors[side] = c->paired + p->n_unp[side];
		for (size_t i = 0; i < p->n_unp[side]; i++) {
			const tb_unpaired *u = &p->unp[side][i];
			if (u->kind != TB_UNP_UNMAPPED)
				continue;
			c->unmapped[side]++;
			/* A layer index is the likeliest number in a tensor's name. */
			if (strpbrk(u->tensor->name, "0123456789"))
				c->layer_tensors[side]++;
		}
	}
}

static size_t smaller_side(const tb_coverage *c)
{
	return c->cells[0] < c->cells[1] ? c->cells[0] : c->cells[1];
}

bool tb_coverage_empty(const tb_coverage *c)
{
	/* A side with no tensor left (a layout that stitched none of its
	 * steps) pairs nothing either: all missing is no match. */
	return c->paired == 0;
}

static bool no_layer_paired(const tb_coverage *c)
{
	return c->layer_tensors[0] && c->layer_tensors[1] && !c->layer_paired;
}

bool tb_coverage_poor(const tb_coverage *c)
{
	return tb_coverage_empty(c) || no_layer_paired(c) || c->cells_paired * 2 < smaller_side(c);
}

void tb_coverage_text(const tb_coverage *c, char *buf, size_t size)
{
	size_t smaller = smaller_side(c);
	char unm[96] = "";
	int n;

	if (c->unmapped[0] || c->unmapped[1])
		snprintf(unm, sizeof unm, "; unmapped tensors: ref %zu, cand %zu", c->unmapped[0], c->unmapped[1]);
	if (tb_coverage_empty(c))
		n = snprintf(buf, size, "no cell paired (ref %zu tensors, cand %zu", c->tensors[0], c->tensors[1]);
	else if (c->cells_paired * 2 < smaller)
		n = snprintf(buf, size, "only %zu of %zu main cells paired (ref %zu, cand %zu", c->cells_paired, smaller,
			     c->cells[0], c->cells[1]);
	else if (no_layer_paired(c))
		n = snprintf(buf, size, "no layer cell paired, %zu main cell%s in all (ref %zu, cand %zu", c->cells_paired,
			     c->cells_paired == 1 ? "" : "s", c->cells[0], c->cells[1]);
	else
		n = snprintf(buf, size, "%zu of %zu main cells paired (ref %zu, cand %zu", c->cells_paired, smaller,
			     c->cells[0], c->cells[1]);
	if (n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, "%s)", unm);
}

void tb_coverage_subtap_note(const tb_coverage *c, char *buf, size_t size)
{
	size_t n = c->sub_one_sided[0] + c->sub_one_sided[1];

	if (!n) {
		snprintf(buf, size, "%s", "");
		return;
	}
	snprintf(buf, size,
		 "%zu sub-tap cell%s on one side only (ref %zu, cand %zu): listed as unpaired, not counted in the "
		 "coverage",
		 n, n == 1 ? "" : "s", c->sub_one_sided[0], c->sub_one_sided[1]);
}
