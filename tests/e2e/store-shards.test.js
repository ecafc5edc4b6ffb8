// store-shards.test.js: a store whose shard count changes between runs
// (store.shards): the waiting messages move to their account's shard of
// the new count, files of shards no longer used go, nothing is lost and
// each account's order holds; query_sm finds a moved message.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const L = require('./lib.js');

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
