/* fuzz_router.c: the router line protocol, from framing to replies, on a real connection. */
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "session.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_session(&proto_router, data, size);
	return 0;
}
