// upstream-cluster.test.js: two nodes of a cluster (one nats-server with
// JetStream, started here) each keep a session to the same upstream SMS
// centre (the simulator in smsc-sim.js). A message node a submitted gets
// its receipt on node b's session: node b has no entry for the SMSC's id,
// asks the cluster, and node a relays the receipt to its submitter with
// echorouterd's id. A receipt no node knows is counted unmatched, once;
// one that overtook its submit_sm_resp is matched once the id is filed.
// With SQLite stores, a node restarted since its submit answers from its
// store file.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const L = require('./lib.js');
const { SmscSim } = require('./smsc-sim.js');

const BIN = process.env.ECHOROUTERD_BIN;
const skip = L.natsMissing(BIN);
const SQLITE = !BIN || /sqlite: yes/.test(execFileSync(BIN, ['-V']).toString());

const WAIT = L.WRAP.length ? 120000 : 20000;

function nodeConf(node, natsPort, simPort, prefix = 'erdup', extra = '') {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);
accounts = ( { id = "alice"; password = "pw"; } );
routes = ( { prefix = "+351"; to = "upstream:opA"; } );
upstreams = (
  { name = "opA"; host = "127.0.0.1"; port = ${simPort};
    system_id = "erd"; password = "secret"; sessions = 1; }
);
cluster = {
  node = "${node}";
  servers = ( "nats://127.0.0.1:${natsPort}" );
  subject_prefix = "${prefix}";
  request_timeout = 2;
};
${extra}`;
}

function metric(m, name) {
	return L.val(m, `echorouterd_upstream_${name}{upstream="opA"}`);
}

// A receipt from the SMSC for its message id, as SMSCs write it.
function receipt(id, stat) {
	return { source_addr_ton: 1, source_addr_npi: 1,
		source_addr: '351910000001', dest_addr_ton: 1, dest_addr_npi: 1,
		destination_addr: 'alice', esm_class: 0x04,
		receipted_message_id: id, message_state: stat === 'DELIVRD' ? 2 : 5,
		short_message: Buffer.from(`id:${id} sub:001 dlvrd:001 submit ` +
			`date:2611261830 done date:2611261832 stat:${stat} err:000 text:hi`) };
}

let dir, nats, sim, A, B;

async function startNats() {
	const n = { port: await L.freePort(), log: '', exited: false };
	n.child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(n.port),
		'-js', '-sd', path.join(dir, 'js')], { stdio: ['ignore', 'ignore', 'pipe'] });
	n.child.stderr.setEncoding('utf8');
	n.child.stderr.on('data', (c) => { n.log += c; });
	n.child.on('exit', () => { n.exited = true; });
	await L.until(() => /Server is ready/.test(n.log) || n.exited, WAIT,
		'nats-server ready');
	if (n.exited)
		throw new Error(`nats-server did not start:\n${n.log}`);
	return n;
}

test.before(async () => {
	if (skip)
		return;
	dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upcluster-'));
	nats = await startNats();
	sim = new SmscSim({ messageId: (n) => `sim${1000 + n}` });
	const simPort = await sim.start();
	A = await L.startDaemon(nodeConf('a', nats.port, simPort));
	B = await L.startDaemon(nodeConf('b', nats.port, simPort));
	for (const d of [A, B])
		await L.until(async () => metric(await L.scrape(d.ports.metrics),
			'sessions_bound') === 1, WAIT, 'the upstream bound');
	// Both in the cluster: a LOGIN needs its claim agreed.
	await L.until(async () => {
		const c = await L.lineClient(A.ports.router);
		c.sock.write('LOGIN alice pw\n');
		const r = await c.wait((l) => /^(OK|ERR)/.test(l), 'LOGIN');
		c.sock.destroy();
		return r === 'OK LOGIN alice';
	}, WAIT, 'a first LOGIN through the cluster');
});

test.after(async () => {
	if (skip)
		return;
	const errors = [];
	for (const d of [A, B])
		if (d)
			await L.stopDaemon(d).catch((e) => errors.push(e));
	if (sim)
		await sim.stop();
	if (nats)
		nats.child.kill('SIGKILL');
	fs.rmSync(dir, { recursive: true, force: true });
	if (errors.length > 0)
		throw errors[0];
});

// alice logs in on a line to node a: the address may still be held by
// an earlier LOGIN a moment.
async function loginAlice(alice) {
	await L.until(async () => {
		alice.lines = [];
		alice.sock.write('LOGIN alice pw\n');
		const r = await alice.wait((l) => /^(OK LOGIN|ERR)/.test(l), 'LOGIN');
		return r === 'OK LOGIN alice';
	}, WAIT, 'alice logged in on node a');
}

test('a receipt that comes back on another node\'s session reaches the submitter with our id', { skip }, async () => {
	const alice = await L.lineClient(A.ports.router);
	try {
		await loginAlice(alice);
		alice.sock.write('RECEIPTS ON\nSEND +351910000001 hello\n');
		const ok = await alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		const id = ok.split(' ')[1];
		assert.equal(sim.submits.length, 1);
		const byA = sim.submits[0].session;
		const other = [...sim.sessions].find((s) => s !== byA &&
			s.bindCommand !== 'bind_transmitter');
		assert.ok(other, 'node b has a session of its own');
		const r = await sim.deliver(receipt('sim1000', 'DELIVRD'), WAIT, other);
		assert.equal(r.command_status, 0);
		const rcpt = await alice.wait((l) => l.startsWith('RCPT '), 'the receipt, through node b');
		assert.equal(rcpt, `RCPT ${id} DELIVRD 000 2611261832`);
		const ma = await L.scrape(A.ports.metrics);
		const mb = await L.scrape(B.ports.metrics);
		assert.equal(metric(ma, 'receipts_matched_total'), 1, 'node a matched it');
		assert.equal(metric(mb, 'receipts_matched_total'), 0);
		await L.sleep(2500);	// past the question's wait: not unmatched
		assert.equal(metric(await L.scrape(B.ports.metrics), 'receipts_unmatched_total'), 0);
		assert.equal(alice.lines.filter((l) => l.startsWith('RCPT ')).length, 1);
	} finally {
		alice.sock.destroy();
	}
});

test('a receipt for an id no node sent is counted unmatched once, by the node that got it', { skip }, async () => {
	const before = metric(await L.scrape(B.ports.metrics), 'receipts_unmatched_total');
	const onB = [...sim.sessions].find((s) => s !== sim.submits[0]?.session &&
		s.bindCommand !== 'bind_transmitter');
	assert.ok(onB);
	const r = await sim.deliver(receipt('nosuch77', 'DELIVRD'), WAIT, onB);
	assert.equal(r.command_status, 0, 'answered at once, not after the cluster');
	await L.until(async () => metric(await L.scrape(B.ports.metrics),
		'receipts_unmatched_total') === before + 1, WAIT, 'unmatched on node b');
	await L.sleep(500);
	assert.equal(metric(await L.scrape(A.ports.metrics), 'receipts_unmatched_total'), 0);
	assert.equal(metric(await L.scrape(B.ports.metrics), 'receipts_unmatched_total'), before + 1);
});

// The receipt overtakes the submit_sm_resp on the submitting node's own
// session: node a finds no id yet and asks the cluster, nobody has it,
// and node a looks once more when the question's wait is over (by then
// the answer filed the id) instead of counting it unmatched.
test('a receipt before its submit_sm_resp on the submitting node is matched after the cluster\'s wait', { skip }, async () => {
	const alice = await L.lineClient(A.ports.router);
	const unmatched = async () => metric(await L.scrape(A.ports.metrics), 'receipts_unmatched_total') +
		metric(await L.scrape(B.ports.metrics), 'receipts_unmatched_total');
	const before = await unmatched();
	try {
		await loginAlice(alice);
		const n = sim.submits.length;
		sim.delay = 700;
		alice.sock.write('RECEIPTS ON\nSEND +351910000001 overtaken\n');
		await L.until(() => sim.submits.length === n + 1, WAIT, 'the submit at the SMSC');
		sim.delay = 0;
		const x = sim.submits[n];
		const r = await sim.deliver(receipt(x.id, 'DELIVRD'), WAIT, x.session);
		assert.equal(r.command_status, 0);
		const ok = await alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		const rcpt = await alice.wait((l) => l.startsWith('RCPT '), 'the receipt');
		assert.equal(rcpt, `RCPT ${ok.split(' ')[1]} DELIVRD 000 2611261832`);
		assert.equal(await unmatched(), before);
	} finally {
		sim.delay = 0;
		alice.sock.destroy();
	}
});

// Publishes payload on subject with reply, as any NATS client may.
function natsPublish(port, subject, reply, payload) {
	return L.natsExchange(port, () => 'CONNECT {"verbose":false}\r\n' +
		`PUB ${subject} ${reply} ${payload.length}\r\n${payload}\r\nPING\r\n`,
	(buf) => (/PONG\r\n/.test(buf) ? true : undefined), WAIT);
}

test('malformed questions about receipts are dropped; one for a known id is not answered twice', { skip }, async () => {
	for (const p of ['', 'garbage', 'x 1 2 opA 9999\nshort', 'x 1 999 opA 3\nabc',
		`x 1 2 opA 70\n${'9'.repeat(70)}`, 'x 1 2 opA 0\n', 'x 1 2 nosuch 4\nsim1'])
		await natsPublish(nats.port, 'erdup.rq', 'erdup.ra.zz.1', p);
	// Both nodes still route, ask and answer.
	const before = metric(await L.scrape(B.ports.metrics), 'receipts_unmatched_total');
	const onB = [...sim.sessions].find((s) => s !== sim.submits[0]?.session &&
		s.bindCommand !== 'bind_transmitter');
	assert.equal((await sim.deliver(receipt('nosuch78', 'DELIVRD'), WAIT, onB)).command_status, 0);
	await L.until(async () => metric(await L.scrape(B.ports.metrics),
		'receipts_unmatched_total') === before + 1, WAIT, 'unmatched on node b');
	for (const d of [A, B])
		assert.equal(d.exited, null, 'still running');
});

test('with stores: a node restarted since its submit matches another node\'s question from its store file', { skip: skip || (!SQLITE && 'no SQLite') || L.sqlite3Missing() }, async () => {
	const sim2 = new SmscSim({ messageId: (n) => `st${7000 + n}` });
	const simPort = await sim2.start();
	const conf = (node) => nodeConf(node, nats.port, simPort, 'erdst',
		`store = { path = "${dir}/${node}.db"; };`);
	const bound = async (d) => L.until(async () => metric(await L.scrape(d.ports.metrics),
		'sessions_bound') === 1, WAIT, 'the upstream bound');
	let C = null, D = null, alice = null;
	try {
		C = await L.startDaemon(conf('c'));
		D = await L.startDaemon(conf('d'));
		await bound(C);
		await bound(D);
		alice = await L.lineClient(C.ports.router);
		await loginAlice(alice);
		alice.sock.write('RECEIPTS ON\nSEND +351910000001 kept\n');
		const ok = await alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		const id = ok.split(' ')[1];
		await L.until(() => sim2.submits.length === 1, WAIT, 'the submit');
		const byC = sim2.submits[0].session;
		const dSession = [...sim2.sessions].find((s) => s !== byC);
		assert.ok(dSession, 'node d has a session of its own');
		alice.sock.destroy();
		// The id is in c's store file (a clean stop commits); c's memory
		// starts empty.
		await L.stopDaemon(C);
		C = await L.startDaemon(conf('c'));
		await bound(C);
		alice = await L.lineClient(C.ports.router);
		await loginAlice(alice);
		alice.sock.write('RECEIPTS ON\n');
		await alice.wait((l) => l === 'OK RECEIPTS ON', 'RECEIPTS ON');
		const r = await sim2.deliver(receipt('st7000', 'DELIVRD'), WAIT, dSession);
		assert.equal(r.command_status, 0);
		const rcpt = await alice.wait((l) => l.startsWith('RCPT '), 'the receipt, through node d');
		assert.equal(rcpt, `RCPT ${id} DELIVRD 000 2611261832`);
		assert.equal(metric(await L.scrape(C.ports.metrics), 'receipts_matched_total'), 1,
			'node c matched it');
		await L.sleep(2500);	// past the question's wait: not unmatched
		assert.equal(metric(await L.scrape(D.ports.metrics), 'receipts_unmatched_total'), 0);
		assert.equal(alice.lines.filter((l) => l.startsWith('RCPT ')).length, 1);
		// A final receipt: the id leaves c's store file once relayed.
		await L.stopDaemon(C);
		C = null;
		const rows = fs.readdirSync(dir).filter((f) => /^c\.db(\.\d+)?$/.test(f))
			.map((f) => execFileSync('sqlite3', [path.join(dir, f),
				'SELECT count(*) FROM rcpt']).toString().trim());
		assert.deepEqual(rows.filter((n) => n !== '0'), [], 'nothing left in rcpt');
	} finally {
		if (alice)
			alice.sock.destroy();
		for (const d of [C, D])
			if (d)
				await L.stopDaemon(d);
		await sim2.stop();
	}
});
