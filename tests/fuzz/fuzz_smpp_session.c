/* fuzz_smpp_session.c: the SMPP front end, from framing to responses, on a real connection. */
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "session.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_session(&proto_smpp, data, size);
	return 0;
}
