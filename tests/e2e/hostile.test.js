// hostile.test.js: regressions for what a hostile SMPP client found
// (commit d7cfeb3): sender spoofing, false UNDELIV receipts after unbind,
// control characters sent to line clients, and binds kept after unbind.
// Run by `make check-e2e` (node --test). Every wait is bounded.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const L = require('./lib.js');

const ESME_RINVSRCADR = 0x0a;
const ESME_RINVBNDSTS = 0x04;
const ESME_RSUBMITFAIL = 0x45;

const LISTENERS = `
listeners = (
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);`;

function conf(extra) {
	return `dispatchers = 3;\nidle_timeout = 0;\n${LISTENERS}\n${extra || ''}`;
}

const ACCOUNTS = `accounts = (
  { id = "shop"; password = "ps"; },
  { id = "gw1"; password = "pg"; },
  { id = "alice"; password = "pa"; },
  { id = "rx"; password = "pr"; },
  { id = "one"; password = "po"; max_binds = 1; },
  { id = "+15557777"; password = "pn"; }
);`;

async function until(pred, what, ms = 10000) {
	const end = Date.now() + ms;
	while (!pred()) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Answers every deliver_sm and collects them.
function collect(session) {
	const got = [];
	session.on('deliver_sm', (pdu) => {
		got.push(pdu);
		session.send(pdu.response());
	});
	return got;
}

// A router line client logged in as addr; .text() is all it has received.
async function lineLogin(port, addr, password) {
	const sock = await L.rawConnect(port);
	const raw = [];
	const bytes = () => Buffer.concat(raw);
	const text = () => bytes().toString('utf8');
	sock.on('data', (c) => raw.push(c));
	sock.write(password === undefined ? `LOGIN ${addr}\n` : `LOGIN ${addr} ${password}\n`);
	await until(() => text().includes(`OK LOGIN ${addr}\n`), `router login ${addr}`);
	raw.length = 0;
	return { sock, bytes, text,
		msgs: () => text().split('\n').filter((l) => l.startsWith('MSG ')) };
}

// An ESME on a raw socket: PDUs encoded and decoded with the smpp package,
// but written when and how the test says (the package answers by itself).
class RawEsme {
	constructor(sock) {
		this.sock = sock;
		this.seq = 1;
		this.buf = Buffer.alloc(0);
		this.pdus = [];		// every PDU received, in order
		this.closed = false;
		sock.on('data', (chunk) => {
			this.buf = Buffer.concat([this.buf, chunk]);
			while (this.buf.length >= 16) {
				const n = this.buf.readUInt32BE(0);
				if (this.buf.length < n)
					break;
				this.pdus.push(new L.smpp.PDU(this.buf.subarray(0, n)));
				this.buf = this.buf.subarray(n);
			}
		});
		sock.on('close', () => { this.closed = true; });
	}

	// halfOpen: stays open for writing after the server's FIN, as a
	// client busy writing may (node closes its side at once by default).
	static async connect(port, halfOpen) {
		if (!halfOpen)
			return new RawEsme(await L.rawConnect(port));
		return new RawEsme(await L.withTimeout(new Promise((resolve, reject) => {
			const sock = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true },
				() => resolve(sock));
			sock.on('error', reject);
		}), 15000, 'raw connect'));
	}

	// The bytes of a request (a fresh sequence_number) or a response.
	encode(command, options) {
		const o = { ...(options || {}) };
		if (o.sequence_number === undefined)
			o.sequence_number = this.seq++;
		const pdu = new L.smpp.PDU(command, o);
		return { seq: o.sequence_number, bytes: pdu.toBuffer() };
	}

	send(command, options) {
		const { seq, bytes } = this.encode(command, options);
		this.sock.write(bytes);
		return seq;
	}

	// The first received PDU matching pred; bounded.
	async wait(pred, what) {
		await until(() => this.pdus.some(pred), what);
		return this.pdus.find(pred);
	}

	resp(command, seq) {
		return this.wait((p) => p.command === `${command}_resp` &&
			p.sequence_number === seq, `${command}_resp #${seq}`);
	}

	async bind(how, system_id, password) {
		const seq = this.send(how, { system_id, password });
		return (await this.resp(how, seq)).command_status;
	}

	of(command) {
		return this.pdus.filter((p) => p.command === command);
	}

	async closedWithin(what) {
		await until(() => this.closed, what);
	}
}

function submitStatus(session, fields) {
	return L.call(session, 'submit_sm', fields).then((r) => r.command_status);
}

// 1. Nobody sends as an address they do not own.

test('source_addr naming another account is refused (ESME_RINVSRCADR)', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const alice = await lineLogin(d.ports.router, 'alice', 'pa');
		const shop = await L.bind(d.ports.smpp, 'bind_transmitter', 'shop', 'ps');
		assert.equal(shop.status, 0);
		const to = { destination_addr: 'alice' };
		// Another account, the recipient herself, and an account under TON 1
		// (normalised to "+gw1", which names nobody: the raw form counts).
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: 'gw1',
			short_message: 'spoof gw1' }), ESME_RINVSRCADR);
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: 'alice',
			short_message: 'spoof alice' }), ESME_RINVSRCADR);
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: 'gw1',
			source_addr_ton: 1, source_addr_npi: 1, short_message: 'spoof +gw1' }),
		ESME_RINVSRCADR);
		// A number whose international form is another account's.
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: '15557777',
			source_addr_ton: 1, source_addr_npi: 1, short_message: 'spoof +15557777' }),
		ESME_RINVSRCADR);
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: '+15557777',
			short_message: 'spoof +15557777' }), ESME_RINVSRCADR);
		// An account's bind (gw1 bound as receiver) changes nothing.
		const gw1 = await L.bind(d.ports.smpp, 'bind_receiver', 'gw1', 'pg');
		assert.equal(gw1.status, 0);
		assert.equal(await submitStatus(shop.s, { ...to, source_addr: 'gw1',
			short_message: 'spoof gw1 bound' }), ESME_RINVSRCADR);
		// What passes: free-form ids and numbers of nobody, its own id,
		// and no source_addr at all (then it is the system_id).
		const ok = [];
		for (const [source_addr, text] of [['+15550001', 'from a number'],
			['MyShop', 'from a name'], ['shop', 'from itself'], ['', 'from nobody said']]) {
			const r = await L.call(shop.s, 'submit_sm', { ...to, source_addr,
				short_message: Buffer.from(text) });
			assert.equal(r.command_status, 0, `source_addr "${source_addr}"`);
			ok.push(`MSG ${r.message_id} ${source_addr || 'shop'} ${text}`);
		}
		await until(() => alice.msgs().length >= ok.length, 'the four messages at alice');
		await sleep(100);
		assert.deepEqual(alice.msgs(), ok, 'alice got only the allowed ones');
		alice.sock.destroy();
		shop.s.destroy();
		gw1.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('source_addr naming an address someone else holds is refused', async () => {
	// No accounts: any address may log in or bind, and none is an account.
	const d = await L.startDaemon(conf(''));
	try {
		const bob = await lineLogin(d.ports.router, 'bob');
		const num = await lineLogin(d.ports.router, '+15550009');
		const rx1 = await L.bind(d.ports.smpp, 'bind_receiver', 'rx1', 'x');
		assert.equal(rx1.status, 0);
		const rx1got = collect(rx1.s);
		const shop = await L.bind(d.ports.smpp, 'bind_transmitter', 'shop', 'x');
		assert.equal(shop.status, 0);
		const to = { destination_addr: 'bob', short_message: 'spoof' };
		for (const f of [{ source_addr: 'bob' }, { source_addr: 'rx1' },
			{ source_addr: '+15550009' },
			{ source_addr: '15550009', source_addr_ton: 1, source_addr_npi: 1 }])
			assert.equal(await submitStatus(shop.s, { ...to, ...f }),
				ESME_RINVSRCADR, JSON.stringify(f));
		for (const f of [{ source_addr: 'bob' }, { source_addr: 'rx1' }])
			assert.equal(await submitStatus(shop.s, { ...f,
				destination_addr: '+15550009', short_message: 'spoof' }),
			ESME_RINVSRCADR, JSON.stringify(f));
		// An address nobody holds passes.
		const r = await L.call(shop.s, 'submit_sm', { destination_addr: 'bob',
			source_addr: 'carol', short_message: 'hi bob' });
		assert.equal(r.command_status, 0);
		await until(() => bob.msgs().length >= 1, 'the message at bob');
		await sleep(100);
		assert.deepEqual(bob.msgs(), [`MSG ${r.message_id} carol hi bob`]);
		assert.deepEqual(num.msgs(), []);
		assert.equal(rx1got.length, 0);
		for (const s of [bob.sock, num.sock, rx1.s, shop.s])
			s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('no accounts: a transmitter bound as a line client\'s address cannot speak as it', async () => {
	// Review of d7cfeb3: a transmitter joins nothing, so binding as
	// "alice" while alice is logged in on a line, then sending with an
	// empty source_addr (or "alice"), spoke as alice.
	const d = await L.startDaemon(conf(''));
	try {
		const alice = await lineLogin(d.ports.router, 'alice');
		const bob = await lineLogin(d.ports.router, 'bob');
		const fake = await L.bind(d.ports.smpp, 'bind_transmitter', 'alice', 'x');
		assert.equal(fake.status, 0);
		for (const f of [{}, { source_addr: 'alice' }])
			assert.equal(await submitStatus(fake.s, { ...f,
				destination_addr: 'bob', short_message: 'spoof' }),
			ESME_RINVSRCADR, JSON.stringify(f));
		// Once alice has gone, the address is free for whoever binds.
		alice.sock.destroy();
		let r;
		for (let i = 0; i < 100; i++) {
			r = await L.call(fake.s, 'submit_sm', { destination_addr: 'bob',
				short_message: 'now mine' });
			if (r.command_status === 0)
				break;
			await sleep(20);
		}
		assert.equal(r.command_status, 0);
		await until(() => bob.msgs().length >= 1, 'the message at bob');
		assert.deepEqual(bob.msgs(), [`MSG ${r.message_id} alice now mine`]);
		for (const s of [bob.sock, fake.s])
			s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('an account with source_addrs sends only from those prefixes and its id', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS.replace('\n);', `,
  { id = "limited"; password = "pl"; source_addrs = [ "+1555" ]; }
);`)));
	try {
		const alice = await lineLogin(d.ports.router, 'alice', 'pa');
		const lim = await L.bind(d.ports.smpp, 'bind_transmitter', 'limited', 'pl');
		assert.equal(lim.status, 0);
		const to = { destination_addr: 'alice' };
		const ok = [];
		for (const [f, from] of [[{ source_addr: '+15551234' }, '+15551234'],
			[{ source_addr: '15551234', source_addr_ton: 1, source_addr_npi: 1 }, '+15551234'],
			[{ source_addr: 'limited' }, 'limited'],
			[{ source_addr: 'limited', source_addr_ton: 1 }, '+limited'],
			[{ source_addr: '' }, 'limited']]) {
			const r = await L.call(lim.s, 'submit_sm', { ...to, ...f,
				short_message: 'ok' });
			assert.equal(r.command_status, 0, JSON.stringify(f));
			ok.push(`MSG ${r.message_id} ${from} ok`);
		}
		// Prefixes match the address as routes see it: TON 0 "1555..." is
		// not "+1555...".
		for (const f of [{ source_addr: '+16661234' }, { source_addr: '15551234' },
			{ source_addr: '16661234', source_addr_ton: 1, source_addr_npi: 1 },
			{ source_addr: 'MyShop' }, { source_addr: 'gw1' }])
			assert.equal(await submitStatus(lim.s, { ...to, ...f,
				short_message: 'no' }), ESME_RINVSRCADR, JSON.stringify(f));
		await until(() => alice.msgs().length >= ok.length, 'the allowed messages');
		await sleep(100);
		assert.deepEqual(alice.msgs(), ok);
		alice.sock.destroy();
		lim.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// 2. After unbind, the answers to outstanding deliver_sm still count.

test('deliver_sm answered right after unbind: DELIVRD receipts, then unbind_resp', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { window = 8; response_timeout = 30; };`));
	try {
		const rx = await RawEsme.connect(d.ports.smpp);
		assert.equal(await rx.bind('bind_receiver', 'rx', 'pr'), 0);
		const shop = await L.bind(d.ports.smpp, 'bind_transceiver', 'shop', 'ps');
		assert.equal(shop.status, 0);
		const receipts = collect(shop.s);
		for (let i = 0; i < 4; i++)
			assert.equal(await submitStatus(shop.s, { destination_addr: 'rx',
				registered_delivery: 1, short_message: `r${i}` }), 0);
		await until(() => rx.of('deliver_sm').length === 4, 'four deliver_sm at rx');
		await sleep(100);
		assert.equal(receipts.length, 0, 'no receipt before the answers');
		// unbind, then the four answers, in one write.
		const unbind = rx.encode('unbind');
		const answers = rx.of('deliver_sm').map((p) =>
			rx.encode('deliver_sm_resp', { sequence_number: p.sequence_number }).bytes);
		rx.sock.write(Buffer.concat([unbind.bytes, ...answers]));
		const u = await rx.resp('unbind', unbind.seq);
		assert.equal(u.command_status, 0);
		await rx.closedWithin('close after unbind_resp');
		assert.deepEqual(rx.pdus.map((p) => p.command),
			['bind_receiver_resp', 'deliver_sm', 'deliver_sm', 'deliver_sm',
				'deliver_sm', 'unbind_resp']);
		await until(() => receipts.length >= 4, 'four receipts');
		await sleep(200);
		const stats = receipts.map((p) => (/stat:(\w+)/.exec(L.text(p)) || [])[1]);
		assert.deepEqual(stats, ['DELIVRD', 'DELIVRD', 'DELIVRD', 'DELIVRD']);
		shop.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// What an unbind waits for is bounded: deliver_sm still unanswered after
// response_timeout are given up (UNDELIV), then unbind_resp is sent, not
// an unbind of our own. (Ported from a parallel take on these defects.)
test('an unbind waits for held deliver_sm no longer than response_timeout', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { response_timeout = 2; enquire_link_interval = 0; };`));
	try {
		const a = await L.bind(d.ports.smpp, 'bind_transceiver', 'shop', 'ps');
		const atA = collect(a.s);
		const b = await L.bind(d.ports.smpp, 'bind_receiver', 'rx', 'pr');
		const held = [];
		b.s.on('deliver_sm', (pdu) => held.push(pdu));
		for (let i = 0; i < 2; i++) {
			const r = await L.call(a.s, 'submit_sm', { destination_addr: 'rx',
				short_message: `t${i}`, registered_delivery: 1 });
			assert.equal(r.command_status, 0);
		}
		await until(() => held.length === 2, 'two deliver_sm held');
		// One answered after the unbind, one never.
		const t0 = Date.now();
		const unbound = L.call(b.s, 'unbind');
		b.s.send(held[0].response());
		assert.equal((await unbound).command_status, 0);
		const waited = Date.now() - t0;
		assert.ok(waited >= 800 && waited < 8000, `unbind_resp after ${waited} ms`);
		await until(() => atA.length === 2, 'two receipts');
		const stats = atA.map((p) => (/stat:(\w+)/.exec(L.text(p)) || [])[1]).sort();
		assert.deepEqual(stats, ['DELIVRD', 'UNDELIV']);
		b.s.destroy();
		a.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('while unbinding: submit_sm gets ESME_RINVBNDSTS, enquire_link is answered', async () => {
	const d = await L.startDaemon(conf(`${ACCOUNTS}
smpp = { window = 8; response_timeout = 30; };`));
	try {
		const rx = await RawEsme.connect(d.ports.smpp);
		assert.equal(await rx.bind('bind_transceiver', 'rx', 'pr'), 0);
		const shop = await L.bind(d.ports.smpp, 'bind_transceiver', 'shop', 'ps');
		const receipts = collect(shop.s);
		for (let i = 0; i < 2; i++)
			assert.equal(await submitStatus(shop.s, { destination_addr: 'rx',
				registered_delivery: 1, short_message: `w${i}` }), 0);
		await until(() => rx.of('deliver_sm').length === 2, 'two deliver_sm at rx');
		const unbindSeq = rx.send('unbind');
		const sub = rx.send('submit_sm', { destination_addr: 'shop', short_message: 'late' });
		assert.equal((await rx.resp('submit_sm', sub)).command_status, ESME_RINVBNDSTS);
		const enq = rx.send('enquire_link');
		assert.equal((await rx.resp('enquire_link', enq)).command_status, 0);
		// The bind takes nothing new while it ends.
		assert.equal(await submitStatus(shop.s, { destination_addr: 'rx',
			short_message: 'too late' }), L.smpp.ESME_RINVDSTADR);
		await sleep(100);
		assert.equal(rx.of('unbind_resp').length, 0, 'no unbind_resp yet');
		assert.equal(rx.closed, false);
		assert.equal(rx.of('deliver_sm').length, 2);
		for (const p of rx.of('deliver_sm'))
			rx.send('deliver_sm_resp', { sequence_number: p.sequence_number });
		assert.equal((await rx.resp('unbind', unbindSeq)).command_status, 0);
		await rx.closedWithin('close after unbind_resp');
		await until(() => receipts.length >= 2, 'two receipts');
		await sleep(100);
		// Only shop's receipts: the late submit was not taken.
		assert.deepEqual(receipts.map((p) => (/stat:(\w+)/.exec(L.text(p)) || [])[1]),
			['DELIVRD', 'DELIVRD']);
		shop.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// 3. What a line client gets is UTF-8 text without control characters.

test('text for a line client: DEL, C1, ESC and octets not valid in their coding refused, text passes', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const alice = await lineLogin(d.ports.router, 'alice', 'pa');
		const shop = await L.bind(d.ports.smpp, 'bind_transmitter', 'shop', 'ps');
		// Converted to UTF-8 first (data_coding 0 is GSM 03.38, 3 Latin-1,
		// 8 UCS-2): what the text is, not its octets, is checked.
		const ucs2 = (s) => Buffer.from(s, 'utf16le').swap16();
		for (const [what, dc, bytes] of [
			['DEL in UCS-2', 8, ucs2('rm\x7f-rf')],
			['DEL in Latin-1', 3, Buffer.from('rm\x7f-rf', 'latin1')],
			['U+0085 NEXT LINE in Latin-1', 3, Buffer.from([0x61, 0x85, 0x62])],
			['U+009B CSI in UCS-2', 8, ucs2('\u009b2J')],
			['ESC in UCS-2', 8, ucs2('\x1b[2J')],
			['CR in GSM 03.38', 0, Buffer.from([0x61, 0x0d, 0x62])],
			['an octet outside GSM 03.38', 0, Buffer.from([0x6f, 0x6c, 0xe9])],
			['a GSM escape with nothing after it', 0, Buffer.from([0x61, 0x1b])],
			['a lone surrogate', 8, Buffer.from([0xd8, 0x00, 0x00, 0x61])],
			['an odd UCS-2 length', 8, Buffer.from([0x00, 0x61, 0x00])]])
			assert.equal(await submitStatus(shop.s, { destination_addr: 'alice',
				data_coding: dc, short_message: bytes }), ESME_RSUBMITFAIL, what);
		const r = await L.call(shop.s, 'submit_sm', { destination_addr: 'alice',
			data_coding: 8, short_message: ucs2('olá €') });
		assert.equal(r.command_status, 0);
		const want = Buffer.from(`MSG ${r.message_id} shop olá €\n`, 'utf8');
		await until(() => alice.bytes().length >= want.length, 'the UTF-8 message');
		await sleep(100);
		assert.deepEqual(alice.bytes(), want);
		alice.sock.destroy();
		shop.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// 4. unbind gives the bind back at once.

test('after unbind_resp the account can bind again at once (max_binds = 1)', async () => {
	const d = await L.startDaemon(conf(ACCOUNTS));
	try {
		const first = await RawEsme.connect(d.ports.smpp, true);
		assert.equal(await first.bind('bind_receiver', 'one', 'po'), 0);
		// unbind, then more PDUs a client had pipelined behind it, more than
		// one read takes, and more as it goes on: the first connection's
		// close lingers, dropping that input, for as long as it comes (up
		// to 5 s). Before the fix the bind was counted until that close.
		const u = first.encode('unbind');
		const enq = first.encode('enquire_link').bytes;
		first.sock.write(Buffer.concat([u.bytes, ...Array(16384).fill(enq)]));
		const chatter = setInterval(() => {
			if (!first.closed)
				first.send('enquire_link');
		}, 20);
		let second;
		try {
			assert.equal((await first.resp('unbind', u.seq)).command_status, 0);
			// The first socket stays open: bind again, on a new connection.
			second = await RawEsme.connect(d.ports.smpp);
			assert.equal(await second.bind('bind_receiver', 'one', 'po'), 0,
				'bound again while the first connection lingers');
		} finally {
			clearInterval(chatter);
		}
		const shop = await L.bind(d.ports.smpp, 'bind_transmitter', 'shop', 'ps');
		const r = await L.call(shop.s, 'submit_sm', { destination_addr: 'one',
			short_message: 'to the new bind' });
		assert.equal(r.command_status, 0);
		const m = await second.wait((p) => p.command === 'deliver_sm', 'deliver_sm at the new bind');
		assert.equal(L.text(m), 'to the new bind');
		second.send('deliver_sm_resp', { sequence_number: m.sequence_number });
		assert.equal(first.of('deliver_sm').length, 0);
		first.sock.destroy();
		second.sock.destroy();
		shop.s.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});
