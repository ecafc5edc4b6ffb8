// kannel.test.js: a real SMS gateway, Kannel (bearerbox and smsbox),
// bound to echorouterd as an SMPP transceiver: what its sendsms interface
// submits in UCS-2 or GSM 03.38 reaches a line client as UTF-8, and a line
// client's UTF-8 reaches Kannel's sms-service URL as the same text. Skips
// when Kannel is not installed (make check installs it). Run by `make
// check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');
const K = require('./kannel.js');

const skip = K.kannelMissing();
// The numbers Kannel sends from and receives for (routes to its account).
const KANNEL_NUMBER = '5550100', RAW_NUMBER = '5560100', LATIN_NUMBER = '5570100';

const CONF = `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);
accounts = (
  { id = "kannel"; password = "k4nnel"; },
  { id = "kannel2"; password = "k4nnel"; },
  { id = "kannel3"; password = "k4nnel"; alphabet = "latin1"; coding = "latin1"; },
  { id = "4477001"; password = "a"; },
  { id = "4477002"; password = "a"; },
  { id = "4477003"; password = "a"; },
  { id = "4477004"; password = "a"; },
  { id = "4477005"; password = "a"; },
  { id = "4477006"; password = "a"; },
  { id = "4477007"; password = "a"; },
  { id = "4477008"; password = "a"; },
  { id = "4477009"; password = "a"; },
  { id = "4477010"; password = "a"; }
);
routes = (
  { prefix = "555"; to = "kannel"; },
  { prefix = "556"; to = "kannel2"; },
  { prefix = "557"; to = "kannel3"; }
);
`;

let d = null, k = null, mo = null;

test.before(async () => {
	if (skip)
		return;
	d = await L.startDaemon(CONF);
	mo = await K.moServer();
	k = await K.startKannel({ smppPort: d.ports.smpp, account: 'kannel',
		password: 'k4nnel', moUrl: mo.url, moRecode: true });
});

test.after(async () => {
	if (skip)
		return;
	await K.stopKannel(k);
	if (mo)
		await mo.close();
	await L.stopAll(d);
});

// A failure shows the ends of Kannel's logs and the daemon's.
async function withLogs(kannel, fn) {
	try {
		await fn();
	} catch (e) {
		e.message += `\nbearerbox's log ends:\n${K.logTail(kannel, 'bearerbox')}` +
		    `\nsmsbox's log ends:\n${K.logTail(kannel, 'smsbox')}` +
		    `\nechorouterd's log ends:\n${d.log.trimEnd().split('\n').slice(-10).join('\n')}`;
		throw e;
	}
}

// A line client logged in as addr: c.lines, and wait(pred) on them.
async function line(addr) {
	const c = await L.lineClient(d.ports.router);
	const wait = c.wait;
	c.wait = (pred, what, ms = 20000) => wait(pred, what, ms);
	c.sock.write(`LOGIN ${addr} a\n`);
	await c.wait((l) => l.startsWith('OK LOGIN'), `login ${addr}`);
	return c;
}

// A sendsms from Kannel's number to a line client; Kannel's answer.
async function sendsms(to, text, coding) {
	const r = await K.sendsms(k, { from: KANNEL_NUMBER, to, text,
		coding: String(coding), charset: 'UTF-8' });
	assert.equal(r.status, 202, `sendsms: ${r.body}`);
	return r;
}

test('sendsms coding=2 (UCS-2): Cyrillic and an emoji reach a line client as UTF-8', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477001');
		const text = 'Привет, мир 😀';
		await sendsms('4477001', text, 2);
		const got = await c.wait((l) => l.startsWith('MSG '), 'MSG from Kannel');
		assert.match(got, /^MSG \d+ /);
		assert.equal(got.replace(/^MSG \d+ /, ''), `${KANNEL_NUMBER} ${text}`);
		c.sock.destroy();
	});
});

test('sendsms coding=0 (GSM 03.38): @, € and the extension table reach a line client as UTF-8', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477002');
		const text = '@A€ hi £$¥ èéùìò ÄÖÑÜ ΔΩ {[~]}|^\\ §¿';
		await sendsms('4477002', text, 0);
		const got = await c.wait((l) => l.startsWith('MSG '), 'MSG from Kannel');
		assert.equal(got.replace(/^MSG \d+ /, ''), `${KANNEL_NUMBER} ${text}`);
		c.sock.destroy();
	});
});

// mo-recode = true: smsbox recodes UCS-2 to UTF-8 before the get-url.
test('a line client\'s SEND to Kannel: UCS-2 and GSM text reach its sms-service URL as the same UTF-8', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477003');
		for (const text of ['olá € ☃', '@A€ hi']) {
			const before = c.lines.length;
			c.sock.write(`SEND ${KANNEL_NUMBER} ${text}\n`);
			const ok = await c.wait((l) => c.lines.indexOf(l) >= before &&
			    /^(OK|ERR) /.test(l), 'the answer to SEND');
			assert.match(ok, /^OK \d+$/);
			const q = await K.moWait(mo, (g) => g.from.toString() === '4477003' &&
			    g.text.toString() === text, `${text} at the sms-service URL`);
			assert.equal(q.to.toString(), KANNEL_NUMBER);
			assert.equal(q.charset.toString(), 'UTF-8');
			assert.equal(q.bin.toString(), text);
		}
		c.sock.destroy();
	});
});

// Without mo-recode, %a squeezes blanks in the UCS-2 octets; %b is
// what the SMSC sent, with %C saying UTF-16BE.
test('without mo-recode Kannel hands a UCS-2 message on as %b, the octets of the text, with charset UTF-16BE', { skip }, async () => {
	const raw = await K.startKannel({ smppPort: d.ports.smpp, account: 'kannel2',
		password: 'k4nnel', moUrl: mo.url, moRecode: false });
	try {
		await withLogs(raw, async () => {
			const c = await line('4477004');
			const text = 'olá € ☃';
			c.sock.write(`SEND ${RAW_NUMBER} ${text}\n`);
			await c.wait((l) => /^OK \d+$/.test(l), 'OK for the SEND');
			const q = await K.moWait(mo, (g) => g.from.toString() === '4477004',
			    'the message at the sms-service URL');
			assert.equal(q.to.toString(), RAW_NUMBER);
			assert.equal(q.coding.toString(), '2');
			assert.equal(q.charset.toString(), 'UTF-16BE');
			assert.deepEqual(q.bin, Buffer.from(text, 'utf16le').swap16());
			c.sock.destroy();
		});
	} finally {
		await K.stopKannel(raw);
	}
});

// A Kannel whose SMSC's data_coding 0 is Latin-1 (alt-charset), bound
// as an account that says so both ways: alphabet for what it sends,
// coding for what it gets (data_coding 3 while Latin-1 carries the text).
test('Kannel with alt-charset ISO-8859-1 and an account with alphabet and coding "latin1": Latin-1 both ways', { skip }, async () => {
	const lat = await K.startKannel({ smppPort: d.ports.smpp, account: 'kannel3',
		password: 'k4nnel', moUrl: mo.url, moRecode: true, altCharset: 'ISO-8859-1' });
	try {
		await withLogs(lat, async () => {
			const c = await line('4477006');
			const text = 'olé @ ñ ¿ ¤';
			const r = await K.sendsms(lat, { from: LATIN_NUMBER, to: '4477006',
				text, coding: '0', charset: 'UTF-8' });
			assert.equal(r.status, 202, `sendsms: ${r.body}`);
			const got = await c.wait((l) => l.startsWith('MSG '), 'MSG from Kannel');
			assert.equal(got.replace(/^MSG \d+ /, ''), `${LATIN_NUMBER} ${text}`);
			for (const t of ['olá @ ñ', 'olá € ☃']) {
				c.sock.write(`SEND ${LATIN_NUMBER} ${t}\n`);
				const q = await K.moWait(mo, (g) => g.from.toString() === '4477006' &&
				    g.text.toString() === t, `${t} at the sms-service URL`);
				assert.equal(q.to.toString(), LATIN_NUMBER);
			}
			c.sock.destroy();
		});
	} finally {
		await K.stopKannel(lat);
	}
});

// The one MSG line a sendsms of text from Kannel becomes, whole. A part
// refused shows at once as failed on Kannel's SMPP connection: no need to
// wait for a line that cannot come.
async function oneLine(c, to, text) {
	const failed = await K.smscFailed(k);
	await sendsms(to, text, 2);
	const got = await L.until(async () => {
		const m = c.lines.find((l) => l.startsWith('MSG '));
		if (m === undefined && await K.smscFailed(k) > failed)
			throw new Error('echorouterd refused a part Kannel sent');
		return m;
	}, 20000, 'MSG from Kannel');
	assert.equal(got.replace(/^MSG \d+ /, ''), `${KANNEL_NUMBER} ${text}`);
	await L.sleep(500);
	assert.equal(c.lines.filter((l) => l.startsWith('MSG ')).length, 1);
}

// Kannel cuts UCS-2 parts at 134 octets, inside a surrogate pair if one
// is there (3GPP TS 23.040 asks not to): what a joiner must take.
const CUT_PAIR = 'я'.repeat(66) + '😀' + 'ж'.repeat(10);

test('Kannel\'s long sendsms reaches an SMPP client as its parts, unchanged: UCS-2 with an 8-bit concatenation UDH', { skip }, async () => {
	await withLogs(k, async () => {
		const b = await L.session(d.ports.smpp, 'bind_receiver', '4477007', 'a');
		await sendsms('4477007', CUT_PAIR, 2);
		await L.until(() => b.got.length >= 2, 20000, 'two deliver_sm');
		await L.sleep(300);
		assert.equal(b.got.length, 2);
		const ref = b.got[0].short_message.udh[0][2];
		b.got.forEach((p, n) => {
			assert.equal(p.esm_class & 0x40, 0x40, 'UDHI');
			assert.equal(p.data_coding, 8);
			assert.deepEqual([...p.short_message.udh[0]], [0x00, 0x03, ref, 2, n + 1]);
		});
		const [one, two] = b.got.map((p) => p.short_message.message);
		assert.equal(one.length, 67);
		assert.equal(one + two, CUT_PAIR);
		assert.match(one.slice(-1), /[\uD800-\uDBFF]/, 'part 1 ends inside the pair');
		b.s.close();
	});
});

// Kannel splits it into 5 parts of 67 UCS-2 units with an 8-bit
// concatenation UDH (05 00 03 ref 5 n).
test('sendsms with 300 characters in UCS-2: Kannel\'s parts reach a line client as one line', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477005');
		const text = 'Съешь же ещё этих мягких французских булок, да выпей чаю. '
			.repeat(6).slice(0, 300);
		assert.equal(text.length, 300);
		try {
			await oneLine(c, '4477005', text);
		} finally {
			c.sock.destroy();
		}
	});
});

test('an emoji Kannel cuts between two parts reaches a line client whole, in one line', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477008');
		try {
			await oneLine(c, '4477008', CUT_PAIR);
		} finally {
			c.sock.destroy();
		}
	});
});

// Kannel keeps a DLR under the message_id of the submit_sm_resp, and
// looks a receipt up by its receipted_message_id: a receipt that comes
// before the submit_sm_resp finds nothing ("DLR ... not found" in its
// log) and its dlr-url is never called. A sendsms to `to` asking for
// reports (delivered, failed), and the type its dlr-url gets.
async function dlrType(to) {
	const r = await K.sendsms(k, { from: KANNEL_NUMBER, to,
		text: 'report, please', coding: '0', charset: 'UTF-8', 'dlr-mask': '3',
		'dlr-url': `${mo.url}?kind=dlr&type=%d&for=${to}` });
	assert.equal(r.status, 202, `sendsms: ${r.body}`);
	const q = await L.until(() => {
		const hit = mo.got.find((g) => g.kind && g.for.toString() === to);
		if (hit === undefined && new RegExp(`DLR from SMSC<\\w+> for DST<${to}> not found`)
		    .test(K.logTail(k, 'bearerbox', 500)))
			throw new Error('Kannel found no DLR for the receipt');
		return hit;
	}, 20000, 'the dlr-url called');
	return q.type.toString();
}

test('sendsms with a dlr-url: the receipt of a message an SMPP client took reaches Kannel\'s DLR as delivered', { skip }, async () => {
	await withLogs(k, async () => {
		const b = await L.session(d.ports.smpp, 'bind_receiver', '4477010', 'a');
		try {
			assert.equal(await dlrType('4477010'), '1');
			assert.equal(L.text(b.got[0]), 'report, please');
		} finally {
			b.s.close();
		}
	});
});

test('sendsms with a dlr-url: the receipt of a message delivered to a line client reaches Kannel\'s DLR as delivered', { skip }, async () => {
	await withLogs(k, async () => {
		const c = await line('4477009');
		try {
			assert.equal(await dlrType('4477009'), '1');
			assert.ok(c.lines.some((l) => /^MSG \d+ 5550100 report, please$/.test(l)));
		} finally {
			c.sock.destroy();
		}
	});
});
