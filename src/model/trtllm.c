#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/trtllm.h"

#define MAX_DEPTH 16

/* What a class is, by its name (TensorRT-LLM's modules: LlamaModel,
 * LlamaDecoderLayer, LlamaAttention, GatedMLP, RMSNorm, Embedding, Linear,
 * LMHead, RotaryEmbedding). */
typedef enum kind { K_OTHER, K_MODEL, K_LAYER, K_ATTN, K_MLP, K_NORM, K_EMBED, K_LINEAR, K_ROPE } kind;

static const struct {
	const char *part;
	bool suffix; /* the class name ends with part (else contains it) */
	kind k;
} kinds[] = {
    {"DecoderLayer", true, K_LAYER}, {"Block", true, K_LAYER},	    {"Model", true, K_MODEL},
    {"Attention", false, K_ATTN},    {"MLP", false, K_MLP},	    {"MoE", false, K_MLP},
    {"Norm", false, K_NORM},	     {"Embedding", false, K_EMBED}, {"Rotary", false, K_ROPE},
    {"Linear", false, K_LINEAR},     {"LMHead", false, K_LINEAR},
};

static kind kind_of(const char *cls, size_t n)
{
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
		size_t p = strlen(kinds[i].part);
		if (kinds[i].suffix ? n >= p && !strncmp(cls + n - p, kinds[i].part, p)
				    : memmem(cls, n, kinds[i].part, p) != NULL)
			return kinds[i].k;
	}
	return K_OTHER;
}

/* One call of a module. */
typedef struct call {
	long parent;		/* index, -1 at the top */
	long first_child, next; /* the calls it made, as a list; -1 ends it */
	long ordinal;
	const char *cls; /* into a name, cls_len bytes */
	size_t cls_len;
	kind k;
	char *path;    /* its module path, once named */
	bool internal; /* inside a linear layer (or another leaf) */
	int step;
} call;

typedef struct parsed {
	long node; /* the call the tensor belongs to */
	bool output;
	const char *x; /* the argument name or count */
} parsed;

typedef struct calls {
	call *v;
	size_t n, cap;
	long top; /* the first top-level call, -1: none */
} calls;

static long find_or_add(calls *c, long parent, long ordinal, const char *cls, size_t len)
{
	long *head = parent >= 0 ? &c->v[parent].first_child : &c->top;

	for (long i = *head; i >= 0; i = c->v[i].next)
		if (c->v[i].ordinal == ordinal && c->v[i].cls_len == len && !strncmp(c->v[i].cls, cls, len))
			return i;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		call *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return -2;
		c->v = v;
		c->cap = cap;
	}
	head = parent >= 0 ? &c->v[parent].first_child : &c->top;
	c->v[c->n] = (call){.parent = parent,
			    .first_child = -1,
			    .next = *head,
			    .ordinal = ordinal,
			    .cls = cls,
			    .cls_len = len,
			    .k = kind_of(cls, len),
			    .step = -1};
	*head = (long)c->n;
	return (long)c->n++;
}

/* "1.LlamaModel-2.LlamaDecoderLayer-output.2": its call (added to c) and
 * what it is; 0 when the name is not the hook's, -1 out of memory. */
static int parse(calls *c, const char *name, parsed *p)
{
	const char *s = name, *last = strrchr(name, '-');
	long node = -1;
	int depth = 0;

	if (!last || (strncmp(last + 1, "input.", 6) && strncmp(last + 1, "output.", 7)))
		return 0;
	p->output = last[1] == 'o';
	p->x = last + (p->output ? 8 : 7);
	if (!*p->x)
		return 0;
	while (s < last) {
		const char *dash = memchr(s, '-', (size_t)(last - s + 1)), *dot;
		char *end;
		long ord = strtol(s, &end, 10);
		if (!dash || end == s || *end != '.' || ord < 1 || !isdigit((unsigned char)*s) || ++depth > MAX_DEPTH)
			return 0;
		dot = end;
		if (dash - dot < 2)
			return 0;
		node = find_or_add(c, node, ord, dot + 1, (size_t)(dash - dot - 1));
		if (node == -2)
			return -1;
		s = dash + 1;
	}
	p->node = node;
	return node >= 0;
}

/* A child call and its ordinal, to sort the children by. */
typedef struct kid {
	long ordinal, node;
} kid;

static int cmp_kid(const void *a, const void *b)
{
	const kid *x = a, *y = b;

	return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* The names children get by their parent's kind and their own, in call
 * order: names[i] for the i-th child of the kind (from 0), when there are
 * `need` of them (0: any number); with `each`, names[0] for every one
 * (numbered ".i" when `numbered`).  top: the calls at the top level (no
 * parent). */
static const struct {
	bool top;
	kind parent, child;
	int need;
	bool each, numbered;
	const char *names[2];
} child_names[] = {
    {true, K_OTHER, K_MODEL, 0, true, false, {"model"}},
    {true, K_OTHER, K_LINEAR, 0, true, false, {"lm_head"}},
    {false, K_MODEL, K_EMBED, 1, false, false, {"embed_tokens"}},
    {false, K_MODEL, K_LAYER, 0, true, true, {"layers"}},
    {false, K_MODEL, K_NORM, 1, false, false, {"norm"}},
    {false, K_LAYER, K_NORM, 0, false, false, {"input_layernorm", "post_attention_layernorm"}},
    {false, K_LAYER, K_ATTN, 1, false, false, {"self_attn"}},
    {false, K_LAYER, K_MLP, 1, false, false, {"mlp"}},
    {false, K_ATTN, K_LINEAR, 2, false, false, {"qkv_proj", "o_proj"}},
    {false, K_ATTN, K_NORM, 2, false, false, {"q_norm", "k_norm"}},
    {false, K_ATTN, K_ROPE, 1, false, false, {"rotary_emb"}},
    {false, K_MLP, K_LINEAR, 2, false, false, {"gate_up_proj", "down_proj"}},
};

/* The name a child gets under a parent of kind pk, being the i-th of its
 * kind among its siblings (from 0), n of them. */
static void child_name(kind pk, const call *ch, int i, int n, char *buf, size_t size)
{
	char lower[128];
	size_t k;

	for (size_t r = 0; r < sizeof child_names / sizeof *child_names; r++) {
		const char *name = child_names[r].each ? child_names[r].names[0]
				   : i < 2	       ? child_names[r].names[i]
						       : NULL;
		if (child_names[r].top != (ch->parent < 0) || (!child_names[r].top && child_names[r].parent != pk) ||
		    child_names[r].child != ch->k || (child_names[r].need && n != child_names[r].need) || !name)
			continue;
		if (child_names[r].numbered)
			snprintf(buf, size, "%s.%d", name, i);
		else
			snprintf(buf, size, "%s", name);
		return;
	}
	/* any other: the class in lower case, numbered when there are several */
	for (k = 0; k < ch->cls_len && k + 1 < sizeof lower; k++)
		lower[k] = (char)tolower((unsigned char)ch->cls[k]);
	lower[k] = '\0';
	if (n > 1)
		snprintf(buf, size, "%s_%d", lower, i);
	else
		snprintf(buf, size, "%s", lower);
}

/* Name the children of parent (-1: the top-level calls). */
static int name_children(calls *c, long parent)
{
	long head = parent >= 0 ? c->v[parent].first_child : c->top;
	size_t nk = 0, cap = 0;
	kid *kv;
	long *kids;
	kind pk = parent >= 0 ? c->v[parent].k : K_OTHER;
	bool inside =
	    parent >= 0 && (c->v[parent].internal || pk == K_LINEAR || pk == K_EMBED || pk == K_NORM || pk == K_ROPE);

	for (long i = head; i >= 0; i = c->v[i].next)
		cap++;
	kv = malloc((cap ? cap : 1) * sizeof *kv);
	kids = malloc((cap ? cap : 1) * sizeof *kids);
	if (!kids || !kv) {
		free(kids);
		free(kv);
		return -1;
	}
	for (long i = head; i >= 0; i = c->v[i].next)
		kv[nk++] = (kid){c->v[i].ordinal, i};
	qsort(kv, nk, sizeof *kv, cmp_kid);
	for (size_t i = 0; i < nk; i++)
		kids[i] = kv[i].node;
	free(kv);
	for (size_t i = 0; i < nk; i++) {
		call *ch = &c->v[kids[i]];
		int idx = 0, n = 0;
		char name[160], path[4096];
		for (size_t j = 0; j < nk; j++) {
			if (c->v[kids[j]].k != ch->k)
				continue;
			idx += j < i;
			n++;
		}
		child_name(pk, ch, idx, n, name, sizeof name);
		if (parent >= 0)
			snprintf(path, sizeof path, "%s.%s", c->v[parent].path, name);
		else
			snprintf(path, sizeof path, "%s", name);
		ch->internal = inside;
		ch->step = parent >= 0 ? c->v[parent].step : ch->step;
		if (!(ch->path = strdup(path))) {
			free(kids);
			return -1;
		}
	}
	/* the top level: each call of the model is a step, what follows it
	 * (the LM head) belongs to its step */
	if (parent < 0) {
		int models = 0, step = -1;
		for (size_t i = 0; i < nk; i++)
			models += c->v[kids[i]].k == K_MODEL;
		for (size_t i = 0; i < nk && models > 1; i++) {
			step += c->v[kids[i]].k == K_MODEL;
			c->v[kids[i]].step = step < 0 ? 0 : step;
		}
	}
	for (size_t i = 0; i < nk; i++)
		if (name_children(c, kids[i]) < 0) {
			free(kids);
			return -1;
		}
	free(kids);
	return 0;
}

static bool numeric(const char *x)
{
	return *x && strspn(x, "0123456789") == strlen(x);
}

/* The order the hook wrote a call's outputs in: those it named after
 * arguments first (their order is the signature's, unknown here: by
 * name), then the counted ones by count. */
static int cmp_outputs(const void *a, const void *b)
{
	const char *x = (*(const parsed *const *)a)->x, *y = (*(const parsed *const *)b)->x;
	bool nx = numeric(x), ny = numeric(y);

	if (nx != ny)
		return nx ? 1 : -1;
	if (nx)
		return (strtol(x, NULL, 10) > strtol(y, NULL, 10)) - (strtol(x, NULL, 10) < strtol(y, NULL, 10));
	return strcmp(x, y);
}

/* Give the tensors of one call their names: at[0..n) index p and names. */
static int name_tensors(const calls *c, long node, tb_trtllm_name *names, const parsed *p, const size_t *at, size_t n)
{
	const parsed **outs = malloc((n ? n : 1) * sizeof *outs);
	size_t no = 0;
	const call *cl = &c->v[node];
	char buf[4400];

	if (!outs)
		return -1;
	for (size_t k = 0; k < n; k++) {
		size_t i = at[k];
		bool dup = false;
		names[i].step = cl->step;
		if (cl->internal) {
			names[i].internal = true;
			continue;
		}
		if (!p[i].output) {
			snprintf(buf, sizeof buf, "%s.inputs.%s", cl->path, p[i].x);
			if (!(names[i].out = strdup(buf)))
				goto oom;
			continue;
		}
		/* after the forward, the hook dumps the inputs again as outputs */
		for (size_t j = 0; j < n && !dup; j++)
			dup = !p[at[j]].output && !strcmp(p[at[j]].x, p[i].x);
		if (dup)
			names[i].internal = true;
		else
			outs[no++] = &p[i];
	}
	qsort(outs, no, sizeof *outs, cmp_outputs);
	for (size_t k = 0; k < no; k++) {
		size_t i = (size_t)(outs[k] - p);
		if (no == 1)
			snprintf(buf, sizeof buf, "%s", cl->path);
		else
			snprintf(buf, sizeof buf, "%s.output.%zu", cl->path, k);
		if (!(names[i].out = strdup(buf)))
			goto oom;
	}
	free(outs);
	return 0;
oom:
	free(outs);
	return -1;
}

/* A tensor by its call, to group them. */
typedef struct by_node {
	long node;
	size_t i;
} by_node;

static int cmp_by_node(const void *a, const void *b)
{
	const by_node *x = a, *y = b;

	if (x->node != y->node)
		return (x->node > y->node) - (x->node < y->node);
	return (x->i > y->i) - (x->i < y->i);
}

int tb_trtllm_rename(tb_trtllm_name *names, size_t n)
{
	calls c = {.top = -1};
	parsed *p = malloc((n ? n : 1) * sizeof *p);
	size_t *at = NULL;
	by_node *bn = NULL;
	int rc = -1;

	if (!p)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int r = parse(&c, names[i].in, &p[i]);
		if (r <= 0) {
			rc = r;
			goto out;
		}
	}
	rc = n ? 1 : 0;
	if (!n || name_children(&c, -1) < 0) {
		rc = n ? -1 : 0;
		goto out;
	}
	at = malloc(n * sizeof *at);
	bn = malloc(n * sizeof *bn);
	if (!at || !bn) {
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		bn[i] = (by_node){p[i].node, i};
	qsort(bn, n, sizeof *bn, cmp_by_node);
	for (size_t i = 0; i < n; i++)
		at[i] = bn[i].i;
	for (size_t g = 0, e; g < n; g = e) {
		for (e = g; e < n && p[at[e]].node == p[at[g]].node; e++)
			;
		if (name_tensors(&c, p[at[g]].node, names, p, at + g, e - g) < 0) {
			rc = -1;
			goto out;
		}
	}
out:
	if (rc != 1)
		for (size_t i = 0; i < n; i++) {
			free(names[i].out);
			names[i].out = NULL;
		}
	for (size_t i = 0; i < c.n; i++)
		free(c.v[i].path);
	free(c.v);
	free(at);
	free(bn);
	free(p);
	return rc;
}
