/* fuzz_esme_session.c: the ESME side of an upstream session, from framing to answers, with the input as the SMS centre's PDUs. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "proto.h"
#include "session.h"
#include "upstream_int.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct upstream_conf uc = {
	.name = "fuzz", .host = "127.0.0.1", .address = "127.0.0.1",
	.port = 2775, .bind = UPSTREAM_BIND_TRANSCEIVER, .system_id = "erd",
	.password = "secret", .sessions = 1, .window = 10,
	.enquire_link_interval = 30, .response_timeout = 10,
	.reconnect_min = 1, .reconnect_max = 60,
};

static struct proto esme;

/*
 * Once bound, the session always has submits queued or in flight (a
 * short text and a long one in turn), so that the input's answers meet
 * them: submit_sm_resp, generic_nack, throttles, ids of every length.
 */
static int
esme_fuzz_message(struct conn *c, const uint8_t *msg, size_t len)
{
	static unsigned turn;
	struct upstream_sess *s;
	int rc = proto_esme.on_message(c, msg, len);

	s = c->pdata;
	if (s != NULL && s->qlen + s->inflight < 2)
		upstream_fuzz_submit(c, turn++ % 2 == 0 ? "hello @ home" :
		    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
		    "a long text that takes two parts in UCS-2, since the "
		    "first word is Cyrillic and the rest makes it long enough");
	return rc;
}

/* The connection fuzz_session makes becomes an upstream session's. */
static void
esme_fuzz_open(struct conn *c)
{
	upstream_fuzz_attach(c, &uc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (esme.name == NULL) {
		esme = proto_esme;
		esme.on_open = esme_fuzz_open;
		esme.on_message = esme_fuzz_message;
	}
	fuzz_session(&esme, data, size);
	return 0;
}
