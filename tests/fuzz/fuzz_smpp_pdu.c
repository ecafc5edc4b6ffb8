/* fuzz_smpp_pdu.c: the SMPP codec: decode, and encode what was decoded, which must decode alike. */
#include <stdlib.h>
#include <string.h>

#include "smpp_pdu.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
same(const struct smpp_pdu *a, const struct smpp_pdu *b)
{
	if (a->command_id != b->command_id ||
	    a->command_status != b->command_status ||
	    a->sequence_number != b->sequence_number)
		abort();
	/* Error responses are written without a body, by design. */
	if ((a->command_id & SMPP_RESP) && a->command_status != SMPP_ESME_ROK)
		return;
	if (strcmp(a->system_id, b->system_id) != 0 ||
	    strcmp(a->source_addr, b->source_addr) != 0 ||
	    strcmp(a->destination_addr, b->destination_addr) != 0 ||
	    a->sm_length != b->sm_length ||
	    (a->sm_length > 0 &&
	    memcmp(a->short_message, b->short_message, a->sm_length) != 0) ||
	    a->message_payload_len != b->message_payload_len)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[70000];
	struct smpp_pdu p, q;
	ssize_t len, n;

	/* Framing first, as the connection does. */
	len = smpp_frame_len(data, size, 65536);
	if (len <= 0)
		return 0;
	if (smpp_decode(data, (size_t)len, &p) != SMPP_ESME_ROK)
		return 0;
	n = smpp_encode(&p, out, sizeof(out));
	if (n < 0)
		return 0;	/* e.g. an error response we write without body */
	if (smpp_decode(out, (size_t)n, &q) != SMPP_ESME_ROK)
		abort();
	same(&p, &q);
	return 0;
}
