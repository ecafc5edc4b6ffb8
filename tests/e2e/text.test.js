// text.test.js: text converted at the recipient's edge: a line client's
// UTF-8 reaches the npm smpp client as GSM 03.38, UCS-2 or Latin-1, in
// parts (UDH, SAR) or one message_payload when it is long, and an SMPP
// client's data_coding reaches a line client as UTF-8, directly and
// through the store. Run by `make check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const L = require('./lib.js');

const ESME_ROK = 0, ESME_RSUBMITFAIL = 0x45, ESME_RINVDCS = 0x104;
const ESME_RSYSERR = 0x08, ESME_RMSGQFUL = 0x14;

function conf(extra = '') {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);
smpp = { response_timeout = 5; };
accounts = (
  { id = "alice"; password = "a"; },
  { id = "bob"; password = "b"; },
  { id = "uc"; password = "u"; coding = "ucs2"; },
  { id = "lat"; password = "l"; coding = "latin1"; alphabet = "latin1"; },
  { id = "sar"; password = "s"; long = "sar"; },
  { id = "pay"; password = "p"; long = "payload"; },
  { id = "two"; password = "t"; max_parts = 2; }
);
${extra}`;
}

// A line client logged in as addr: c.lines, and wait(pred) on them.
async function line(port, addr, password) {
	const c = await L.lineClient(port);
	c.sock.write(`LOGIN ${addr} ${password}\n`);
	await c.wait((l) => l.startsWith('OK LOGIN'), `login ${addr}`);
	return c;
}

async function until(pred, what, ms = 10000) {
	const end = Date.now() + ms;
	while (!pred()) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

// What the SMPP client got, raw: short_message octets as sent.
function octets(pdu) {
	const sm = pdu.short_message;
	return sm && sm.message !== undefined ? sm.message : sm;
}

function ucs2(s) {
	return Buffer.from(s, 'utf16le').swap16();
}

// SEND from the line client; its OK.
async function send(c, to, text) {
	const before = c.lines.length;
	c.sock.write(`SEND ${to} ${text}\n`);
	return c.wait((l) => c.lines.indexOf(l) >= before &&
	    /^(OK|ERR) /.test(l), 'the answer to SEND');
}

test('line UTF-8 to SMPP: UCS-2 when GSM 03.38 lacks a character, else GSM', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		assert.match(await send(a, 'bob', 'olá € ☃'), /^OK \d+$/);
		await until(() => b.got.length === 1, 'deliver_sm at bob');
		assert.equal(b.got[0].data_coding, 8);
		assert.equal(L.text(b.got[0]), 'olá € ☃');
		assert.match(await send(a, 'bob', '@A€ hi'), /^OK \d+$/);
		await until(() => b.got.length === 2, 'the second deliver_sm');
		assert.equal(b.got[1].data_coding, 0);
		assert.equal(L.text(b.got[1]), '@A€ hi');
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('line UTF-8 to SMPP: coding per account', async () => {
	const d = await L.startDaemon(conf());
	try {
		const u = await L.session(d.ports.smpp, 'bind_receiver', 'uc', 'u');
		const l1 = await L.session(d.ports.smpp, 'bind_receiver', 'lat', 'l');
		const a = await line(d.ports.router, 'alice', 'a');
		assert.match(await send(a, 'uc', 'plain'), /^OK /);
		assert.match(await send(a, 'lat', 'olá'), /^OK /);
		assert.match(await send(a, 'lat', 'olá €'), /^OK /);
		await until(() => u.got.length === 1 && l1.got.length === 2, 'deliver_sm at uc and lat');
		// coding = "ucs2": UCS-2 even for text GSM carries.
		assert.equal(u.got[0].data_coding, 8);
		assert.equal(L.text(u.got[0]), 'plain');
		// coding = "latin1": Latin-1 while it fits, then UCS-2.
		assert.equal(l1.got[0].data_coding, 3);
		assert.equal(L.text(l1.got[0]), 'olá');
		assert.equal(l1.got[1].data_coding, 8);
		assert.equal(L.text(l1.got[1]), 'olá €');
		a.sock.destroy();
		u.s.close(); l1.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP to a line client: UCS-2, GSM 03.38, IA5 and Latin-1 become UTF-8', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const lt = await L.session(d.ports.smpp, 'bind_transceiver', 'lat', 'l');
		const a = await line(d.ports.router, 'alice', 'a');
		const sends = [
			[b, { data_coding: 8, short_message: ucs2('Привет') }, 'Привет'],
			[b, { data_coding: 8, short_message: ucs2('smile 😀') }, 'smile 😀'],
			[b, { data_coding: 0, short_message: Buffer.from([0x00, 0x41, 0x1B, 0x65]) }, '@A€'],
			[b, { data_coding: 1, short_message: Buffer.from('ia5 {x}') }, 'ia5 {x}'],
			[b, { data_coding: 3, short_message: Buffer.from([0x6F, 0x6C, 0xE1]) }, 'olá'],
			// alphabet = "latin1": data_coding 0 is Latin-1 from lat.
			[lt, { data_coding: 0, short_message: Buffer.from([0x40, 0xE9]) }, '@é'],
		];
		for (const [who, opts, want] of sends) {
			const r = await L.call(who.s, 'submit_sm', { destination_addr: 'alice', ...opts });
			assert.equal(r.command_status, ESME_ROK, want);
			const from = who === b ? 'bob' : 'lat';
			await a.wait((l) => l === `MSG ${r.message_id} ${from} ${want}`, `MSG ${want}`);
		}
		a.sock.destroy();
		b.s.close(); lt.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP to a line client: binary or unknown coding is ESME_RINVDCS, nothing delivered', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		for (const dc of [2, 4, 0xF5]) {
			const r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
			    data_coding: dc, short_message: Buffer.from('abc') });
			assert.equal(r.command_status, ESME_RINVDCS, `data_coding ${dc}`);
		}
		// GSM that decodes to a line break: the text rule's status.
		let r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 0, short_message: Buffer.from([0x41, 0x0A, 0x42]) });
		assert.equal(r.command_status, ESME_RSUBMITFAIL);
		// An odd UCS-2 length is not text.
		r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 8, short_message: Buffer.from([0x00, 0x41, 0x00]) });
		assert.equal(r.command_status, ESME_RSUBMITFAIL);
		r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 0, short_message: Buffer.from('last') });
		assert.equal(r.command_status, ESME_ROK);
		await a.wait((l) => l.startsWith('MSG '), 'the good one');
		assert.deepEqual(a.lines.filter((l) => l.startsWith('MSG ')),
		    [`MSG ${r.message_id} bob last`]);
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP to SMPP: octets and data_coding pass unchanged', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const u = await L.session(d.ports.smpp, 'bind_receiver', 'uc', 'u');
		const raw = Buffer.from([0x00, 0x41, 0x1B, 0x65, 0x80, 0xFF]);
		const r = await L.call(b.s, 'submit_sm', { destination_addr: 'uc',
		    data_coding: 4, short_message: raw });
		assert.equal(r.command_status, ESME_ROK);
		await until(() => u.got.length === 1, 'deliver_sm at uc');
		assert.equal(u.got[0].data_coding, 4);
		assert.deepEqual(Buffer.from(octets(u.got[0])), raw);
		b.s.close(); u.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('through the store: converted when the recipient comes, both ways', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`));
	try {
		// bob, offline, gets alice's UTF-8 as UCS-2 when he binds.
		const a = await line(d.ports.router, 'alice', 'a');
		assert.match(await send(a, 'bob', 'olá € ☃'), /^OK \d+$/);
		a.sock.destroy();
		// alice, offline, gets bob's UCS-2 and GSM as UTF-8 when she logs in.
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		await until(() => b.got.length === 1, 'the stored deliver_sm at bob');
		assert.equal(b.got[0].data_coding, 8);
		assert.equal(L.text(b.got[0]), 'olá € ☃');
		await L.sleep(200);	// alice's session is gone
		const r1 = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 8, short_message: ucs2('Привет') });
		const r2 = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 0, short_message: Buffer.from([0x00, 0x41, 0x1B, 0x65]) });
		assert.equal(r1.command_status, ESME_ROK);
		assert.equal(r2.command_status, ESME_ROK);
		const a2 = await line(d.ports.router, 'alice', 'a');
		await a2.wait((l) => l === `MSG ${r1.message_id} bob Привет`, 'Привет from the store');
		await a2.wait((l) => l === `MSG ${r2.message_id} bob @A€`, '@A€ from the store');
		a2.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('alphabet and coding reload: the smpp group\'s new defaults apply to what comes next', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		assert.match(await send(a, 'bob', 'hi'), /^OK /);
		await until(() => b.got.length === 1, 'deliver_sm before the reload');
		assert.equal(b.got[0].data_coding, 0);
		const before = d.log.length;
		fs.writeFileSync(path.join(d.dir, 'echorouterd.conf'),
		    conf().replace('smpp = {', 'smpp = { coding = "ucs2"; alphabet = "latin1"; max_parts = 1;'));
		d.child.kill('SIGHUP');
		await until(() => d.log.slice(before).includes('reloaded '), 'the reload');
		// Each reactor takes the new configuration on its next turn.
		await until(() => {
			if (b.got.length === a.lines.filter((l) => /^OK \d+$/.test(l)).length)
				a.sock.write('SEND bob hi\n');
			return b.got[b.got.length - 1].data_coding === 8;
		}, 'UCS-2 after the reload');
		assert.equal(L.text(b.got[b.got.length - 1]), 'hi');
		// max_parts = 1 now: a text of two UCS-2 parts is refused.
		const mark = a.lines.length;
		a.sock.write(`SEND bob ${'z'.repeat(71)}\n`);
		await a.wait((l) => a.lines.indexOf(l) >= mark &&
		    /^ERR 400 \d+ over the recipient's max_parts$/.test(l),
		    'max_parts after the reload');
		// bob's data_coding 0 is Latin-1 now: E9 is é, not a GSM error.
		const r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
		    data_coding: 0, short_message: Buffer.from([0x6F, 0x6C, 0xE9]) });
		assert.equal(r.command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${r.message_id} bob olé`, 'Latin-1 after the reload');
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// ---- long text: parts at the SMPP recipient's edge ----------------------

// The concatenation IE (00 03 ref total seq) of a deliver_sm, or null.
function concat(pdu) {
	const sm = pdu.short_message;
	const ies = sm && sm.udh ? sm.udh : [];
	const ie = ies.find((u) => u[0] === 0x00 && u[1] === 0x03);
	return ie ? { ref: ie[2], total: ie[3], seq: ie[4] } : null;
}

// Checks that pdus are one set of UDH parts, numbered 1..n in order with
// one reference, and returns { ref, text } with their texts joined.
function joinUdh(pdus) {
	const ies = pdus.map(concat);
	const ref = ies[0].ref;
	ies.forEach((ie, i) => {
		assert.ok(ie, `part ${i + 1} has a concatenation IE`);
		assert.deepEqual(ie, { ref, total: pdus.length, seq: i + 1 });
		assert.equal(pdus[i].esm_class & 0x40, 0x40, 'UDHI set');
	});
	return { ref, text: pdus.map((p) => L.text(p)).join('') };
}

test('long line text to SMPP: UDH parts, GSM 03.38 and UCS-2, joined by the client', async () => {
	const d = await L.startDaemon(conf().replace('listeners = (',
	    'listeners = (\n  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },'));
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		// The euro sign is an escape pair across the 153rd septet: it
		// moves whole into the second part.
		const gsm = 'a'.repeat(152) + '€' + 'b'.repeat(200) + '{end}' + 'c'.repeat(42);
		assert.equal([...gsm].length, 400);
		const cyr = 'Привет, мир! '.repeat(16).slice(0, 200);
		assert.match(await send(a, 'bob', gsm), /^OK \d+$/);
		assert.match(await send(a, 'bob', cyr), /^OK \d+$/);
		await until(() => b.got.length === 6, 'six parts at bob');
		const g = b.got.slice(0, 3), u = b.got.slice(3);
		g.forEach((p) => assert.equal(p.data_coding, 0));
		u.forEach((p) => assert.equal(p.data_coding, 8));
		const jg = joinUdh(g), ju = joinUdh(u);
		assert.equal(jg.text, gsm);
		assert.equal(ju.text, cyr);
		assert.notEqual(jg.ref, ju.ref, 'each text has its own reference');
		// 152 septets, then 2 + 151, then the rest.
		assert.equal(L.text(g[0]), 'a'.repeat(152));
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_smpp_long_messages_total'), 2);
		assert.equal(L.val(m, 'echorouterd_smpp_long_parts_total'), 6);
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('long line text to SMPP: long = "sar" sends SAR TLVs, "payload" one message_payload', async () => {
	const d = await L.startDaemon(conf());
	try {
		const sr = await L.session(d.ports.smpp, 'bind_receiver', 'sar', 's');
		const py = await L.session(d.ports.smpp, 'bind_receiver', 'pay', 'p');
		const a = await line(d.ports.router, 'alice', 'a');
		const text = 'x'.repeat(170) + ' olé';
		assert.match(await send(a, 'sar', text), /^OK \d+$/);
		assert.match(await send(a, 'pay', text), /^OK \d+$/);
		await until(() => sr.got.length === 2 && py.got.length === 1, 'parts at sar, payload at pay');
		sr.got.forEach((p, i) => {
			assert.equal(concat(p), null, 'no UDH with SAR');
			assert.equal(p.esm_class & 0x40, 0);
			assert.equal(p.sar_total_segments, 2);
			assert.equal(p.sar_segment_seqnum, i + 1);
			assert.equal(p.sar_msg_ref_num, sr.got[0].sar_msg_ref_num);
		});
		assert.equal(sr.got.map((p) => L.text(p)).join(''), text);
		assert.ok(py.got[0].message_payload, 'message_payload');
		assert.equal(py.got[0].sar_msg_ref_num, undefined);
		assert.equal(L.text(py.got[0]), text);
		a.sock.destroy();
		sr.s.close(); py.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// message_payload's length is 16 bits: a text over 65,535 octets cannot
// go to a "payload" recipient however long one waits. It is a 400, not
// "recipient busy" (a 503, which tells the sender to try again).
test('long line text to SMPP: over 65,535 octets for long = "payload" is a 400, nothing sent', async () => {
	const d = await L.startDaemon(conf('limits = { max_line = 262144; };\n'));
	try {
		const py = await L.session(d.ports.smpp, 'bind_receiver', 'pay', 'p');
		const a = await line(d.ports.router, 'alice', 'a');
		// UCS-2 (not GSM): two octets a character.
		const r = await send(a, 'pay', 'ж'.repeat(33000));
		assert.match(r, /^ERR 400 \d+ recipient cannot take this text$/);
		// (The npm client takes PDUs of 16 KiB at most.)
		assert.match(await send(a, 'pay', 'ж'.repeat(8000)), /^OK \d+$/);
		await until(() => py.got.length === 1, 'the one that fits');
		await L.sleep(200);
		assert.equal(py.got.length, 1);
		assert.equal(L.text(py.got[0]), 'ж'.repeat(8000));
		a.sock.destroy();
		py.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('long line text to SMPP: over max_parts is refused with its reason, nothing sent', async () => {
	const d = await L.startDaemon(conf());
	try {
		const t = await L.session(d.ports.smpp, 'bind_receiver', 'two', 't');
		const a = await line(d.ports.router, 'alice', 'a');
		assert.match(await send(a, 'two', 'y'.repeat(306)), /^OK \d+$/);
		const r = await send(a, 'two', 'y'.repeat(307));
		assert.match(r, /^ERR 400 \d+ over the recipient's max_parts$/);
		assert.match(await send(a, 'two', 'last'), /^OK \d+$/);
		await until(() => t.got.length === 3, 'two parts and the last');
		await L.sleep(200);
		assert.equal(t.got.length, 3);
		assert.equal(L.text(t.got[2]), 'last');
		a.sock.destroy();
		t.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('long line text to SMPP: parts wait for room in a small window, in order', async () => {
	const d = await L.startDaemon(conf().replace('smpp = {', 'smpp = { window = 2;'));
	try {
		const s = await L.connect(d.ports.smpp);
		const got = [], held = [];
		// Answers each deliver_sm late: the window stays full a while.
		s.on('deliver_sm', (pdu) => {
			got.push(pdu);
			held.push(pdu);
			setTimeout(() => s.send(held.shift().response()), 50);
		});
		const r = await L.call(s, 'bind_receiver', { system_id: 'bob', password: 'b' });
		assert.equal(r.command_status, ESME_ROK);
		const a = await line(d.ports.router, 'alice', 'a');
		const text = 'Ж'.repeat(67 * 4 + 10);	// 5 UCS-2 parts
		assert.match(await send(a, 'bob', text), /^OK \d+$/);
		assert.match(await send(a, 'bob', 'after'), /^OK \d+$/);
		await until(() => got.length === 6, 'five parts, then the next message');
		assert.equal(joinUdh(got.slice(0, 5)).text, text);
		assert.equal(L.text(got[5]), 'after');
		a.sock.destroy();
		s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('long line text through the store: one OK, every part when bob binds; a part\'s error is the message\'s', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`));
	try {
		const a = await line(d.ports.router, 'alice', 'a');
		const t1 = 'q'.repeat(400), t2 = 'r'.repeat(400), t3 = 's'.repeat(400);
		const oks = [];
		for (const t of [t1, t2, t3])
			oks.push(await send(a, 'bob', t));
		oks.forEach((r) => assert.match(r, /^OK \d+$/));
		assert.equal(a.lines.filter((l) => /^(OK|ERR) \d/.test(l)).length, 3, 'one answer per SEND');
		// bob answers t2's second part with a temporary error once, and
		// t3's second part with a permanent one, every time.
		let q = 0;
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b', (p) => {
			const ie = concat(p), txt = L.text(p);
			if (ie.seq === 2 && txt[0] === 'r' && q++ === 0)
				return ESME_RMSGQFUL;
			return ie.seq === 2 && txt[0] === 's' ? ESME_RSYSERR : ESME_ROK;
		});
		const sets = () => {
			const by = {};
			for (const p of b.got)
				(by[L.text(p)[0]] = by[L.text(p)[0]] || []).push(p);
			return by;
		};
		// t2 is sent again, all three parts, after its part's error.
		await until(() => (sets().r || []).length === 6, 't2 twice', 15000);
		const by = sets();
		assert.equal(joinUdh(by.q).text, t1);
		assert.equal(joinUdh(by.r.slice(3)).text, t2);
		// t3 failed for good: its parts are not sent again.
		await L.sleep(2500);
		assert.equal(sets().s.length, 3, 't3 not retried');
		assert.equal(sets().q.length, 3, 't1 delivered once');
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('long line text through the store: a bind that closes mid-message gets every part again', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`));
	try {
		const a = await line(d.ports.router, 'alice', 'a');
		const text = 'm'.repeat(153 * 2) + 'n'.repeat(10);
		assert.match(await send(a, 'bob', text), /^OK \d+$/);
		// The first bob answers part 1 only, then goes.
		const s = await L.connect(d.ports.smpp);
		const first = [];
		s.on('deliver_sm', (pdu) => {
			first.push(pdu);
			if (first.length === 1)
				s.send(pdu.response());
		});
		const r = await L.call(s, 'bind_receiver', { system_id: 'bob', password: 'b' });
		assert.equal(r.command_status, ESME_ROK);
		await until(() => first.length === 3, 'three parts at the first bob');
		s.close();
		await L.sleep(200);
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		await until(() => b.got.length === 3, 'every part again', 15000);
		assert.equal(joinUdh(b.got).text, text);
		await L.sleep(1500);
		assert.equal(b.got.length, 3, 'delivered once to the second bob');
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('long line text through the store: over max_parts when the recipient comes, it fails and the next goes', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`));
	try {
		const a = await line(d.ports.router, 'alice', 'a');
		// Stored while two is away: the sender's OK means on disk.
		assert.match(await send(a, 'two', 'w'.repeat(400)), /^OK \d+$/);
		assert.match(await send(a, 'two', 'after'), /^OK \d+$/);
		const t = await L.session(d.ports.smpp, 'bind_receiver', 'two', 't');
		await until(() => t.got.length >= 1, 'the next message at two');
		await L.sleep(2500);	// a retry would come after 1 s
		assert.deepEqual(t.got.map((p) => L.text(p)), ['after']);
		a.sock.destroy();
		t.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});


// Parts of a long message from an SMPP client, joined at a line client's
// edge: UDH concatenation IEs (8- or 16-bit reference, anywhere among
// other IEs) or SAR TLVs.

function udh8(ref, total, seq) {
	return Buffer.from([5, 0x00, 3, ref, total, seq]);
}

// A UDH with the 16-bit reference IE after the IEs in pre.
function udh16(ref, total, seq, pre = []) {
	const ies = [...pre, 0x08, 4, ref >> 8, ref & 0xff, total, seq];
	return Buffer.from([ies.length, ...ies]);
}

function withMetrics(c) {
	return c.replace('protocol = "router"; }', 'protocol = "router"; },\n' +
	    '  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }');
}

async function part(b, header, body, opts = {}) {
	return L.call(b.s, 'submit_sm', { destination_addr: 'alice', data_coding: 0,
	    esm_class: 0x40, short_message: Buffer.concat([header, body]), ...opts });
}

// Submits the parts in the order given (seqs, 1-based); their ids by seq.
async function parts(b, bodies, seqs, header, opts = {}) {
	const ids = [];
	for (const seq of seqs) {
		const r = await part(b, header(seq), bodies[seq - 1], opts);
		assert.equal(r.command_status, ESME_ROK, `part ${seq}`);
		ids[seq - 1] = r.message_id;
	}
	return ids;
}

const msgLines = (c) => c.lines.filter((l) => l.startsWith('MSG '));

test('SMPP parts to a line client: three UDH parts in reverse order are one line, GSM and UCS-2', async () => {
	const d = await L.startDaemon(withMetrics(conf()));
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		// GSM 03.38: '@' is 00, '€' the escape pair 1B 65.
		const g = [Buffer.from('Hello, '), Buffer.from([0x00, 0x20, 0x1B, 0x65, 0x20]),
		    Buffer.from('the end')];
		// Part 2 twice: the second copy is answered and ignored.
		let ids = await parts(b, g, [3, 2, 2], (seq) => udh8(7, 3, seq));
		assert.equal(msgLines(a).length, 0, 'nothing before the last part');
		ids = { ...ids, ...await parts(b, g, [1], (seq) => udh8(7, 3, seq)) };
		await a.wait((l) => l === `MSG ${ids[0]} bob Hello, @ € the end`, 'the joined GSM line');
		// UCS-2, an emoji (a surrogate pair) whole in its part.
		const u = ['Привет, ', 'мир 😀', ' ☃'].map(ucs2);
		const uids = await parts(b, u, [3, 1, 2], (seq) => udh8(8, 3, seq), { data_coding: 8 });
		await a.wait((l) => l === `MSG ${uids[0]} bob Привет, мир 😀 ☃`, 'the joined UCS-2 line');
		await L.sleep(300);
		assert.equal(msgLines(a).length, 2, msgLines(a).join('\n'));
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_join_joined_total'), 2);
		assert.equal(L.val(m, 'echorouterd_join_parts_held'), 0);
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP parts to a line client: a 16-bit reference after another IE, SAR TLVs, a UDH without parts', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		// Text formatting (IE 0A) before the 16-bit concatenation IE.
		const fmt = [0x0A, 3, 0x00, 0x05, 0x00];
		const h = ['first half, ', 'second half'].map((s) => Buffer.from(s));
		const ids = await parts(b, h, [2, 1], (seq) => udh16(0x1234, 2, seq, fmt));
		await a.wait((l) => l === `MSG ${ids[0]} bob first half, second half`, '16-bit reference');
		// SAR TLVs, no UDH: 2, 3, 1.
		const s = ['sar ', 'in three ', 'parts ✓'].map(ucs2);
		const sids = [];
		for (const seq of [2, 3, 1]) {
			const r = await L.call(b.s, 'submit_sm', { destination_addr: 'alice',
			    data_coding: 8, short_message: s[seq - 1], sar_msg_ref_num: 300,
			    sar_total_segments: 3, sar_segment_seqnum: seq });
			assert.equal(r.command_status, ESME_ROK, `SAR part ${seq}`);
			sids[seq - 1] = r.message_id;
		}
		await a.wait((l) => l === `MSG ${sids[0]} bob sar in three parts ✓`, 'SAR parts');
		// A header with no concatenation IE, and one of one part: taken off.
		let r = await part(b, Buffer.from([5, ...fmt]), Buffer.from('plain after a header'));
		assert.equal(r.command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${r.message_id} bob plain after a header`, 'UDH taken off');
		r = await part(b, udh8(9, 1, 1), Buffer.from('one of one'));
		await a.wait((l) => l === `MSG ${r.message_id} bob one of one`, 'one of one');
		// A header that runs past the text is refused, nothing delivered.
		r = await part(b, Buffer.from([9, 0x00, 3, 1]), Buffer.alloc(0));
		assert.equal(r.command_status, ESME_RSUBMITFAIL);
		await L.sleep(300);
		assert.equal(msgLines(a).length, 4, msgLines(a).join('\n'));
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// A receipt's text, or undefined for a deliver_sm that is not one.
function receipt(pdu) {
	return (pdu.esm_class & 0x04) ? L.text(pdu) : undefined;
}

test('SMPP parts to a line client: a part that never comes is reported UNDELIV after reassembly_timeout', async () => {
	// The sending account's own timeout, over the smpp group's 60 s.
	const d = await L.startDaemon(withMetrics(conf()).replace('{ id = "bob"; password = "b"; }',
	    '{ id = "bob"; password = "b"; reassembly_timeout = 1; }'));
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		const t = ['one ', 'two ', 'three'].map((s) => Buffer.from(s));
		const ids = await parts(b, t, [1, 3], (seq) => udh8(1, 3, seq),
		    { registered_delivery: 1 });
		await until(() => b.got.filter(receipt).length === 2, 'two receipts', 15000);
		// Each quotes its part's text, not the UDH's octets.
		for (const [id, text] of [[ids[0], 'one '], [ids[2], 'three']])
			assert.ok(b.got.some((p) => receipt(p) !== undefined &&
			    new RegExp(`^id:${id} .*stat:UNDELIV err:\\d+ text:${text}$`).test(receipt(p))),
			    `UNDELIV for ${id}: ${b.got.map(L.text).join(' | ')}`);
		// A whole one that asked for receipts gets DELIVRD for each part.
		const w = ['whole ', 'message'].map((s) => Buffer.from(s));
		const wids = await parts(b, w, [2, 1], (seq) => udh8(2, 2, seq),
		    { registered_delivery: 1 });
		await a.wait((l) => l === `MSG ${wids[0]} bob whole message`, 'the whole one');
		await until(() => b.got.filter((p) => /stat:DELIVRD/.test(receipt(p) || '')).length === 2,
		    'DELIVRD for both parts');
		for (const [id, text] of [[wids[0], 'whole '], [wids[1], 'message']])
			assert.ok(b.got.some((p) => receipt(p) === undefined ? false :
			    new RegExp(`^id:${id} .*stat:DELIVRD err:\\d+ text:${text}$`).test(receipt(p))),
			    `DELIVRD for ${id}: ${b.got.map(L.text).join(' | ')}`);
		await L.sleep(300);
		assert.deepEqual(msgLines(a), [`MSG ${wids[0]} bob whole message`]);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_join_incomplete_total'), 1);
		assert.equal(L.val(m, 'echorouterd_join_joined_total'), 1);
		assert.equal(L.val(m, 'echorouterd_join_parts_held'), 0);
		assert.equal(L.val(m, 'echorouterd_join_bytes_held'), 0);
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('SMPP parts to a line client: past the account\'s reassembly_limit or reassembly_bytes a part waits (ESME_RMSGQFUL), nothing lost', async () => {
	const d = await L.startDaemon(conf().replace('{ id = "bob"; password = "b"; }',
	    '{ id = "bob"; password = "b"; reassembly_limit = 1; }').replace('alphabet = "latin1"; }',
	    'alphabet = "latin1"; reassembly_bytes = 10; }'));
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		const one = await part(b, udh8(1, 2, 1), Buffer.from('a1 '));
		assert.equal(one.command_status, ESME_ROK);
		let r = await part(b, udh8(2, 2, 1), Buffer.from('b1 '));
		assert.equal(r.command_status, ESME_RMSGQFUL, 'a second message over the limit');
		// The message waiting may still complete; then there is room.
		assert.equal((await part(b, udh8(1, 2, 2), Buffer.from('a2'))).command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${one.message_id} bob a1 a2`, 'the first message');
		r = await part(b, udh8(2, 2, 1), Buffer.from('b1 '));
		assert.equal(r.command_status, ESME_ROK, 'sent again');
		assert.equal((await part(b, udh8(2, 2, 2), Buffer.from('b2'))).command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${r.message_id} bob b1 b2`, 'the second message');
		// lat's reassembly_bytes = 10: 8 octets wait, 8 more do not.
		const lt = await L.session(d.ports.smpp, 'bind_transceiver', 'lat', 'l');
		const l1 = await part(lt, udh8(1, 2, 1), Buffer.from('12345678'));
		assert.equal(l1.command_status, ESME_ROK);
		assert.equal((await part(lt, udh8(2, 2, 1), Buffer.from('abcdefgh'))).command_status,
		    ESME_RMSGQFUL, 'over reassembly_bytes');
		assert.equal((await part(lt, udh8(1, 2, 2), Buffer.from('9'))).command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${l1.message_id} lat 123456789`, 'lat\'s message');
		lt.s.close();
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('through the store: parts wait on disk; a line client that leaves while parts are held gets the joined line once', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(withMetrics(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`)));
	const held = async () => L.val(await L.scrape(d.ports.metrics), 'echorouterd_join_parts_held');
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		// alice offline: three parts in reverse order, stored.
		const t = ['stored ', 'in ', 'parts'].map((s) => Buffer.from(s));
		const ids = await parts(b, t, [3, 2, 1], (seq) => udh8(4, 3, seq));
		const a = await line(d.ports.router, 'alice', 'a');
		await a.wait((l) => l === `MSG ${ids[0]} bob stored in parts`, 'joined from the store');
		// alice online: two parts of three wait (in the store, in flight)...
		const u = ['left ', 'and ', 'back'].map((s) => Buffer.from(s));
		const uids = await parts(b, u, [1, 2], (seq) => udh8(5, 3, seq));
		await L.until(async () => (await held()) === 2, 10000, 'two parts held');
		// ...she leaves: they go back to the store, nothing lost.
		a.sock.destroy();
		await L.until(async () => (await held()) === 0, 10000, 'parts handed back');
		await L.sleep(200);
		Object.assign(uids, await parts(b, u, [3], (seq) => udh8(5, 3, seq)));
		const a2 = await line(d.ports.router, 'alice', 'a');
		await a2.wait((l) => l === `MSG ${uids[0]} bob left and back`, 'joined after coming back');
		await L.sleep(500);
		assert.equal(msgLines(a2).length, 1, msgLines(a2).join('\n'));
		a2.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('through the store: parts held when the daemon is killed (-9) are joined after the restart', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const c = withMetrics(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`));
	let d = await L.startDaemon(c);
	try {
		let b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		let a = await line(d.ports.router, 'alice', 'a');
		const t = ['survives ', 'a ', 'crash'].map((s) => Buffer.from(s));
		const ids = await parts(b, t, [2, 1], (seq) => udh8(6, 3, seq));
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
		    'echorouterd_join_parts_held') === 2, 10000, 'two parts held');
		// Killed with alice's session holding them: no close hands them back.
		a.sock.on('error', () => {});
		b.s.on('error', () => {});
		d.child.kill('SIGKILL');
		await until(() => d.exited !== null, 'the kill', 5000);
		fs.rmSync(d.dir, { recursive: true, force: true });
		a.sock.destroy(); b.s.destroy();
		d = await L.startDaemon(c);
		b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		Object.assign(ids, await parts(b, t, [3], (seq) => udh8(6, 3, seq)));
		a = await line(d.ports.router, 'alice', 'a');
		await a.wait((l) => l === `MSG ${ids[0]} bob survives a crash`, 'joined after the restart');
		await L.sleep(500);
		assert.equal(msgLines(a).length, 1, msgLines(a).join('\n'));
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('through the store: a part that never completes is undeliverable after reassembly_timeout, with its receipt', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-text-'));
	const d = await L.startDaemon(withMetrics(conf(`store = { path = "${path.join(dir, 'store.db')}"; };`))
	    .replace('smpp = {', 'smpp = { reassembly_timeout = 1;'));
	const held = async () => L.val(await L.scrape(d.ports.metrics), 'echorouterd_join_parts_held');
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		const r = await part(b, udh8(9, 2, 1), Buffer.from('half'), { registered_delivery: 1 });
		assert.equal(r.command_status, ESME_ROK);
		await L.until(async () => (await held()) === 1, 10000, 'the part held');
		await until(() => b.got.some((p) => new RegExp(`^id:${r.message_id} .*stat:UNDELIV`)
		    .test(receipt(p) || '')), 'the store\'s UNDELIV receipt', 15000);
		assert.equal(await held(), 0);
		// It is final: it does not come again.
		await L.sleep(1500);
		assert.equal(await held(), 0);
		assert.equal(msgLines(a).length, 0, msgLines(a).join('\n'));
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('reassembly_limit reloads: the smpp group\'s new cap applies to the next part', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const a = await line(d.ports.router, 'alice', 'a');
		const one = await part(b, udh8(1, 2, 1), Buffer.from('x1 '));
		const two = await part(b, udh8(2, 2, 1), Buffer.from('y1 '));
		assert.equal(one.command_status, ESME_ROK);
		assert.equal(two.command_status, ESME_ROK, 'two messages waiting: under the default 100');
		const before = d.log.length;
		fs.writeFileSync(path.join(d.dir, 'echorouterd.conf'),
		    conf().replace('smpp = {', 'smpp = { reassembly_limit = 2;'));
		d.child.kill('SIGHUP');
		await until(() => d.log.slice(before).includes('reloaded '), 'the reload');
		// alice's reactor turns (and takes the new configuration).
		a.sock.write('PING reload\n');
		await a.wait((l) => l === 'PONG reload', 'PONG');
		const r = await part(b, udh8(3, 2, 1), Buffer.from('z1 '));
		assert.equal(r.command_status, ESME_RMSGQFUL, 'a third over the reloaded cap');
		assert.equal((await part(b, udh8(1, 2, 2), Buffer.from('x2'))).command_status, ESME_ROK);
		assert.equal((await part(b, udh8(2, 2, 2), Buffer.from('y2'))).command_status, ESME_ROK);
		await a.wait((l) => l === `MSG ${one.message_id} bob x1 x2`, 'the first');
		await a.wait((l) => l === `MSG ${two.message_id} bob y1 y2`, 'the second');
		a.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});
