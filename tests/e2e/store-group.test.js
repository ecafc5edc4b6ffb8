// store-group.test.js: a group commit gathers the messages that keep
// coming. SENDs to an offline account arriving 100 us apart, each alone
// in the store's mailbox when it comes, are committed together rather
// than one commit each; a message that comes alone is acknowledged at
// once all the same.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const L = require('./lib.js');

const BIN = process.env.ECHOROUTERD_BIN;
const skip = BIN && !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()) &&
	'built without SQLite';

const N = 80;

function conf(db) {
	return `dispatchers = 1;
idle_timeout = 0;
listeners = (
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; },
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }
);
accounts = ( { id = "alice"; password = "a"; }, { id = "bob"; password = "b"; } );
store = { path = "${db}"; sync = "normal"; shards = 1; };
`;
}

async function commits(d) {
	return L.val(await L.scrape(d.ports.metrics),
		'echorouterd_store_commits_total{result="ok"}');
}

// The SENDs acknowledged so far.
function oks(c) {
	return c.lines.filter((l) => /^OK \d+$/.test(l)).length;
}

// Spins for us microseconds: timers are no finer than a millisecond.
function spin(us) {
	const end = process.hrtime.bigint() + BigInt(us) * 1000n;
	while (process.hrtime.bigint() < end)
		;
}

test('SENDs arriving 100 us apart share a commit; a lone one is answered at once', { skip }, async () => {
	const d = await L.startDaemon(conf('store.db'));
	try {
		const a = await L.lineClient(d.ports.router);
		a.sock.write('LOGIN alice a\n');
		await a.wait((l) => l === 'OK LOGIN alice', 'login');
		// A first message: the store's file and statements warm.
		a.sock.write('SEND bob warm\n');
		await a.wait((l) => /^OK \d+$/.test(l), 'first OK');
		const before = await commits(d);
		// Each write goes out at once (nothing queued in the socket).
		for (let i = 0; i < N; i++) {
			a.sock.write(`SEND bob m${i}\n`);
			spin(100);
		}
		await L.until(() => oks(a) === N + 1,
			10000, `${N + 1} OKs`);
		const spent = (await commits(d)) - before;
		// About one commit a SEND without gathering; a few with it.
		assert.ok(spent >= 1 && spent <= N / 3,
			`${N} SENDs 100 us apart took ${spent} commits`);
		// Alone: answered without waiting for more (3 ms at most).
		const t0 = process.hrtime.bigint();
		a.sock.write('SEND bob alone\n');
		await L.until(() => oks(a) === N + 2,
			10000, 'the lone OK');
		const ms = Number(process.hrtime.bigint() - t0) / 1e6;
		assert.ok(ms < 2000, `a lone SEND took ${ms} ms`);
		a.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});
