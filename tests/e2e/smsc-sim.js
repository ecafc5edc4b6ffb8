// smsc-sim.js: an SMS centre for the upstream tests (a test helper, not a
// product part), on the npm smpp package's server: it takes binds of each
// type against one system_id and password, or refuses them with a given
// status, answers enquire_link unless told to stay silent, sends unbind on
// demand, sends deliver_sm (MOs, receipts) and data_sm on demand, and
// records every bind, connection and PDU. It takes submit_sm:
// each is answered with the status its submitStatus(pdu, n) gives (0 by
// default; null: left unanswered, held in sim.held), after delay ms, with
// a message_id of its own; the highest count unanswered at once is kept.
'use strict';

const smpp = require('smpp');

const BIND_COMMANDS = ['bind_transceiver', 'bind_transmitter', 'bind_receiver'];

class SmscSim {
	// opts: system_id, password (the binds it takes), refuse (a
	// command_status every bind gets), silent (no enquire_link_resp),
	// tls ({ key, cert }: a TLS server).
	constructor(opts = {}) {
		this.opts = { system_id: 'erd', password: 'secret', ...opts };
		this.connects = [];	// Date.now() of each connection
		this.binds = [];	// { command, system_id, password, status, at }
		this.pdus = [];		// every PDU received, in order
		this.sessions = new Set();	// open and bound
		this.closed = 0;
		this.submits = [];	// { pdu, status, id, at, session }
		this.held = [];		// submit_sm left unanswered: { s, pdu }
		this.unanswered = 0;	// submit_sm not answered now
		this.maxUnanswered = 0;
		this.nextId = 1000;
		// submitStatus(pdu, n): n counts from 0; delay: ms before
		// answering; messageId(n): the id to give.
		this.submitStatus = opts.submitStatus || (() => 0);
		this.delay = opts.delay || 0;
		this.messageId = opts.messageId || ((n) => `sim${n + this.nextId}`);
	}

	// Listens on port (0: any free one); resolves with the port.
	start(port = 0) {
		const o = this.opts.tls ? { key: this.opts.tls.key, cert: this.opts.tls.cert } : {};
		this.server = smpp.createServer(o, (s) => this._session(s));
		return new Promise((resolve, reject) => {
			this.server.once('error', reject);
			this.server.listen(port, '127.0.0.1', () => {
				this.port = this.server.address().port;
				resolve(this.port);
			});
		});
	}

	_session(s) {
		this.connects.push(Date.now());
		s.on('error', () => {});
		s.on('close', () => { this.sessions.delete(s); this.closed++; });
		s.on('pdu', (pdu) => {
			this.pdus.push(pdu);
			if (BIND_COMMANDS.includes(pdu.command))
				this._bind(s, pdu);
			else if (pdu.command === 'enquire_link' && !this.opts.silent)
				s.send(pdu.response());
			else if (pdu.command === 'unbind')
				s.send(pdu.response(), () => s.close());
			else if (pdu.command === 'submit_sm')
				this._submit(s, pdu);
		});
		// Over TLS the first PDU may come with the handshake's last
		// flight, before the package listens for 'readable': read it.
		if (this.opts.tls)
			setImmediate(() => s._extractPDUs());
	}

	_bind(s, pdu) {
		let status = 0;
		if (this.opts.refuse !== undefined)
			status = this.opts.refuse;
		else if (pdu.system_id !== this.opts.system_id)
			status = smpp.ESME_RINVSYSID;
		else if (pdu.password !== this.opts.password)
			status = smpp.ESME_RINVPASWD;
		this.binds.push({ command: pdu.command, system_id: pdu.system_id,
			password: pdu.password, system_type: pdu.system_type, status,
			at: Date.now() });
		s.send(pdu.response({ command_status: status, system_id: 'sim' }));
		if (status === 0) {
			s.bindCommand = pdu.command;
			this.sessions.add(s);
		}
	}

	// A bound session that may be sent messages (transceiver, receiver).
	receiving() {
		return [...this.sessions].find((s) => s.bindCommand !== 'bind_transmitter');
	}

	// Sends command (deliver_sm, data_sm) with fields on a receiving
	// session (or on s); resolves with the response PDU, or rejects
	// after ms.
	send(command, fields, ms = 10000, s = this.receiving()) {
		if (s === undefined)
			return Promise.reject(new Error('no receiving session bound'));
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => reject(new Error(`no ${command}_resp in ${ms} ms`)), ms);
			s[command](fields, (resp) => {
				clearTimeout(timer);
				resolve(resp);
			});
		});
	}

	deliver(fields, ms, s) {
		return this.send('deliver_sm', fields, ms, s);
	}

	_submit(s, pdu) {
		const n = this.submits.length;
		const status = this.submitStatus(pdu, n);
		const id = this.messageId(n);
		this.submits.push({ pdu, status, id, at: Date.now(), session: s });
		this.unanswered++;
		this.maxUnanswered = Math.max(this.maxUnanswered, this.unanswered);
		if (status === null) {
			this.held.push({ s, pdu });
			return;
		}
		const answer = () => {
			this.unanswered--;
			s.send(pdu.response({ command_status: status,
				message_id: status === 0 ? id : '' }));
		};
		if (this.delay > 0)
			setTimeout(answer, this.delay);
		else
			answer();
	}

	// submit_sm whose status was 0: the messages taken.
	taken() {
		return this.submits.filter((x) => x.status === 0);
	}

	// Binds taken (status 0), of one command or of all.
	bound(command) {
		return this.binds.filter((b) => b.status === 0 &&
			(command === undefined || b.command === command)).length;
	}

	// Sends unbind on every bound session; resolves with the number of
	// unbind_resp received within ms.
	unbindAll(ms = 10000) {
		const all = [...this.sessions];
		return new Promise((resolve) => {
			let answered = 0, left = all.length;
			const timer = setTimeout(() => resolve(answered), ms);
			if (left === 0) {
				clearTimeout(timer);
				resolve(0);
			}
			for (const s of all)
				s.unbind((resp) => {
					if (resp.command_status === 0)
						answered++;
					s.close();
					if (--left === 0) {
						clearTimeout(timer);
						resolve(answered);
					}
				});
		});
	}

	stop() {
		for (const s of this.sessions)
			s.destroy();
		return new Promise((resolve) => this.server.close(() => resolve()));
	}
}

module.exports = { SmscSim };
