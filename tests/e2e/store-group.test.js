// store-group.test.js: a busy store's group commit gathers the messages
// that keep coming. After a burst, SENDs to an offline account arriving
// 100 us apart, each alone in the store's mailbox when it comes, are
// committed together rather than one commit each; a client sending one
// message at a time is answered at once all the same.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const L = require('./lib.js');

const BIN = process.env.ECHOROUTERD_BIN;
const skip = BIN && !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()) &&
	'built without SQLite';

const N = 80;
const BURST = 20;

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

test('busy, SENDs arriving 100 us apart share a commit; one at a time, each is answered at once', { skip }, async () => {
	const d = await L.startDaemon(conf('store.db'));
	try {
		const a = await L.lineClient(d.ports.router);
		a.sock.write('LOGIN alice a\n');
		await a.wait((l) => l === 'OK LOGIN alice', 'login');
		// Each write goes out at once (no Nagle).
		a.sock.setNoDelay(true);
		// A burst: one group of twenty, and the store busy.
		let burst = '';
		for (let i = 0; i < BURST; i++)
			burst += `SEND bob b${i}\n`;
		a.sock.write(burst);
		await L.until(() => oks(a) === BURST, 10000, `${BURST} OKs`);
		const before = await commits(d);
		for (let i = 0; i < N; i++) {
			a.sock.write(`SEND bob m${i}\n`);
			spin(100);
		}
		await L.until(() => oks(a) === BURST + N,
			10000, `${BURST + N} OKs`);
		const spent = (await commits(d)) - before;
		// About one commit a SEND without gathering; a few with it.
		assert.ok(spent >= 1 && spent <= N / 3,
			`${N} SENDs 100 us apart took ${spent} commits`);
		// One at a time: each answered without waiting for more (the
		// store gathers only while busy). The median of ten round trips.
		const rtt = [];
		for (let i = 0; i < 10; i++) {
			const want = oks(a) + 1;
			const t0 = process.hrtime.bigint();
			a.sock.write(`SEND bob one${i}\n`);
			// (a.wait runs as lines arrive; L.until polls each 100 ms.)
			await a.wait(() => oks(a) >= want, `one${i}'s OK`);
			rtt.push(Number(process.hrtime.bigint() - t0) / 1e6);
		}
		rtt.sort((x, y) => x - y);
		assert.ok(rtt[5] < 50, `round trips ${rtt.join(', ')} ms`);
		a.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});
