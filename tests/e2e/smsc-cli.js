// smsc-cli.js: the tests' SMS centre simulator (smsc-sim.js) as a program,
// for the README's upstream tour and for check-system.sh. A test helper,
// not a product part. Usage:
//   node smsc-cli.js [PORT] [--log FILE] [--for SECONDS]
// Listens on 127.0.0.1:PORT (2776; 0 for any free one) and takes binds as
// system_id "erd", password "secret". Prints each bind and each submit_sm
// (answered ESME_ROK with an id of its own); a submit_sm that asked for a
// receipt gets one a second later, DELIVRD. A line typed on its input,
// "FROM TO TEXT", goes to the bound session as a message from the network
// (deliver_sm), and the answer is printed. --log appends one JSON line per
// PDU received (command, addresses, text, data_coding); --for ends it
// after SECONDS, so a script never leaves it behind.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { SmscSim } = require(path.join(__dirname, 'smsc-sim.js'));

// A PDU's text as UTF-8 (the package decodes it by data_coding).
function text(sm) {
	if (sm === undefined || sm === null)
		return '';
	if (typeof sm === 'string')
		return sm;
	if (Buffer.isBuffer(sm))
		return sm.toString('utf8');
	return String(sm.message);
}

// "YYMMDDhhmm" in UTC, as receipts write dates.
function receiptDate(d) {
	return d.toISOString().replace(/[-:T]/g, '').slice(2, 12);
}

class CliSim extends SmscSim {
	constructor(log) {
		super({ messageId: (n) => `sim${1000 + n}` });
		this.log = log;
		this.logged = 0;
	}

	_bind(s, pdu) {
		super._bind(s, pdu);
		const b = this.binds[this.binds.length - 1];
		console.log(`bound: ${b.command} ${b.system_id}` +
			(b.status === 0 ? '' : ` refused, status ${b.status}`));
	}

	_submit(s, pdu) {
		super._submit(s, pdu);
		const x = this.submits[this.submits.length - 1];
		console.log(`submit_sm from ${pdu.source_addr} to ${pdu.destination_addr}` +
			` (data_coding ${pdu.data_coding}): ${text(pdu.short_message)}` +
			` -> ${x.id}`);
		if (pdu.registered_delivery & 1)
			setTimeout(() => this.receipt(s, pdu, x), 1000);
	}

	// A DELIVRD receipt for x, on the session that submitted it.
	async receipt(s, pdu, x) {
		const at = new Date(x.at), now = new Date();
		const r = await this.send('deliver_sm', {
			source_addr_ton: pdu.dest_addr_ton, source_addr_npi: pdu.dest_addr_npi,
			source_addr: pdu.destination_addr, destination_addr: pdu.source_addr,
			esm_class: 0x04, receipted_message_id: x.id, message_state: 2,
			short_message: `id:${x.id} sub:001 dlvrd:001 submit date:` +
				`${receiptDate(at)} done date:${receiptDate(now)} ` +
				`stat:DELIVRD err:000 text:${text(pdu.short_message).slice(0, 20)}`,
		}, 10000, this.sessions.has(s) ? s : undefined).catch((e) => e);
		console.log(`receipt for ${x.id}: DELIVRD, answered ` +
			(r instanceof Error ? r.message : `status ${r.command_status}`));
	}

	// "FROM TO TEXT" from the input: a message from the network.
	async mo(line) {
		const m = /^(\S+)\s+(\S+)\s+(.+)$/.exec(line.trim());
		if (m === null) {
			if (line.trim() !== '')
				console.log('type: FROM TO TEXT');
			return;
		}
		const r = await this.send('deliver_sm', { source_addr_ton: 1,
			source_addr_npi: 1, source_addr: m[1], destination_addr: m[2],
			short_message: m[3] }).catch((e) => e);
		console.log(`deliver_sm from ${m[1]} to ${m[2]}: ` +
			(r instanceof Error ? r.message : `answered status ${r.command_status}`));
	}

	flush() {
		if (!this.log)
			return;
		for (; this.logged < this.pdus.length; this.logged++) {
			const p = this.pdus[this.logged];
			fs.appendFileSync(this.log, JSON.stringify({ command: p.command,
				source_addr: p.source_addr, destination_addr: p.destination_addr,
				text: text(p.short_message), data_coding: p.data_coding }) + '\n');
		}
	}
}

async function main() {
	const args = process.argv.slice(2);
	let port = 2776, log = null, secs = 0;
	for (let i = 0; i < args.length; i++) {
		if (args[i] === '--log')
			log = args[++i];
		else if (args[i] === '--for')
			secs = Number(args[++i]);
		else if (/^\d+$/.test(args[i]))
			port = Number(args[i]);
		else {
			console.error('usage: smsc-cli.js [PORT] [--log FILE] [--for SECONDS]');
			process.exit(2);
		}
	}
	const sim = new CliSim(log);
	const timer = setInterval(() => sim.flush(), 100);
	const stop = async () => {
		clearInterval(timer);
		sim.flush();
		await sim.stop();
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);
	if (secs > 0)
		setTimeout(stop, secs * 1000).unref();
	const got = await sim.start(port);
	console.log(`SMS centre simulator on 127.0.0.1:${got}, system_id erd, password secret`);
	readline.createInterface({ input: process.stdin }).on('line', (l) => sim.mo(l));
}

main().catch((e) => { console.error(e.message); process.exit(1); });
