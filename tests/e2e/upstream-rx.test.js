// upstream-rx.test.js: what an upstream SMS centre (the simulator in
// smsc-sim.js) sends echorouterd: messages from the network routed to a
// line client and to an SMPP ESME, answered by what became of them;
// receipts for messages sent to it, named in another form of the SMSC's
// id, reaching a line client and an ESME with echorouterd's ids, also
// when they come before the SMSC's submit_sm_resp; and receipts for ids
// echorouterd never sent, counted and dropped.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const L = require('./lib.js');
const { SmscSim } = require('./smsc-sim.js');

const WAIT = L.WRAP.length ? 120000 : 20000;

function conf(port, extra = '') {
	return `dispatchers = 2;
listeners = (
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; },
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; }
);
accounts = (
  { id = "alice"; password = "pw"; },
  { id = "esme1"; password = "pw"; }
);
routes = (
  { prefix = "+351"; to = "upstream:opA"; },
  { prefix = "+1555"; to = "alice"; },
  { prefix = "+1666"; to = "esme1"; }
);
upstreams = (
  { name = "opA"; host = "127.0.0.1"; port = ${port};
    system_id = "erd"; password = "secret"; ${extra} }
);
`;
}

function metric(m, name) {
	return L.val(m, `echorouterd_upstream_${name}{upstream="opA"}`);
}

// alice logged in on a line to d, with RECEIPTS ON if asked.
async function aliceOn(d, receipts) {
	const alice = await L.lineClient(d.ports.router);
	alice.sock.write(`LOGIN alice pw\n${receipts ? 'RECEIPTS ON\n' : ''}`);
	await alice.wait((l) => l === (receipts ? 'OK RECEIPTS ON' : 'OK LOGIN alice'), 'alice logged in');
	return alice;
}

// A daemon bound to a fresh simulator, and alice logged in on a line.
async function setup(extra, simOpts, top = '') {
	const sim = new SmscSim(simOpts);
	const port = await sim.start();
	const d = await L.startDaemon(conf(port, extra) + top);
	await L.until(async () => metric(await L.scrape(d.ports.metrics),
		'sessions_bound') === 1, WAIT, 'the upstream bound');
	const alice = await L.lineClient(d.ports.router);
	alice.sock.write('LOGIN alice pw\n');
	await alice.wait((l) => l === 'OK LOGIN alice', 'alice logged in');
	return { sim, d, alice };
}

async function teardown(t) {
	t.alice.sock.destroy();
	await L.stopDaemon(t.d);
	await t.sim.stop();
}

function mo(dest, message, more = {}) {
	return { source_addr_ton: 1, source_addr_npi: 1,
		source_addr: '351911000001', dest_addr_ton: 1, dest_addr_npi: 1,
		destination_addr: dest, data_coding: 0, short_message: message, ...more };
}

test('an MO reaches the line client its route names, GSM 03.38 decoded; the SMSC hears ESME_ROK', async () => {
	const t = await setup();
	try {
		// "Hi @ é" in GSM 03.38: @ is 0x00, é is 0x05.
		const r = await t.sim.deliver(mo('15551234',
			Buffer.from([0x48, 0x69, 0x20, 0x00, 0x20, 0x05])));
		assert.equal(r.command_status, 0);
		const line = await t.alice.wait((l) => l.startsWith('MSG '), 'the MO');
		assert.match(line, /^MSG \d+ \+351911000001 Hi @ é$/);
		// data_sm with its text in message_payload goes the same way.
		const r2 = await t.sim.send('data_sm', { source_addr_ton: 1,
			source_addr: '351911000002', dest_addr_ton: 1,
			destination_addr: '15551234', data_coding: 0,
			message_payload: Buffer.from('via data-sm') });
		assert.equal(r2.command_status, 0);
		await t.alice.wait((l) => / \+351911000002 via data-sm$/.test(l), 'the data_sm');
		const m = await L.scrape(t.d.ports.metrics);
		assert.equal(metric(m, 'mo_routed_total'), 2);
		assert.equal(metric(m, 'deliver_refused_total'), 0);
	} finally {
		await teardown(t);
	}
});

test('an MO reaches an SMPP ESME with its octets and data_coding as sent', async () => {
	const t = await setup();
	const esme = await L.session(t.d.ports.smpp, 'bind_transceiver', 'esme1', 'pw');
	try {
		const ucs2 = Buffer.from([0x00, 0x4f, 0x00, 0x6c, 0x00, 0xe1]);	// "Olá"
		const r = await t.sim.deliver(mo('16660001', ucs2, { data_coding: 8 }));
		assert.equal(r.command_status, 0);
		await L.until(() => esme.got.length === 1, WAIT, 'deliver_sm at the ESME');
		const p = esme.got[0];
		assert.equal(p.destination_addr, '16660001');
		assert.equal(p.source_addr, '351911000001');
		assert.equal(p.source_addr_ton, 1);
		assert.equal(p.data_coding, 8);
		assert.equal(p.esm_class & 0x3c, 0, 'an MO is no receipt');
		const sm = p.short_message;
		assert.deepEqual(Buffer.isBuffer(sm) ? sm : Buffer.from(sm.message, 'utf16le').swap16(), ucs2);
	} finally {
		esme.s.close();
		await teardown(t);
	}
});

test('an MO with no route is answered ESME_RINVDSTADR: the SMSC keeps it', async () => {
	const t = await setup();
	try {
		const r = await t.sim.deliver(mo('19990000', Buffer.from('nobody')));
		assert.equal(r.command_status, 0x0b);
		// A local recipient that is not logged in: no route either.
		const esme1 = await t.sim.deliver(mo('16660001', Buffer.from('away')));
		assert.equal(esme1.command_status, 0x0b);
		const m = await L.scrape(t.d.ports.metrics);
		assert.equal(metric(m, 'deliver_refused_total'), 2);
		assert.equal(metric(m, 'mo_routed_total'), 0);
		assert.equal(t.alice.lines.filter((l) => l.startsWith('MSG ')).length, 0);
	} finally {
		await teardown(t);
	}
});

test('receipts for ids never sent are answered ESME_ROK, counted unmatched, delivered to nobody', async () => {
	// No submit is unanswered, so no answer can file their ids later:
	// they are not looked for again, but unmatched at once.
	const t = await setup();
	try {
		const text = 'id:777 sub:001 dlvrd:001 submit date:2611261830 ' +
			'done date:2611261831 stat:DELIVRD err:000 text:x';
		// Marked by esm_class, by the receipted_message_id TLV, and
		// only by its text: each addressed to alice's route.
		const rs = [
			await t.sim.deliver(mo('15551234', Buffer.from(text), { esm_class: 0x04 })),
			await t.sim.deliver(mo('15551234', Buffer.from(''), { esm_class: 0x04,
				receipted_message_id: '778', message_state: 2 })),
			await t.sim.deliver(mo('15551234', Buffer.from(text.replace('777', '779')))),
		];
		assert.deepEqual(rs.map((r) => r.command_status), [0, 0, 0]);
		// An MO after them is the first (and only) line alice gets.
		await t.sim.deliver(mo('15551234', Buffer.from('after')));
		const first = await t.alice.wait((l) => l.startsWith('MSG '), 'the MO after');
		assert.match(first, / after$/);
		await L.sleep(300);
		assert.equal(t.alice.lines.filter((l) => l.startsWith('MSG ')).length, 1);
		const m = await L.scrape(t.d.ports.metrics);
		assert.equal(metric(m, 'receipts_unmatched_total'), 3);
		assert.equal(metric(m, 'receipts_matched_total'), 0);
		assert.equal(metric(m, 'receipts_late_total'), 0);
		// The stats line (SIGUSR1) counts them too.
		const before = t.d.log.length;
		t.d.child.kill('SIGUSR1');
		await L.until(() => / upstream_opA_receipts_matched=0 upstream_opA_receipts_unmatched=3/
			.test(t.d.log.slice(before)), WAIT, 'stats line');
		assert.equal(metric(m, 'mo_routed_total'), 1);
		assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 0);
	} finally {
		await teardown(t);
	}
});

test('a line client that turned RECEIPTS ON gets a RCPT line with the id its SEND got', async () => {
	const t = await setup();
	const esme = await L.session(t.d.ports.smpp, 'bind_transceiver', 'esme1', 'pw');
	try {
		t.alice.sock.write('SEND esme1 before\n');
		await t.alice.wait((l) => /^OK \d+$/.test(l), 'the first SEND');
		t.alice.sock.write('RECEIPTS ON\n');
		await t.alice.wait((l) => l === 'OK RECEIPTS ON', 'receipts on');
		t.alice.sock.write('SEND esme1 hello\n');
		const ok = await t.alice.wait((l) => /^OK \d+$/.test(l) &&
			t.alice.lines.indexOf(l) > t.alice.lines.indexOf('OK RECEIPTS ON'), 'the SEND');
		const id = ok.split(' ')[1];
		// The ESME answered deliver_sm_resp ESME_ROK: delivered.
		const rcpt = await t.alice.wait((l) => l.startsWith('RCPT '), 'the receipt');
		assert.match(rcpt, new RegExp(`^RCPT ${id} DELIVRD 000 \\d{10}$`));
		await L.until(() => esme.got.length === 2, WAIT, 'both at the ESME');
		await L.sleep(300);
		// The SEND before RECEIPTS ON asked for none.
		assert.equal(t.alice.lines.filter((l) => l.startsWith('RCPT ')).length, 1);
		assert.equal(t.alice.lines.filter((l) => l.startsWith('MSG ')).length, 0);
	} finally {
		esme.s.close();
		await teardown(t);
	}
});

// A receipt from the SMSC for its message id, in the text SMSCs write.
function receipt(id, stat, err, more = {}) {
	return mo('1555000', Buffer.from(`id:${id} sub:001 dlvrd:001 submit date:2611261830 ` +
		`done date:2611261832 stat:${stat} err:${err} text:hi`), { esm_class: 0x04, ...more });
}

test('a message that asked for no receipt leaves no id in the map; a receipt for it anyway is unmatched', async () => {
	const t = await setup('', { messageId: () => 'sim77' });
	try {
		t.alice.sock.write('SEND +351910000001 no receipt wanted\n');
		await t.alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		assert.equal(t.sim.submits[0].pdu.registered_delivery & 3, 0);
		let m = await L.scrape(t.d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 0);
		assert.equal((await t.sim.deliver(receipt('sim77', 'DELIVRD', '000'))).command_status, 0);
		m = await L.scrape(t.d.ports.metrics);
		assert.equal(metric(m, 'receipts_unmatched_total'), 1);
		await L.sleep(300);
		assert.equal(t.alice.lines.filter((l) => l.startsWith('RCPT ')).length, 0);
	} finally {
		await teardown(t);
	}
});

test('receipts in another form of the SMSC id reach a line client and an ESME with echorouterd\'s ids', async () => {
	// The SMSC calls the first message "3039" (hex of 12345), the second
	// "0000012346"; its receipts say 12345 and 303A.
	const t = await setup('', { messageId: (n) => ['3039', '0000012346'][n] || `x${n}` });
	const esme = await L.session(t.d.ports.smpp, 'bind_transceiver', 'esme1', 'pw');
	try {
		t.alice.sock.write('RECEIPTS ON\nSEND +351910000001 hello\n');
		const ok = await t.alice.wait((l) => /^OK \d+$/.test(l), 'the SEND to the SMSC');
		const lineId = ok.split(' ')[1];
		const r = await L.call(esme.s, 'submit_sm', { source_addr: 'esme1',
			dest_addr_ton: 1, dest_addr_npi: 1, destination_addr: '351910000002',
			registered_delivery: 1, short_message: 'hi there' });
		assert.equal(r.command_status, 0);
		const esmeId = r.message_id;
		assert.equal(t.sim.submits.length, 2);
		assert.equal(t.sim.submits[0].pdu.registered_delivery & 1, 1,
			'RECEIPTS ON asks the SMSC for a receipt');
		let m = await L.scrape(t.d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 2);
		// An intermediate receipt first: nobody hears of it.
		assert.equal((await t.sim.deliver(receipt('12345', 'ENROUTE', '000'))).command_status, 0);
		assert.equal((await t.sim.deliver(receipt('12345', 'DELIVRD', '000'))).command_status, 0);
		assert.equal((await t.sim.deliver(receipt('303A', 'UNDELIV', '012', {
			receipted_message_id: '303A', message_state: 5 }))).command_status, 0);
		const rcpt = await t.alice.wait((l) => l.startsWith('RCPT '), 'the line receipt');
		assert.equal(rcpt, `RCPT ${lineId} DELIVRD 000 2611261832`);
		await L.until(() => esme.got.length === 1, WAIT, 'the ESME\'s receipt');
		const p = esme.got[0];
		assert.equal(p.esm_class & 0x3c, 0x04);
		assert.equal(p.receipted_message_id, esmeId);
		assert.equal(p.message_state, 5);
		const text = L.text(p);
		assert.match(text, new RegExp(`^id:${esmeId} `));
		assert.match(text, / stat:UNDELIV err:012 /);
		assert.match(text, / done date:2611261832 /);
		// The final receipts took their entries: once more, unmatched.
		assert.equal((await t.sim.deliver(receipt('12345', 'DELIVRD', '000'))).command_status, 0);
		m = await L.scrape(t.d.ports.metrics);
		assert.equal(metric(m, 'receipts_matched_total'), 3);
		assert.equal(metric(m, 'receipts_unmatched_total'), 1);
		assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 0);
		await L.sleep(300);
		assert.equal(t.alice.lines.filter((l) => l.startsWith('RCPT ')).length, 1);
		assert.equal(esme.got.length, 1);
	} finally {
		esme.s.close();
		await teardown(t);
	}
});

// t's daemon stopped and a new one started on the same store (its
// memory map empty), bound to the simulator, alice on it with RECEIPTS
// ON: { d2, alice2 }, kept in t for teardownRestarted.
async function restartOnStore(t, store) {
	t.alice.sock.destroy();
	await L.stopDaemon(t.d);
	t.d = null;
	const d2 = t.d2 = await L.startDaemon(conf(t.sim.port) + store);
	await L.until(async () => metric(await L.scrape(d2.ports.metrics),
		'sessions_bound') === 1 && t.sim.receiving() !== undefined, WAIT, 'bound again');
	const alice2 = t.alice2 = await aliceOn(d2, true);
	return { d2, alice2 };
}

async function teardownRestarted(t, dir) {
	if (t.alice2)
		t.alice2.sock.destroy();
	t.alice.sock.destroy();
	await L.stopAll(t.d, t.d2);
	await t.sim.stop();
	fs.rmSync(dir, { recursive: true, force: true });
}

test('with a store, a receipt matches after a restart: the SMSC id was kept on disk', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-rcpt-'));
	const store = `store = { path = "${path.join(dir, 'store.db')}"; };\n`;
	const t = await setup('', { messageId: () => '0000BEEF' }, store);
	try {
		t.alice.sock.write('RECEIPTS ON\nSEND +351910000001 kept\n');
		const ok = await t.alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		const id = ok.split(' ')[1];
		// Stored first, then submitted: the SMSC's answer files its id.
		await L.until(async () => L.val(await L.scrape(t.d.ports.metrics),
			'echorouterd_upstream_receipt_ids') === 1, WAIT, 'the SMSC id filed');
		// A new daemon on the same store: its memory map is empty.
		const { d2, alice2 } = await restartOnStore(t, store);
		let m = await L.scrape(d2.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 0);
		// 48879 is 0xBEEF: the store's keys match the other form too.
		const r = await t.sim.deliver(receipt('48879', 'DELIVRD', '000'));
		assert.equal(r.command_status, 0);
		const rcpt = await alice2.wait((l) => l.startsWith('RCPT '), 'the receipt');
		assert.equal(rcpt, `RCPT ${id} DELIVRD 000 2611261832`);
		// The final receipt took it from the store as well.
		assert.equal((await t.sim.deliver(receipt('BEEF', 'DELIVRD', '000'))).command_status, 0);
		assert.equal((await t.sim.deliver(receipt('99', 'DELIVRD', '000'))).command_status, 0);
		m = await L.scrape(d2.ports.metrics);
		assert.equal(metric(m, 'receipts_matched_total'), 1);
		assert.equal(metric(m, 'receipts_unmatched_total'), 2);
	} finally {
		await teardownRestarted(t, dir);
	}
});

// A text the SMSC takes in two parts gets an id of the SMSC's for each,
// both filed under ours. The first part's final receipt, matched in
// memory, drops only that part's ids from the store: the second part's
// receipt still matches after a restart (it once went with the first).
test('with a store, each part of a long message keeps its own SMSC id: one part\'s final receipt leaves the other\'s', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-parts-'));
	const store = `store = { path = "${path.join(dir, 'store.db')}"; };\n`;
	const t = await setup('', { messageId: (n) => `C0DE0${n + 1}` }, store);
	try {
		t.alice.sock.write(`RECEIPTS ON\nSEND +351910000001 ${'x'.repeat(200)}\n`);
		const ok = await t.alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
		const id = ok.split(' ')[1];
		await L.until(async () => L.val(await L.scrape(t.d.ports.metrics),
			'echorouterd_upstream_receipt_ids') === 2, WAIT, 'both parts\' ids filed');
		assert.deepEqual(t.sim.submits.map((x) => x.id), ['C0DE01', 'C0DE02']);
		assert.equal((await t.sim.deliver(receipt('C0DE01', 'DELIVRD', '000'))).command_status, 0);
		await t.alice.wait((l) => l.startsWith(`RCPT ${id} DELIVRD`), 'part 1\'s receipt');
		// (The store drops it on its own thread: give it the time.)
		await L.sleep(500);
		const { d2, alice2 } = await restartOnStore(t, store);
		assert.equal((await t.sim.deliver(receipt('C0DE02', 'DELIVRD', '000'))).command_status, 0);
		await alice2.wait((l) => l.startsWith(`RCPT ${id} DELIVRD`), 'part 2\'s receipt, from the store');
		// Part 1's went with its final receipt.
		assert.equal((await t.sim.deliver(receipt('C0DE01', 'DELIVRD', '000'))).command_status, 0);
		const m = await L.scrape(d2.ports.metrics);
		assert.equal(metric(m, 'receipts_matched_total'), 1);
		assert.equal(metric(m, 'receipts_unmatched_total'), 1);
	} finally {
		await teardownRestarted(t, dir);
	}
});

// The SMSC's receipt overtakes its submit_sm_resp: SMSCs that answer
// from one thread and deliver from another do this, and so does one
// that sends receipts on another session than the submit's. The receipt
// is looked for again until the answer files the id, then reaches the
// submitter; its deliver_sm_resp waits for that.
for (const stored of [false, true]) {
	test(`a receipt that comes before its submit_sm_resp still reaches the submitter${stored ? ' (with a store)' : ''}`, async () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-early-'));
		const store = stored ? `store = { path = "${path.join(dir, 'store.db')}"; };\n` : '';
		// The SMSC holds its answer to the submit until told.
		// A wait long enough for a slow machine: the match ends it.
		const t = await setup('', { submitStatus: () => null },
			store + 'upstream_receipts = { wait = 10; };\n');
		try {
			t.alice.sock.write('RECEIPTS ON\nSEND +351910000001 overtaken\n');
			await L.until(() => t.sim.held.length === 1, WAIT, 'the submit_sm at the SMSC');
			let answeredAt = 0;
			const delivered = t.sim.deliver(receipt('early1', 'DELIVRD', '000'))
				.then((r) => { answeredAt = Date.now(); return r; });
			await L.until(async () => metric(await L.scrape(t.d.ports.metrics),
				'receipts_late_total') === 1, WAIT, 'the receipt waiting');
			const released = Date.now();
			const h = t.sim.held[0];
			h.s.send(h.pdu.response({ command_status: 0, message_id: 'early1' }));
			const r = await delivered;
			assert.equal(r.command_status, 0);
			const ok = await t.alice.wait((l) => /^OK \d+$/.test(l), 'the SEND');
			const id = ok.split(' ')[1];
			const rcpt = await t.alice.wait((l) => l.startsWith('RCPT '), 'the receipt');
			assert.equal(rcpt, `RCPT ${id} DELIVRD 000 2611261832`);
			// Answered once the submit_sm_resp had gone, not before.
			assert.ok(answeredAt >= released, 'deliver_sm_resp before the submit_sm_resp');
			const m = await L.scrape(t.d.ports.metrics);
			assert.equal(metric(m, 'receipts_matched_total'), 1);
			assert.equal(metric(m, 'receipts_unmatched_total'), 0);
			assert.equal(metric(m, 'receipts_late_total'), 1);
			assert.equal(L.val(m, 'echorouterd_upstream_receipt_ids'), 0);
		} finally {
			await teardown(t);
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});
}
