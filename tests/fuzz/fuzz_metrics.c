/* fuzz_metrics.c: the metrics listener's HTTP, from framing to answers, on a real connection. */
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "session.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_session(&proto_metrics, data, size);
	return 0;
}
