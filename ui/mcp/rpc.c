/*
 * rpc: the JSON-RPC line loop of `tbisect mcp`.  Standard input is read
 * in blocks and cut into lines; a line is one message.  Requests are
 * answered in order, one line each on standard output, which carries
 * nothing else.  While a comparison runs (poll_call), what arrives is
 * queued, but for a notifications/cancelled of the request under way,
 * which stops it.  A line over MCP_MAX_LINE bytes is skipped whole and
 * answered with an error; when standard input ends, the loop ends (a
 * line cut short by the end is dropped) and the server exits 0.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp/answers.h"
#include "mcp/rpc.h"
#include "mcp/tools.h"

/* JSON-RPC 2.0's error codes, and MCP's for a resource it does not have. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
	MCP_RESOURCE_NOT_FOUND = -32002,
};

/* The handshake's revisions this server speaks (the first is offered
 * when the client asks for another), and the stateless one. */
static const char *const handshake_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
#define STATELESS_VERSION "2026-07-28"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"

#define INSTRUCTIONS                                                                                                  \
	"tbisect compares a reference model's activation dumps with a port's and finds where they first diverge. "      \
	"Call open_pair(ref, cand) first; it returns a pair id for the other tools. Then first_divergence (the cell, "  \
	"its origin, the top causes), causes and replay to confirm one, explain_cell for a cell's numbers, cells to "  \
	"page through the grid. Answers are summaries; pass detail or cursor for more. `tbisect mcp --skill` prints "  \
	"the porting loop step by step."

/* One line read, or the note that one was too long. */
typedef struct line {
	char *text;
	bool too_long;
	struct line *next;
} line;

static struct {
	char *buf;             /* the line being read */
	size_t len, cap;
	bool skipping;         /* inside a line over MCP_MAX_LINE */
	bool eof;              /* standard input ended */
	bool gone;             /* standard output cannot be written: stop */
	line *head, *tail;     /* lines read, not handled yet */
} in;

static void send_msg(cJSON *msg)
{
	char *text = msg ? cJSON_PrintUnformatted(msg) : NULL;

	if (!text) {
		fputs("tbisect mcp: out of memory writing an answer\n", stderr);
	} else if (!in.gone && (fputs(text, stdout) == EOF || putchar('\n') == EOF || fflush(stdout) == EOF)) {
		fprintf(stderr, "tbisect mcp: cannot write to standard output: %s\n", strerror(errno));
		in.gone = true;
	}
	free(text);
	cJSON_Delete(msg);
}

static cJSON *envelope(const cJSON *id)
{
	cJSON *msg = cJSON_CreateObject();

	cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
	cJSON_AddItemToObject(msg, "id", id ? cJSON_Duplicate(id, true) : cJSON_CreateNull());
	return msg;
}

static void send_error(const cJSON *id, int code, const char *message)
{
	cJSON *msg = envelope(id), *e = cJSON_AddObjectToObject(msg, "error");

	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	send_msg(msg);
}

static void push_line(char *text, bool too_long)
{
	line *l = malloc(sizeof *l);

	if (!l) {
		free(text);
		return;
	}
	*l = (line){text, too_long, NULL};
	if (in.tail)
		in.tail->next = l;
	else
		in.head = l;
	in.tail = l;
}

/* Append n bytes read, queueing each line they complete. */
static void take(const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (c == '\n') {
			if (in.skipping)
				push_line(NULL, true);
			else if (in.len) {
				char *text = malloc(in.len + 1);
				if (text) {
					memcpy(text, in.buf, in.len);
					text[in.len] = '\0';
					push_line(text, false);
				}
			}
			in.len = 0;
			in.skipping = false;
			continue;
		}
		if (in.skipping)
			continue;
		if (in.len >= MCP_MAX_LINE) {
			in.skipping = true;
			in.len = 0;
			continue;
		}
		if (in.len + 1 > in.cap) {
			size_t cap = in.cap ? in.cap * 2 : 65536;
			char *grown = realloc(in.buf, cap);
			if (!grown) {
				in.skipping = true;
				in.len = 0;
				continue;
			}
			in.buf = grown;
			in.cap = cap;
		}
		in.buf[in.len++] = c;
	}
}

/* Read what standard input has within timeout_ms (-1: wait). */
static void fill(int timeout_ms)
{
	char chunk[65536];
	struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
	ssize_t n;

	if (in.eof)
		return;
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return;
	n = read(STDIN_FILENO, chunk, sizeof chunk);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (in.len || in.skipping)
			fputs("tbisect mcp: standard input ended inside a message; it is dropped\n", stderr);
		in.eof = true;
		return;
	}
	take(chunk, (size_t)n);
}

static line *pop_line(void)
{
	line *l = in.head;

	if (l) {
		in.head = l->next;
		if (!in.head)
			in.tail = NULL;
	}
	return l;
}

/* Is text a notifications/cancelled of the request id? */
static bool cancels(const char *text, const cJSON *id)
{
	cJSON *msg = cJSON_Parse(text);
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	bool yes = msg && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "method")) &&
		   !strcmp(cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring, "notifications/cancelled") &&
		   cJSON_Compare(cJSON_GetObjectItemCaseSensitive(params, "requestId"), id, true);

	cJSON_Delete(msg);
	return yes;
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool poll_call(mcp_call *call, size_t done, size_t total, const char *what)
{
	line **at;

	/* Progress first, so that a comparison that outlasts one poll says
	 * so; then at most four a second, each further than the last. */
	if (call->progress_token && !call->cancelled &&
	    (!call->progressed || (done > call->progress && now_sec() - call->progress_at >= 0.25))) {
		cJSON *msg = cJSON_CreateObject(), *p;
		cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
		cJSON_AddStringToObject(msg, "method", "notifications/progress");
		p = cJSON_AddObjectToObject(msg, "params");
		cJSON_AddItemToObject(p, "progressToken", cJSON_Duplicate(call->progress_token, true));
		cJSON_AddNumberToObject(p, "progress", (double)done);
		cJSON_AddNumberToObject(p, "total", (double)total);
		cJSON_AddStringToObject(p, "message", what);
		send_msg(msg);
		call->progressed = true;
		call->progress = done;
		call->progress_at = now_sec();
	}
	fill(100);
	for (at = &in.head; *at;) {
		line *l = *at;
		if (l->text && cancels(l->text, call->id)) {
			call->cancelled = true;
			*at = l->next;
			free(l->text);
			free(l);
			continue;
		}
		at = &l->next;
	}
	in.tail = NULL;
	for (line *l = in.head; l; l = l->next)
		in.tail = l;
	/* Standard output is gone: nobody waits for the answer.  (The end of
	 * standard input is not: requests read before it are answered.) */
	if (in.gone)
		call->cancelled = true;
	return !call->cancelled;
}

/* --- the methods --- */

typedef struct request {
	const cJSON *params; /* an object, or NULL */
	mcp_call call;
	int code;            /* a protocol error, 0 when none */
	char message[512];
} request;

static cJSON *fail(request *rq, int code, const char *fmt, const char *arg)
{
	rq->code = code;
	snprintf(rq->message, sizeof rq->message, fmt, arg);
	return NULL;
}

static const char *param_str(const request *rq, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(rq->params, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void add_identity(cJSON *result)
{
	cJSON *caps = cJSON_AddObjectToObject(result, "capabilities"), *info;

	cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddObjectToObject(caps, "resources");
	info = cJSON_AddObjectToObject(result, "serverInfo");
	cJSON_AddStringToObject(info, "name", "tbisect");
	cJSON_AddStringToObject(info, "version", PACKAGE_VERSION);
	cJSON_AddStringToObject(result, "instructions", INSTRUCTIONS);
}

static cJSON *m_initialize(request *rq)
{
	const char *asked = param_str(rq, "protocolVersion");
	const char *version = handshake_versions[0];
	cJSON *result;

	if (!asked)
		return fail(rq, RPC_INVALID_PARAMS, "initialize needs params.protocolVersion (a string)%s", "");
	for (size_t i = 0; i < sizeof handshake_versions / sizeof *handshake_versions; i++)
		if (!strcmp(asked, handshake_versions[i]))
			version = asked;
	result = cJSON_CreateObject();
	cJSON_AddStringToObject(result, "protocolVersion", version);
	add_identity(result);
	return result;
}

static cJSON *m_discover(request *rq)
{
	cJSON *result = cJSON_CreateObject(), *v = cJSON_AddArrayToObject(result, "supportedVersions");

	cJSON_AddItemToArray(v, cJSON_CreateString(STATELESS_VERSION));
	add_identity(result);
	return result;
}

static cJSON *m_ping(request *rq)
{
	return cJSON_CreateObject();
}

static cJSON *m_tools_list(request *rq)
{
	cJSON *result = cJSON_CreateObject();

	mcp_tools_list(cJSON_AddArrayToObject(result, "tools"));
	return result;
}

static cJSON *m_tools_call(request *rq)
{
	const char *name = param_str(rq, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(rq->params, "arguments");
	cJSON *result = NULL;

	if (!name)
		return fail(rq, RPC_INVALID_PARAMS, "tools/call needs params.name (a string)%s", "");
	if (args && !cJSON_IsObject(args))
		return fail(rq, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object%s", "");
	if (mcp_tools_call(name, args, &rq->call, &result, rq->message, sizeof rq->message) < 0) {
		rq->code = RPC_INVALID_PARAMS;
		return NULL;
	}
	return result;
}

#define URI_PREFIX "tbisect://pair/"
/* resources/list pages: cells per page. */
#define RESOURCES_PAGE 50

static cJSON *cell_resource(mcp_pair *p, const cJSON *cell)
{
	const cJSON *rep = mcp_pair_report(p);
	const char *tap = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cell, "tap"));
	const cJSON *layer = cJSON_GetObjectItemCaseSensitive(cell, "layer");
	char name[96], uri[160], desc[160];
	cJSON *o = cJSON_CreateObject();

	if (cJSON_IsNumber(layer))
		snprintf(name, sizeof name, "L%d.%s", layer->valueint, tap ? tap : "?");
	else
		snprintf(name, sizeof name, "%s", tap ? tap : "?");
	snprintf(uri, sizeof uri, URI_PREFIX "%s/cell/%s", mcp_pair_id(p), name);
	snprintf(desc, sizeof desc, "%s: %s in %s vs %s", name,
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cell, "status")),
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "ref")),
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "cand")));
	cJSON_AddStringToObject(o, "uri", uri);
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddStringToObject(o, "description", desc);
	cJSON_AddStringToObject(o, "mimeType", "application/json");
	return o;
}

/* Every open pair's cells, a page at a time; the cursor is the index of
 * the next cell over all pairs in order. */
static cJSON *m_resources_list(request *rq)
{
	const char *cursor = param_str(rq, "cursor");
	long start = 0, at = 0;
	cJSON *result, *list;
	char *end;

	if (cursor) {
		start = strtol(cursor, &end, 10);
		if (end == cursor || *end || start < 0)
			return fail(rq, RPC_INVALID_PARAMS, "resources/list: '%s' is no cursor this server gave", cursor);
	}
	result = cJSON_CreateObject();
	list = cJSON_AddArrayToObject(result, "resources");
	for (size_t i = 0; i < mcp_pair_count(); i++) {
		mcp_pair *p = mcp_pair_at(i);
		const cJSON *cell;
		cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(mcp_pair_report(p), "cells")) {
			if (at >= start + RESOURCES_PAGE) {
				char next[24];
				snprintf(next, sizeof next, "%ld", at);
				cJSON_AddStringToObject(result, "nextCursor", next);
				return result;
			}
			if (at++ >= start)
				cJSON_AddItemToArray(list, cell_resource(p, cell));
		}
	}
	return result;
}

static cJSON *m_templates_list(request *rq)
{
	cJSON *result = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(result, "resourceTemplates");
	cJSON *t = cJSON_CreateObject();

	cJSON_AddStringToObject(t, "uriTemplate", URI_PREFIX "{pair}/cell/{cell}");
	cJSON_AddStringToObject(t, "name", "cell");
	cJSON_AddStringToObject(t, "description",
				"One cell of an open pair (pair: open_pair's id; cell: L3.attn, embed, logits): "
				"explain_cell's answer");
	cJSON_AddStringToObject(t, "mimeType", "application/json");
	cJSON_AddItemToArray(list, t);
	return result;
}

static cJSON *m_resources_read(request *rq)
{
	const char *uri = param_str(rq, "uri"), *slash;
	char id[32];
	mcp_pair *p;
	long cell;
	tb_err err;
	cJSON *answer, *result, *contents, *c;
	char *text;

	if (!uri)
		return fail(rq, RPC_INVALID_PARAMS, "resources/read needs params.uri (a string)%s", "");
	if (strncmp(uri, URI_PREFIX, strlen(URI_PREFIX)) || !(slash = strchr(uri + strlen(URI_PREFIX), '/')) ||
	    strncmp(slash, "/cell/", 6) || (size_t)(slash - uri - strlen(URI_PREFIX)) >= sizeof id)
		return fail(rq, MCP_RESOURCE_NOT_FOUND, "no resource '%s' (tbisect://pair/ID/cell/NAME)", uri);
	snprintf(id, sizeof id, "%.*s", (int)(slash - uri - strlen(URI_PREFIX)), uri + strlen(URI_PREFIX));
	p = mcp_pair_get(id, &rq->call, &err);
	cell = p ? mcp_pair_cell(p, slash + 6) : -1;
	if (cell < 0)
		return fail(rq, MCP_RESOURCE_NOT_FOUND, "no resource '%s': no such pair or cell", uri);
	answer = mcp_answer_cell(p, cell, false, &err);
	text = answer ? cJSON_PrintUnformatted(answer) : NULL;
	cJSON_Delete(answer);
	if (!text)
		return fail(rq, RPC_INTERNAL, "cannot read '%s'", uri);
	result = cJSON_CreateObject();
	contents = cJSON_AddArrayToObject(result, "contents");
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "uri", uri);
	cJSON_AddStringToObject(c, "mimeType", "application/json");
	cJSON_AddStringToObject(c, "text", text);
	cJSON_AddItemToArray(contents, c);
	free(text);
	return result;
}

static const struct method {
	const char *name;
	cJSON *(*fn)(request *rq);
} methods[] = {
	{"initialize", m_initialize},
	{"server/discover", m_discover},
	{"ping", m_ping},
	{"tools/list", m_tools_list},
	{"tools/call", m_tools_call},
	{"resources/list", m_resources_list},
	{"resources/templates/list", m_templates_list},
	{"resources/read", m_resources_read},
};

static void handle(const char *text)
{
	cJSON *msg = cJSON_Parse(text), *result = NULL;
	const cJSON *id, *method, *params, *meta;
	const struct method *m = NULL;
	request rq = {0};

	if (!msg) {
		send_error(NULL, RPC_PARSE_ERROR, "parse error: the line is not JSON");
		return;
	}
	id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	if (!cJSON_IsObject(msg) || (id && !cJSON_IsString(id) && !cJSON_IsNumber(id))) {
		send_error(NULL, RPC_INVALID_REQUEST,
			   cJSON_IsArray(msg) ? "invalid request: batches are not supported"
					      : "invalid request: not a JSON-RPC 2.0 message");
		goto out;
	}
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc")->valuestring, "2.0")) {
		send_error(id, RPC_INVALID_REQUEST, "invalid request: \"jsonrpc\" must be \"2.0\"");
		goto out;
	}
	/* A response: this server sends no requests, so it answers none. */
	if (!method && id)
		goto out;
	if (!cJSON_IsString(method)) {
		send_error(id, RPC_INVALID_REQUEST, "invalid request: no method");
		goto out;
	}
	/* Notifications are not answered; a cancellation of a request already
	 * answered (or unknown) is ignored. */
	if (!id)
		goto out;
	for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
		if (!strcmp(methods[i].name, method->valuestring))
			m = &methods[i];
	if (!m) {
		char why[300];
		snprintf(why, sizeof why, "method not found: %.200s", method->valuestring);
		send_error(id, RPC_METHOD_NOT_FOUND, why);
		goto out;
	}
	if (params && !cJSON_IsObject(params)) {
		send_error(id, RPC_INVALID_PARAMS, "invalid params: params must be an object");
		goto out;
	}
	meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	rq.params = params;
	rq.call.id = id;
	rq.call.progress_token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	rq.call.poll = poll_call;
	result = m->fn(&rq);
	/* A cancelled request is not answered (the client stopped waiting). */
	if (rq.call.cancelled) {
		cJSON_Delete(result);
		goto out;
	}
	if (!result) {
		send_error(id, rq.code ? rq.code : RPC_INTERNAL, rq.message[0] ? rq.message : "out of memory");
		goto out;
	}
	/* The stateless revision: every result says it is complete. */
	const char *version = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, META_VERSION));
	if (!strcmp(m->name, "server/discover") || (version && !strcmp(version, STATELESS_VERSION)))
		cJSON_AddStringToObject(result, "resultType", "complete");
	cJSON *reply = envelope(id);
	cJSON_AddItemToObject(reply, "result", result);
	send_msg(reply);
out:
	cJSON_Delete(msg);
}

int mcp_serve(const mcp_defaults *d)
{
	/* A client that closes its end gets no SIGPIPE death: the write
	 * fails, and the loop ends. */
	signal(SIGPIPE, SIG_IGN);
	mcp_pairs_init(d);
	while (!in.gone) {
		line *l = pop_line();
		if (!l) {
			if (in.eof)
				break;
			fill(-1);
			continue;
		}
		if (l->too_long)
			send_error(NULL, RPC_INVALID_REQUEST, "invalid request: the message is larger than 1 MB");
		else
			handle(l->text);
		free(l->text);
		free(l);
	}
	for (line *l; (l = pop_line());) {
		free(l->text);
		free(l);
	}
	free(in.buf);
	mcp_pairs_free();
	return 0;
}
