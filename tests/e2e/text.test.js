// text.test.js: text converted at the recipient's edge, one part: a line
// client's UTF-8 reaches the npm smpp client as GSM 03.38, UCS-2 or
// Latin-1, and an SMPP client's data_coding reaches a line client as
// UTF-8, directly and through the store. Run by `make check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const L = require('./lib.js');

const ESME_ROK = 0, ESME_RSUBMITFAIL = 0x45, ESME_RINVDCS = 0x104;

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
  { id = "lat"; password = "l"; coding = "latin1"; alphabet = "latin1"; }
);
${extra}`;
}

// A line client logged in as addr: c.lines, and wait(pred) on them.
async function line(port, addr, password) {
	const c = await L.lineClient(port);
	c.wait = (pred, what) => L.withTimeout(new Promise((resolve) => {
		const check = () => {
			const hit = c.lines.find(pred);
			if (hit === undefined)
				return;
			c.waiters.splice(c.waiters.indexOf(check), 1);
			resolve(hit);
		};
		c.waiters.push(check);
		check();
	}), 10000, what);
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
		    conf().replace('smpp = {', 'smpp = { coding = "ucs2"; alphabet = "latin1";'));
		d.child.kill('SIGHUP');
		await until(() => d.log.slice(before).includes('reloaded '), 'the reload');
		// Each reactor takes the new configuration on its next turn.
		await until(() => {
			if (b.got.length === a.lines.filter((l) => /^OK \d+$/.test(l)).length)
				a.sock.write('SEND bob hi\n');
			return b.got[b.got.length - 1].data_coding === 8;
		}, 'UCS-2 after the reload');
		assert.equal(L.text(b.got[b.got.length - 1]), 'hi');
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
