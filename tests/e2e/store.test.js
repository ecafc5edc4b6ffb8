// store.test.js: store-and-forward over SMPP with the npm smpp client:
// stored submits, delivery on bind, receipts, validity, schedules, retries,
// query_sm, cancel_sm, replace_sm and bad time strings.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { execFileSync, spawn } = require('node:child_process');
const L = require('./lib.js');

// ERD_STORE_BACKEND=jetstream (store-jetstream.test.js): the same tests on
// the JetStream backend, each daemon a one-node cluster on a nats-server
// -js that the tests start.
const JS = process.env.ERD_STORE_BACKEND === 'jetstream';
// ERD_STORE_SHARDS=N (store-shards1.test.js, store-shards4.test.js): the
// same tests with store.shards = N; unset, "auto" (2: one per reactor).
const SHARDS = process.env.ERD_STORE_SHARDS;

// A build without SQLite (WITH_SQLITE=no) has no store to test.
const BIN = process.env.ECHOROUTERD_BIN;
function whySkip() {
	if (BIN && !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()))
		return 'built without SQLite';
	return JS ? L.natsMissing(BIN) : false;
}
const skip = whySkip();
let nats = null;

// Starts nats (again, on the same port and directory).
async function natsStart() {
	const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(nats.port),
		'-js', '-sd', nats.dir], { stdio: ['ignore', 'ignore', 'pipe'] });
	nats.child = child;
	nats.log = '';
	nats.exited = false;
	child.on('exit', () => { nats.exited = true; });
	child.stderr.setEncoding('utf8');
	await L.withTimeout(new Promise((resolve, reject) => {
		child.stderr.on('data', (c) => {
			nats.log += c;
			if (/Server is ready/.test(nats.log))
				resolve();
		});
		child.on('exit', () => reject(new Error(`nats-server exited:\n${nats.log}`)));
	}), 15000, 'nats-server ready');
}

test.before(async () => {
	if (skip || !JS)
		return;
	nats = { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'erd-storejs-')),
		port: await L.freePort() };
	await natsStart();
});

test.after(async () => {
	if (nats === null)
		return;
	nats.child.kill('SIGKILL');
	fs.rmSync(nats.dir, { recursive: true, force: true });
});

// With JetStream, the store a path names: a node and a prefix of its own.
let fresh = 0;
function jsPrefix(storePath) {
	return 'st' + (storePath ? String(Buffer.from(storePath).reduce((h, c) => (h * 31 + c) >>> 0, 7))
		: `f${process.pid}x${fresh++}`);
}

function jsStore(storePath) {
	return `store = { backend = "jetstream"; };
cluster = { node = "n1"; servers = ( "nats://127.0.0.1:${nats.port}" );
  subject_prefix = "${jsPrefix(storePath)}"; claim_ttl = 4; };
`;
}

// One JetStream API request over a plain NATS connection; its JSON reply.
function jsApi(subject, body) {
	const payload = JSON.stringify(body);
	return L.natsExchange(nats.port, () => 'CONNECT {"verbose":false,"pedantic":false}\r\n' +
		`SUB _INBOX.erdtest 1\r\nPUB ${subject} _INBOX.erdtest ${Buffer.byteLength(payload)}\r\n` +
		`${payload}\r\n`,
	(buf) => {
		const m = /MSG _INBOX\.erdtest 1 (\d+)\r\n/.exec(buf);
		const start = m ? m.index + m[0].length : 0;
		return m && buf.length >= start + Number(m[1]) ?
			JSON.parse(buf.slice(start, start + Number(m[1]))) : undefined;
	});
}

const ESME_ROK = 0x00;
const ESME_RCANCELFAIL = 0x11;
const ESME_RREPLACEFAIL = 0x13;
const ESME_RMSGQFUL = 0x14;
const ESME_RINVSCHED = 0x61;
const ESME_RINVEXPIRY = 0x62;
const ESME_RQUERYFAIL = 0x67;
const ESME_RSYSERR = 0x08;
const ENROUTE = 1, DELIVERED = 2, EXPIRED = 3, DELETED = 4;

function conf(storePath, storeExtra = '') {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = ( { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; } );
smpp = { response_timeout = 3; };
accounts = (
  { id = "alice"; password = "a"; },
  { id = "bob"; password = "b"; },
  { id = "carol"; password = "c"; }
);
${JS ? jsStore(storePath) : `store = { path = "${storePath || 'store.db'}"; sync = "full";${SHARDS ? ` shards = ${SHARDS};` : ''} };`}
`.replace(/store = \{/, `store = { ${storeExtra}`);
}

const { session } = L;

async function until(pred, what, ms = 10000) {
	const end = Date.now() + ms;
	while (!(await pred())) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await new Promise((r) => setTimeout(r, 20));
	}
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function submit(s, options) {
	return L.call(s, 'submit_sm', { destination_addr: 'bob', ...options });
}

function isReceipt(pdu) {
	return (pdu.esm_class & 0x04) !== 0;
}

function receiptFor(got, id) {
	return got.find((p) => isReceipt(p) && p.receipted_message_id === id);
}

// "YYMMDDhhmmss" of the UTC time t (ms).
function ymdhms(t) {
	const d = new Date(t);
	const p = (n) => String(n).padStart(2, '0');
	return p(d.getUTCFullYear() % 100) + p(d.getUTCMonth() + 1) +
	    p(d.getUTCDate()) + p(d.getUTCHours()) + p(d.getUTCMinutes()) +
	    p(d.getUTCSeconds());
}

// The absolute SMPP time of t in a zone nn quarter hours ahead of UTC.
function absoluteAhead(t, nn) {
	return `${ymdhms(t + nn * 15 * 60000)}0${String(nn).padStart(2, '0')}+`;
}

function relative(seconds) {
	return `0000000000${String(seconds).padStart(2, '0')}000R`;
}

test('stored for an offline account, delivered on bind, DELIVRD receipt back', { skip }, async () => {
	const d = await L.startDaemon(conf());
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transceiver', 'alice', 'a');
		const r = await submit(a.s, { short_message: 'hello bob', registered_delivery: 1 });
		assert.equal(r.command_status, ESME_ROK);
		const q = await L.call(a.s, 'query_sm', { message_id: r.message_id });
		assert.equal(q.command_status, ESME_ROK);
		assert.equal(q.message_state, ENROUTE);
		const b = await session(port, 'bind_receiver', 'bob', 'b');
		await until(() => b.got.length === 1, 'bob gets the stored message');
		assert.equal(L.text(b.got[0]), 'hello bob');
		await until(() => receiptFor(a.got, r.message_id), 'DELIVRD receipt');
		assert.match(L.text(receiptFor(a.got, r.message_id)), /stat:DELIVRD/);
		const q2 = await L.call(a.s, 'query_sm', { message_id: r.message_id });
		assert.equal(q2.message_state, DELIVERED);
		assert.ok(q2.final_date, 'a final_date');
		// Nothing else, and only once.
		await sleep(300);
		assert.equal(b.got.length, 1);
		a.s.close(); b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('validity: an expired message leaves with an EXPIRED receipt; bad times refused', { skip }, async () => {
	const d = await L.startDaemon(conf());
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transceiver', 'alice', 'a');
		// Relative, and absolute in a zone 2 hours ahead of UTC.
		const r1 = await submit(a.s, { short_message: 'short-lived',
		    validity_period: relative(2), registered_delivery: 1 });
		assert.equal(r1.command_status, ESME_ROK);
		const r2 = await submit(a.s, { short_message: 'short-lived too',
		    validity_period: absoluteAhead(Date.now() + 3000, 8), registered_delivery: 1 });
		assert.equal(r2.command_status, ESME_ROK);
		// One that lives longer stays ENROUTE meanwhile.
		const r3 = await submit(a.s, { short_message: 'long-lived',
		    validity_period: absoluteAhead(Date.now() + 3600000, 8) });
		await until(() => receiptFor(a.got, r1.message_id) &&
		    receiptFor(a.got, r2.message_id), 'EXPIRED receipts', 10000);
		assert.match(L.text(receiptFor(a.got, r1.message_id)), /stat:EXPIRED/);
		assert.match(L.text(receiptFor(a.got, r2.message_id)), /stat:EXPIRED/);
		assert.equal((await L.call(a.s, 'query_sm', { message_id: r1.message_id })).message_state, EXPIRED);
		assert.equal((await L.call(a.s, 'query_sm', { message_id: r3.message_id })).message_state, ENROUTE);
		// Malformed, cut short, and in the past.
		assert.equal((await submit(a.s, { short_message: 'x', validity_period: 'garbage' })).command_status, ESME_RINVEXPIRY);
		assert.equal((await submit(a.s, { short_message: 'x', schedule_delivery_time: '99999999999999+' })).command_status, ESME_RINVSCHED);
		assert.equal((await submit(a.s, { short_message: 'x', schedule_delivery_time: absoluteAhead(Date.now() - 3600000, 0) })).command_status, ESME_RINVSCHED);
		assert.equal((await submit(a.s, { short_message: 'x', validity_period: absoluteAhead(Date.now() - 60000, 4) })).command_status, ESME_RINVEXPIRY);
		a.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('a scheduled message waits for its time, even for an online recipient', { skip }, async () => {
	const d = await L.startDaemon(conf());
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transmitter', 'alice', 'a');
		const b = await session(port, 'bind_receiver', 'bob', 'b');
		const t0 = Date.now();
		// 3 s ahead, written in a zone 5:30 behind UTC.
		const at = new Date(t0 + 3000 - 330 * 60000);
		const sched = `${ymdhms(at.getTime())}022-`;
		const r = await submit(a.s, { short_message: 'later', schedule_delivery_time: sched });
		assert.equal(r.command_status, ESME_ROK);
		const now = await submit(a.s, { short_message: 'now' });
		assert.equal(now.command_status, ESME_ROK);
		await until(() => b.got.length >= 1, 'the unscheduled one');
		assert.equal(L.text(b.got[0]), 'now');
		await sleep(Math.max(0, t0 + 1800 - Date.now()));
		assert.equal(b.got.length, 1, 'nothing before its time');
		await until(() => b.got.length === 2, 'the scheduled one', 8000);
		assert.equal(L.text(b.got[1]), 'later');
		// Whole seconds: not before the second it was scheduled for.
		assert.ok(Date.now() >= Math.floor((t0 + 3000) / 1000) * 1000,
		    'delivered no earlier than its time');
		a.s.close(); b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('a schedule later than the default validity: delivered, its validity counted from its time', { skip }, async () => {
	// No validity_period: the default (2 s) runs from the schedule (+4 s),
	// not from the submit, which would expire it before it is due.
	const d = await L.startDaemon(conf(undefined, 'default_validity = 2;'));
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transceiver', 'alice', 'a');
		const b = await session(port, 'bind_receiver', 'bob', 'b');
		const r = await submit(a.s, { short_message: 'due later',
		    schedule_delivery_time: relative(4), registered_delivery: 1 });
		assert.equal(r.command_status, ESME_ROK);
		await until(() => b.got.length >= 1 || receiptFor(a.got, r.message_id),
		    'the scheduled message or its receipt', 15000);
		const rc = receiptFor(a.got, r.message_id);
		assert.ok(!rc || !/stat:EXPIRED/.test(L.text(rc)),
		    `expired before it was due: ${rc && L.text(rc)}`);
		assert.equal(b.got.length, 1, 'bob gets it');
		assert.equal(L.text(b.got[0]), 'due later');
		await until(() => receiptFor(a.got, r.message_id), 'its receipt');
		assert.match(L.text(receiptFor(a.got, r.message_id)), /stat:DELIVRD/);
		a.s.close(); b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('a temporary error from the recipient is retried; after OK it is gone', { skip }, async () => {
	const d = await L.startDaemon(conf());
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transmitter', 'alice', 'a');
		const r = await submit(a.s, { short_message: 'try again' });
		assert.equal(r.command_status, ESME_ROK);
		let first = true;
		const b = await session(port, 'bind_receiver', 'bob', 'b', () => {
			if (first) {
				first = false;
				return ESME_RMSGQFUL;
			}
			return ESME_ROK;
		});
		await until(() => b.got.length === 2, 'delivered again after ESME_RMSGQFUL', 10000);
		assert.equal(L.text(b.got[0]), 'try again');
		assert.equal(L.text(b.got[1]), 'try again');
		await sleep(2500);
		assert.equal(b.got.length, 2, 'not again after ESME_ROK');
		a.s.close(); b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('query_sm, cancel_sm, replace_sm, and their failures', { skip }, async () => {
	const d = await L.startDaemon(conf());
	try {
		const port = d.ports.smpp;
		const a = await session(port, 'bind_transceiver', 'alice', 'a');
		const c = await session(port, 'bind_transmitter', 'carol', 'c');
		const ids = [];
		for (const t of ['one', 'two', 'three', 'four'])
			ids.push((await submit(a.s, { short_message: t, registered_delivery: 1 })).message_id);
		// Unknown ids, and another account's message.
		assert.equal((await L.call(a.s, 'query_sm', { message_id: '12345' })).command_status, ESME_RQUERYFAIL);
		assert.equal((await L.call(c.s, 'query_sm', { message_id: ids[0] })).command_status, ESME_RQUERYFAIL);
		assert.equal((await L.call(c.s, 'cancel_sm', { message_id: ids[0] })).command_status, ESME_RCANCELFAIL);
		assert.equal((await L.call(c.s, 'replace_sm', { message_id: ids[1], short_message: 'carol was here' })).command_status, ESME_RREPLACEFAIL);
		// Cancel one: DELETED, and not again.
		assert.equal((await L.call(a.s, 'cancel_sm', { message_id: ids[0] })).command_status, ESME_ROK);
		assert.equal((await L.call(a.s, 'query_sm', { message_id: ids[0] })).message_state, DELETED);
		assert.equal((await L.call(a.s, 'cancel_sm', { message_id: ids[0] })).command_status, ESME_RCANCELFAIL);
		await until(() => receiptFor(a.got, ids[0]), 'DELETED receipt');
		assert.match(L.text(receiptFor(a.got, ids[0])), /stat:DELETED/);
		// Replace the text of another.
		assert.equal((await L.call(a.s, 'replace_sm', { message_id: ids[1], short_message: 'TWO' })).command_status, ESME_ROK);
		// One to carol (offline: a transmitter), for the cancel by address.
		const toCarol = (await submit(a.s, { destination_addr: 'carol', short_message: 'for carol' })).message_id;
		const b = await session(port, 'bind_receiver', 'bob', 'b');
		await until(() => b.got.length === 3, 'bob gets what was not cancelled');
		assert.deepEqual(b.got.map(L.text), ['TWO', 'three', 'four']);
		// Delivered: no replace, no cancel.
		assert.equal((await L.call(a.s, 'replace_sm', { message_id: ids[1], short_message: 'late' })).command_status, ESME_RREPLACEFAIL);
		assert.equal((await L.call(a.s, 'cancel_sm', { message_id: ids[2] })).command_status, ESME_RCANCELFAIL);
		// Cancel by destination: every pending one of alice's to carol.
		const more = (await submit(a.s, { destination_addr: 'carol', short_message: 'more for carol' })).message_id;
		const r = await L.call(a.s, 'cancel_sm', { message_id: '', destination_addr: 'carol' });
		assert.equal(r.command_status, ESME_ROK);
		for (const id of [toCarol, more])
			assert.equal((await L.call(a.s, 'query_sm', { message_id: id })).message_state, DELETED);
		assert.equal((await L.call(a.s, 'cancel_sm', { message_id: '', destination_addr: 'carol' })).command_status, ESME_RCANCELFAIL);
		a.s.close(); b.s.close(); c.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('a restart keeps the backlog: 100 delivered once, in order', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	try {
		let d = await L.startDaemon(conf(db));
		let a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		const rs = await Promise.all(Array.from({ length: 100 },
		    (_, i) => submit(a.s, { short_message: `m${i}` })));
		assert.ok(rs.every((r) => r.command_status === ESME_ROK));
		a.s.close();
		await L.stopDaemon(d);
		d = await L.startDaemon(conf(db));
		try {
			assert.match(d.log, /100 (messages )?waiting/);
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			await until(() => b.got.length >= 100, 'the backlog');
			await sleep(300);
			assert.deepEqual(b.got.map(L.text), Array.from({ length: 100 }, (_, i) => `m${i}`));
			b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// The commands docs/operations.md gives to look inside the store, run as
// written (the path changed) with the sqlite3 shell, where there is one.
function inspectionCommands(db) {
	const text = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
	const start = text.indexOf('\n### Looking inside the SQLite store\n');
	assert.ok(start >= 0, 'docs/operations.md: no "Looking inside the SQLite store"');
	const block = /\n```sh\n([\s\S]*?)\n```/.exec(text.slice(start));
	assert.ok(block, 'no sh block there');
	return block[1].split('\n').filter((l) => l.startsWith('$ sqlite3 -readonly conf/store.db '))
		.map((l) => {
			const q = /'([^']*)'$/.exec(l);
			assert.ok(q, `no quoted query in: ${l}`);
			// Each shard's file (store.db, store.db.1, ...): an account's
			// messages are in one of them.
			return (args) => fs.readdirSync(path.dirname(db))
				.filter((f) => f === path.basename(db) || f.startsWith(`${path.basename(db)}.`) &&
					/^\d+$/.test(f.slice(path.basename(db).length + 1)))
				.map((f) => execFileSync('sqlite3', ['-readonly', ...args,
					path.join(path.dirname(db), f), q[1]]).toString())
				.join('');
		});
}

test('the documented sqlite3 commands show the waiting messages by name, and an SMPP message\'s final state, still answered by query_sm', { skip: skip || (JS && 'the SQLite backend only') || L.sqlite3Missing() }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	try {
		const d = await L.startDaemon(conf(db));
		try {
			const a = await session(d.ports.smpp, 'bind_transceiver', 'alice', 'a');
			const r1 = await submit(a.s, { short_message: 'one' });
			const r2 = await submit(a.s, { short_message: 'two', destination_addr: 'carol' });
			const r3 = await submit(a.s, { short_message: 'three' });
			assert.ok([r1, r2, r3].every((r) => r.command_status === ESME_ROK));
			const [list, counts, finals] = inspectionCommands(db);
			// Read while the daemon runs (WAL): ids, names, ENROUTE.
			const rows = list([]).trim().split('\n').sort();
			assert.deepEqual(rows, [`${r1.message_id}|bob|1`, `${r2.message_id}|carol|1`,
				`${r3.message_id}|bob|1`].sort());
			assert.deepEqual(counts([]).trim().split('\n').sort(), ['bob|2', 'carol|1']);
			assert.equal(finals([]).trim(), '');
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			await until(() => b.got.length === 2, 'bob gets his two');
			// Delivered: the final rows are alice's to ask about.
			await until(async () => (await L.call(a.s, 'query_sm',
				{ message_id: r3.message_id })).message_state === DELIVERED, 'query_sm: DELIVERED');
			await until(() => finals([]).trim().split('\n').length === 2, 'two final rows');
			const fin = finals(['-separator', ' ']).trim().split('\n').map((l) => l.split(' '));
			assert.deepEqual(fin.map((f) => f.slice(0, 4)).sort(), [
				[r1.message_id, 'bob', 'alice', String(DELIVERED)],
				[r3.message_id, 'bob', 'alice', String(DELIVERED)]].sort());
			assert.deepEqual(counts([]).trim().split('\n'), ['carol|1']);
			a.s.close(); b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('the store file deleted under the daemon: submits refused (ESME_RSYSERR), what was stored still delivered', { skip: skip || (JS && 'the SQLite backend only') }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	try {
		const d = await L.startDaemon(conf(db));
		try {
			const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
			const r = await submit(a.s, { short_message: 'before' });
			assert.equal(r.command_status, ESME_ROK);
			// Every shard's file: store.db, store.db.1, ...
			const files = fs.readdirSync(dir).filter((f) => /^store\.db(\.\d+)?$/.test(f));
			assert.equal(files.length, Number(SHARDS || 2), files.join(' '));
			for (const f of files)
				fs.unlinkSync(path.join(dir, f));
			// Checked once a second: a few may still be taken before.
			const taken = [];
			let status = ESME_ROK;
			const end = Date.now() + 10000;
			while (status === ESME_ROK && Date.now() < end) {
				const rr = await submit(a.s, { short_message: `after${taken.length}` });
				status = rr.command_status;
				if (status === ESME_ROK) {
					taken.push(`after${taken.length}`);
					await sleep(100);
				}
			}
			assert.equal(status, ESME_RSYSERR, 'refused with ESME_RSYSERR');
			await until(() => (d.log.match(/was removed or replaced/g) || []).length ===
			    files.length, 'each file lost');
			await sleep(1500);
			assert.equal((d.log.match(/was removed or replaced/g) || []).length, files.length,
			    'logged once for each');
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			await until(() => b.got.length >= 1 + taken.length, 'what was stored');
			assert.deepEqual(b.got.map(L.text), ['before', ...taken]);
			a.s.close(); b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('behind a full window, acknowledged messages wait on disk, not in memory', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	const text = (c) => c.replace('response_timeout = 3;', 'response_timeout = 30; window = 1;');
	try {
		let d = await L.startDaemon(text(conf(db)));
		// bob takes one deliver_sm and never answers it.
		const s = await L.connect(d.ports.smpp);
		const seen = [];
		s.on('deliver_sm', (pdu) => seen.push(L.text(pdu)));
		assert.equal((await L.call(s, 'bind_receiver', { system_id: 'bob', password: 'b' })).command_status, ESME_ROK);
		const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		for (let i = 1; i <= 5; i++)
			assert.equal((await submit(a.s, { short_message: `w${i}` })).command_status, ESME_ROK);
		await until(() => seen.length === 1, 'the one the window takes');
		assert.equal(seen[0], 'w1');
		// The daemon dies with w2..w5 acknowledged behind bob's window.
		d.child.kill('SIGKILL');
		await until(() => d.exited !== null, 'the kill', 5000);
		fs.rmSync(d.dir, { recursive: true, force: true });
		a.s.destroy(); s.destroy();
		d = await L.startDaemon(text(conf(db)));
		try {
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			await until(() => b.got.length >= 4, 'w2..w5 after the crash');
			await sleep(300);
			assert.deepEqual(b.got.map(L.text), ['w2', 'w3', 'w4', 'w5']);
			b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// What the store has handed to sessions and not had back is counted, in
// messages and in the memory they take, and the count falls as they come
// back: bob's window takes 5 that he leaves unanswered, his session holds
// the other 3 of his 8; once he answers, none are out.
test('the store counts what is in flight, and its memory, until it comes back', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	const text = (c) => c.replace('response_timeout = 3;', 'response_timeout = 30; window = 5;')
		.replace('protocol = "smpp"; }', 'protocol = "smpp"; },\n'
		    + '  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }');
	const d = await L.startDaemon(text(conf(db)));
	try {
		// Stored for bob, offline.
		const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		const body = 'x'.repeat(100);
		for (let i = 0; i < 8; i++)
			assert.equal((await submit(a.s, { short_message: `f${i}${body}` })).command_status, ESME_ROK);
		const s = await L.connect(d.ports.smpp);
		const held = [];
		let answering = false;
		s.on('deliver_sm', (pdu) => (answering ? s.send(pdu.response()) : held.push(pdu)));
		assert.equal((await L.call(s, 'bind_receiver', { system_id: 'bob', password: 'b' })).command_status, ESME_ROK);
		await until(() => held.length === 5, 'the window\'s 5');
		const gauge = async (name) => L.val(await L.scrape(d.ports.metrics), name);
		await until(async () => await gauge('echorouterd_store_in_flight_messages') === 8, 'all 8 out');
		const bytes = await gauge('echorouterd_store_in_flight_bytes');
		// Each: its text and the message's fixed part (a few hundred bytes).
		assert.ok(bytes > 8 * (body.length + 2) && bytes < 8 * (body.length + 4096), `${bytes} bytes`);
		// bob answers, those and the rest as they come.
		answering = true;
		for (const pdu of held)
			s.send(pdu.response());
		await until(async () => {
			const m = await L.scrape(d.ports.metrics);
			return L.val(m, 'echorouterd_store_messages') === 0 &&
			    L.val(m, 'echorouterd_store_in_flight_messages') === 0 &&
			    L.val(m, 'echorouterd_store_in_flight_bytes') === 0;
		}, 'nothing waiting, nothing in flight');
		a.s.close(); s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// An account holds at most an eighth of its shard's bytes in flight (64
// MiB over the shards: 8 MiB at most), whatever its 64 places would take.
// bob has 60 lines of 600 KB waiting (36 MB) and reads none: his socket
// takes a few, the store's bytes out for him stand within his share and
// a line past it, and the rest waits on disk. Then he reads them all.
test('an account holds at most its share of the bytes in flight', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	const N = 60, SIZE = 600000;
	const c = conf(db).replace(/listeners = \(.*\);/, 'listeners = ( { name = "router"; address = "127.0.0.1";'
	    + ' port = 0; protocol = "router"; },\n  { name = "metrics"; address = "127.0.0.1"; port = 0;'
	    + ' protocol = "metrics"; } );\nlimits = { max_line = 1048576; output_limit = 268435456;'
	    + ' output_stall_timeout = 0; };');
	const d = await L.startDaemon(c);
	try {
		const a = await L.lineClient(d.ports.router);
		a.sock.write('LOGIN alice a\n');
		await a.wait((l) => l === 'OK LOGIN alice', 'alice in');
		const body = (i) => `b${i}-${'y'.repeat(SIZE)}`;
		for (let i = 0; i < N; i++) {
			a.sock.write(`SEND bob ${body(i)}\n`);
			await a.wait((l) => a.lines.filter((x) => x.startsWith('OK ')).length === i + 2,
			    `SEND ${i} stored`, 20000);
		}
		// bob logs in and reads nothing past his answer.
		const b = net.connect(d.ports.router, '127.0.0.1');
		await new Promise((ok, ko) => { b.once('connect', ok); b.once('error', ko); });
		let got = '', reading = false;
		b.setEncoding('latin1');
		// Paused as soon as his answer is in: the lines after it stay
		// in the sockets and the daemon.
		b.on('data', (x) => {
			got += x;
			if (got.startsWith('OK LOGIN bob\n') && !b.isPaused() && !reading)
				b.pause();
		});
		b.write('LOGIN bob b\n');
		await until(() => got.startsWith('OK LOGIN bob\n'), 'bob in');
		// What is out for bob stands still (his queues full).
		let last = -1, now = -2, m;
		for (let i = 0; i < 60 && now !== last; i++) {
			last = now;
			await sleep(500);
			m = await L.scrape(d.ports.metrics);
			now = L.val(m, 'echorouterd_store_in_flight_bytes');
		}
		const out = L.val(m, 'echorouterd_store_in_flight_messages');
		assert.ok(out >= 1, 'some out for bob');
		assert.ok(now <= (8 << 20) + SIZE + 4096, `${now} bytes in flight, in ${out} messages`);
		// Then he reads: each line once, in order; nothing waits after.
		reading = true;
		b.resume();
		await until(() => (got.match(/\n/g) || []).length >= 1 + N, 'all of bob\'s lines', 60000);
		const lines = got.split('\n').slice(1, 1 + N);
		lines.forEach((l, i) => assert.ok(l.endsWith(` alice ${body(i)}`), `line ${i}: ${l.slice(0, 60)}`));
		await until(async () => L.val(await L.scrape(d.ports.metrics), 'echorouterd_store_messages') === 0,
		    'the store empty');
		a.sock.destroy(); b.destroy();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('JetStream: a bucket made earlier with a shorter TTL keeps waiting messages past it', { skip: skip || (!JS && 'the JetStream backend only') }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'ttl');
	// The bucket as a run with a TTL of 6 s would have left it.
	const bucket = `${jsPrefix(db)}-store`;
	const made = await jsApi(`$JS.API.STREAM.CREATE.KV_${bucket}`, {
		name: `KV_${bucket}`, subjects: [`$KV.${bucket}.>`], storage: 'file',
		num_replicas: 1, max_msgs_per_subject: 1, max_age: 6e9, discard: 'new',
		allow_rollup_hdrs: true, deny_delete: true, allow_direct: true,
		duplicate_window: 2e9,
	});
	assert.ok(!made.error, JSON.stringify(made.error));
	try {
		let d = await L.startDaemon(conf(db));
		try {
			await until(() => /keeps messages 6 s/.test(d.log), 'the TTL read');
			const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
			for (let i = 0; i < 3; i++)
				assert.equal((await submit(a.s, { short_message: `w${i}` })).command_status, ESME_ROK);
			a.s.close();
			// Twice the bucket's TTL: written again meanwhile, or gone.
			await sleep(13000);
		} finally {
			await L.stopDaemon(d);
		}
		d = await L.startDaemon(conf(db));
		try {
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			await until(() => b.got.length >= 3, 'the waiting messages', 15000);
			assert.deepEqual(b.got.map(L.text), ['w0', 'w1', 'w2']);
			b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('JetStream: with the NATS server gone, what would be stored is refused for now (ESME_RTHROTTLED); then stored again, nothing lost', { skip: skip || (!JS && 'the JetStream backend only') }, async () => {
	const ESME_RTHROTTLED = 0x58;
	const d = await L.startDaemon(conf());
	try {
		const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		const acked = [];
		for (let i = 0; i < 3; i++) {
			assert.equal((await submit(a.s, { short_message: `before${i}` })).command_status, ESME_ROK);
			acked.push(`before${i}`);
		}
		nats.child.kill('SIGKILL');
		await until(() => nats.exited, 'nats-server gone');
		// Refused, not lost and not left waiting: a temporary error.
		const refused = [];
		for (let i = 0; i < 3; i++) {
			const r = await submit(a.s, { short_message: `during${i}` });
			assert.equal(r.command_status, ESME_RTHROTTLED, `during${i}`);
			refused.push(`during${i}`);
		}
		await natsStart();
		// The node reconnects and reads its messages again.
		let r;
		await until(async () => {
			r = await submit(a.s, { short_message: 'after' });
			return r.command_status === ESME_ROK;
		}, 'stored again', 20000);
		acked.push('after');
		const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		await until(() => b.got.length >= acked.length, 'the backlog', 20000);
		await sleep(500);
		// Every acknowledged one once, in order; no refused one.
		assert.deepEqual(b.got.map(L.text), acked);
		a.s.close();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// SIGTERM while a bind drains its backlog: the deliver_sm_resp for the
// window outstanding at the signal are still read (within
// shutdown_timeout), so what the ESME acknowledged leaves the store and is
// not sent again after the restart. Nothing lost, nothing twice.
test('SIGTERM during a drain: the outstanding window is answered, no duplicates after the restart', { skip }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-store-'));
	const db = path.join(dir, 'store.db');
	const text = (c) => c.replace('response_timeout = 3;', 'response_timeout = 30; window = 16;');
	const N = 2000;
	try {
		let d = await L.startDaemon(text(conf(db)));
		const a = await session(d.ports.smpp, 'bind_transmitter', 'alice', 'a');
		for (let i = 0; i < N; i += 200) {
			const rs = await Promise.all(Array.from({ length: 200 },
			    (_, k) => submit(a.s, { short_message: `d${i + k}` })));
			assert.ok(rs.every((r) => r.command_status === ESME_ROK));
		}
		a.s.close();
		// bob answers every deliver_sm at once; SIGTERM comes mid-drain,
		// with a window out.
		const s = await L.connect(d.ports.smpp);
		const first = [];
		s.on('deliver_sm', (pdu) => {
			s.send(pdu.response({ command_status: ESME_ROK }));
			first.push(L.text(pdu));
		});
		s.on('error', () => {});
		assert.equal((await L.call(s, 'bind_receiver', { system_id: 'bob', password: 'b' })).command_status, ESME_ROK);
		await until(() => first.length >= N / 4, 'part of the drain', 20000);
		d.child.kill('SIGTERM');
		await until(() => d.exited !== null, 'the exit', 20000);
		assert.equal(d.exited.code, 0, d.log);
		fs.rmSync(d.dir, { recursive: true, force: true });
		s.destroy();
		d = await L.startDaemon(text(conf(db)));
		let second;
		try {
			const b = await session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
			// Until 2.5 s pass with nothing new: a message sent again
			// (retried) would come a second or two after the rest.
			let n = -1, quiet = Date.now();
			await until(() => {
				if (b.got.length !== n) {
					n = b.got.length;
					quiet = Date.now();
				}
				return Date.now() - quiet >= 2500;
			}, 'the rest', 30000);
			second = b.got.map(L.text);
			b.s.close();
		} finally {
			await L.stopDaemon(d);
		}
		const once = new Set(first);
		const twice = second.filter((t) => once.has(t));
		const all = new Set([...first, ...second]);
		const lost = Array.from({ length: N }, (_, i) => `d${i}`).filter((t) => !all.has(t));
		console.log(`answered before the exit ${first.length}, after the restart ${second.length}, ` +
		    `twice ${twice.length}, lost ${lost.length}`);
		assert.deepEqual(lost, []);
		assert.deepEqual(twice, [], 'acknowledged before the exit, sent again after it');
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
