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
	}
	fuzz_session(&esme, data, size);
	return 0;
}
