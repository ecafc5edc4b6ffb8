// smpp.test.js: the npm smpp package, a real third-party ESME, against
// echorouterd's SMPP front end. Run by `make check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const SMPP_LISTENERS = `
listeners = (
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);`;

function conf(extra) {
	return `dispatchers = 3;\nidle_timeout = 0;\n${SMPP_LISTENERS}\n${extra || ''}`;
}

const ACCOUNTS = `accounts = (
  { id = "esmeA"; password = "pa"; },
  { id = "esmeB"; password = "pb"; },
  { id = "slow"; password = "ps"; max_tps = 5; },
  { id = "gw"; password = "pg"; max_binds = 2; },
  { id = "+351910000001"; password = "pl"; }
);`;

// Answers every deliver_sm and collects them.
function collect(session) {
	const got = [];
	session.on('deliver_sm', (pdu) => {
		got.push(pdu);
		session.send(pdu.response());
	});
	return got;
}

async function until(pred, what, ms = 10000) {
	const end = Date.now() + ms;
	while (!pred()) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

// A router line client logged in as addr; .text() is all it has received.
async function lineLogin(port, addr, password) {
	const sock = await L.rawConnect(port);
	let buf = '';
	sock.setEncoding('utf8');
	sock.on('data', (c) => { buf += c; });
	sock.write(`LOGIN ${addr} ${password}\n`);
	await until(() => buf.includes(`OK LOGIN ${addr}`), `router login ${addr}`);
	return { sock, text: () => buf };
}

test('binds are checked against the accounts', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const ok = await L.bind(port, 'bind_transceiver', 'esmeA', 'pa');
		assert.equal(ok.status, 0);
		assert.equal(ok.resp.system_id, 'echorouterd');
		assert.equal(ok.resp.sc_interface_version, 0x34);
		const again = await L.call(ok.s, 'bind_transmitter', { system_id: 'esmeA', password: 'pa' });
		assert.equal(again.command_status, L.smpp.ESME_RALYBND);
		const badpw = await L.bind(port, 'bind_transmitter', 'esmeA', 'nope');
		assert.equal(badpw.status, L.smpp.ESME_RINVPASWD);
		const nobody = await L.bind(port, 'bind_receiver', 'stranger', 'x');
		assert.equal(nobody.status, L.smpp.ESME_RINVSYSID);
		// max_binds = 2 for gw: the third bind fails.
		const g1 = await L.bind(port, 'bind_receiver', 'gw', 'pg');
		const g2 = await L.bind(port, 'bind_transmitter', 'gw', 'pg');
		const g3 = await L.bind(port, 'bind_transceiver', 'gw', 'pg');
		assert.equal(g1.status, 0);
		assert.equal(g2.status, 0);
		assert.equal(g3.status, L.smpp.ESME_RBINDFAIL);
		for (const x of [ok, badpw, nobody, g1, g2, g3])
			x.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Without accounts a system_id may bind smpp.max_binds times (4 unless
// set): an SMSC-side daemon takes an upstream's 8 sessions with 8.
test('without accounts, binds per system_id are limited by smpp.max_binds', async () => {
	for (const [extra, max] of [['', 4], ['smpp = { max_binds = 8; };', 8]]) {
		const d = await L.startDaemon(conf(extra));
		const held = [];
		try {
			for (let i = 0; i < max; i++) {
				const b = await L.bind(d.ports.smpp, 'bind_transceiver', 'open1', '');
				held.push(b);
				assert.equal(b.status, 0, `bind ${i + 1} of ${max}`);
			}
			const over = await L.bind(d.ports.smpp, 'bind_transmitter', 'open1', '');
			held.push(over);
			assert.equal(over.status, L.smpp.ESME_RBINDFAIL);
			// Another system_id has its own count.
			const other = await L.bind(d.ports.smpp, 'bind_transmitter', 'open2', '');
			held.push(other);
			assert.equal(other.status, 0);
		} finally {
			for (const x of held)
				x.s.destroy();
			await L.stopDaemon(d);
		}
	}
});

test('bind state: nothing before a bind, no submit on a receiver', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const s = await L.connect(port);
		let r = await L.call(s, 'submit_sm', { destination_addr: 'esmeB', short_message: 'x' });
		assert.equal(r.command_status, L.smpp.ESME_RINVBNDSTS);
		r = await L.call(s, 'enquire_link');
		assert.equal(r.command_status, 0);
		const rx = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		r = await L.call(rx.s, 'submit_sm', { destination_addr: 'esmeA', short_message: 'x' });
		assert.equal(r.command_status, L.smpp.ESME_RINVBNDSTS);
		s.destroy();
		rx.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('submit from A reaches B as deliver_sm, with a receipt back to A', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transceiver', 'esmeA', 'pa');
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		const atA = collect(a.s), atB = collect(b.s);
		const r = await L.call(a.s, 'submit_sm', {
			source_addr_ton: 1, source_addr_npi: 1, source_addr: '447700900001',
			dest_addr_ton: 5, dest_addr_npi: 0, destination_addr: 'esmeB',
			data_coding: 0, short_message: Buffer.from('hello B'),
			registered_delivery: 1,
		});
		assert.equal(r.command_status, 0);
		assert.match(r.message_id, /^\d+$/);
		await until(() => atB.length === 1, 'deliver_sm at B');
		const m = atB[0];
		assert.equal(L.text(m), 'hello B');
		assert.equal(m.source_addr, '447700900001');
		assert.equal(m.source_addr_ton, 1);
		assert.equal(m.source_addr_npi, 1);
		assert.equal(m.destination_addr, 'esmeB');
		assert.equal(m.dest_addr_ton, 5);
		await until(() => atA.length === 1, 'receipt at A');
		const rc = atA[0];
		assert.equal(rc.esm_class & 0x3c, 0x04);
		assert.equal(rc.receipted_message_id, r.message_id);
		assert.equal(rc.message_state, 2);
		assert.match(L.text(rc), new RegExp(`^id:${r.message_id} sub:001 dlvrd:001 submit date:\\d{10} done date:\\d{10} stat:DELIVRD err:000 text:hello B`));
		const u = await L.call(a.s, 'unbind');
		assert.equal(u.command_status, 0);
		assert.equal(u.command, 'unbind_resp');
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('long messages go as message_payload; binary passes untouched', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transmitter', 'esmeA', 'pa');
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		const atB = collect(b.s);
		const bin = Buffer.from([0x05, 0x00, 0x03, 0x2a, 0x02, 0x01, 0xff, 0x00, 0x80]);
		let r = await L.call(a.s, 'submit_sm', { destination_addr: 'esmeB',
			esm_class: 0x40, data_coding: 4, short_message: bin });
		assert.equal(r.command_status, 0);
		const long = 'x'.repeat(1000);
		r = await L.call(a.s, 'submit_sm', { destination_addr: 'esmeB',
			message_payload: Buffer.from(long) });
		assert.equal(r.command_status, 0);
		await until(() => atB.length === 2, 'two deliver_sm');
		// The library splits off the UDH (esm_class 0x40); the rest of the
		// bytes must be exactly what A sent.
		const sm = atB[0].short_message;
		assert.equal(atB[0].data_coding, 4);
		assert.equal(atB[0].esm_class & 0x40, 0x40);
		assert.ok(Array.isArray(sm.udh) && sm.udh.length > 0, 'UDH kept');
		assert.deepEqual(Buffer.from(sm.message), bin.subarray(bin[0] + 1));
		assert.equal(L.text(atB[1]), long);
		a.s.destroy();
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('no bound recipient: ESME_RINVDSTADR; TON 1 matches +prefix routes', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
routes = ( { prefix = "+4477"; to = "esmeB"; } );`));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transmitter', 'esmeA', 'pa');
		let r = await L.call(a.s, 'submit_sm', { destination_addr: 'nobody', short_message: 'x' });
		assert.equal(r.command_status, L.smpp.ESME_RINVDSTADR);
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		const atB = collect(b.s);
		r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 1, dest_addr_npi: 1,
			destination_addr: '447700900123', short_message: 'routed' });
		assert.equal(r.command_status, 0);
		await until(() => atB.length === 1, 'routed deliver_sm');
		assert.equal(atB[0].destination_addr, '447700900123');
		assert.equal(atB[0].dest_addr_ton, 1);
		// TON 0 is not international: no route.
		r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 0, destination_addr: '447700900123',
			short_message: 'x' });
		assert.equal(r.command_status, L.smpp.ESME_RINVDSTADR);
		a.s.destroy();
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('window and queue: beyond them the submitter gets ESME_RMSGQFUL', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { window = 4; queue_limit = 4; response_timeout = 60; };`));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transmitter', 'esmeA', 'pa');
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		const held = [];
		b.s.on('deliver_sm', (pdu) => held.push(pdu));	// no answer yet
		const status = [];
		for (let i = 0; i < 10; i++) {
			const r = await L.call(a.s, 'submit_sm', { destination_addr: 'esmeB', short_message: `m${i}` });
			status.push(r.command_status);
		}
		assert.deepEqual(status.slice(0, 8), Array(8).fill(0));
		assert.deepEqual(status.slice(8), [L.smpp.ESME_RMSGQFUL, L.smpp.ESME_RMSGQFUL]);
		await until(() => held.length === 4, 'the first window');
		await new Promise((r) => setTimeout(r, 200));
		assert.equal(held.length, 4, 'no more than the window in flight');
		// Answering opens the window: the queued four follow, in order.
		b.s.on('deliver_sm', (pdu) => b.s.send(pdu.response()));
		for (const pdu of held)
			b.s.send(pdu.response());
		await until(() => held.length === 8, 'the queued messages');
		assert.deepEqual(held.map(L.text), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']);
		a.s.destroy();
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Answers in any order settle their own messages: slots free out of
// order, so later deliver_sm go to whichever slot is free, and a failure
// answer reaches the right submitter's receipt.
test('deliver_sm answered out of order: each answer settles its own message', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { window = 4; queue_limit = 100; response_timeout = 60; };`));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transceiver', 'esmeA', 'pa');
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		const atA = collect(a.s);
		const held = [];
		b.s.on('deliver_sm', (pdu) => held.push(pdu));
		const ids = [];
		for (let i = 0; i < 12; i++) {
			const r = await L.call(a.s, 'submit_sm', { destination_addr: 'esmeB',
				short_message: `m${i}`, registered_delivery: 1 });
			assert.equal(r.command_status, 0);
			ids.push(r.message_id);
		}
		const FAIL = new Set([0, 3, 5, 11]);
		const answer = (i) => b.s.send(held[i].response(
			{ command_status: FAIL.has(i) ? 0x65 : 0 }));
		for (const [upto, order] of [[4, [2, 0, 3, 1]], [8, [6, 4, 7, 5]],
			[12, [11, 10, 9, 8]]]) {
			await until(() => held.length === upto, `${upto} deliver_sm`);
			await new Promise((r) => setTimeout(r, 100));
			assert.equal(held.length, upto, 'no more than the window in flight');
			for (const i of order)
				answer(i);
		}
		assert.deepEqual(held.map(L.text), ids.map((_, i) => `m${i}`));
		await until(() => atA.length === 12, 'a receipt for each');
		const stat = new Map(atA.map((p) => [p.receipted_message_id,
			/stat:(\w+)/.exec(L.text(p))[1]]));
		ids.forEach((id, i) => assert.equal(stat.get(id),
			FAIL.has(i) ? 'UNDELIV' : 'DELIVRD', `m${i} (${id})`));
		a.s.destroy();
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('max_tps: a burst over a second\'s worth gets ESME_RTHROTTLED', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const a = await L.bind(port, 'bind_transmitter', 'slow', 'ps');
		const b = await L.bind(port, 'bind_receiver', 'esmeB', 'pb');
		collect(b.s);
		const all = await Promise.all(Array.from({ length: 20 }, (_, i) =>
			L.call(a.s, 'submit_sm', { destination_addr: 'esmeB', short_message: `t${i}` })));
		const ok = all.filter((r) => r.command_status === 0).length;
		const thr = all.filter((r) => r.command_status === L.smpp.ESME_RTHROTTLED).length;
		assert.equal(ok + thr, 20);
		assert.ok(ok >= 5 && ok <= 9, `accepted ${ok}`);
		assert.ok(thr >= 11, `throttled ${thr}`);
		// Unbinding and binding again does not refill the bucket.
		const closed = L.withTimeout(new Promise((r) => a.s.once('close', r)),
			15000, 'close after unbind');
		await L.call(a.s, 'unbind');
		await closed;
		const t0 = Date.now();
		const a2 = await L.bind(port, 'bind_transmitter', 'slow', 'ps');
		assert.equal(a2.status, 0);
		const again = await Promise.all(Array.from({ length: 20 }, (_, i) =>
			L.call(a2.s, 'submit_sm', { destination_addr: 'esmeB', short_message: `u${i}` })));
		const ok2 = again.filter((r) => r.command_status === 0).length;
		// At 5 per second, what refilled since the burst, plus one.
		const refilled = Math.floor((Date.now() - t0) / 200) + 1;
		assert.ok(ok2 <= Math.max(refilled, 2) + 1, `accepted ${ok2} after rebinding`);
		a2.s.destroy();
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('generic_nack for unknown commands and bad PDUs; absurd length closes', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	const port = d.ports.smpp;
	try {
		const sock = await L.rawConnect(port);
		sock.write(L.header(16, 0x00000999, 0, 7));
		let got = await L.rawRead(sock, 16);
		assert.equal(got.readUInt32BE(4), 0x80000000);
		assert.equal(got.readUInt32BE(8), L.smpp.ESME_RINVCMDID);
		assert.equal(got.readUInt32BE(12), 7);
		// A bind whose system_id has no NUL within 16 bytes.
		const body = Buffer.concat([Buffer.alloc(20, 0x41), Buffer.alloc(10)]);
		const bind = Buffer.concat([L.header(16 + body.length, 0x00000009, 0, 8), body]);
		sock.write(bind);
		got = await L.rawRead(sock, 16);
		assert.equal(got.readUInt32BE(4), 0x80000009);
		assert.equal(got.readUInt32BE(8), L.smpp.ESME_RINVSYSID);
		// command_length 1 GiB: generic_nack ESME_RINVCMDLEN, then closed.
		sock.write(L.header(1 << 30, 0x00000004, 0, 9));
		got = await L.rawRead(sock, 1 << 20);
		assert.equal(got.length, 16);
		assert.equal(got.readUInt32BE(4), 0x80000000);
		assert.equal(got.readUInt32BE(8), L.smpp.ESME_RINVCMDLEN);
		assert.equal(got.readUInt32BE(12), 9);
		sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('the server probes idle binds and gives up on silent ones', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { enquire_link_interval = 1; response_timeout = 1; };`));
	const port = d.ports.smpp;
	try {
		const live = await L.bind(port, 'bind_transceiver', 'esmeA', 'pa');
		live.s.on('enquire_link', (pdu) => live.s.send(pdu.response()));
		const mute = await L.bind(port, 'bind_transceiver', 'esmeB', 'pb');
		const seen = [];
		mute.s.on('enquire_link', (pdu) => seen.push('enquire_link'));
		mute.s.on('unbind', () => seen.push('unbind'));
		const closed = new Promise((r) => mute.s.on('close', r));
		await L.withTimeout(closed, 10000, 'silent bind closed');
		assert.deepEqual(seen.slice(0, 2), ['enquire_link', 'unbind']);
		// The one that answers is still bound.
		const r = await L.call(live.s, 'enquire_link');
		assert.equal(r.command_status, 0);
		live.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP and line router clients message each other both ways', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const a = await L.bind(d.ports.smpp, 'bind_transceiver', 'esmeA', 'pa');
		const atA = collect(a.s);
		const lc = await lineLogin(d.ports.router, '+351910000001', 'pl');
		const line = lc.sock;
		line.write('SEND esmeA hi from the line\n');
		await until(() => atA.length === 1, 'deliver_sm from a line client');
		assert.equal(L.text(atA[0]), 'hi from the line');
		assert.equal(atA[0].source_addr, '351910000001');
		assert.equal(atA[0].source_addr_ton, 1);
		await until(() => /OK \d+\n/.test(lc.text()), 'OK for the SEND');
		const r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 1, dest_addr_npi: 1,
			destination_addr: '351910000001', short_message: 'hi line' });
		assert.equal(r.command_status, 0);
		await until(() => lc.text().includes(`MSG ${r.message_id} esmeA hi line\n`), 'MSG at the line client');
		line.destroy();
		a.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Kannel and other gateways file a receipt under the message_id of the
// submit_sm_resp: a receipt before its response finds nothing. The line
// client takes the message at once, on the ESME's reactor or another.
test('a receipt for a line recipient comes after its submit_sm_resp, on any reactor', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const a = await L.bind(d.ports.smpp, 'bind_transceiver', 'esmeA', 'pa');
		collect(a.s);
		const seen = [];
		a.s.on('pdu', (p) => {
			if (p.command === 'submit_sm_resp')
				seen.push(`resp ${p.message_id}`);
			else if (p.command === 'deliver_sm' && (p.esm_class & 0x3c) === 0x04)
				seen.push(`receipt ${p.receipted_message_id}`);
		});
		// Connections go to the 3 reactors in turn: the line client's
		// three lands on the ESME's reactor once, on others twice.
		const ids = [];
		for (let k = 0; k < 3; k++) {
			const lc = await lineLogin(d.ports.router, '+351910000001', 'pl');
			for (let i = 0; i < 5; i++) {
				const r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 1, dest_addr_npi: 1,
					destination_addr: '351910000001', short_message: `m${k}.${i}`,
					registered_delivery: 1 });
				assert.equal(r.command_status, 0);
				ids.push(r.message_id);
			}
			await until(() => (lc.text().match(/^MSG /gm) || []).length === 5, 'the MSG lines');
			const closed = new Promise((resolve) => lc.sock.once('close', resolve));
			lc.sock.write('QUIT\n');
			await closed;
		}
		await until(() => seen.filter((x) => x.startsWith('receipt')).length === ids.length, 'the receipts');
		for (const id of ids) {
			const resp = seen.indexOf(`resp ${id}`), rc = seen.indexOf(`receipt ${id}`);
			assert.ok(resp >= 0 && rc > resp, `message ${id}: ${seen.join(', ')}`);
		}
		a.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('200 ESME sessions on 3 reactors exchange 20,000 messages', async () => {
	const N = 200, PER = 100, WINDOW = 10;
	const accounts = Array.from({ length: N }, (_, i) =>
		`{ id = "e${i}"; password = "p${i}"; }`).join(',\n');
	const d = await L.startDaemon(conf(`accounts = (\n${accounts}\n);`));
	const port = d.ports.smpp;
	try {
		const sessions = [];
		for (let i = 0; i < N; i++) {
			const b = await L.bind(port, 'bind_transceiver', `e${i}`, `p${i}`);
			assert.equal(b.status, 0);
			sessions.push(b.s);
		}
		const received = new Map();	// "from>to#k" -> count
		let delivered = 0, answered = 0, failed = 0;
		sessions.forEach((s) => s.on('deliver_sm', (pdu) => {
			const t = L.text(pdu);
			received.set(t, (received.get(t) || 0) + 1);
			delivered++;
			s.send(pdu.response());
		}));
		const ids = new Set();
		await Promise.all(sessions.map((s, i) => new Promise((resolve) => {
			let sent = 0, inflight = 0, done = 0;
			const pump = () => {
				while (inflight < WINDOW && sent < PER) {
					const k = sent++;
					const to = (i + 1 + (k * 7) % (N - 1)) % N;
					inflight++;
					s.submit_sm({ destination_addr: `e${to}`, short_message: `e${i}>e${to}#${k}` }, (r) => {
						inflight--;
						answered++;
						if (r.command_status !== 0)
							failed++;
						else
							ids.add(r.message_id);
						if (++done === PER)
							resolve();
						else
							pump();
					});
				}
			};
			pump();
		})));
		assert.equal(answered, N * PER);
		assert.equal(failed, 0);
		assert.equal(ids.size, N * PER, 'message ids are unique');
		await until(() => delivered >= N * PER, `deliveries (${delivered})`, 60000);
		await new Promise((r) => setTimeout(r, 200));
		assert.equal(delivered, N * PER);
		assert.equal(received.size, N * PER, 'none lost, none duplicated');
		for (const [k, v] of received)
			assert.equal(v, 1, `${k} delivered ${v} times`);
		sessions.forEach((s) => s.destroy());
	} finally {
		await L.stopDaemon(d);
	}
});

// Regression: a receiver bind refused because a router client held the
// address still counted against max_binds, locking the account out.
test('a refused bind does not count against max_binds', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS.replace(
		'{ id = "gw"; password = "pg"; max_binds = 2; }',
		'{ id = "gw"; password = "pg"; max_binds = 1; }')}`));
	try {
		const line = (await lineLogin(d.ports.router, 'gw', 'pg')).sock;
		const s = await L.connect(d.ports.smpp);
		for (let i = 0; i < 3; i++) {
			const r = await L.call(s, 'bind_receiver', { system_id: 'gw', password: 'pg' });
			assert.equal(r.command_status, L.smpp.ESME_RBINDFAIL);
		}
		line.destroy();
		let ok = null;
		for (let i = 0; i < 100 && ok === null; i++) {
			const r = await L.call(s, 'bind_receiver', { system_id: 'gw', password: 'pg' });
			if (r.command_status === 0) ok = r;
			else await new Promise((res) => setTimeout(res, 20));
		}
		assert.ok(ok, 'the account can bind once the router client left');
		s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Regression: SMPP text went raw into MSG lines, so a line break in it
// forged lines at the router client.
test('text a line client cannot take is refused, not forged into lines', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const a = await L.bind(d.ports.smpp, 'bind_transmitter', 'esmeA', 'pa');
		const lc = await lineLogin(d.ports.router, '+351910000001', 'pl');
		const line = lc.sock;
		let r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 1,
			destination_addr: '351910000001',
			short_message: Buffer.from('hi\nMSG 42 bank transfer approved\nOK 7') });
		assert.equal(r.command_status, 0x45);	// ESME_RSUBMITFAIL
		r = await L.call(a.s, 'submit_sm', { dest_addr_ton: 1,
			destination_addr: '351910000001', short_message: 'plain\ttext' });
		assert.equal(r.command_status, 0);
		await until(() => lc.text().includes('MSG '), 'the plain message');
		const lines = lc.text().split('\n').filter((l) => l.startsWith('MSG '));
		assert.deepEqual(lines, [`MSG ${r.message_id} esmeA plain\ttext`]);
		line.destroy();
		a.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Regression: unbind right after submit_sm closed the session before the
// submit's answer came back from the recipient's reactor.
test('unbind is answered after the submits before it', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		// B first: consecutive connections land on different reactors.
		const b = await L.bind(d.ports.smpp, 'bind_receiver', 'esmeB', 'pb');
		collect(b.s);
		const a = await L.bind(d.ports.smpp, 'bind_transmitter', 'esmeA', 'pa');
		const order = [];
		const done = new Promise((resolve) => {
			for (let i = 0; i < 5; i++)
				a.s.submit_sm({ destination_addr: 'esmeB', short_message: `u${i}` },
					(r) => order.push(`submit ${r.command_status}`));
			a.s.unbind({}, (r) => { order.push(`unbind ${r.command_status}`); resolve(); });
		});
		await L.withTimeout(done, 10000, 'unbind_resp');
		assert.deepEqual(order, ['submit 0', 'submit 0', 'submit 0', 'submit 0',
			'submit 0', 'unbind 0']);
		await L.withTimeout(new Promise((r) => a.s.on('close', r)), 10000, 'close');
		b.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// Statuses of n submit_sm (fields from mk(i)) to a receiver that never
// answers, with window 1 and an 8 KiB watermark; and how many were
// accepted before the first ESME_RMSGQFUL, after which all must be.
async function submitToStuckBind(n, mk) {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { window = 1; queue_limit = 1000; response_timeout = 60; };
limits = { output_high_watermark = 8192; };`));
	try {
		const a = await L.bind(d.ports.smpp, 'bind_transmitter', 'esmeA', 'pa');
		const b = await L.bind(d.ports.smpp, 'bind_receiver', 'esmeB', 'pb');
		b.s.on('deliver_sm', () => {});	// never answered: window stays full
		const status = [];
		for (let i = 0; i < n; i++) {
			const r = await L.call(a.s, 'submit_sm', { destination_addr: 'esmeB',
				...mk(i) });
			status.push(r.command_status);
		}
		a.s.destroy();
		b.s.destroy();
		const ok = status.indexOf(L.smpp.ESME_RMSGQFUL);
		if (ok >= 0) {
			assert.deepEqual(status.slice(0, ok), Array(ok).fill(0));
			assert.deepEqual(status.slice(ok), Array(n - ok).fill(L.smpp.ESME_RMSGQFUL));
		}
		return { ok, status };
	} finally {
		await L.stopDaemon(d);
	}
}

// The per-bind queue is bounded in bytes as well as in messages: long
// message_payloads must not let one stuck bind hold queue_limit x 64 KiB.
test('the queue of a stuck bind is bounded in bytes too', async () => {
	const { ok, status } = await submitToStuckBind(12, (i) => ({
		message_payload: Buffer.alloc(1000, 0x61 + (i % 26)) }));
	// One in the window, then as many as fit in 8192 bytes, each its 1000
	// bytes of text and some hundreds of fields: 5 here (4 if the fields
	// grow past 640 bytes).
	assert.ok(ok >= 1 + 4 && ok <= 1 + 7, `accepted ${ok}: ${status}`);
});

// Counting text alone let a stuck bind hold queue_limit tiny messages of
// ~370 bytes each: 1000 x 1-byte texts counted as 1000 bytes of 8192.
test('queued messages count their whole size, not only their text', async () => {
	const { ok, status } = await submitToStuckBind(60, () => ({ short_message: 'x' }));
	// Counting text alone, all 60 would fit (60 of 8192 bytes). At 200-800
	// bytes a message, one in the window and 10-40 queued.
	assert.ok(ok >= 1 + 10 && ok <= 1 + 40, `accepted ${ok}: ${status}`);
});
