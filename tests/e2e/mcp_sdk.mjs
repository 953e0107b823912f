// mcp_sdk: tbisect mcp through the official TypeScript SDK's stdio client
// (tests/e2e/mcp_sdk.sh runs it).  The client validates every
// structuredContent against the tool's outputSchema; each answer is
// compared with check --json of the same pair.  Prints TAP.
//   node mcp_sdk.mjs SDK_DIR TBISECT REF CAND CHECK_JSON BIG_REF BIG_CAND
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { pathToFileURL } from 'node:url';

const [sdk, tbisect, ref, cand, checkFile, bigRef, bigCand] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${sdk}/dist/esm/${p}`).href);
const { Client } = await load('client/index.js');
const { StdioClientTransport } = await load('client/stdio.js');
const check = JSON.parse(readFileSync(checkFile, 'utf8'));

let n = 0;
let failed = 0;
function ok(cond, desc, why) {
	n++;
	console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${desc}`);
	if (!cond) {
		failed++;
		if (why !== undefined)
			console.log(`# ${JSON.stringify(why).slice(0, 400)}`);
	}
}
const same = (a, b, desc) => ok(isDeepStrictEqual(a, b), desc, { got: a, expected: b });

const stderr = [];
// The SDK passes the server only a few variables: XDG_STATE_HOME keeps the
// pass history in the test's folder.
const transport = new StdioClientTransport({ command: tbisect, args: ['mcp'], stderr: 'pipe', env: { ...process.env } });
transport.stderr?.on('data', (d) => stderr.push(String(d)));
const client = new Client({ name: 'tbisect-sdk-test', version: '1.0.0' });

// A tool call; the SDK throws when structuredContent does not fit the outputSchema.
async function call(name, args) {
	const r = await client.callTool({ name, arguments: args });
	if (!r.isError)
		same(JSON.parse(r.content[0].text), r.structuredContent, `${name}: the text is the structured content`);
	return r;
}

try {
	await client.connect(transport);
	ok(client.getServerVersion()?.name === 'tbisect', 'initialize: the server is tbisect');
	ok(client.getServerCapabilities()?.tools !== undefined, '... it offers tools');

	const { tools } = await client.listTools();
	same(tools.map((t) => t.name), ['open_pair', 'first_divergence', 'explain_cell', 'causes', 'cells', 'replay',
		'suggest_map', 'compare_passes'], 'tools/list: the eight tools');
	ok(tools.every((t) => t.inputSchema?.type === 'object' && t.outputSchema?.type === 'object'),
		'... each with an input and an output schema');
	ok(tools.every((t) => typeof t.annotations?.readOnlyHint === 'boolean' &&
		typeof t.annotations?.idempotentHint === 'boolean'), '... and its annotations');

	let r = await call('open_pair', { ref, cand });
	const pair = r.structuredContent?.pair;
	ok(pair === 'p1', 'open_pair: the pair id', r);
	same(r.structuredContent.verdict, check.verdict, '... the verdict of check --json');
	same(r.structuredContent.coverage, check.coverage, '... its coverage');

	r = await call('first_divergence', { pair });
	const fd = r.structuredContent;
	same(fd.first_divergence.cell, check.first_divergence.cell, 'first_divergence: the cell of check --json');
	same(fd.first_divergence.first_bad_position, check.first_divergence.first_bad_position, '... its first bad position');
	same(fd.origin, check.origin, '... the origin');
	same(fd.tolerance, check.tolerance, '... the tolerance');
	same(fd.causes, check.causes.slice(0, 3), '... the top three causes');
	same(fd.counts, check.counts, '... the counts');

	const at = check.cells.findIndex((c) => c.layer === check.first_divergence.layer && c.tap === check.first_divergence.tap);
	r = await call('explain_cell', { pair, cell: check.first_divergence.cell });
	const cell = { ...r.structuredContent };
	for (const k of Object.keys(check.cells[at]))
		if (!isDeepStrictEqual(cell[k], check.cells[at][k]))
			ok(false, `explain_cell: ${k} as check --json`, { got: cell[k], expected: check.cells[at][k] });
	ok(Object.keys(check.cells[at]).every((k) => isDeepStrictEqual(cell[k], check.cells[at][k])),
		'explain_cell: every key of check --json\'s cell, same value');
	ok(Array.isArray(cell.worst_channels) && cell.worst_channels.length > 0, '... the worst channels');

	r = await call('causes', { pair });
	same(r.structuredContent.causes, check.causes, 'causes: those of check --json');

	const rows = [];
	let cursor;
	let pages = 0;
	do {
		r = await call('cells', cursor ? { pair, cursor, limit: 10 } : { pair, limit: 10 });
		rows.push(...r.structuredContent.cells);
		cursor = r.structuredContent.next_cursor;
		pages++;
	} while (cursor && pages < 100);
	same(rows.map((c) => c.status), check.cells.map((c) => c.status), 'cells: page by page, the grid of check --json');
	same(rows.map((c) => c.rel_l2), check.cells.map((c) => c.rel_l2), '... with its numbers');

	r = await call('replay', { pair, cell: 'L0.attn.q_rope' });
	same(r.structuredContent.replay.cause, check.causes[0].id, 'replay: confirms the top cause');

	r = await call('suggest_map', { pair });
	same(r.structuredContent.map.rules, [], 'suggest_map: nothing to map');

	r = await call('compare_passes', { pair, record: true });
	ok(r.structuredContent.recorded === true, 'compare_passes: records a pass', r.structuredContent);
	same(r.structuredContent.history.at(-1).first_divergence, check.first_divergence.cell, '... at the first divergence');

	const { resourceTemplates } = await client.listResourceTemplates();
	same(resourceTemplates[0]?.uriTemplate, 'tbisect://pair/{pair}/cell/{cell}', 'resources: the cell template');
	const uri = `tbisect://pair/${pair}/cell/${check.first_divergence.cell}`;
	const res = await client.readResource({ uri });
	same(JSON.parse(res.contents[0].text).rel_l2, check.cells[at].rel_l2, '... a cell read by its URI');

	// the error paths
	r = await client.callTool({ name: 'first_divergence', arguments: { pair: 'p9' } });
	ok(r.isError === true && /p9/.test(r.content[0].text), 'a pair never opened: a tool error naming it', r);
	r = await client.callTool({ name: 'explain_cell', arguments: { pair, cell: 'L99.attn' } });
	ok(r.isError === true && /L99\.attn/.test(r.content[0].text), 'an unknown cell: a tool error naming it', r);
	r = await client.callTool({ name: 'open_pair', arguments: { ref: `${ref}-gone`, cand } });
	ok(r.isError === true && r.content[0].text.includes(`${ref}-gone`), 'a missing tree: a tool error naming it', r);
	try {
		await client.callTool({ name: 'no_such_tool', arguments: {} });
		ok(false, 'an unknown tool: a protocol error');
	} catch (e) {
		same(e.code, -32602, 'an unknown tool: a protocol error (invalid params)');
	}
	try {
		await client.request({ method: 'no/such', params: {} }, (await load('types.js')).EmptyResultSchema);
		ok(false, 'an unknown method: a protocol error');
	} catch (e) {
		same(e.code, -32601, 'an unknown method: method not found');
	}

	// a long comparison: progress, then cancelled by the client
	const ac = new AbortController();
	let progress = 0;
	try {
		await client.callTool({ name: 'open_pair', arguments: { ref: bigRef, cand: bigCand } }, undefined,
			{ signal: ac.signal, onprogress: () => { progress++; ac.abort('enough'); } });
	} catch (e) {
		// aborted: the SDK sent notifications/cancelled
	}
	ok(progress > 0, 'a long comparison reports progress');
	same(await client.ping(), {}, '... and, cancelled, leaves the server answering');
} catch (e) {
	ok(false, `the session ran to its end: ${e?.message ?? e}`);
} finally {
	await client.close();
}
ok(!stderr.join('').includes('Sanitizer'), 'no sanitizer report', stderr.join(''));
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
