// store-shards.test.js: a store whose shard count changes between runs
// (store.shards): the waiting messages move to their account's shard of
// the new count, files of shards no longer used go, nothing is lost and
// each account's order holds; query_sm finds a moved message. Messages for
// an upstream SMS centre spread over the shards by number, and keep each
// number's order, also when the count changes.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const L = require('./lib.js');
const { SmscSim } = require('./smsc-sim.js');

const BIN = process.env.ECHOROUTERD_BIN;
const skip = BIN && !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()) &&
	'built without SQLite';

const ESME_ROK = 0x00;
const ENROUTE = 1;
const RECIPIENTS = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];

function conf(db, shards) {
	const accounts = RECIPIENTS.map((r) => `{ id = "${r}"; password = "p"; }`);
	return `dispatchers = 2;
idle_timeout = 0;
listeners = ( { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; } );
accounts = ( { id = "alice"; password = "a"; }, ${accounts.join(', ')} );
store = { path = "${db}"; sync = "full"; shards = ${shards}; };
`;
}

// Sends n messages "<tag><i>" to each recipient; every one acknowledged.
async function sendAll(d, tag, n) {
	const a = await L.session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
	const ids = {};
	for (const r of RECIPIENTS)
		for (let i = 0; i < n; i++) {
			const resp = await L.call(a.s, 'submit_sm', {
				destination_addr: r, short_message: `${r}-${tag}${i}` });
			assert.equal(resp.command_status, ESME_ROK, `${r}-${tag}${i}`);
			ids[`${r}-${tag}${i}`] = resp.message_id;
		}
	return { a, ids };
}

function shardFiles(dir) {
	return fs.readdirSync(dir).filter((f) => /^store\.db(\.\d+)?$/.test(f)).sort();
}

function movedIn(log) {
	let n = 0;
	for (const m of log.matchAll(/store: \S+: (\d+) waiting messages moved/g))
		n += Number(m[1]);
	return n;
}

test('store.shards changed: waiting messages move to their shard, old files go, order kept', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-shards-'));
	const db = path.join(dir, 'store.db');
	try {
		// One shard: what a store made before shards looks like.
		let d = await L.startDaemon(conf(db, 1));
		let sent;
		try {
			sent = await sendAll(d, 'a', 5);
			sent.a.s.close();
		} finally {
			await L.stopDaemon(d);
		}
		assert.deepEqual(shardFiles(dir), ['store.db']);
		// Four: most accounts move out of store.db.
		d = await L.startDaemon(conf(db, 4));
		let ids;
		try {
			assert.match(d.log, /\(4 shards\)/);
			assert.ok(movedIn(d.log) > 0 && movedIn(d.log) < 30,
				`moved ${movedIn(d.log)}:\n${d.log}`);
			assert.deepEqual(shardFiles(dir), ['store.db', 'store.db.1', 'store.db.2', 'store.db.3']);
			const more = await sendAll(d, 'b', 5);
			ids = { ...sent.ids, ...more.ids };
			// A moved message: query_sm asks the shards in turn.
			for (const r of RECIPIENTS) {
				const q = await L.call(more.a.s, 'query_sm', {
					message_id: ids[`${r}-a0`], source_addr: 'alice' });
				assert.equal(q.command_status, ESME_ROK, `query ${r}-a0`);
				assert.equal(q.message_state, ENROUTE, `state of ${r}-a0`);
			}
			more.a.s.close();
		} finally {
			await L.stopDaemon(d);
		}
		// Two: the files of shards 2 and 3 are emptied into 0 and 1, removed.
		d = await L.startDaemon(conf(db, 2));
		try {
			assert.match(d.log, /store\.db\.2: \d+ waiting messages moved .*; removed/);
			assert.match(d.log, /store\.db\.3: \d+ waiting messages moved .*; removed/);
			assert.deepEqual(shardFiles(dir), ['store.db', 'store.db.1']);
			for (const r of RECIPIENTS) {
				const b = await L.session(d.ports.smpp, 'bind_receiver', r, 'p');
				await L.until(() => b.got.length >= 10, 10000, `${r}'s backlog`);
				await L.sleep(200);
				const want = [0, 1, 2, 3, 4].map((i) => `${r}-a${i}`)
					.concat([0, 1, 2, 3, 4].map((i) => `${r}-b${i}`));
				assert.deepEqual(b.got.map(L.text), want, `${r}: each once, in order`);
				b.s.close();
			}
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

function upstreamConf(db, shards, port) {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);
accounts = ( { id = "alice"; password = "pa"; } );
routes = ( { prefix = "+351"; to = [ "upstream:opA" ]; } );
upstreams = ( { name = "opA"; host = "127.0.0.1"; port = ${port};
    system_id = "erd"; password = "secret"; dest_ton = 1; dest_npi = 1;
    reconnect_min = 1; reconnect_max = 1; sessions = 2; window = 8; } );
store = { path = "${db}"; sync = "full"; shards = ${shards}; };
`;
}

// SENDs n messages "<k>.<i>" to each of the numbers, interleaved; all OK.
async function sendNumbers(d, numbers, tag, n) {
	const c = await L.lineClient(d.ports.router);
	c.sock.write('LOGIN alice pa\n');
	await c.wait((l) => l.startsWith('OK LOGIN'), 'login');
	let lines = '';
	for (let i = 0; i < n; i++)
		for (const [k] of numbers.entries())
			lines += `SEND ${numbers[k]} ${tag}${k}.${i}\n`;
	c.sock.write(lines);
	await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === n * numbers.length,
		20000, 'every SEND acknowledged');
	c.sock.destroy();
}

test('upstream messages spread over the shards by number; each number\'s order holds, also across a change of shards', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-shards-'));
	const db = path.join(dir, 'store.db');
	const port = await L.freePort();
	const numbers = [...Array(8).keys()].map((k) => `+35191000050${k}`);
	let sim = null;
	try {
		// The SMS centre is away: everything waits, spread over 4 shards.
		let d = await L.startDaemon(upstreamConf(db, 4, port));
		try {
			await sendNumbers(d, numbers, 'a', 5);
			const m = await L.scrape(d.ports.metrics);
			assert.equal(L.val(m, 'echorouterd_store_messages'), 40);
			// Spread by number over the shards (8 numbers: 1 to shard 0, 2 to 1, 2 to 2, 3 to 3).
			const per = [0, 1, 2, 3].map((k) => L.val(m, `echorouterd_store_shard_messages{shard="${k}"}`));
			assert.deepEqual(per, [5, 10, 10, 15]);
		} finally {
			await L.stopDaemon(d);
		}
		// Two shards now: the messages of numbers that hash elsewhere move.
		d = await L.startDaemon(upstreamConf(db, 2, port));
		try {
			// By number: from more than one file (by account, one).
			const from = [...d.log.matchAll(/store: \S+\/(store\.db[.\d]*): ([1-9]\d*) waiting messages moved/g)]
				.map((m) => m[1]);
			assert.ok(new Set(from).size >= 2, `moved from ${from}:\n${d.log}`);
			await sendNumbers(d, numbers, 'b', 5);
			sim = new SmscSim();
			await sim.start(port);
			await L.until(() => sim.taken().length >= 80, 20000, 'all 80 delivered');
			await L.sleep(500);
			assert.equal(sim.taken().length, 80, 'each once');
			for (const [k, t] of numbers.entries())
				assert.deepEqual(sim.taken().filter((x) => `+${x.pdu.destination_addr}` === t)
					.map((x) => L.text(x.pdu)),
				[...[0, 1, 2, 3, 4].map((i) => `a${k}.${i}`), ...[0, 1, 2, 3, 4].map((i) => `b${k}.${i}`)],
				`${t}: in order`);
			await L.until(async () => L.val(await L.scrape(d.ports.metrics),
				'echorouterd_store_messages') === 0, 20000, 'an empty store');
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		if (sim)
			await sim.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('a receipt is stored in the shard that marks its message, and reaches its submitter from there, also after kill -9', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-shards-'));
	const db = path.join(dir, 'store.db');
	// alice is shard 0's of two, r0 shard 1's (pinned by the unit test's hash).
	const text = conf(db, 2).replace('listeners = (',
		'listeners = ( { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },');
	let d = await L.startDaemon(text);
	try {
		const a = await L.session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		const r = await L.call(a.s, 'submit_sm', { destination_addr: 'r0',
			short_message: 'tell me', registered_delivery: 1 });
		assert.equal(r.command_status, ESME_ROK);
		a.s.close();
		// The message waits: one of its size. A count alone would not tell
		// it from the receipt that replaces it (one message either way).
		const m0 = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m0, 'echorouterd_store_messages'), 1);
		const bytes0 = L.val(m0, 'echorouterd_store_bytes');
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'r0', 'p');
		await L.until(() => b.got.length === 1, 10000, 'r0 has it');
		// Delivered, and its receipt for alice stored: one message waits,
		// the receipt, longer than "tell me".
		await L.until(async () => {
			const m = await L.scrape(d.ports.metrics);
			return L.val(m, 'echorouterd_store_messages') === 1 &&
				L.val(m, 'echorouterd_store_bytes') > bytes0;
		}, 10000, 'the receipt stored');
		b.s.close();
		d.child.kill('SIGKILL');
		await L.until(() => d.exited !== null, 10000, 'the kill');
		fs.rmSync(d.dir, { recursive: true, force: true });
		d = await L.startDaemon(text);
		// It was in r0's shard: it moves home to alice's at start.
		assert.match(d.log, /store\.db\.1: 1 waiting messages moved/);
		const back = await L.session(d.ports.smpp, 'bind_receiver', 'alice', 'a');
		await L.until(() => back.got.length >= 1, 10000, 'the receipt');
		await L.sleep(300);
		assert.equal(back.got.length, 1);
		assert.equal(back.got[0].receipted_message_id, r.message_id);
		back.s.close();
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_store_messages') === 0, 10000, 'an empty store');
	} finally {
		if (d.exited === null)
			await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('store.shards: not a number nor "auto", or with JetStream above 1: refused by -t', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-shards-'));
	try {
		const check = (text) => {
			const file = path.join(dir, 'c.conf');
			fs.writeFileSync(file, text);
			try {
				execFileSync(BIN, ['-t', '-c', file], { stdio: 'pipe' });
				return '';
			} catch (e) {
				return e.stderr.toString();
			}
		};
		const base = conf(path.join(dir, 'store.db'), 1);
		assert.equal(check(base), '');
		assert.equal(check(base.replace('shards = 1', 'shards = "auto"')), '');
		assert.match(check(base.replace('shards = 1', 'shards = 0')),
			/store\.shards|shards: .*1\.\.32/);
		assert.match(check(base.replace('shards = 1', 'shards = "many"')),
			/store\.shards: expected "auto" or a number 1\.\.32/);
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
