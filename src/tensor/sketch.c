#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/sketch.h"

#define READ_BLOCK 65536 /* values decoded at a time; TB_SKETCH_BLOCK is a multiple */

/* splitmix64's finaliser: the hash of (seed, index) behind every bucket
 * and sign, so that any host sketching any shard agrees. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

static uint32_t pow2_clamp(uint64_t x, uint32_t lo, uint32_t hi)
{
	uint32_t k = lo;

	while (k < hi && (uint64_t)k * 2 <= x)
		k *= 2;
	return k;
}

void tb_sketch_params_for(const tb_tensor *t, uint64_t seed, tb_sketch_params *p)
{
	int64_t d[TB_MAX_DIMS];
	int nd = tb_tensor_squeezed(t, d);

	memset(p, 0, sizeof *p);
	p->seed = seed;
	p->numel = t->numel;
	/* a bucket of 8 bytes per 8 KB of values: 0.1% of the tensor */
	p->k = pow2_clamp(t->numel * tb_dtype_size(t->dtype) / 8192, 64, 4096);
	if (nd >= 2 && d[nd - 1] > 0 && d[nd - 2] > 0) {
		p->n_pos = d[nd - 2];
		p->row_len = (uint64_t)d[nd - 1];
		/* 8 buckets of 4 bytes a position: 0.2% of an f32 row of 4096 */
		p->kp = pow2_clamp(p->row_len, 1, 8);
	}
}

uint64_t tb_sketch_size(const tb_sketch_params *p)
{
	uint64_t blocks = (p->numel + TB_SKETCH_BLOCK - 1) / TB_SKETCH_BLOCK;

	return 8 * (uint64_t)p->k + (uint64_t)p->n_pos * (8 + 4 * (uint64_t)p->kp) + 8 * blocks;
}

int tb_sketch_alloc(tb_sketch *s, const tb_sketch_params *p)
{
	memset(s, 0, sizeof *s);
	s->p = *p;
	s->ranks = 1;
	s->min = INFINITY;
	s->max = -INFINITY;
	s->n_blocks = (p->numel + TB_SKETCH_BLOCK - 1) / TB_SKETCH_BLOCK;
	s->bucket = calloc(p->k ? p->k : 1, sizeof *s->bucket);
	s->pos_sumsq = calloc(p->n_pos ? (size_t)p->n_pos : 1, sizeof *s->pos_sumsq);
	s->pos_bucket = calloc(p->n_pos ? (size_t)p->n_pos * p->kp : 1, sizeof *s->pos_bucket);
	s->hash = calloc(s->n_blocks ? s->n_blocks : 1, sizeof *s->hash);
	if (!s->bucket || !s->pos_sumsq || !s->pos_bucket || !s->hash) {
		tb_sketch_free(s);
		return -1;
	}
	return 0;
}

void tb_sketch_free(tb_sketch *s)
{
	free(s->bucket);
	free(s->pos_sumsq);
	free(s->pos_bucket);
	free(s->hash);
	memset(s, 0, sizeof *s);
}

/* Where the next value lands: its row's position and column. */
typedef struct cursor {
	int64_t pos;
	uint64_t col;
	double pos_acc[8]; /* the current position's buckets, in double until stored */
} cursor;

/* Store the position buckets of a finished row. */
static void end_row(tb_sketch *s, cursor *c)
{
	for (uint32_t b = 0; b < s->p.kp; b++) {
		s->pos_bucket[(size_t)c->pos * s->p.kp + b] += (float)c->pos_acc[b];
		c->pos_acc[b] = 0;
	}
	c->col = 0;
	c->pos = c->pos + 1 == s->p.n_pos ? 0 : c->pos + 1;
}

/* Fold values [i0, i0 + n) into the sketch, a run within one row at a
 * time.  One hash of (seed, i) serves both sketches: its low bits pick
 * the whole-tensor bucket and bit 63 the sign, bits 32 and up the
 * position's bucket and bit 62 its sign. */
static void fold(tb_sketch *s, cursor *c, const float *v, uint64_t i0, uint64_t n)
{
	const tb_sketch_params *p = &s->p;
	uint64_t kmask = p->k - 1, pmask = p->kp ? p->kp - 1 : 0;

	for (uint64_t k = 0; k < n;) {
		uint64_t run = p->n_pos > 0 ? p->row_len - c->col : n;
		double sum = 0, ss = 0, mn = s->min, mx = s->max;
		uint64_t block = (i0 + k) / TB_SKETCH_BLOCK, hb = 0;
		if (run > n - k)
			run = n - k;
		for (uint64_t j = k; j < k + run; j++) {
			double x = v[j];
			uint64_t h = mix(p->seed ^ (i0 + j));
			uint32_t bits;
			memcpy(&bits, &v[j], sizeof bits);
			/* the block hash adds a term per value, so that shares and
			 * shards of a tensor add up to its hash; summed in a
			 * register, stored when the block changes */
			if ((i0 + j) / TB_SKETCH_BLOCK != block) {
				s->hash[block] += hb;
				block = (i0 + j) / TB_SKETCH_BLOCK;
				hb = 0;
			}
			hb += bits * (h | 1);
			if (!isfinite(x)) {
				s->nan += isnan(x);
				s->inf += isinf(x);
				continue;
			}
			sum += x;
			ss += x * x;
			mn = x < mn ? x : mn;
			mx = x > mx ? x : mx;
			/* the signs by arithmetic, not branches: random, they would
			 * be mispredicted half the time */
			s->bucket[h & kmask] += x * (1.0 - (double)(h >> 63) * 2);
			c->pos_acc[(h >> 32) & pmask] += x * (1.0 - (double)(h >> 62 & 1) * 2);
		}
		if (run)
			s->hash[block] += hb;
		s->sum += sum;
		s->sumsq += ss;
		s->min = mn;
		s->max = mx;
		if (p->n_pos > 0) {
			s->pos_sumsq[c->pos] += ss;
			c->col += run;
			if (c->col == p->row_len)
				end_row(s, c);
		}
		k += run;
	}
}

/* One thread's share of a tensor: values [from, to), whole rows, folded
 * into its own sketch. */
typedef struct share {
	tb_tensor *t;
	tb_sketch *s;
	uint64_t from, to;
	bool nomem;
} share;

static void *sketch_share(void *arg)
{
	share *sh = arg;
	tb_sketch *s = sh->s;
	float *v = malloc(READ_BLOCK * sizeof *v);
	cursor c = {0};

	if (!v) {
		sh->nomem = true;
		return NULL;
	}
	if (s->p.n_pos > 0)
		c.pos = (int64_t)((sh->from / s->p.row_len) % (uint64_t)s->p.n_pos);
	for (uint64_t i = sh->from; i < sh->to; i += READ_BLOCK) {
		uint64_t n = sh->to - i < READ_BLOCK ? sh->to - i : READ_BLOCK;
		tb_tensor_read_f32(sh->t, i, n, v);
		fold(s, &c, v, i, n);
		tb_tensor_drop(sh->t, i, n);
	}
	free(v);
	return NULL;
}

void tb_sketch_add(tb_sketch *into, const tb_sketch *from)
{
	for (uint32_t k = 0; k < into->p.k; k++)
		into->bucket[k] += from->bucket[k];
	for (int64_t q = 0; q < into->p.n_pos; q++)
		into->pos_sumsq[q] += from->pos_sumsq[q];
	for (int64_t k = 0; k < into->p.n_pos * into->p.kp; k++)
		into->pos_bucket[k] += from->pos_bucket[k];
	for (uint64_t b = 0; b < into->n_blocks; b++)
		into->hash[b] += from->hash[b];
	into->nan += from->nan;
	into->inf += from->inf;
	into->sum += from->sum;
	into->sumsq += from->sumsq;
	into->min = from->min < into->min ? from->min : into->min;
	into->max = from->max > into->max ? from->max : into->max;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

int tb_sketch_tensor(tb_tensor *t, tb_sketch *s, int threads, tb_err *err)
{
	enum { MAX_SHARES = 64 };
	uint64_t row = s->p.n_pos > 0 ? s->p.row_len : 1, unit, units;
	share sh[MAX_SHARES];
	tb_sketch part[MAX_SHARES];
	pthread_t tid[MAX_SHARES];
	int n = threads < 1 ? 1 : threads > MAX_SHARES ? MAX_SHARES : threads, started = 0, rc = 0;

	/* shares start on a row, and on a read block for the page cache's
	 * sake (one share when that unit is longer than the tensor) */
	unit = row / gcd(row, READ_BLOCK);
	unit = unit > t->numel / READ_BLOCK + 1 ? t->numel + 1 : unit * READ_BLOCK;
	units = (t->numel + unit - 1) / unit;
	if ((uint64_t)n > units)
		n = units ? (int)units : 1;
	if (tb_tensor_streamed(t))
		n = 1; /* a deflated member inflates front to back: shares would restart it by turns */
	if (tb_tensor_acquire(t, err) < 0)
		return -1;
	for (int k = 0; k < n; k++) {
		sh[k] = (share){t, k ? &part[k] : s, units * (uint64_t)k / (uint64_t)n * unit,
				units * (uint64_t)(k + 1) / (uint64_t)n * unit, false};
		if (sh[k].to > t->numel)
			sh[k].to = t->numel;
		if (k && tb_sketch_alloc(&part[k], &s->p) < 0) {
			n = k;
			rc = tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
			break;
		}
	}
	for (int k = 1; k < n && rc == 0; k++, started++)
		if (pthread_create(&tid[k], NULL, sketch_share, &sh[k]) != 0) {
			rc = tb_err_setc(err, TB_ERR_SYSTEM, NULL, "cannot start a thread");
			break;
		}
	if (rc == 0)
		sketch_share(&sh[0]);
	for (int k = 1; k <= started; k++)
		pthread_join(tid[k], NULL);
	for (int k = 0; k < n; k++) {
		if (sh[k].nomem && rc == 0)
			rc = tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
		if (k) {
			tb_sketch_add(s, &part[k]);
			tb_sketch_free(&part[k]);
		}
	}
	s->finite = t->numel - s->nan - s->inf;
	tb_tensor_release(t);
	return rc;
}

int tb_sketch_shard(tb_tensor *t, tb_sketch *s, int rank, int ranks, tb_err *err)
{
	int64_t d[TB_MAX_DIMS];
	int nd = tb_tensor_squeezed(t, d);
	uint64_t w = nd > 0 ? (uint64_t)d[nd - 1] : 1, rows, per, i = 0;
	float *v;

	if (w == 0 || t->numel % w || w * (uint64_t)ranks != (s->p.n_pos > 0 ? s->p.row_len : s->p.numel / (t->numel / w)))
		return tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s' does not fit its joined shape", t->name);
	rows = t->numel / w;
	per = READ_BLOCK / w ? READ_BLOCK / w : 1;
	if (!(v = malloc((size_t)(per * w) * sizeof *v)))
		return tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching tensor '%s'", t->name);
	if (tb_tensor_acquire(t, err) < 0) {
		free(v);
		return -1;
	}
	for (uint64_t r0 = 0; r0 < rows; r0 += per) {
		uint64_t n = rows - r0 < per ? rows - r0 : per;
		tb_tensor_read_f32(t, r0 * w, n * w, v);
		for (uint64_t r = r0; r < r0 + n; r++, i++) {
			/* a row of the joined tensor holds the ranks' rows side by side */
			cursor c = {.pos = s->p.n_pos > 0 ? (int64_t)(r % (uint64_t)s->p.n_pos) : 0, .col = (uint64_t)rank * w};
			int64_t pos = c.pos;
			fold(s, &c, v + (r - r0) * w, r * w * (uint64_t)ranks + (uint64_t)rank * w, w);
			if (s->p.n_pos > 0 && c.col != 0)
				for (uint32_t b = 0; b < s->p.kp; b++)
					s->pos_bucket[(size_t)pos * s->p.kp + b] += (float)c.pos_acc[b];
		}
		tb_tensor_drop(t, r0 * w, n * w);
	}
	s->finite = t->numel - s->nan - s->inf;
	s->rank = (uint16_t)rank;
	s->ranks = (uint16_t)ranks;
	tb_tensor_release(t);
	free(v);
	return 0;
}

bool tb_sketch_params_match(const tb_sketch_params *a, const tb_sketch_params *b, char *buf, size_t size)
{
	if (a->seed != b->seed)
		snprintf(buf, size, "sketched with seeds %llu and %llu", (unsigned long long)a->seed,
			 (unsigned long long)b->seed);
	else if (a->numel != b->numel || a->n_pos != b->n_pos || a->row_len != b->row_len)
		snprintf(buf, size, "sketches of %llu and %llu values", (unsigned long long)a->numel,
			 (unsigned long long)b->numel);
	else if (a->k != b->k || a->kp != b->kp)
		snprintf(buf, size, "sketches of %u and %u buckets", a->k, b->k);
	else
		return true;
	return false;
}
